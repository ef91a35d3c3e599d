package cow

import (
	"cmp"
	"slices"
	"unsafe"
)

// Reuse of the nodes copy-on-write leaves behind.
//
// When the writer copies a node that a capture may see, the original leaves
// the live tree for good: only captures taken before that moment can reach
// it. Once every such capture is released the original is garbage, and the
// writer reuses its memory for its next copy instead of asking the
// allocator for fresh memory. The memory a copy writes into is then memory
// the writer wrote one or two captures ago, still in the CPU's caches,
// rather than memory the collector freed tens of milliseconds ago. With a
// capture every 1000 puts at 1M entries (BenchmarkPut, snap=every1000) the
// leaf copy into fresh memory cost 460 ns of a 1080-ns put; with reuse the
// put takes 650-770 ns and allocates nothing, so it no longer sets the
// collector off either (side by side with the code before: 1060-1220 ns,
// 1171 B per put). With
// a full snapshot written back to back (BenchmarkPutWhileWriting), whose
// epochs are 40-70 ms long, reused memory is as cold as fresh memory and
// nothing changes measurably.
//
// # When a node may be reused
//
// A node leaves the live tree in the writer epoch E it is replaced in. A
// capture of epoch c froze the version at the end of writer epoch c, so it
// may reach the node if c < E and cannot if c >= E. The node is therefore
// garbage once the oldest live capture has an epoch >= E, or none is live
// (Owner.oldestLive). Nothing else holds nodes: views and snapshots hold
// captured roots, and a map whose root is held elsewhere does not reuse
// (below).
//
// # What a caller must not do
//
// Reading a view after releasing its capture was always an error (reads
// check and panic); with reuse the memory may already hold other entries,
// so such a read that slips past the check reads a node being rewritten.
// Release a capture only once its readers are done (a snapshot writer
// releases when it has written).
//
// # Cursors do not reuse
//
// The rule above holds for a map that alone holds its live root. A map
// whose root is handed out (Root) or taken in (SetRoot) is a cursor over
// roots stored elsewhere, as a nested map state is: a write whose result
// is not stored leaves the stored root reaching the nodes the write
// replaced. Such a map stops reusing for good; its copies go to the
// allocator and what they replace to the collector.

// nodeReuse holds one map's retired nodes: those waiting for the captures
// that may reach them (in the order they were retired, so in epoch order),
// and those ready to be written again. Writer goroutine only.
type nodeReuse[K comparable, V any] struct {
	waiting  []retiredNode
	head     int                             // waiting[:head] have been moved on
	leaves   [reuseLeafCaps][]unsafe.Pointer // ready leaves by capacity
	branches []*mapBranch[K, V]              // ready branches
	nLeaves  int                             // ready leaves, all capacities
	bytes    int                             // bytes of the ready nodes (counted in Owner.reuseBytes too)
	waitingB int                             // bytes of the waiting nodes (counted in Owner.waitingBytes too)
	runs     []memRange                      // arrays SetRun made leaves of, by address
	off      bool                            // a cursor: retire nothing (see above)
}

// stop turns reuse off for good and lets the collector have what it held.
func (r *nodeReuse[K, V]) stop(o *Owner) {
	o.reuseBytes -= r.bytes
	o.waitingBytes -= r.waitingB
	*r = nodeReuse[K, V]{off: true}
}

// forget lets the collector have the waiting nodes, when no capture is
// live and all of them are garbage: with no capture, writes are in place
// and make no copy that would take them up.
func (r *nodeReuse[K, V]) forget(o *Owner) {
	o.waitingBytes -= r.waitingB
	r.waiting, r.head, r.waitingB = nil, 0, 0
}

// memRange is the address range [lo, hi) of an array whose pieces are
// leaves. Addresses only: it keeps nothing alive, and the collector does
// not move heap memory.
type memRange struct{ lo, hi uintptr }

// noteRun records that the leaves of ents (one array cut into leaves by
// SetRun) must never be reused: reusing one piece as a new leaf would keep
// the whole array alive for as long as that leaf lives. In the demo, which
// restores from checkpoints, that held a fifth more resident memory.
// Recorded ranges never overlap: a range the new one overlaps belonged to
// an array the collector has freed since, and is dropped. O(log r + r) for
// r ranges, once per SetRun.
func (r *nodeReuse[K, V]) noteRun(ents []mapEntry[K, V]) {
	if r.off || cap(ents) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(ents)))
	r.addRun(memRange{lo, lo + uintptr(cap(ents))*unsafe.Sizeof(ents[0])})
}

