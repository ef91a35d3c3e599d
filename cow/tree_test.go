package cow

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/internal/invariants"

	"pgregory.net/rapid"
)

// treeSize scales a test's size down under the invariants build tag, where
// every write runs an O(n) Check.
func treeSize(n int) int {
	if invariants.Exhaustive {
		return max(n/20, 100)
	}
	return n
}

func newIntTree(leafMax, branchMax int) *Tree[int, int] {
	return newTreeWidths(NewOwner(), cmp.Compare[int], Equal[int], leafMax, branchMax)
}

// treeReader is what Tree and TreeSnapshot have in common, for checks that
// run on both.
type treeReader interface {
	Len() int
	Get(int) (int, bool)
	Min() (int, int, bool)
	Max() (int, int, bool)
	All() iter.Seq2[int, int]
	Ascend(int) iter.Seq2[int, int]
}

var (
	_ treeReader = (*Tree[int, int])(nil)
	_ treeReader = (*TreeSnapshot[int, int])(nil)
)

type treeTB interface {
	Helper()
	Fatalf(string, ...any)
}

// treeSorted returns the model's entries in key order.
func treeSorted(model map[int]int) []Entry[int, int] {
	es := make([]Entry[int, int], 0, len(model))
	for _, k := range slices.Sorted(maps.Keys(model)) {
		es = append(es, Entry[int, int]{k, model[k]})
	}
	return es
}

// treeCollect returns what a sequence yields.
func treeCollect(seq iter.Seq2[int, int]) []Entry[int, int] {
	var es []Entry[int, int]
	for k, v := range seq {
		es = append(es, Entry[int, int]{k, v})
	}
	return es
}

// treeMatch checks everything r reads against the model: all entries in
// order, Len, Min, Max, Get of every present key and of absent ones, and
// Ascend from a few places.
func treeMatch(t treeTB, what string, r treeReader, model map[int]int) {
	t.Helper()
	want := treeSorted(model)
	if got := treeCollect(r.All()); !slices.Equal(got, want) {
		t.Fatalf("%s: All() = %v\nwant %v", what, treeShort(got), treeShort(want))
	}
	if r.Len() != len(want) {
		t.Fatalf("%s: Len() = %d, want %d", what, r.Len(), len(want))
	}
	k, v, ok := r.Min()
	if len(want) == 0 {
		if ok {
			t.Fatalf("%s: Min() of empty = %d,%d,true", what, k, v)
		}
	} else if !ok || (Entry[int, int]{k, v}) != want[0] {
		t.Fatalf("%s: Min() = %d,%d,%v, want %v", what, k, v, ok, want[0])
	}
	k, v, ok = r.Max()
	if len(want) == 0 {
		if ok {
			t.Fatalf("%s: Max() of empty = %d,%d,true", what, k, v)
		}
	} else if !ok || (Entry[int, int]{k, v}) != want[len(want)-1] {
		t.Fatalf("%s: Max() = %d,%d,%v, want %v", what, k, v, ok, want[len(want)-1])
	}
	for _, e := range want {
		if v, ok := r.Get(e.Key); !ok || v != e.Val {
			t.Fatalf("%s: Get(%d) = %d,%v, want %d", what, e.Key, v, ok, e.Val)
		}
	}
	for _, k := range []int{-1 << 40, 1 << 40} {
		if v, ok := r.Get(k); ok {
			t.Fatalf("%s: Get(%d) = %d, want absent", what, k, v)
		}
	}
	if len(want) > 0 {
		for _, i := range []int{0, len(want) / 3, len(want) - 1} {
			from := want[i].Key
			if got := treeCollect(r.Ascend(from)); !slices.Equal(got, want[i:]) {
				t.Fatalf("%s: Ascend(%d) = %v, want %v", what, from, treeShort(got), treeShort(want[i:]))
			}
			if got := treeCollect(r.Ascend(from + 1)); !slices.Equal(got, want[i+1:]) {
				t.Fatalf("%s: Ascend(%d) = %v, want %v", what, from+1, treeShort(got), treeShort(want[i+1:]))
			}
		}
	}
}

