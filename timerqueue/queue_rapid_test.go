package timerqueue

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

// queueMachine drives a Queue and the model (a map of timers) with the same
// random operations, and checks after every step that the queue and every
// live snapshot equal the model (frozen at capture time for snapshots).
// Advance callbacks register and delete timers and take snapshots, driven by
// drawn data, and check each fired timer is the one the model says is next.
type queueMachine struct {
	owner  *cow.Owner
	q      *Queue
	model  map[Timer]int
	sorted []entry // the model in order, when not stale
	stale  bool
	frozen []frozenQueue
	// Inside Advance: the watermark and how many callbacks ran.
	upTo  int64
	fires int
}

// frozenQueue is a live snapshot and the model as it was when it was taken.
type frozenQueue struct {
	snap    *Snapshot
	entries []entry
}

// maxLiveSnapshots bounds the live snapshots (every one is checked after
// every step): a Snapshot action with that many live is a no-op.
const maxLiveSnapshots = 6

// Small alphabets, so that ties on timestamp and key are frequent; the
// empty strings and the \x00 and \xff bytes sit at the edges of the order.
var (
	testKeys       = []string{"", "\x00", "a", "a\x00", "ab", "b", "\xff"}
	testNamespaces = []string{"", "w", "w\x00", "x"}
)

func drawTimestamp(t *rapid.T, label string) int64 {
	switch rapid.IntRange(0, 19).Draw(t, label+"kind") {
	case 0:
		return math.MinInt64
	case 1:
		return math.MaxInt64
	}
	return int64(rapid.IntRange(-2, 40).Draw(t, label))
}

func drawTimer(t *rapid.T, label string) Timer {
	return Timer{
		Timestamp: drawTimestamp(t, label+"ts"),
		Key:       rapid.SampledFrom(testKeys).Draw(t, label+"key"),
		Namespace: rapid.SampledFrom(testNamespaces).Draw(t, label+"ns"),
	}
}

// drawTimerIn draws a timer with a timestamp in [lo, hi].
func drawTimerIn(t *rapid.T, lo, hi int64, label string) Timer {
	ts := lo
	switch {
	case hi == lo:
	case rapid.Bool().Draw(t, label+"edge"):
		ts = rapid.SampledFrom([]int64{lo, hi}).Draw(t, label+"ts")
	default:
		// A small offset from one end, so that huge ranges still give
		// timestamps near the watermark.
		d := rapid.Int64Range(0, min(uint64ToInt64(uint64(hi-lo)), 40)).Draw(t, label+"d")
		if rapid.Bool().Draw(t, label+"fromHi") {
			ts = hi - d
		} else {
			ts = lo + d
		}
	}
	return Timer{
		Timestamp: ts,
		Key:       rapid.SampledFrom(testKeys).Draw(t, label+"key"),
		Namespace: rapid.SampledFrom(testNamespaces).Draw(t, label+"ns"),
	}
}

func uint64ToInt64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// entries returns the model in Compare order.
func (m *queueMachine) entries() []entry {
	if m.stale {
		m.sorted, m.stale = sortedModel(m.model), false
	}
	return m.sorted
}

// drawExisting draws a registered timer if there is one (else any timer).
func (m *queueMachine) drawExisting(t *rapid.T, label string) Timer {
	if len(m.model) == 0 || rapid.IntRange(0, 3).Draw(t, label+"any") == 0 {
		return drawTimer(t, label)
	}
	es := m.entries()
	return es[rapid.IntRange(0, len(es)-1).Draw(t, label+"i")].t
}

func (m *queueMachine) register(t *rapid.T, tm Timer) {
	_, had := m.model[tm]
	if added := m.q.Register(tm, keyGroupOf(tm.Key)); added == had {
		t.Fatalf("Register(%+v) = %v, want %v", tm, added, !had)
	}
	m.model[tm] = keyGroupOf(tm.Key)
	m.stale = true
}

func (m *queueMachine) delete(t *rapid.T, tm Timer) {
	_, had := m.model[tm]
	if deleted := m.q.Delete(tm); deleted != had {
		t.Fatalf("Delete(%+v) = %v, want %v", tm, deleted, had)
	}
	delete(m.model, tm)
	m.stale = true
}

func (m *queueMachine) snapshot(t *rapid.T) {
	var s *Snapshot
	if rapid.Bool().Draw(t, "ownCapture") {
		s = m.q.Snapshot()
	} else {
		s = m.q.View(m.owner.Capture())
	}
	m.frozen = append(m.frozen, frozenQueue{s, slices.Clone(m.entries())})
}

// nextDue returns the first timer of the model with Timestamp <= upTo.
func (m *queueMachine) nextDue(upTo int64) (Timer, bool) {
	var best Timer
	found := false
	for tm := range m.model {
		if tm.Timestamp <= upTo && (!found || Compare(tm, best) < 0) {
			best, found = tm, true
		}
	}
	return best, found
}

// errCallbackPanic is what a callback panics with when the drawn data says so.
var errCallbackPanic = fmt.Errorf("drawn callback panic")