// addRun records mr, dropping the ranges it overlaps.
func (r *nodeReuse[K, V]) addRun(mr memRange) {
	i := r.firstAbove(mr.lo)
	if i > 0 && r.runs[i-1].hi > mr.lo {
		i-- // the range below reaches into the new one
	}
	j := i
	for j < len(r.runs) && r.runs[j].lo < mr.hi {
		j++
	}
	r.runs = slices.Replace(r.runs, i, j, mr)
}

// inRun reports whether address a is inside an array noteRun recorded (or
// one at the same addresses before it was freed: such a leaf is only not
// reused). O(log r).
func (r *nodeReuse[K, V]) inRun(a uintptr) bool {
	i := r.firstAbove(a)
	return i > 0 && a < r.runs[i-1].hi
}

// firstAbove returns the index of the first range starting above a.
func (r *nodeReuse[K, V]) firstAbove(a uintptr) int {
	i, _ := slices.BinarySearchFunc(r.runs, a+1, func(m memRange, a uintptr) int { return cmp.Compare(m.lo, a) })
	return i
}

// retiredNode is a node that left the live tree in writer epoch epoch: a
// leaf (its first entry and capacity) or a branch (c == branchMark).
type retiredNode struct {
	p     unsafe.Pointer
	c     int32
	epoch uint64
}

const (
	// reuseLeafCaps bounds the capacity of the leaves kept for reuse:
	// larger ones (collision leaves, leaves of a restore run) go to the
	// collector.
	reuseLeafCaps = 2 * mapLeafMax
	// reuseMaxPerCap and reuseMaxBranches bound what a map keeps ready: of
	// each leaf capacity, and of branches. A capture every thousand writes
	// at 1M entries retires about a thousand leaves (of a dozen
	// capacities) and seven hundred branches per epoch, and needs as many.
	// Each capacity has its own bound so that a surplus of one cannot crowd
	// out another that runs short; a surplus goes to the collector. On top
	// of these, a map keeps no more ready leaves than a sixteenth of its
	// entries and no more branches than a 256th (a leaf holds 1.5 to 48
	// entries, a branch covers at least 49): what waits for reuse stays
	// small beside the map, however long surpluses build up.
	reuseMaxPerCap   = 512
	reuseMaxBranches = 2048
	// reusePromoteMax bounds the work of one promote: a copy retires one
	// or two nodes, so the waiting list drains far faster than it fills.
	reusePromoteMax = 256
	// reuseBudget bounds the bytes all maps of one owner keep ready. Reuse
	// pays because the memory a copy goes into is still in the CPU's
	// caches; more ready memory than the caches hold is cold and only
	// costs memory (the demo's resident memory grew by a third with
	// per-map bounds alone, at the same speed).
	reuseBudget = 4 << 20
	// waitingBudget bounds the bytes of retired nodes all maps of one
	// owner keep waiting. The rule of when a node is free is conservative:
	// a capture held long (a checkpoint's base) keeps waiting every node
	// retired after it, also those only short captures taken since could
	// reach, which the collector would have freed. Past the budget a
	// retired node is left to the collector.
	waitingBudget = 4 << 20
)

// retireLeaf records that the leaf of slot s left the live tree now.
func (m *Map[K, V]) retireLeaf(s mapSlot[K, V]) {
	if s.n > 0 && s.c < reuseLeafCaps && !m.reuse.off && !m.reuse.inRun(uintptr(s.p)) {
		m.wait(retiredNode{s.p, s.c, m.owner.epoch}, int(s.c)*int(unsafe.Sizeof(mapEntry[K, V]{})))
	}
}

// retireBranch records that branch b left the live tree now.
func (m *Map[K, V]) retireBranch(b *mapBranch[K, V]) {
	if !m.reuse.off {
		m.wait(retiredNode{unsafe.Pointer(b), branchMark, m.owner.epoch}, int(unsafe.Sizeof(*b)))
	}
}

// wait queues a retired node of nb bytes, unless the owner's waiting
// budget is spent.
func (m *Map[K, V]) wait(n retiredNode, nb int) {
	o := m.owner
	if o.waitingBytes+nb > waitingBudget {
		return
	}
	o.waitingBytes += nb
	m.reuse.waitingB += nb
	m.reuse.waiting = append(m.reuse.waiting, n)
}