// treeShort formats a long entry list readably.
func treeShort(es []Entry[int, int]) string {
	if len(es) <= 20 {
		return fmt.Sprint(es)
	}
	return fmt.Sprintf("%v ... %v (%d entries)", es[:10], es[len(es)-10:], len(es))
}

// treeFrozen is a live snapshot with the model copy taken at its capture.
type treeFrozen struct {
	snap  *TreeSnapshot[int, int]
	model map[int]int
}

// treeMachine drives a Tree and a Go map side by side, with snapshots.
type treeMachine struct {
	tree     *Tree[int, int]
	model    map[int]int
	frozen   []treeFrozen
	keySpace int
	keys     *rapid.Generator[int] // mostly in [0, keySpace), sometimes just outside
	vals     *rapid.Generator[int] // few values, so that equal-value writes happen
}

func (m *treeMachine) check(t *rapid.T) {
	if err := m.tree.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	treeMatch(t, "tree", m.tree, m.model)
	for i, f := range m.frozen {
		if err := f.snap.check(); err != nil {
			t.Fatalf("snapshot %d (epoch %d): check: %v", i, f.snap.Epoch(), err)
		}
		treeMatch(t, fmt.Sprintf("snapshot %d (epoch %d)", i, f.snap.Epoch()), f.snap, f.model)
	}
}

// noop checks that an operation that must change nothing left the root
// pointer, the write counter and the length alone.
func (m *treeMachine) noop(t *rapid.T, what string, op func()) {
	root, writes, n := m.tree.root, m.tree.owner.writes, m.tree.len
	op()
	if m.tree.root != root || m.tree.owner.writes != writes || m.tree.len != n {
		t.Fatalf("%s should write nothing, but it changed the tree", what)
	}
}