// fire is the Advance callback: it checks the timer is the model's next due
// one, then runs a few drawn operations on the queue.
func (m *queueMachine) fire(t *rapid.T, panicAt int) func(Timer, int) {
	return func(tm Timer, kg int) {
		want, ok := m.nextDue(m.upTo)
		if !ok || tm != want || kg != m.model[want] {
			t.Fatalf("Advance(%d) fired %+v (key group %d) as timer %d; the model's next due is %+v (%v)", m.upTo, tm, kg, m.fires, want, ok)
		}
		delete(m.model, tm)
		m.stale = true
		m.fires++
		if m.q.Contains(tm) || m.q.Len() != len(m.model) {
			t.Fatalf("in the callback of %+v: Contains = %v, Len = %d; want false, %d", tm, m.q.Contains(tm), m.q.Len(), len(m.model))
		}
		for range rapid.IntRange(0, 3).Draw(t, "cbOps") {
			switch rapid.IntRange(0, 6).Draw(t, "cbOp") {
			case 0: // a timer due in this Advance
				if m.fires < 200 { // a bounded number, so that Advance ends
					m.register(t, drawTimerIn(t, tm.Timestamp, m.upTo, "cbDue"))
				}
			case 1: // a timer due after this Advance (due now if upTo is the end of time)
				if m.fires < 200 {
					lo := m.upTo
					if lo < math.MaxInt64 {
						lo++
					}
					hi := int64(math.MaxInt64)
					if lo <= math.MaxInt64-10 {
						hi = lo + 10
					}
					m.register(t, drawTimerIn(t, lo, hi, "cbLater"))
				}
			case 2:
				if m.fires < 200 {
					m.register(t, drawTimer(t, "cbAny"))
				}
			case 3, 4: // very likely a pending one
				m.delete(t, m.drawExisting(t, "cbDel"))
			case 5:
				if len(m.frozen) < maxLiveSnapshots {
					m.snapshot(t)
				}
			case 6:
				tm := m.drawExisting(t, "cbContains")
				wantKG, want := m.model[tm]
				if got := m.q.Contains(tm); got != want {
					t.Fatalf("in a callback: Contains(%+v) = %v, want %v", tm, got, want)
				}
				if kg, got := m.q.KeyGroup(tm); got != want || kg != wantKG {
					t.Fatalf("in a callback: KeyGroup(%+v) = %d, %v; want %d, %v", tm, kg, got, wantKG, want)
				}
				if rapid.Bool().Draw(t, "cbCheckAll") {
					checkQueue(t, m.q, m.entries())
				}
			}
		}
		if m.fires == panicAt {
			panic(errCallbackPanic)
		}
	}
}

func (m *queueMachine) advance(t *rapid.T) {
	var upTo int64
	switch rapid.IntRange(0, 9).Draw(t, "upToKind") {
	case 0:
		upTo = math.MaxInt64
	case 1:
		upTo = math.MinInt64
	default:
		upTo = int64(rapid.IntRange(-3, 40).Draw(t, "upTo"))
	}
	panicAt := -1
	if rapid.IntRange(0, 9).Draw(t, "panics") == 0 {
		panicAt = rapid.IntRange(1, 5).Draw(t, "panicAt")
	}
	m.upTo, m.fires = upTo, 0
	if rapid.IntRange(0, 9).Draw(t, "nilFire") == 0 {
		due := 0
		for tm := range m.model {
			if tm.Timestamp <= upTo {
				delete(m.model, tm)
				m.stale = true
				due++
			}
		}
		if fired := m.q.Advance(upTo, nil); fired != due {
			t.Fatalf("Advance(%d, nil) = %d, want %d", upTo, fired, due)
		}
		return
	}
	var fired int
	panicked := func() (p bool) {
		defer func() {
			if r := recover(); r != nil {
				if r != errCallbackPanic {
					panic(r)
				}
				p = true
			}
		}()
		fired = m.q.Advance(upTo, m.fire(t, panicAt))
		return false
	}()
	if panicked {
		if m.fires != panicAt {
			t.Fatalf("Advance panicked after %d callbacks, want %d", m.fires, panicAt)
		}
		return
	}
	if fired != m.fires {
		t.Fatalf("Advance(%d) = %d, but the callback ran %d times", upTo, fired, m.fires)
	}
	if tm, ok := m.nextDue(upTo); ok {
		t.Fatalf("after Advance(%d), %+v is due but was not fired", upTo, tm)
	}
}