// promote moves up to reusePromoteMax of the retired nodes no live capture
// can reach to the ready lists (or lets the collector have them): a backlog
// left by a long-held capture drains over the next copies, not in one
// pause. O(1) amortized per retired node.
func (r *nodeReuse[K, V]) promote(o *Owner, size int) {
	if r.head == len(r.waiting) {
		return
	}
	oldest := o.oldestLive()
	maxLeaves, maxBranches := size/16+4, min(reuseMaxBranches, size/256+4)
	var entry mapEntry[K, V]
	branchBytes, entryBytes := int(unsafe.Sizeof(mapBranch[K, V]{})), int(unsafe.Sizeof(entry))
	for end := min(len(r.waiting), r.head+reusePromoteMax); r.head < end; {
		n := r.waiting[r.head]
		if oldest != 0 && n.epoch > oldest {
			break
		}
		r.waiting[r.head] = retiredNode{}
		r.head++
		nb := branchBytes
		if n.c != branchMark {
			nb = int(n.c) * entryBytes
		}
		r.waitingB -= nb
		o.waitingBytes -= nb
		switch {
		case n.c == branchMark:
			if len(r.branches) < maxBranches && o.reuseBytes+branchBytes <= reuseBudget {
				r.branches = append(r.branches, (*mapBranch[K, V])(n.p))
				r.bytes += branchBytes
				o.reuseBytes += branchBytes
			}
		case len(r.leaves[n.c]) < reuseMaxPerCap && r.nLeaves < maxLeaves && o.reuseBytes+int(n.c)*entryBytes <= reuseBudget:
			r.leaves[n.c] = append(r.leaves[n.c], n.p)
			r.nLeaves++
			r.bytes += int(n.c) * entryBytes
			o.reuseBytes += int(n.c) * entryBytes
		}
	}
	if r.head == len(r.waiting) {
		r.waiting, r.head = r.waiting[:0], 0
	} else if r.head > len(r.waiting)/2 && r.head > 64 {
		r.waiting = r.waiting[:copy(r.waiting, r.waiting[r.head:])]
		r.head = 0
	}
}

// newLeaf returns a leaf of length n holding src (len(src) <= n) in its
// first entries, with room for at least want entries: retired memory when
// some of a fitting capacity is ready, else fresh memory of capacity want.
// The entries past len(src) are for the caller to fill.
func (m *Map[K, V]) newLeaf(src []mapEntry[K, V], n, want int) []mapEntry[K, V] {
	r := &m.reuse
	r.promote(m.owner, m.len)
	// A ready leaf fits if it wastes no more than the allocator's rounding
	// to its size classes would (an eighth, above 512 bytes): reuse must
	// not let capacities creep up.
	for c := want; c <= min(want+want/8+1, reuseLeafCaps-1); c++ {
		if k := len(r.leaves[c]); k > 0 {
			p := r.leaves[c][k-1]
			r.leaves[c][k-1] = nil
			r.leaves[c] = r.leaves[c][:k-1]
			r.nLeaves--
			nb := c * int(unsafe.Sizeof(mapEntry[K, V]{}))
			r.bytes -= nb
			m.owner.reuseBytes -= nb
			ents := unsafe.Slice((*mapEntry[K, V])(p), c)
			copy(ents, src)
			clear(ents[len(src):]) // what the previous leaf held there
			return ents[:n]
		}
	}
	if want == len(src) {
		return append([]mapEntry[K, V](nil), src...)[:n] // unzeroed: all of it is copied over
	}
	return append(make([]mapEntry[K, V], 0, want), src...)[:n]
}

// copyBranch returns a copy of b in retired memory when some is ready,
// else in fresh memory.
func (m *Map[K, V]) copyBranch(b *mapBranch[K, V]) *mapBranch[K, V] {
	r := &m.reuse
	r.promote(m.owner, m.len)
	if k := len(r.branches); k > 0 {
		c := r.branches[k-1]
		r.branches[k-1] = nil
		r.branches = r.branches[:k-1]
		nb := int(unsafe.Sizeof(*c))
		r.bytes -= nb
		m.owner.reuseBytes -= nb
		*c = *b
		return c
	}
	c := *b
	return &c
}
