package cow

import (
	"iter"
	"sync/atomic"
)

// MapSnapshot is a read-only version of a Map, frozen by a Capture. Any
// number of goroutines may read it concurrently with each other and with the
// map's writer. Reading it after its capture is released panics.
type MapSnapshot[K comparable, V any] struct {
	root    mapSlot[K, V]
	len     int
	hash    func(K) uint64
	equal   func(a, b V) bool
	capture *Capture
	live    *Map[K, V]                   // the map it was taken of, for Passed
	front   atomic.Pointer[readFrontier] // set by Passed
}

// Snapshot captures the map's current version in O(1) and returns it. It
// takes a capture of the map's owner, which freezes every structure of that
// owner; use Owner.Capture and View to snapshot several structures at one
// version. Writer goroutine only.
func (m *Map[K, V]) Snapshot() *MapSnapshot[K, V] {
	a := new(struct {
		snap MapSnapshot[K, V]
		c    Capture
	}) // one allocation for both
	m.owner.captureInto(&a.c)
	a.snap = MapSnapshot[K, V]{root: m.root, len: m.len, hash: m.hash, equal: m.equal, capture: &a.c, live: m}
	return &a.snap
}

// View returns the map's version frozen by c in O(1). c must come from the
// map's owner, and no structure of that owner may have been written since c
// was taken (View panics otherwise). Views taken under one capture share it:
// releasing any of them releases the capture. Writer goroutine only.
func (m *Map[K, V]) View(c *Capture) *MapSnapshot[K, V] {
	c.mustView(m.owner)
	return &MapSnapshot[K, V]{root: m.root, len: m.len, hash: m.hash, equal: m.equal, capture: c, live: m}
}

// Epoch returns the epoch of the snapshot's capture: snapshots of one owner
// have strictly increasing epochs.
func (s *MapSnapshot[K, V]) Epoch() uint64 { return s.capture.epoch }

// Capture returns the capture that froze the snapshot.
func (s *MapSnapshot[K, V]) Capture() *Capture { return s.capture }

// Release releases the snapshot's capture (see Capture.Release). Safe from any
// goroutine; idempotent.
func (s *MapSnapshot[K, V]) Release() { s.capture.Release() }

// Released reports whether the snapshot's capture was released.
func (s *MapSnapshot[K, V]) Released() bool { return s.capture.Released() }

// Len returns the number of entries. O(1).
func (s *MapSnapshot[K, V]) Len() int {
	s.capture.mustRead()
	return s.len
}

// Get returns the value of k and whether it is present.
func (s *MapSnapshot[K, V]) Get(k K) (V, bool) {
	s.capture.mustRead()
	h := s.hash(k)
	s.mustNotBePassed(h)
	return s.root.lookup(h, k)
}

// All yields every entry in hash order. It checks at every leaf that the
// snapshot is still live and panics if it was released.
func (s *MapSnapshot[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		s.capture.mustRead()
		s.mustNotBePassed(0)
		s.root.all(yield, s.capture.mustRead)
	}
}

// GetHashed is Get for a caller that already has h, the hash of k.
func (s *MapSnapshot[K, V]) GetHashed(h uint64, k K) (V, bool) {
	s.capture.mustRead()
	s.mustNotBePassed(h)
	return s.root.lookup(h, k)
}