func (m *queueMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"": m.check,
		"Register": func(t *rapid.T) {
			m.register(t, m.drawExisting(t, "reg"))
		},
		"RegisterMany": func(t *rapid.T) {
			// Enough timers to fill several leaves of the tree.
			n := rapid.IntRange(1, 200).Draw(t, "n")
			base := rapid.IntRange(-2, 40).Draw(t, "base")
			spread := rapid.IntRange(1, 40).Draw(t, "spread")
			for i := range n {
				m.register(t, Timer{
					Timestamp: int64(base + i%spread),
					Key:       fmt.Sprintf("k%03d", i*7%n),
					Namespace: testNamespaces[i%len(testNamespaces)],
				})
			}
		},
		"Delete": func(t *rapid.T) {
			m.delete(t, m.drawExisting(t, "del"))
		},
		"Contains": func(t *rapid.T) {
			tm := m.drawExisting(t, "has")
			want, ok := m.model[tm]
			if got := m.q.Contains(tm); got != ok {
				t.Fatalf("Contains(%+v) = %v, want %v", tm, got, ok)
			}
			if kg, got := m.q.KeyGroup(tm); got != ok || kg != want {
				t.Fatalf("KeyGroup(%+v) = %d, %v; want %d, %v", tm, kg, got, want, ok)
			}
		},
		"Advance": m.advance,
		"Snapshot": func(t *rapid.T) {
			if len(m.frozen) < maxLiveSnapshots {
				m.snapshot(t)
			}
		},
		"Release": func(t *rapid.T) {
			if len(m.frozen) == 0 {
				return
			}
			i := rapid.IntRange(0, len(m.frozen)-1).Draw(t, "release")
			m.frozen[i].snap.Release()
			// Views under one capture share it: drop every one released.
			m.frozen = slices.DeleteFunc(m.frozen, func(f frozenQueue) bool { return f.snap.Released() })
		},
		"Diff": func(t *rapid.T) {
			if len(m.frozen) == 0 {
				return
			}
			a := m.frozen[rapid.IntRange(0, len(m.frozen)-1).Draw(t, "a")]
			b := m.frozen[rapid.IntRange(0, len(m.frozen)-1).Draw(t, "b")]
			checkDiff(t, a.snap, b.snap, a.entries, b.entries)
		},
	}
}

// checkDiff fails unless Diff(a, b) is ascending, reports only real
// changes, and turns a's entries into b's.
func checkDiff(t tb, a, b *Snapshot, ae, be []entry) {
	t.Helper()
	got := map[Timer]int{}
	for _, e := range ae {
		got[e.t] = e.kg
	}
	var prev *Timer
	for c := range Diff(a, b) {
		if prev != nil && Compare(*prev, c.Key) >= 0 {
			t.Fatalf("Diff: %+v after %+v", c.Key, *prev)
		}
		k := c.Key
		prev = &k
		old, had := got[c.Key]
		switch c.Kind {
		case cow.Added:
			if had {
				t.Fatalf("Diff: added %+v, already present", c.Key)
			}
			got[c.Key] = c.New
		case cow.Removed:
			if !had || old != c.Old {
				t.Fatalf("Diff: removed %+v (key group %d), present %v with %d", c.Key, c.Old, had, old)
			}
			delete(got, c.Key)
		default:
			t.Fatalf("Diff: %v %+v: key groups never change", c.Kind, c.Key)
		}
	}
	equalEntries(t, fmt.Sprintf("Diff(epoch %d, epoch %d) applied", a.Epoch(), b.Epoch()), sortedModel(got), be)
}

func (m *queueMachine) check(t *rapid.T) {
	checkQueue(t, m.q, m.entries())
	lo := rapid.IntRange(-1, 8).Draw(t, "lo")
	hi := rapid.IntRange(lo-1, 8).Draw(t, "hi")
	probe := drawTimer(t, "probe")
	for _, f := range m.frozen {
		checkSnapshot(t, f.snap, f.entries, lo, hi)
		if len(f.entries) > 0 && rapid.Bool().Draw(t, "probeExisting") {
			probe = f.entries[rapid.IntRange(0, len(f.entries)-1).Draw(t, "probeI")].t
		}
		i, want := slices.BinarySearchFunc(f.entries, probe, func(e entry, t Timer) int { return Compare(e.t, t) })
		kg, got := f.snap.KeyGroup(probe)
		if got != want || got && kg != f.entries[i].kg || f.snap.Contains(probe) != want {
			t.Fatalf("snapshot epoch %d: KeyGroup(%+v) = %d, %v; want %v", f.snap.Epoch(), probe, kg, got, want)
		}
	}
}

// runQueueMachine runs the state machine with a drawn Advance batch size:
// small ones put batch boundaries everywhere.
func runQueueMachine(t *rapid.T) {
	owner := cow.NewOwner()
	m := &queueMachine{owner: owner, q: New(owner), model: map[Timer]int{}}
	m.q.batch = rapid.SampledFrom([]int{1, 2, 3, 7, 64, defaultBatch}).Draw(t, "batch")
	defer func() {
		for _, f := range m.frozen {
			f.snap.Release()
		}
	}()
	t.Repeat(m.actions())
}

// TestQueue_StateMachine runs random registrations, deletions, Advances
// (whose callbacks register, delete and capture), snapshots, releases and
// diffs against the model, checking the queue and every live snapshot after
// every step and the order of every fired timer.
func TestQueue_StateMachine(t *testing.T) {
	rapid.Check(t, runQueueMachine)
}

func FuzzQueue(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(runQueueMachine))
}