func (m *treeMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"": m.check,
		"Set": func(t *rapid.T) {
			k, v := m.keys.Draw(t, "k"), m.vals.Draw(t, "v")
			old, had := m.model[k]
			if had && old == v {
				m.noop(t, "Set of an equal value", func() { m.tree.Set(k, v) })
				return
			}
			if replaced := m.tree.Set(k, v); replaced != had {
				t.Fatalf("Set(%d) = %v, model had it: %v", k, replaced, had)
			}
			m.model[k] = v
		},
		"SetRun": func(t *rapid.T) {
			lo := m.keys.Draw(t, "lo")
			n := rapid.IntRange(1, max(1, m.keySpace/2)).Draw(t, "n")
			step := rapid.IntRange(-2, 2).Draw(t, "step") // descending, repeated or ascending keys
			v := m.vals.Draw(t, "v")
			for i := range n {
				k := lo + i*step
				m.tree.Set(k, v+i%2)
				m.model[k] = v + i%2
			}
		},
		"Delete": func(t *rapid.T) {
			k := m.keys.Draw(t, "k")
			want, had := m.model[k]
			if !had {
				m.noop(t, "Delete of an absent key", func() { m.tree.Delete(k) })
				return
			}
			if v, ok := m.tree.Delete(k); !ok || v != want {
				t.Fatalf("Delete(%d) = %d,%v, want %d,true", k, v, ok, want)
			}
			delete(m.model, k)
		},
		"Get": func(t *rapid.T) {
			k := m.keys.Draw(t, "k")
			want, had := m.model[k]
			if v, ok := m.tree.Get(k); ok != had || v != want {
				t.Fatalf("Get(%d) = %d,%v, want %d,%v", k, v, ok, want, had)
			}
		},
		"DeleteMin": func(t *rapid.T) {
			want := treeSorted(m.model)
			k, v, ok := m.tree.DeleteMin()
			if len(want) == 0 {
				if ok {
					t.Fatalf("DeleteMin() of empty = %d,%d,true", k, v)
				}
				return
			}
			if !ok || (Entry[int, int]{k, v}) != want[0] {
				t.Fatalf("DeleteMin() = %d,%d,%v, want %v", k, v, ok, want[0])
			}
			delete(m.model, k)
		},
		"PopMinUntil": func(t *rapid.T) {
			bound := m.keys.Draw(t, "bound")
			n := rapid.IntRange(-1, m.keySpace).Draw(t, "max")
			var want []Entry[int, int]
			for _, e := range treeSorted(m.model) {
				if e.Key > bound || len(want) >= n {
					break
				}
				want = append(want, e)
			}
			prefix := []Entry[int, int]{{-7, -7}} // PopMinUntil appends to dst
			if len(want) == 0 {
				m.noop(t, "PopMinUntil with nothing to pop", func() {
					if got := m.tree.PopMinUntil(bound, n, prefix); len(got) != 1 {
						t.Fatalf("PopMinUntil(%d, %d) = %v, want nothing appended", bound, n, got)
					}
				})
				return
			}
			got := m.tree.PopMinUntil(bound, n, prefix)
			if !slices.Equal(got[1:], want) || got[0] != prefix[0] {
				t.Fatalf("PopMinUntil(%d, %d) = %v, want %v", bound, n, treeShort(got[1:]), treeShort(want))
			}
			for _, e := range want {
				delete(m.model, e.Key)
			}
		},
		"DeleteRun": func(t *rapid.T) {
			lo := m.keys.Draw(t, "lo")
			n := rapid.IntRange(1, max(1, m.keySpace/3)).Draw(t, "n")
			step := rapid.IntRange(-3, 3).Draw(t, "step")
			for i := range n {
				k := lo + i*step
				want, had := m.model[k]
				if v, ok := m.tree.Delete(k); ok != had || v != want {
					t.Fatalf("Delete(%d) = %d,%v, want %d,%v", k, v, ok, want, had)
				}
				delete(m.model, k)
			}
		},
		"DeleteRange": func(t *rapid.T) {
			lo := m.keys.Draw(t, "lo")
			hi := lo + rapid.IntRange(-3, m.keySpace).Draw(t, "width")
			want := 0
			for k := range m.model {
				if lo <= k && k < hi {
					want++
				}
			}
			if want == 0 {
				m.noop(t, "DeleteRange of an empty range", func() {
					if got := m.tree.DeleteRange(lo, hi); got != 0 {
						t.Fatalf("DeleteRange(%d, %d) = %d, want 0", lo, hi, got)
					}
				})
				return
			}
			if got := m.tree.DeleteRange(lo, hi); got != want {
				t.Fatalf("DeleteRange(%d, %d) = %d, want %d", lo, hi, got, want)
			}
			maps.DeleteFunc(m.model, func(k, _ int) bool { return lo <= k && k < hi })
		},
		"Ascend": func(t *rapid.T) {
			from := m.keys.Draw(t, "from")
			limit := rapid.IntRange(0, 50).Draw(t, "limit")
			var want []Entry[int, int]
			for _, e := range treeSorted(m.model) {
				if e.Key >= from && len(want) < limit {
					want = append(want, e)
				}
			}
			var got []Entry[int, int]
			if limit > 0 {
				for k, v := range m.tree.Ascend(from) {
					got = append(got, Entry[int, int]{k, v})
					if len(got) == limit {
						break
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Ascend(%d) first %d = %v, want %v", from, limit, got, want)
			}
		},
		"Snapshot": func(t *rapid.T) {
			if len(m.frozen) >= 6 {
				return
			}
			var s *TreeSnapshot[int, int]
			if rapid.Bool().Draw(t, "view") {
				s = m.tree.View(m.tree.owner.Capture())
			} else {
				s = m.tree.Snapshot()
			}
			m.frozen = append(m.frozen, treeFrozen{s, maps.Clone(m.model)})
		},
		"Release": func(t *rapid.T) {
			if len(m.frozen) == 0 {
				return
			}
			i := rapid.IntRange(0, len(m.frozen)-1).Draw(t, "i")
			m.frozen[i].snap.Release()
			m.frozen = slices.Delete(m.frozen, i, i+1)
		},
		"Diff": func(t *rapid.T) {
			if len(m.frozen) == 0 {
				return
			}
			a := m.frozen[rapid.IntRange(0, len(m.frozen)-1).Draw(t, "a")]
			b := m.frozen[rapid.IntRange(0, len(m.frozen)-1).Draw(t, "b")]
			var st treeDiffStats
			got := maps.Clone(a.model)
			treeApply(t, got, func(yield func(Change[int, int]) bool) { treeDiff(a.snap, b.snap, &st, yield) })
			if !maps.Equal(got, b.model) {
				t.Fatalf("Diff(epoch %d, epoch %d) applied to the first does not give the second", a.snap.Epoch(), b.snap.Epoch())
			}
			if a.snap == b.snap && st.nodes != 0 {
				t.Fatalf("Diff(s, s) read %d nodes, want 0", st.nodes)
			}
		},
	}
}

// treeWidths are the node widths the state machine draws from: small ones
// give deep trees from a few keys, the real ones are what ships.
var treeWidths = [][2]int{{4, 4}, {5, 4}, {4, 5}, {7, 6}, {16, 8}, {treeLeafWidth, treeBranchWidth}}

// runTreeMachine runs the state machine with node widths and a key space
// drawn from the given ones.
func runTreeMachine(t *rapid.T, widths [][2]int, keySpaces []int) {
	w := rapid.SampledFrom(widths).Draw(t, "widths")
	keySpace := rapid.SampledFrom(keySpaces).Draw(t, "keyspace")
	m := &treeMachine{
		tree:     newIntTree(w[0], w[1]),
		model:    map[int]int{},
		keySpace: keySpace,
		keys:     rapid.IntRange(-2, keySpace+1),
		vals:     rapid.IntRange(0, 3),
	}
	defer func() {
		for _, f := range m.frozen {
			f.snap.Release()
		}
	}()
	t.Repeat(m.actions())
}

// TestTree_StateMachine runs random operations, snapshots and releases
// against a Go map, checking the tree and every live snapshot after every
// step. Small node widths make trees several levels deep from a few keys.
func TestTree_StateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runTreeMachine(t, treeWidths, []int{16, 300, 3000}) })
}

