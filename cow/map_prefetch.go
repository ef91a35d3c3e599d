package cow

import (
	"unsafe"

	"github.com/cowstate/cowstate/internal/prefetch"
)

// Prefetch brings into the CPU's cache what a lookup or update of each of
// hashes will read: the branch slots on the way to its leaf (with a
// capture live, also the header of the leaf's parent, which a write
// reads) and the lines of the leaf a search of the entry compares, or
// with a capture live all of a leaf that a write would copy.
// It is a hint and nothing more: it writes nothing and keeps nothing, so
// a write between a Prefetch and the operations it prepares costs only
// the lines that then miss again.
//
// Why: at 1M-10M entries a lookup is a chain of cache misses (the last
// branch level, then the leaf), and an update runs so many instructions
// that the CPU cannot start the next key's misses while it waits on this
// key's (decision 0041). Prefetch walks each hash with a few loads and
// no stores, so the walks of a group of keys are independent and their
// misses overlap; the updates that follow find their lines in cache.
// The walk down must load each branch slot to find the next node, but
// the leaf's lines, the last and likeliest miss, are asked for with
// prefetch instructions, which do not wait for their lines: loads would
// hold the CPU's reorder window until they arrived, and keep the next
// keys' walks and the first updates from starting (BenchmarkJob at 1M
// keys: 97-107 ns an event with loads, 61-68 with prefetches; decision
// 0048). Groups of 4-8 keys do best: a larger group's lines are evicted
// from the first-level cache before their update comes (decisions 0045,
// 0048; BenchmarkPrefetch). Cost: about ten loads a hash, most of them
// hits, and a prefetch of one to four lines (up to eighteen of a leaf a
// write would copy: BenchmarkJob at 10M keys, every=1s, 173 ns an event
// against 184 with the window only, medians of four interleaved rounds).
//
// Writer goroutine only (it reads the live root).
func (m *Map[K, V]) Prefetch(hashes []uint64) {
	high := m.owner.high.Load()
	if high != 0 && m.copiedAll() {
		high = 0 // no leaf is copied (ownedAll)
	}
	for _, h := range hashes {
		m.touchPath(h, high)
	}
}

// touchPath loads the branch slots seekLeaf's walk reads for hash h (each
// load gives the next address, so none is dead). Of the leaf it
// prefetches, without waiting, the entries seekLeaf compares: the
// startWindow from the start of the hash's eighth in a leaf whose slot
// holds the starts; in one without, the window in a leaf of
// leafWindowMin entries or more, and in a shorter one the line of the
// interpolated entry, where the scan starts. With a
// capture live (high, not 0) it also reads the header of the leaf's
// parent, which a write reads (getForSetLive): if the parent is shared
// or does not own the leaf, a write copies the leaf whole, and all of it
// is asked for.
func (m *Map[K, V]) touchPath(h uint64, high uint64) {
	s, parent, slot, rest := m.leafSlot(h)
	if !s.isLeaf() {
		return
	}
	n := uintptr(s.len())
	size := unsafe.Sizeof(mapEntry[K, V]{})
	if high != 0 && parent != nil && (parent.epoch <= high || parent.owned&(1<<uint(slot)) == 0) {
		prefetch.Range(s.p, n*size)
		return
	}
	if meta := s.meta; meta&metaStarts != 0 {
		lo := uintptr(meta >> (metaStartShift + startBits*eighth(rest)) & startMask)
		lo = min(lo, n-min(n, startWindow)) // within the leaf
		prefetch.Range(unsafe.Pointer(leafAt[K, V](s.p, lo)), min(n-lo, startWindow)*size)
		return
	}
	i := uintptr((rest >> 32) * uint64(n) >> 32)
	if n < leafWindowMin {
		prefetch.Range(unsafe.Pointer(leafAt[K, V](s.p, i)), size)
		return
	}
	j := min(i-min(i, leafWindow/2), n-leafWindow)
	prefetch.Range(unsafe.Pointer(leafAt[K, V](s.p, j)), leafWindow*size)
}
