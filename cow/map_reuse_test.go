package cow

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/cowstate/cowstate/internal/invariants"
)

// identityMap returns a map and its model holding i -> i for i < n.
func identityMap(n int) (*Map[int, int], map[int]int) {
	m, model := newIntMap(hashInt), make(map[int]int, n)
	for i := range n {
		m.Set(i, i)
		model[i] = i
	}
	return m, model
}

// capturedEpochs returns a function that makes writes overwrites of random
// keys below n (recorded in model if not nil), then captures the map and
// releases the previous capture; last returns the newest capture.
func capturedEpochs(m *Map[int, int], model map[int]int, n, writes int, r *rand.Rand) (epoch func(), last func() *MapSnapshot[int, int]) {
	var s *MapSnapshot[int, int]
	epoch = func() {
		for range writes {
			k, v := r.IntN(n), r.Int()
			m.Set(k, v)
			if model != nil {
				model[k] = v
			}
		}
		next := m.Snapshot()
		if s != nil {
			s.Release()
		}
		s = next
	}
	return epoch, func() *MapSnapshot[int, int] { return s }
}

// TestMap_ReusesRetiredLeaves takes a capture every 200 overwrites and
// releases the one before: after a warm-up the leaf copies go into the
// leaves the released captures left behind, so of an epoch's 200 leaf and
// 33 branch copies only the branches and the capture allocate. The live
// map and the last capture keep their contents.
func TestMap_ReusesRetiredLeaves(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	const n = 20_000
	m, model := identityMap(n)
	epoch, last := capturedEpochs(m, model, n, 200, rand.New(rand.NewPCG(1, 2)))
	if invariants.Exhaustive {
		// Every write runs Check, which allocates and costs O(n): a few
		// epochs check the contents; the allocation count is meaningless.
		for range 3 {
			epoch()
		}
	} else {
		for range 50 {
			epoch()
		}
		if allocs := testing.AllocsPerRun(20, epoch); allocs > 40 {
			t.Fatalf("an epoch of 200 overwrites under a capture allocated %v times; want its leaf copies in reused leaves", allocs)
		}
	}
	epoch()
	s, frozen := last(), maps.Clone(model)
	for k := range n / 100 {
		m.Set(k*100, -1)
		model[k*100] = -1
	}
	if got := mapContents(t, s.All()); !maps.Equal(got, frozen) {
		t.Fatal("capture changed by writes after it")
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	s.Release()
}

// TestMap_ReusesLeavesAcrossIdleIntervals is a job checkpointing at
// intervals: a capture is taken, writes copy thousands of its leaves
// while the capture is live, the capture is released, and more writes
// follow with none live. The leaves one
// interval's copies retired are the memory the next interval's copies go
// into, across the writes with no capture in between: of an interval's
// thousands of leaf copies, only the branch copies and the capture
// allocate. The live map keeps its contents.
func TestMap_ReusesLeavesAcrossIdleIntervals(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	n := 200_000
	if invariants.Exhaustive {
		n = 2_000 // every write runs Check: contents only
	}
	m, model := identityMap(n)
	r := rand.New(rand.NewPCG(5, 6))
	set := func(writes int) {
		for range writes {
			k, v := r.IntN(n), r.Int()
			m.Set(k, v)
			model[k] = v
		}
	}
	interval := func() {
		s := m.Snapshot()
		set(n / 32)
		s.Release()
		set(n / 100) // with no capture live: in place
	}
	interval()
	interval()
	if !invariants.Exhaustive {
		// About 5.7K of the 32K leaves are copied an interval, and the
		// 1.1K branches above them, into what the interval before
		// retired; about 600 of the leaf copies find no retired leaf of
		// their capacity ready (newLeaf). With either kind allocated
		// afresh an interval allocates 1.7K times or more.
		if allocs := testing.AllocsPerRun(3, interval); allocs > 1_000 {
			t.Fatalf("an interval of %d writes under a capture allocated %v times; want its copies in the leaves and branches the interval before retired", n/32, allocs)
		}
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestLeafReuse_MayKeepAShareOfTheMap: past the owner's budget, a map
// keeps retired leaves (waiting and ready together) up to a quarter of
// its entries' bytes, and no more.
func TestLeafReuse_MayKeepAShareOfTheMap(t *testing.T) {
	var r leafReuse[int, int]
	entry := int(unsafe.Sizeof(mapEntry[int, int]{}))
	size := 1 << 20
	share := size * entry / reuseShare
	if !r.mayKeep(64, 0, waitingBudget, 16) {
		t.Fatal("refused what the owner's budget has room for")
	}
	r.waitingB, r.bytes = share/2, share/2-64
	if !r.mayKeep(64, waitingBudget, waitingBudget, size) {
		t.Fatal("refused the last bytes of the map's share")
	}
	if r.mayKeep(65, waitingBudget, waitingBudget, size) {
		t.Fatal("kept more than the map's share with the owner's budget spent")
	}
	if r.mayKeep(64, waitingBudget, waitingBudget, size/2) {
		t.Fatal("kept more than a smaller map's share")
	}
}

// TestMap_CursorDoesNotReuse drives a Map as a cursor over a root stored
// elsewhere, as a nested map state does: a write whose result is thrown
// away leaves the stored root reaching the nodes the write replaced, so
// such a map must never reuse them.
func TestMap_CursorDoesNotReuse(t *testing.T) {
	const n = 5000
	m, model := identityMap(n)
	stored := m.Root() // the root kept in the enclosing structure
	for round := range 3 {
		pin := m.Owner().Capture()
		m.SetRoot(stored)
		for k := range n / 4 {
			m.Set(k*4+round, -1) // copies what pin shares, then is thrown away
		}
		m.SetRoot(stored)
		pin.Release()
		if got := mapContents(t, stored.All()); !maps.Equal(got, model) {
			t.Fatalf("round %d: the stored root changed under a thrown-away write", round)
		}
	}
}

// TestMap_ReuseStaysSmall checks that what waits for reuse stays small
// beside a small map written under captures for a long time.
func TestMap_ReuseStaysSmall(t *testing.T) {
	const n = 300
	m, _ := identityMap(n)
	epoch, last := capturedEpochs(m, nil, n, 20, rand.New(rand.NewPCG(3, 4)))
	for range 2000 {
		epoch()
	}
	last().Release()
	ready := 0
	for _, l := range m.reuse.ready {
		ready += len(l)
	}
	if ready != m.reuse.nReady || ready > n/16+4 {
		t.Fatalf("a map of %d entries keeps %d leaves (counted %d) ready for reuse", n, ready, m.reuse.nReady)
	}
}

// TestNodeReuse_Runs checks the address ranges of SetRun's arrays: lookups
// inside and at the edges, and a new range dropping the stale ones it
// overlaps.
func TestNodeReuse_Runs(t *testing.T) {
	var r leafReuse[int, int]
	r.addRun(memRange{300, 400})
	r.addRun(memRange{100, 200})
	for a, want := range map[uintptr]bool{99: false, 100: true, 199: true, 200: false, 250: false, 300: true, 399: true, 400: false} {
		if got := r.inRun(a); got != want {
			t.Errorf("inRun(%d) = %v with [100,200) [300,400)", a, got)
		}
	}
	r.addRun(memRange{180, 320})
	if want := []memRange{{180, 320}}; !slices.Equal(r.runs, want) {
		t.Fatalf("runs %v, want %v", r.runs, want)
	}
	if r.inRun(150) || !r.inRun(300) || r.inRun(350) {
		t.Fatal("lookups after an overlapping range do not see only it")
	}
}

// TestMap_RunLeavesNotReused loads a map with SetRun, whose leaves are
// pieces of one array, then overwrites under captures: no piece of the
// array may be kept for reuse, and the map keeps its contents.
func TestMap_RunLeavesNotReused(t *testing.T) {
	const n = 20_000
	m := newIntMap(hashInt)
	run := make([]MapEntry[int, int], n)
	model := make(map[int]int, n)
	for i := range run {
		run[i] = MapEntry[int, int]{Hash: hashInt(i), Key: i, Val: i}
		model[i] = i
	}
	slices.SortFunc(run, func(a, b MapEntry[int, int]) int { return cmp.Compare(a.Hash, b.Hash) })
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(run)))
	hi := lo + uintptr(n)*unsafe.Sizeof(run[0])
	m.SetRun(run)
	epoch, last := capturedEpochs(m, model, n, 500, rand.New(rand.NewPCG(5, 6)))
	for range 20 {
		epoch()
	}
	last().Release()
	m.reuse.promote(m.owner, m.len)
	for c, l := range m.reuse.ready {
		for _, p := range l {
			if a := uintptr(p); a >= lo && a < hi {
				t.Fatalf("a piece of the SetRun array (capacity %d) is kept for reuse", c)
			}
		}
	}
	if m.reuse.nReady == 0 {
		t.Fatal("no leaf kept for reuse at all: the test does not exercise reuse")
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
}

// TestMap_ReuseOnlyWithoutPointers: a leaf waiting for reuse keeps alive
// what its entries point to, so only maps of pointer-free entries reuse.
func TestMap_ReuseOnlyWithoutPointers(t *testing.T) {
	if NewMap(NewOwner(), func(s string) uint64 { return uint64(len(s)) }, Equal[int]).reuse.off == false {
		t.Error("a map with string keys reuses leaves")
	}
	if NewMap(NewOwner(), func(k int) uint64 { return uint64(k) }, Equal[*int]).reuse.off == false {
		t.Error("a map with pointer values reuses leaves")
	}
	type inline struct {
		n uint8
		b [15]byte
	}
	if NewMap(NewOwner(), func(k inline) uint64 { return uint64(k.n) }, Equal[[2]float64]).reuse.off {
		t.Error("a map of pointer-free keys and values does not reuse leaves")
	}
}