// TestTree_StateMachineRealWidths is TestTree_StateMachine with the node
// widths that ship, and key spaces large enough for three levels.
func TestTree_StateMachineRealWidths(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		runTreeMachine(t, [][2]int{{treeLeafWidth, treeBranchWidth}}, []int{100, 3000, 12_000})
	})
}

func FuzzTree(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { runTreeMachine(t, treeWidths, []int{16, 300, 3000}) }))
}

// treeRandomOps applies n random writes to tr and model, keys in [0, space).
func treeRandomOps(t treeTB, rng *rand.Rand, tr *Tree[int, int], model map[int]int, n, space int) {
	t.Helper()
	for range n {
		k := rng.IntN(space)
		switch op := rng.IntN(20); {
		case op < 12:
			v := rng.IntN(4)
			tr.Set(k, v)
			model[k] = v
		case op < 17:
			tr.Delete(k)
			delete(model, k)
		case op < 18:
			hi := k + rng.IntN(20)
			want := 0
			for k2 := k; k2 < hi; k2++ {
				if _, ok := model[k2]; ok {
					want++
					delete(model, k2)
				}
			}
			if got := tr.DeleteRange(k, hi); got != want {
				t.Fatalf("DeleteRange(%d, %d) = %d, want %d", k, hi, got, want)
			}
		case op < 19:
			for _, e := range tr.PopMinUntil(k, rng.IntN(20), nil) {
				if v, ok := model[e.Key]; !ok || v != e.Val || e.Key > k {
					t.Fatalf("PopMinUntil(%d) popped %v, model %d,%v", k, e, v, ok)
				}
				delete(model, e.Key)
			}
		default:
			if k, v, ok := tr.DeleteMin(); ok {
				if mv, had := model[k]; !had || mv != v {
					t.Fatalf("DeleteMin() = %d,%d, model %d,%v", k, v, mv, had)
				}
				delete(model, k)
			}
		}
	}
}

