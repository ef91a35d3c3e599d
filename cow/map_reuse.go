package cow

import (
	"cmp"
	"reflect"
	"slices"
	"unsafe"

	"github.com/cowstate/cowstate/internal/layout"
)

// Reuse of the leaves copy-on-write leaves behind.
//
// When the writer copies a leaf that a capture may see, the original leaves
// the live tree for good: only captures taken before that moment can reach
// it. Once every such capture is released the original is garbage, and the
// writer reuses its memory for its next copy instead of asking the
// allocator for fresh memory. The memory a copy writes into is then memory
// the writer wrote one or two captures ago, still in the CPU's caches,
// rather than memory the collector freed tens of milliseconds ago. With
// frequent captures (BenchmarkPut, snap=every1000, at 1M entries) the copy
// into fresh memory is almost half of a put, and with reuse a put
// allocates only its branch copies. With captures tens of milliseconds
// apart (BenchmarkPutWhileWriting) reused memory is as cold as fresh
// memory, and reuse neither helps nor costs speed; with captures a
// second apart, each copying a large share of a big map's leaves (a
// checkpoint's), it saves memory: the originals one checkpoint retires are
// what the next one's copies go into, where the collector would have
// held them as garbage beside the fresh memory the copies took (mayKeep).
// Retired leaves wait across intervals with no capture live for the
// next copies, within a quarter of the map's entry bytes.
//
// # When a leaf may be reused
//
// A leaf leaves the live tree in the writer epoch E it is replaced in. A
// capture of epoch c froze the version at the end of writer epoch c, so it
// may reach the leaf if c < E and cannot if c >= E. The leaf is therefore
// garbage once the oldest live capture has an epoch >= E, or none is live
// (Owner.oldestLive). Nothing else holds leaves: views and snapshots hold
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
//
// # Only leaves without pointers
//
// A retired leaf waits for the captures that may reach it, and the rule
// of when it is free is conservative: a capture held long (a checkpoint's
// base) keeps waiting every leaf retired after it, also those only short
// captures taken since could reach. A waiting node keeps alive what it
// points to, so only leaves whose entries hold no pointer (a scalar
// state's, the benchmark's int64s) are reused: they keep nothing else
// alive. The leaves of an array that SetRun cut into leaves are not
// reused either (noteRun). Branches, which point at subtrees, are reused
// by an exact rule of their own (map_reuse_branch.go).

// leafReuse holds one map's retired leaves: those waiting for the captures
// that may reach them (in the order they were retired, so in epoch order),
// and those ready to be written again. Writer goroutine only.
type leafReuse[K comparable, V any] struct {
	waiting  []retiredLeaf
	head     int                             // waiting[:head] have been moved on
	ready    [reuseLeafCaps][]unsafe.Pointer // ready leaves by capacity
	nReady   int                             // ready leaves, all capacities
	bytes    int                             // bytes of the ready leaves (counted in Owner.reuseBytes too)
	waitingB int                             // bytes of the waiting leaves (counted in Owner.waitingBytes too)
	runs     []memRange                      // arrays SetRun made leaves of, by address
	off      bool                            // no reuse: a cursor, or entries with pointers
}

// init turns reuse off for a map whose entries hold pointers.
func (r *leafReuse[K, V]) init() {
	r.off = !layout.PointerFree(reflect.TypeFor[mapEntry[K, V]]())
}

// stop turns reuse off for good and lets the collector have what it held.
func (r *leafReuse[K, V]) stop(o *Owner) {
	o.reuseBytes -= r.bytes
	o.waitingBytes -= r.waitingB
	*r = leafReuse[K, V]{off: true}
}

// memRange is the address range [lo, hi) of an array whose pieces are
// leaves. Addresses only: it keeps nothing alive, and the collector does
// not move heap memory.
type memRange struct{ lo, hi uintptr }

// noteRun records that the leaves of ents (one array cut into leaves by
// SetRun) must never be reused: reusing one piece as a new leaf would keep
// the whole array (a restored key group's entries, say) alive for as long
// as that leaf lives. (Measured on the demo, this alone made no visible
// difference to its memory; it is kept because nothing else bounds what a
// reused piece pins, and TestMap_RunLeavesNotReused checks it.) Recorded
// ranges never overlap: a range the new one overlaps belonged to
// an array the collector has freed since, and is dropped. O(log r + r) for
// r ranges, once per SetRun.
func (r *leafReuse[K, V]) noteRun(ents []mapEntry[K, V]) {
	if r.off || cap(ents) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(ents)))
	r.addRun(memRange{lo, lo + uintptr(cap(ents))*unsafe.Sizeof(ents[0])})
}

