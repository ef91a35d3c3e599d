package cow

import (
	"maps"
	"testing"
	"unsafe"
)

// The state machine of map_test.go takes and releases captures in any
// order and checks every live one against its model after each step: it
// is what shows that no branch is copied into while a capture reaches it.
// These tests pin down when branches are freed and what they keep alive;
// TestMap_ReusesLeavesAcrossIdleIntervals bounds what an interval under a
// capture allocates, branch copies included.

// TestMap_ReleaseClearsTheBranchesItFrees: the release that leaves no
// live capture reaching a retired branch clears it, so none keeps an old
// version alive, whether or not the writer writes again.
func TestMap_ReleaseClearsTheBranchesItFrees(t *testing.T) {
	m, model := identityMap(20_000)
	s := m.Snapshot()
	for k := range 20_000 {
		m.Set(k, -k)
		model[k] = -k
	}
	p := &m.owner.branches
	if len(p.waiting) == 0 {
		t.Fatal("writes under a capture retired no branch")
	}
	s.Release()
	if n := len(p.waiting); n != 0 {
		t.Fatalf("%d branches still wait with no capture live", n)
	}
	if len(p.free) == 0 {
		t.Fatal("no branch free for reuse")
	}
	if err := m.Check(); err != nil { // a free branch points at nothing
		t.Fatal(err)
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
}

// TestMap_ALongCaptureHoldsBackOnlyTheBranchesItReaches: with a base
// capture held, the branches only a shorter capture since reached are
// freed by its release, whatever waits for the base; and the base still
// reads what it froze.
func TestMap_ALongCaptureHoldsBackOnlyTheBranchesItReaches(t *testing.T) {
	const n = 20_000
	m, model := identityMap(n)
	base, frozen := m.Snapshot(), maps.Clone(model)
	write := func(from, to, v int) {
		for k := from; k < to; k++ {
			m.Set(k, v)
			model[k] = v
		}
	}
	write(0, n, 1) // copies every branch: the originals wait for the base
	short := m.Snapshot()
	write(0, n, 2)                  // copies the copies: only the short capture reaches them
	underShort := short.Epoch() + 1 // the writer epoch they left the tree in
	p := &m.owner.branches
	waitingUnderShort := func() (k int) {
		for _, w := range p.waiting {
			if w.left == underShort {
				k++
			}
		}
		return k
	}
	if waitingUnderShort() == 0 {
		t.Fatal("no branch retired under the short capture")
	}
	short.Release()
	if k := waitingUnderShort(); k != 0 {
		t.Fatalf("%d branches only the released capture reached still wait", k)
	}
	next := m.Snapshot()
	write(0, n/2, 3)
	baseWaits := 0
	for _, w := range p.waiting {
		if w.born <= base.Epoch() {
			baseWaits++
		}
	}
	if baseWaits == 0 {
		t.Fatal("no branch the base reaches waits for it")
	}
	next.Release()
	if got := mapContents(t, base.All()); !maps.Equal(got, frozen) {
		t.Fatal("the base capture changed")
	}
	base.Release()
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestBranchPool_TakeFree: a branch made in epoch born that left the live
// tree in epoch left is reached by a live capture of an epoch in
// [born, left), and free otherwise.
func TestBranchPool_TakeFree(t *testing.T) {
	live := []uint64{3, 7}
	for _, c := range []struct {
		born, left uint64
		reached    bool
	}{
		{1, 3, false}, {1, 4, true}, {3, 4, true}, {4, 7, false}, {4, 8, true},
		{5, 6, false}, {8, 10, false}, {7, 8, true}, {2, 10, true},
	} {
		p := branchPool{waiting: []retiredBranch{{b: new(branchNode), born: c.born, left: c.left}}}
		freed := p.takeFree(live)
		if got := len(freed) == 0; got != c.reached {
			t.Fatalf("a branch of [%d, %d) with captures %v live: reached %v, want %v", c.born, c.left, live, got, c.reached)
		}
		if len(freed)+len(p.waiting) != 1 {
			t.Fatalf("[%d, %d): %d freed and %d waiting of one", c.born, c.left, len(freed), len(p.waiting))
		}
	}
}

// TestBranchNode_HasTheLayoutOfEveryBranch: the pool handles the branches
// of every map type as branchNode, so their fields must sit where
// branchNode's do, whatever K and V.
func TestBranchNode_HasTheLayoutOfEveryBranch(t *testing.T) {
	check := func(name string, size, epoch, kids, same, slot uintptr) {
		var n branchNode
		if size != unsafe.Sizeof(n) || epoch != unsafe.Offsetof(n.epoch) || kids != unsafe.Offsetof(n.kids) ||
			same != unsafe.Offsetof(n.same) || slot != unsafe.Sizeof(kidSlot{}) {
			t.Fatalf("%s: size %d, epoch at %d, kids at %d, same at %d, a slot %d bytes; branchNode: %d, %d, %d, %d, %d",
				name, size, epoch, kids, same, slot, unsafe.Sizeof(n), unsafe.Offsetof(n.epoch), unsafe.Offsetof(n.kids), unsafe.Offsetof(n.same), unsafe.Sizeof(kidSlot{}))
		}
	}
	var a mapBranch[int, int]
	check("mapBranch[int, int]", unsafe.Sizeof(a), unsafe.Offsetof(a.epoch), unsafe.Offsetof(a.kids), unsafe.Offsetof(a.same), unsafe.Sizeof(a.kids[0]))
	var b mapBranch[string, [3]string]
	check("mapBranch[string, [3]string]", unsafe.Sizeof(b), unsafe.Offsetof(b.epoch), unsafe.Offsetof(b.kids), unsafe.Offsetof(b.same), unsafe.Sizeof(b.kids[0]))
	var c mapBranch[NoKey, struct{ a, b uint64 }]
	check("mapBranch[NoKey, struct{ a, b uint64 }]", unsafe.Sizeof(c), unsafe.Offsetof(c.epoch), unsafe.Offsetof(c.kids), unsafe.Offsetof(c.same), unsafe.Sizeof(c.kids[0]))
}