// TestTree_Large runs the real node widths at a size where the tree is
// three levels deep and too large for a core's cache (its searches
// prefetch each node's keys), with snapshots taken and released along
// the way.
func TestTree_Large(t *testing.T) {
	n, space := 400_000, 200_000
	if testing.Short() || invariants.Exhaustive {
		n, space = 40_000, 20_000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	model := map[int]int{}
	for k := range space {
		tr.Set(k, k%4)
		model[k] = k % 4
	}
	if !invariants.Exhaustive && tr.height < 2 {
		t.Fatalf("height %d, want at least 2", tr.height)
	}
	if !testing.Short() && !invariants.Exhaustive && !tr.far() {
		t.Fatalf("%d entries of %d bytes not far: the searches' prefetches go untested", tr.Len(), 8)
	}
	var frozen []treeFrozen
	for round := range 8 {
		treeRandomOps(t, rng, tr, model, n/8, space)
		if err := tr.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		treeMatch(t, "tree", tr, model)
		if round%3 == 2 && len(frozen) > 0 {
			frozen[0].snap.Release()
			frozen = frozen[1:]
		}
		frozen = append(frozen, treeFrozen{tr.Snapshot(), maps.Clone(model)})
		for _, f := range frozen {
			if err := f.snap.check(); err != nil {
				t.Fatalf("round %d: snapshot epoch %d: %v", round, f.snap.Epoch(), err)
			}
			treeMatch(t, "snapshot", f.snap, f.model)
		}
	}
	for len(frozen) > 0 {
		frozen[0].snap.Release()
		frozen = frozen[1:]
	}
	if tr.DeleteRange(-1, space+1); tr.Len() != 0 || !tr.root.isZero() {
		t.Fatalf("DeleteRange of everything left %d entries", tr.Len())
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTree_Set(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for i := range 10_000 {
		k := (i * 7919) % 10_000 // every key once, in a scattered order
		if tr.Set(k, k) {
			t.Fatalf("Set(%d) of a new key reported replaced", k)
		}
	}
	if !tr.Set(5, 5) || !tr.Set(5, 6) {
		t.Fatal("Set of a present key did not report replaced")
	}
	if v, ok := tr.Get(5); !ok || v != 6 {
		t.Fatalf("Get(5) = %d,%v after Set(5, 6)", v, ok)
	}
	tr.Set(5, 5)
	model := map[int]int{}
	for k := range 10_000 {
		model[k] = k
	}
	treeMatch(t, "tree", tr, model)
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTree_NewTreeNilEqual(t *testing.T) {
	tr := NewTree[int, int](NewOwner(), cmp.Compare[int], nil) // BytesEqual
	tr.Set(1, 7)
	before := tr.Snapshot()
	defer before.Release()
	tr.Set(1, 7) // equal bytes: a no-op
	after := tr.Snapshot()
	defer after.Release()
	for c := range DiffTrees(before, after) {
		t.Fatalf("a write of equal bytes shows in the diff: %+v", c)
	}
	defer func() {
		if r := recover(); r != "cow: NewTree: a nil equal needs a value type with no pointers and no padding" {
			t.Fatalf("NewTree with nil equal and string values: recovered %v", r)
		}
	}()
	NewTree[int, string](NewOwner(), cmp.Compare[int], nil)
}

// TestTree_PopMinUntil drains a timer-queue-like tree from the left edge in
// batches while adding later keys at the right edge.
func TestTree_PopMinUntil(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	next := 0 // next timestamp to schedule
	for ; next < 10_000; next++ {
		tr.Set(next, next)
	}
	fired := 0 // every timestamp < fired has fired
	var buf []Entry[int, int]
	for now := 0; now < 30_000; now += 97 {
		for range 50 {
			tr.Set(next, next)
			next++
		}
		for {
			buf = tr.PopMinUntil(now, 256, buf[:0])
			for _, e := range buf {
				if e.Key != fired || e.Val != fired {
					t.Fatalf("now %d: fired %v, want key %d", now, e, fired)
				}
				fired++
			}
			if len(buf) < 256 {
				break
			}
		}
		if fired != min(now+1, next) {
			t.Fatalf("now %d: fired up to %d, want %d", now, fired, min(now+1, next))
		}
		if k, _, ok := tr.Min(); ok && k <= now {
			t.Fatalf("now %d: %d left in the queue", now, k)
		}
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	if tr.Len() != next-fired {
		t.Fatalf("Len %d, want %d", tr.Len(), next-fired)
	}
}

// TestTree_PopMinUntilReadsLeaves checks that PopMinUntil takes a leaf's
// worth of entries per descent: draining n entries in one call costs about
// n/leaf-size copies of the path under a snapshot, not n.
func TestTree_PopMinUntilReadsLeaves(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	if invariants.Exhaustive {
		t.Skip("under the invariants tag every write runs Check, which allocates")
	}
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range 100_000 {
		tr.Set(k, k)
	}
	s := tr.Snapshot()
	defer s.Release()
	dst := make([]Entry[int, int], 0, 20_000)
	allocs := treeAllocs(func() { dst = tr.PopMinUntil(1<<40, 20_000, dst[:0]) })
	// Emptied leaves are dropped without being copied; the path above them is
	// copied once; rebalancing the leaf left partly drained copies a couple.
	if allocs > 10 {
		t.Fatalf("PopMinUntil of 20000 entries under a snapshot allocated %v times", allocs)
	}
	if len(dst) != 20_000 || dst[0].Key != 0 || dst[19_999].Key != 19_999 {
		t.Fatalf("PopMinUntil popped %d entries, %v ... %v", len(dst), dst[0], dst[len(dst)-1])
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTree_DeleteRange(t *testing.T) {
	for _, w := range treeWidths {
		t.Run(fmt.Sprintf("leaf=%d/branch=%d", w[0], w[1]), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(w[0]), uint64(w[1])))
			for range 50 {
				tr := newIntTree(w[0], w[1])
				model := map[int]int{}
				n := rng.IntN(treeSize(3000))
				for range n {
					k := rng.IntN(5000)
					tr.Set(k, k)
					model[k] = k
				}
				s := tr.Snapshot() // half the cases under a snapshot
				if rng.IntN(2) == 0 {
					s.Release()
				}
				lo := rng.IntN(5000) - 100
				hi := lo + rng.IntN(5200)
				want := 0
				for k := range model {
					if lo <= k && k < hi {
						want++
					}
				}
				if got := tr.DeleteRange(lo, hi); got != want {
					t.Fatalf("DeleteRange(%d, %d) = %d, want %d", lo, hi, got, want)
				}
				maps.DeleteFunc(model, func(k, _ int) bool { return lo <= k && k < hi })
				if err := tr.Check(); err != nil {
					t.Fatal(err)
				}
				treeMatch(t, "tree", tr, model)
				s.Release()
			}
		})
	}
}

// TestTree_NoOpWritesAllocateNothing: with a live snapshot, writes that
// change nothing copy no node (they allocate nothing and keep the root).
func TestTree_NoOpWritesAllocateNothing(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range 10_000 {
		tr.Set(2*k, k) // even keys only
	}
	s := tr.Snapshot()
	defer s.Release()
	root, writes := tr.root, tr.owner.writes
	buf := make([]Entry[int, int], 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		tr.Set(5000, 2500)               // equal value
		tr.Delete(5001)                  // absent
		tr.Delete(-1)                    // absent, below the minimum
		tr.DeleteRange(5001, 5002)       // holds no key
		tr.DeleteRange(1<<30, 1<<31)     // past the maximum
		tr.DeleteRange(10, 3)            // empty range
		buf = tr.PopMinUntil(-1, 8, buf) // nothing <= -1
	})
	if allocs != 0 {
		t.Fatalf("no-op writes allocated %v times per run", allocs)
	}
	if tr.root != root || tr.owner.writes != writes || len(buf) != 0 {
		t.Fatal("no-op writes changed the tree")
	}
}

// TestTree_CopyOncePerCapture: under a live snapshot the first write to a
// path copies it (one node per level), later writes of the same epoch to
// the same path copy nothing, and with no live snapshot nothing is copied.
func TestTree_CopyOncePerCapture(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	if invariants.Exhaustive {
		t.Skip("under the invariants tag every write runs Check, which allocates")
	}
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range 100_000 {
		tr.Set(2*k, 0)
	}
	levels := float64(tr.height + 1)
	s := tr.Snapshot()
	if allocs := treeAllocs(func() { tr.Set(1000, 1) }); allocs != levels {
		t.Fatalf("first write under a snapshot allocated %v times, want %v (one per level)", allocs, levels)
	}
	v := 0
	if allocs := testing.AllocsPerRun(100, func() { v++; tr.Set(1000, v) }); allocs != 0 {
		t.Fatalf("second write to the same path allocated %v times", allocs)
	}
	s.Release()
	if allocs := testing.AllocsPerRun(100, func() { v++; tr.Set(2*(v%50_000), v) }); allocs != 0 {
		t.Fatalf("overwrites with no live snapshot allocated %v times", allocs)
	}
	if h := tr.Owner().High(); h != 0 {
		t.Fatalf("High() = %d after the only capture was released", h)
	}
}

func TestTree_ReleasedSnapshotPanics(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range 1000 {
		tr.Set(k, k)
	}
	s := tr.Snapshot()
	other := tr.Snapshot()
	defer other.Release()
	s.Release()
	s.Release() // idempotent
	if !s.Released() || other.Released() {
		t.Fatal("Released() is wrong")
	}
	if s.Epoch() == 0 {
		t.Fatal("Epoch() of a released snapshot should still answer")
	}
	mustPanic := func(name string, read func()) {
		t.Helper()
		defer func() {
			r := recover()
			if r == nil {
				t.Errorf("%s on a released snapshot did not panic", name)
			} else if msg := fmt.Sprint(r); !strings.Contains(msg, "released") {
				t.Errorf("%s on a released snapshot: panic %q does not say why", name, msg)
			} else if err, ok := r.(error); !ok || !errors.Is(err, ErrReleased) {
				t.Errorf("%s on a released snapshot: panic %#v does not match ErrReleased", name, r)
			}
		}()
		read()
	}
	mustPanic("Len", func() { s.Len() })
	mustPanic("Get", func() { s.Get(1) })
	mustPanic("Min", func() { s.Min() })
	mustPanic("Max", func() { s.Max() })
	mustPanic("All", func() {
		for range s.All() {
		}
	})
	mustPanic("Ascend", func() {
		for range s.Ascend(500) {
		}
	})
	mustPanic("DiffTrees", func() {
		for range DiffTrees(s, other) {
		}
	})
	// A release during an iteration stops it at the next entry.
	s2 := tr.Snapshot()
	n := 0
	mustPanic("All released midway", func() {
		for range s2.All() {
			if n++; n == 100 {
				s2.Release()
			}
		}
	})
	if n != 100 {
		t.Fatalf("iteration went on for %d entries after the release", n-100)
	}
}

func TestTree_ViewAfterWritePanics(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	c := tr.Owner().Capture()
	defer c.Release()
	tr.Set(1, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("View after a write did not panic")
		}
	}()
	tr.View(c)
}

// TestTree_ViewsShareCapture: two trees of one owner captured together, and
// writes to one do not disturb the other's view.
func TestTree_ViewsShareCapture(t *testing.T) {
	o := NewOwner()
	a := NewTree(o, cmp.Compare[int], Equal[int])
	b := NewTree(o, cmp.Compare[int], Equal[int])
	for k := range 500 {
		a.Set(k, k)
		b.Set(k, -k)
	}
	c := o.Capture()
	sa, sb := a.View(c), b.View(c)
	a.DeleteRange(0, 250)
	b.Set(3, 3)
	if sa.Len() != 500 || sb.Len() != 500 {
		t.Fatal("views changed after writes")
	}
	if v, _ := sb.Get(3); v != -3 {
		t.Fatalf("view of b: Get(3) = %d, want -3", v)
	}
	sa.Release()
	if !sb.Released() {
		t.Fatal("releasing one view did not release its capture")
	}
}

// TestTree_ConcurrentReaders reads snapshots on other goroutines while the
// writer goes on, checking every snapshot against its frozen contents;
// readers release their snapshots. Run with -race.
func TestTree_ConcurrentReaders(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	model := map[int]int{}
	rng := rand.New(rand.NewPCG(3, 4))
	type job struct {
		snap *TreeSnapshot[int, int]
		want []Entry[int, int]
	}
	jobs := make(chan job, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				for range 2 {
					if got := treeCollect(j.snap.All()); !slices.Equal(got, j.want) {
						t.Errorf("snapshot epoch %d: All() differs from its frozen contents", j.snap.Epoch())
						break
					}
					if j.snap.Len() != len(j.want) {
						t.Errorf("snapshot epoch %d: Len() = %d, want %d", j.snap.Epoch(), j.snap.Len(), len(j.want))
					}
					for i := 0; i < len(j.want); i += 97 {
						if v, ok := j.snap.Get(j.want[i].Key); !ok || v != j.want[i].Val {
							t.Errorf("snapshot epoch %d: Get(%d) = %d,%v, want %d", j.snap.Epoch(), j.want[i].Key, v, ok, j.want[i].Val)
						}
					}
					if len(j.want) > 0 {
						mid := j.want[len(j.want)/2].Key
						if got := treeCollect(j.snap.Ascend(mid)); !slices.Equal(got, j.want[len(j.want)/2:]) {
							t.Errorf("snapshot epoch %d: Ascend differs", j.snap.Epoch())
						}
					}
				}
				j.snap.Release()
			}
		})
	}
	for round := range 60 {
		treeRandomOps(t, rng, tr, model, 2_000, 20_000)
		jobs <- job{tr.Snapshot(), treeSorted(model)}
		if round%10 == 9 {
			if err := tr.Check(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(jobs)
	wg.Wait()
	if n := tr.Owner().LiveCaptures(); n != 0 {
		t.Fatalf("%d captures still live", n)
	}
	treeMatch(t, "tree", tr, model)
}

func TestTree_Check(t *testing.T) {
	tr := newIntTree(4, 4)
	for k := range 200 {
		tr.Set(k, k)
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	// Break things one at a time and expect Check to notice.
	breakers := map[string]func(*Tree[int, int]) func(){
		"order": func(tr *Tree[int, int]) func() {
			l := treeLeftLeaf(tr)
			l.keys[0], l.keys[1] = l.keys[1], l.keys[0]
			return func() { l.keys[0], l.keys[1] = l.keys[1], l.keys[0] }
		},
		"len": func(tr *Tree[int, int]) func() { tr.len++; return func() { tr.len-- } },
		"epoch": func(tr *Tree[int, int]) func() {
			l := treeLeftLeaf(tr)
			e := l.epoch
			l.epoch = tr.owner.epoch + 1
			return func() { l.epoch = e }
		},
		"separator": func(tr *Tree[int, int]) func() {
			b := tr.root.branch
			k := b.keys[0]
			b.keys[0] = -5
			return func() { b.keys[0] = k }
		},
		"fill": func(tr *Tree[int, int]) func() {
			l := treeLeftLeaf(tr)
			saved := *l
			l.remove(1, l.n)
			return func() { *l = saved }
		},
		"shared": func(tr *Tree[int, int]) func() {
			// A node a live capture can see points at a node made after it.
			s := tr.Snapshot()
			b := tr.root.branch
			kid := b.kids[0].branch
			cp := *kid
			cp.epoch = tr.owner.epoch
			b.kids[0].branch = &cp
			return func() { b.kids[0].branch = kid; s.Release() }
		},
	}
	for name, brk := range breakers {
		undo := brk(tr)
		err := tr.Check()
		undo()
		if err == nil {
			t.Errorf("Check did not notice a broken %s", name)
		} else if !strings.Contains(err.Error(), ErrInvariant.Error()) {
			t.Errorf("broken %s: error %v does not wrap ErrInvariant", name, err)
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("after undoing %s: %v", name, err)
		}
	}
}

// treeAllocs returns how many heap allocations one call of f makes
// (testing.AllocsPerRun calls f once more to warm up, which for a write
// under a snapshot is the call that copies).
func treeAllocs(f func()) float64 {
	defer invariants.Suspend()() // a self-check would count as an allocation
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs - before.Mallocs)
}

func treeLeftLeaf(tr *Tree[int, int]) *treeLeaf[int, int] {
	r := tr.root
	for range tr.height {
		r = r.branch.kids[0]
	}
	return r.leaf
}

func TestChangeKind_String(t *testing.T) {
	for k, want := range map[ChangeKind]string{Added: "added", Removed: "removed", Changed: "changed", 0: "ChangeKind(0)", 9: "ChangeKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("ChangeKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
