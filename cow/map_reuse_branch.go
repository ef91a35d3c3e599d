package cow

import (
	"fmt"
	"slices"
	"unsafe"
)

// Reuse of the branches copy-on-write leaves behind.
//
// A write under a capture copies every branch on its path that the
// capture shares (ownBranch); the original leaves the live tree then, and
// only captures can still reach it. At 10M entries a checkpoint's writes
// copy each of the map's 34K branches once (576 bytes each, 19.5 MB), and
// into fresh memory those copies were most of what the writer allocated
// between two checkpoints (BenchmarkJob, keys=10000000, every=1s; decision
// 0065). So a copy's original waits in its owner's pool, and is copied
// into once no live capture reaches it.
//
// # When a branch is free
//
// A branch records the epoch it was made in, B, and leaves the live tree
// in the writer epoch E of the write that copies it. A capture of epoch c
// froze the version at the end of writer epoch c, so it reaches the branch
// exactly when B <= c < E. A branch is retired because a live capture
// reaches it, so only a release can free it: Release looks at every
// waiting branch against the captures still live, and clears those none
// reaches on the releasing goroutine.
//
// # What a waiting branch keeps alive
//
// A branch points at 32 subtrees. While a capture reaches it the capture
// keeps them alive anyway, and the release that frees it clears it, so a
// branch in the pool never keeps alive an old version the collector
// could have: not when a checkpoint's base is held long while shorter
// captures come and go (the leaves' conservative rule, applied to
// branches, held the demo's largest live heap at 105 MB against 68-73,
// decision 0004), and not when the writer goes idle after a release (a
// pass by the writer's next copies held it at 185-191 MB against 85-97).
//
// # One pool an owner
//
// Release runs on any goroutine and knows the owner, not its maps, so
// the pool is the owner's, under its lock: the writer takes the lock to
// retire a branch and to take one. Every mapBranch[K, V] has the layout
// of branchNode (K and V only type its slots' pointers, all
// unsafe.Pointer), so a branch of one map may be copied into by another.
// A map used as a cursor (Root, SetRoot) retires no branch, for the
// reason it reuses no leaf.

// branchNode is a branch of any of an owner's maps, as its pool holds it:
// mapBranch's layout written without type parameters (K and V only type
// a slot's pointer), so that the pool's code is compiled once, not for
// every map type, and instantiates no map type's methods
// (TestBranchNode_HasTheLayoutOfEveryBranch).
type branchNode struct {
	epoch        uint64
	count        int
	owned, dirty uint32
	id, origin   uint64
	kids         [mapFanout]kidSlot
	same         sameBounds
}

// kidSlot is mapSlot's layout without type parameters.
type kidSlot struct {
	p    unsafe.Pointer
	n, c int32
}

// retiredBranch is a branch made in epoch born that left the live tree in
// writer epoch left.
type retiredBranch struct {
	b          *branchNode
	born, left uint64
}

// branchPool holds an owner's retired branches: those waiting for the
// captures that reach them, in no order, and those free, cleared. Guarded
// by Owner.mu.
type branchPool struct {
	waiting []retiredBranch
	free    []*branchNode
	// limit bounds waiting and free together: the largest allowance of a
	// map that retired a branch (branchesKeptPer).
	limit int
}

// branchesKeptPer bounds an owner's waiting and free branches together:
// one for each branchesKeptPer entries of its largest map that retires
// one, plus branchesKeptMin. A map has about one branch for each 300 (at
// 10M) to 950 (at 1M) entries, so every branch a checkpoint's writes copy
// fits.
const (
	branchesKeptPer = 128
	branchesKeptMin = 64
)

// retireBranch records that b, which the writer just copied, left the
// live tree now. Writer goroutine only.
func (m *Map[K, V]) retireBranch(b *mapBranch[K, V]) {
	if !m.branchesOff {
		m.owner.retireBranch((*branchNode)(unsafe.Pointer(b)), m.len)
	}
}

// newBranch returns a branch to copy into: a free one of the owner's
// pool, or fresh memory. The caller overwrites all of it. Writer
// goroutine only.
func (m *Map[K, V]) newBranch() *mapBranch[K, V] {
	if b := m.owner.freeBranch(); b != nil {
		return (*mapBranch[K, V])(unsafe.Pointer(b))
	}
	return new(mapBranch[K, V])
}

// retireBranch is Map.retireBranch for a map of size entries, written
// once for every map type: generic code is compiled for each.
func (o *Owner) retireBranch(b *branchNode, size int) {
	o.mu.Lock()
	p := &o.branches
	p.limit = max(p.limit, size/branchesKeptPer+branchesKeptMin)
	if len(p.waiting)+len(p.free) < p.limit {
		p.waiting = append(p.waiting, retiredBranch{b, b.epoch, o.epoch})
	}
	o.mu.Unlock()
}

// freeBranch takes a free branch from the pool, or returns nil.
func (o *Owner) freeBranch() *branchNode {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &o.branches
	n := len(p.free)
	if n == 0 {
		return nil
	}
	b := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	return b
}

// retiredBranches returns the branches of the pool, waiting and free, and
// an error matching ErrInvariant if a free one points at a subtree
// (Map.Check).
func (o *Owner) retiredBranches() (map[*branchNode]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := &o.branches
	if len(p.waiting)+len(p.free) == 0 {
		return nil, nil
	}
	retired := make(map[*branchNode]string, len(p.waiting)+len(p.free))
	for _, w := range p.waiting {
		retired[w.b] = "waiting"
	}
	for _, b := range p.free {
		if b.kids != ([mapFanout]kidSlot{}) {
			return nil, fmt.Errorf("%w: a free branch still points at subtrees", ErrInvariant)
		}
		retired[b] = "free"
	}
	return retired, nil
}

// takeFree removes from the waiting list, and returns, the branches no
// capture of live (ascending epochs) reaches; the caller clears them and
// adds them to the free list. O(r log c) for r waiting and c live.
func (p *branchPool) takeFree(live []uint64) []*branchNode {
	var freed []*branchNode
	for i := 0; i < len(p.waiting); {
		w := p.waiting[i]
		if j, _ := slices.BinarySearch(live, w.born); j < len(live) && live[j] < w.left {
			i++ // reached by live[j]
			continue
		}
		freed = append(freed, w.b)
		last := len(p.waiting) - 1
		p.waiting[i] = p.waiting[last]
		p.waiting[last] = retiredBranch{}
		p.waiting = p.waiting[:last]
	}
	return freed
}
