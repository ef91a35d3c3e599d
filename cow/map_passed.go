package cow

import (
	"fmt"
	"sync/atomic"
)

// A capture pins every node it reaches until it is released, so the first
// write to a leaf after the capture copies the leaf, even when the capture's
// only reader has already read it. A snapshot write reads a map once, in
// hash order, and nobody reads the capture after it; its reader can say so
// as it goes (MapSnapshot.Passed), and the writer then writes the values of
// leaves behind that point in place, as if the capture had been released
// for them. At 10M entries checkpointed every second, where most leaves are
// copied once a checkpoint, that is the copies of the part of the map
// already written (BenchmarkJob, every=1s; decision 0046).

// readFrontier is how far the reader of one capture has passed through
// one map: no reader of the capture of epoch epoch reads an entry of the
// map with a hash below below again. below only grows; the reader
// stores it after its reads, the writer loads it before its writes, so
// the reads happen before the writes.
type readFrontier struct {
	epoch uint64
	below atomic.Uint64
}

// Passed promises that no reader of s's capture will read an entry of s
// with a hash below below again, so the map's writer may write the values
// of those entries in place rather than copying what the capture shares
// with the live map. It is for a capture read once, in hash order, by one
// reader (a snapshot write that releases its snapshot when it is done):
// the promise covers every view of the capture, on every goroutine, and a
// read behind it through s panics with an error matching ErrPassed. The
// writer uses the promise only while s's capture is the only one live,
// for an update of a present key whose whole leaf lies behind it (a leaf
// covers the hashes that share its path's bits, so the reader, which
// reads each hash range leaf by leaf, has finished with it). Calls with a
// lower below than before change nothing. Cost O(1); the reader's
// goroutine.
func (s *MapSnapshot[K, V]) Passed(below uint64) {
	s.capture.mustRead()
	f := s.front.Load()
	if f == nil {
		f = &readFrontier{epoch: s.capture.epoch}
		s.front.Store(f)
		s.live.front.Store(f) // a newer capture's frontier, if any, loses only its in-place writes
	}
	if below > f.below.Load() {
		f.below.Store(below)
	}
}

// mustNotBePassed panics if the reader promised (Passed) not to read
// hashes below lo again: the writer may have written them since.
func (s *MapSnapshot[K, V]) mustNotBePassed(lo uint64) {
	if f := s.front.Load(); f != nil {
		if below := f.below.Load(); lo < below {
			panic(fmt.Errorf("%w: a read from hash %#x of the snapshot of epoch %d, passed up to %#x",
				ErrPassed, lo, s.capture.epoch, below))
		}
	}
}

// passedEntry returns the entry of k (hash h) when the reader of the only
// live capture, high, has passed its whole leaf (passedLeaf), so that its
// value may be written in place though the capture reaches it; nil
// otherwise (k absent, or its leaf not passed). Writer goroutine only; it
// walks again what the caller just walked, in cache.
func (m *Map[K, V]) passedEntry(h uint64, k K, high uint64) *mapEntry[K, V] {
	if f := m.front.Load(); f == nil || f.epoch != high {
		return nil // no frontier of that capture: no walk
	}
	s := &m.root
	rest := h
	depth := 0
	for s.isBranch() {
		b := (*mapBranch[K, V])(s.p)
		s = &b.kids[rest>>(64-mapBits)]
		rest <<= mapBits
		depth++
	}
	if !s.isLeaf() || !m.passedLeaf(h, depth, high) {
		return nil
	}
	if _, e, _, ok := seekLeaf(s, h, rest, k); ok {
		return e
	}
	return nil
}

// passedLeaf reports whether the reader of the only live capture, high,
// has passed (MapSnapshot.Passed) the whole leaf at depth depth on the
// path of hash h, so that its values may be written in place though the
// capture reaches it: false with no frontier of that capture or with
// another capture live. A write there changes no node's shape, count or
// bounds: only the reader of that capture could tell, and it has gone
// past. O(1); writer goroutine only.
func (m *Map[K, V]) passedLeaf(h uint64, depth int, high uint64) bool {
	f := m.front.Load()
	if f == nil || f.epoch != high || m.owner.low.Load() != high {
		return false
	}
	// The last hash the leaf's path covers: the root leaf covers them
	// all, and so is never passed (below stays under 2^64).
	last := h | ^uint64(0)>>(mapBits*depth)
	return last < f.below.Load()
}

// writePassed is the in-place write of SetHashed and Store for a key
// passedEntry found, within a write begun.
func (m *Map[K, V]) writePassed(e *mapEntry[K, V], v V) {
	if !m.sameValue(&e.val, &v) {
		e.val = v
		m.owner.wroteAt(e.hash)
		m.verify("Set")
	}
}