// addRun records mr, dropping the ranges it overlaps.
func (r *leafReuse[K, V]) addRun(mr memRange) {
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
func (r *leafReuse[K, V]) inRun(a uintptr) bool {
	i := r.firstAbove(a)
	return i > 0 && a < r.runs[i-1].hi
}

// firstAbove returns the index of the first range starting above a.
func (r *leafReuse[K, V]) firstAbove(a uintptr) int {
	i, _ := slices.BinarySearchFunc(r.runs, a+1, func(m memRange, a uintptr) int { return cmp.Compare(m.lo, a) })
	return i
}

// retiredLeaf is a leaf (its first entry and capacity) that left the live
// tree in writer epoch epoch.
type retiredLeaf struct {
	p     unsafe.Pointer
	c     int32
	epoch uint64
}

const (
	// reuseLeafCaps bounds the capacity of the leaves kept for reuse:
	// larger ones (collision leaves) go to the collector.
	reuseLeafCaps = 2 * mapLeafMax
	// reuseMaxPerCap bounds the leaves a map keeps ready of each
	// capacity, or a 64th of its entries if that is more. A capture every
	// thousand writes at 1M entries retires about a thousand leaves (of a
	// dozen capacities) per epoch, and needs as many; a checkpoint every
	// second at 10M entries retires a few hundred thousand. Each capacity
	// has its own bound so that a surplus of one cannot crowd out another
	// that runs short; a surplus goes to the collector. On top of it, a
	// map keeps no more ready leaves than a sixteenth of its entries (a
	// leaf holds 1.5 to 48).
	reuseMaxPerCap = 512
	// reusePromoteMax bounds the work of one promote: a copy retires one
	// leaf, so the waiting list drains far faster than it fills.
	reusePromoteMax = 256
	// reuseBudget and waitingBudget bound the bytes all maps of one owner
	// keep ready and waiting, whatever their size: for small maps, where
	// reuse pays because the memory a copy goes into is still in the
	// CPU's caches. A map may keep more, up to reuseShare of its own
	// entries' bytes, waiting and ready together: see mayKeep.
	reuseBudget   = 4 << 20
	waitingBudget = 4 << 20
	// reuseShare is the share of a map's entry bytes that its waiting and
	// ready leaves may hold together, past the owner's budgets.
	reuseShare = 4 // a quarter
)

// mayKeep reports whether a map of size entries may keep nb more bytes of
// retired leaves (waiting, or ready when moved up from waiting), with the
// owner's maps keeping have bytes against budget.
//
// Why a share of the map: a checkpoint's capture makes the writer copy
// the leaves it writes until the checkpoint has read them, and the
// originals it retires are free once the capture is released. Kept, they
// are the memory the next checkpoint's copies go into; given to the
// collector, they are garbage that stays in the heap until a collection
// finds it, while the next copies take fresh memory. At 10M entries
// checkpointed every second a checkpoint's copies are about 100 MB, and
// the heap held 1.45-1.5 times what it holds with no checkpoints when
// every original went to the collector (BenchmarkJob, heap-peak-MB;
// decision 0053). What is kept is bounded by the map's size, so a job
// that stops checkpointing holds at most a quarter of its entries' bytes
// for the next capture.
func (r *leafReuse[K, V]) mayKeep(nb, have, budget, size int) bool {
	return have+nb <= budget || r.waitingB+r.bytes+nb <= size*int(unsafe.Sizeof(mapEntry[K, V]{}))/reuseShare
}

// retireLeaf records that the leaf of slot s left the live tree now: a
// write copied it, since a capture may share it.
func (m *Map[K, V]) retireLeaf(s mapSlot[K, V]) {
	if !s.isLeaf() {
		return
	}
	m.copiedLeaf()
	r, o := &m.reuse, m.owner
	c := s.capacity()
	if c >= reuseLeafCaps || r.off || r.inRun(uintptr(s.p)) {
		return
	}
	nb := c * int(unsafe.Sizeof(mapEntry[K, V]{}))
	if !r.mayKeep(nb, o.waitingBytes, waitingBudget, m.len) {
		return
	}
	o.waitingBytes += nb
	r.waitingB += nb
	r.waiting = append(r.waiting, retiredLeaf{s.p, int32(c), o.epoch})
}

// promote moves up to reusePromoteMax of the retired leaves no live
// capture can reach to the ready lists (or lets the collector have them):
// a backlog left by a long-held capture drains over the next copies, not in
// one pause. O(1) amortized per retired leaf.
func (r *leafReuse[K, V]) promote(o *Owner, size int) {
	if r.head == len(r.waiting) {
		return
	}
	oldest := o.oldestLive()
	maxReady := size/16 + 4
	maxPerCap := max(reuseMaxPerCap, size/64)
	entryBytes := int(unsafe.Sizeof(mapEntry[K, V]{}))
	for end := min(len(r.waiting), r.head+reusePromoteMax); r.head < end; {
		n := r.waiting[r.head]
		if oldest != 0 && n.epoch > oldest {
			break
		}
		r.waiting[r.head] = retiredLeaf{}
		r.head++
		nb := int(n.c) * entryBytes
		r.waitingB -= nb
		o.waitingBytes -= nb
		if len(r.ready[n.c]) < maxPerCap && r.nReady < maxReady && r.mayKeep(nb, o.reuseBytes, reuseBudget, size) {
			r.ready[n.c] = append(r.ready[n.c], n.p)
			r.nReady++
			r.bytes += nb
			o.reuseBytes += nb
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
		if k := len(r.ready[c]); k > 0 {
			p := r.ready[c][k-1]
			r.ready[c][k-1] = nil
			r.ready[c] = r.ready[c][:k-1]
			r.nReady--
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
