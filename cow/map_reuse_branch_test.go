package cow

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cowstate/cowstate/internal/invariants"
)

// The state machine of map_test.go takes and releases captures in any
// order and checks every live one against its model after each step: it
// is what shows that no branch is copied into while a capture reaches it.
// These tests pin down when branches are reused and what they keep alive.

// TestMap_ReusesBranchesAcrossIntervals: a capture's interval of writes
// copies its leaves and the branches above them into what the interval
// before retired, so it allocates next to nothing.
func TestMap_ReusesBranchesAcrossIntervals(t *testing.T) {
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
		// 1.1K branches above them. About 600 of the leaf copies find no
		// retired leaf of their capacity ready (newLeaf); with the
		// branch copies allocated as well, an interval allocates 1.7K
		// times.
		if allocs := testing.AllocsPerRun(3, interval); allocs > 1_000 {
			t.Fatalf("an interval of %d writes under a capture allocated %v times; want its copies in what the interval before retired", n/32, allocs)
		}
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestMap_RetiredBranchesPointAtNothingOnceNoCaptureIsLive: once the
// captures are released, the writes that follow move every waiting
// branch on and clear it, so none keeps an old version alive.
func TestMap_RetiredBranchesPointAtNothingOnceNoCaptureIsLive(t *testing.T) {
	m, model := identityMap(20_000)
	s := m.Snapshot()
	for k := range 20_000 {
		m.Set(k, -k)
		model[k] = -k
	}
	if len(m.branches.waiting) == 0 {
		t.Fatal("writes under a capture retired no branch")
	}
	s.Release()
	for k := range 100 {
		m.Set(k, k)
		model[k] = k
	}
	if n := len(m.branches.waiting); n != 0 {
		t.Fatalf("%d branches still wait after 100 writes with no capture live", n)
	}
	if len(m.branches.ready) == 0 {
		t.Fatal("no branch ready for reuse")
	}
	if err := m.Check(); err != nil { // a ready branch points at nothing
		t.Fatal(err)
	}
	if got := mapContents(t, m.All()); !maps.Equal(got, model) {
		t.Fatal("live map differs from model")
	}
}

// TestMap_ALongCaptureHoldsBackOnlyTheBranchesItReaches: with a base
// capture held, the branches only a shorter capture since reached are
// moved on once it is released, whatever waits for the base; and the
// base still reads what it froze.
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
	waitingUnderShort := func() (k int) {
		for _, w := range m.branches.waiting {
			if w.epoch == underShort {
				k++
			}
		}
		return k
	}
	if waitingUnderShort() == 0 {
		t.Fatal("no branch retired under the short capture")
	}
	short.Release()
	next := m.Snapshot()
	write(0, n/2, 3) // copies, and looks at what waits
	if k := waitingUnderShort(); k != 0 {
		t.Fatalf("%d branches only the released capture reached still wait", k)
	}
	baseWaits := 0
	for _, w := range m.branches.waiting {
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

// TestOwner_Reaches: a node made in epoch born that left the live tree in
// epoch left is reached by a live capture of an epoch in [born, left).
func TestOwner_Reaches(t *testing.T) {
	o := NewOwner()
	var caps []*Capture
	for range 9 {
		caps = append(caps, o.Capture()) // epochs 1 to 9
	}
	for _, c := range caps {
		if e := c.Epoch(); e != 3 && e != 7 {
			c.Release()
		}
	}
	live := o.liveEpochs(nil)
	for _, c := range []struct {
		born, left uint64
		want       bool
	}{
		{1, 3, false}, {1, 4, true}, {3, 4, true}, {4, 7, false}, {4, 8, true},
		{5, 6, false}, {8, 10, false}, {7, 8, true}, {2, 10, true},
	} {
		got := false
		for _, e := range live {
			if c.born <= e && e < c.left {
				got = true
			}
		}
		if got != c.want {
			t.Fatalf("table: [%d, %d) %v, want %v", c.born, c.left, got, c.want)
		}
		r := branchReuse[int, int]{waiting: []retiredBranch[int, int]{{b: new(mapBranch[int, int]), born: c.born, epoch: c.left}}}
		r.promote(o)
		if ready := len(r.ready) == 1; ready == c.want {
			t.Fatalf("a branch of [%d, %d) with captures %v live: ready %v", c.born, c.left, live, ready)
		}
	}
}
