package timerqueue

import (
	"hash/fnv"
	"maps"
	"slices"
	"testing"
)

// The reference model of a queue: a Go map from timer to key group. Its
// order is Compare over the sorted keys; a snapshot of it is a sorted copy.

// entry is a timer and its key group, as the model lists them.
type entry struct {
	t  Timer
	kg int
}

// keyGroupOf is the key group the tests give a key: a fixed function of its
// bytes, as a backend's is.
func keyGroupOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % 8)
}

// sortedModel returns the model's timers in Compare order.
func sortedModel(m map[Timer]int) []entry {
	keys := slices.SortedFunc(maps.Keys(m), Compare)
	out := make([]entry, len(keys))
	for i, k := range keys {
		out[i] = entry{k, m[k]}
	}
	return out
}

// inGroups returns the entries whose key group is in [lo, hi].
func inGroups(es []entry, lo, hi int) []entry {
	var out []entry
	for _, e := range es {
		if e.kg >= lo && e.kg <= hi {
			out = append(out, e)
		}
	}
	return out
}

// tb is what the checks need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// equalEntries fails unless got equals want, naming the first difference.
func equalEntries(t tb, what string, got, want []entry) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%s: entry %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
}

// equalSeq fails unless seq yields exactly want, naming the first
// difference. It allocates nothing: the checks run after every step.
func equalSeq(t tb, what string, seq func(func(Timer, int) bool), want []entry) {
	t.Helper()
	i := 0
	for tm, kg := range seq {
		if i >= len(want) {
			t.Fatalf("%s: more than the %d entries wanted, next %+v", what, len(want), entry{tm, kg})
		}
		if (entry{tm, kg}) != want[i] {
			t.Fatalf("%s: entry %d is %+v, want %+v", what, i, entry{tm, kg}, want[i])
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, i, len(want))
	}
}

// equalSeqInGroups is equalSeq against the entries of want whose key group
// is in [lo, hi].
func equalSeqInGroups(t tb, what string, seq func(func(Timer, int) bool), want []entry, lo, hi int) {
	t.Helper()
	i := 0
	for tm, kg := range seq {
		for i < len(want) && (want[i].kg < lo || want[i].kg > hi) {
			i++
		}
		if i >= len(want) || (entry{tm, kg}) != want[i] {
			t.Fatalf("%s(%d, %d): unexpected %+v at %d", what, lo, hi, entry{tm, kg}, i)
		}
		i++
	}
	for ; i < len(want); i++ {
		if want[i].kg >= lo && want[i].kg <= hi {
			t.Fatalf("%s(%d, %d): missing %+v", what, lo, hi, want[i])
		}
	}
}

// checkQueue fails unless q holds exactly the model, in order, and passes
// Check.
func checkQueue(t tb, q *Queue, want []entry) {
	t.Helper()
	if err := q.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	equalSeq(t, "queue", q.All(), want)
	if q.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", q.Len(), len(want))
	}
	next, ok := q.Next()
	if ok != (len(want) > 0) || ok && next != want[0].t {
		t.Fatalf("Next = %+v, %v; want the first of %d timers", next, ok, len(want))
	}
}

// checkSnapshot fails unless s holds exactly the frozen entries, in order,
// and its InKeyGroups(lo, hi) is the frozen entries in that range.
func checkSnapshot(t tb, s *Snapshot, frozen []entry, lo, hi int) {
	t.Helper()
	equalSeq(t, "snapshot", s.All(), frozen)
	if s.Len() != len(frozen) {
		t.Fatalf("snapshot epoch %d: Len = %d, want %d", s.Epoch(), s.Len(), len(frozen))
	}
	equalSeqInGroups(t, "InKeyGroups", s.InKeyGroups(lo, hi), frozen, lo, hi)
}

// TestModel_Helpers keeps the model honest: sortedModel sorts by Compare,
// and the comparisons see differences.
func TestModel_Helpers(t *testing.T) {
	m := map[Timer]int{{2, "a", ""}: 1, {1, "b", ""}: 2, {1, "a", "x"}: 3, {1, "a", ""}: 4}
	got := sortedModel(m)
	want := []entry{{Timer{1, "a", ""}, 4}, {Timer{1, "a", "x"}, 3}, {Timer{1, "b", ""}, 2}, {Timer{2, "a", ""}, 1}}
	equalEntries(t, "sortedModel", got, want)
	seq := func(es []entry) func(func(Timer, int) bool) {
		return func(yield func(Timer, int) bool) {
			for _, e := range es {
				if !yield(e.t, e.kg) {
					return
				}
			}
		}
	}
	equalSeq(t, "equalSeq", seq(want), want)
	equalSeqInGroups(t, "equalSeqInGroups", seq(inGroups(want, 2, 3)), want, 2, 3)
	for _, bad := range [][]entry{want[:3], want[1:], {want[0], want[2], want[1], want[3]}} {
		r := &recorder{}
		equalSeq(r, "bad", seq(bad), want)
		if !r.failed {
			t.Fatalf("equalSeq accepted %v for %v", bad, want)
		}
		r = &recorder{}
		equalSeqInGroups(r, "bad", seq(bad), want, 1, 4)
		if !r.failed {
			t.Fatalf("equalSeqInGroups accepted %v for %v", bad, want)
		}
	}
}

// recorder is a tb that records a failure instead of stopping.
type recorder struct{ failed bool }

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
