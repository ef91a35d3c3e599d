package cow

import "iter"

// TreeSnapshot is a read-only version of a Tree, frozen by a Capture. Any
// number of goroutines may read it, concurrently with each other and with the
// tree's writer, until its capture is released; every read after that panics
// (iterations check before every entry, so a release during an iteration
// stops it with a panic too).
type TreeSnapshot[K, V any] struct {
	v       treeVersion[K, V]
	capture *Capture
	// The tree's node widths, for check.
	leafMax, branchMax int
}

// View returns the tree's version frozen by c in O(1). c must come from the
// tree's owner, and no structure of that owner may have been written since c
// was taken (View panics otherwise). Views taken under one capture share it:
// releasing any of them releases the capture. Writer goroutine only.
func (t *Tree[K, V]) View(c *Capture) *TreeSnapshot[K, V] {
	c.mustView(t.owner)
	return &TreeSnapshot[K, V]{v: t.treeVersion, capture: c, leafMax: t.leafMax, branchMax: t.branchMax}
}

// Snapshot captures the tree's current version in O(1) and returns it.
// It takes a new capture of the tree's owner, which freezes every structure
// of that owner; releasing the snapshot releases that capture. Use
// Owner.Capture and View to snapshot several structures at one version.
// Writer goroutine only.
func (t *Tree[K, V]) Snapshot() *TreeSnapshot[K, V] {
	return t.View(t.owner.Capture())
}

// Epoch returns the epoch of the snapshot's capture: snapshots of one owner
// have strictly increasing epochs. Safe from any goroutine, even after
// Release.
func (s *TreeSnapshot[K, V]) Epoch() uint64 { return s.capture.epoch }

// Capture returns the capture that froze the snapshot.
func (s *TreeSnapshot[K, V]) Capture() *Capture { return s.capture }

// Release releases the snapshot's capture (see Capture.Release), and with it
// every view taken under that capture. Safe from any goroutine; idempotent.
func (s *TreeSnapshot[K, V]) Release() { s.capture.Release() }

// Released reports whether the snapshot's capture was released. Safe from any
// goroutine.
func (s *TreeSnapshot[K, V]) Released() bool { return s.capture.Released() }

// Len returns the number of entries. O(1).
func (s *TreeSnapshot[K, V]) Len() int {
	s.capture.mustRead()
	return s.v.len
}

// Get returns the value of k and whether it is present. O(log n).
func (s *TreeSnapshot[K, V]) Get(k K) (V, bool) {
	s.capture.mustRead()
	return s.v.get(k)
}

// Min returns the smallest key and its value; ok is false if the snapshot is
// empty. O(log n).
func (s *TreeSnapshot[K, V]) Min() (k K, v V, ok bool) {
	s.capture.mustRead()
	return s.v.edge(false)
}

// Max returns the largest key and its value; ok is false if the snapshot is
// empty. O(log n).
func (s *TreeSnapshot[K, V]) Max() (k K, v V, ok bool) {
	s.capture.mustRead()
	return s.v.edge(true)
}

// All yields every entry in ascending key order. O(n) for the whole
// sequence.
func (s *TreeSnapshot[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { s.v.ascend(nil, s.capture, yield) }
}

// Ascend yields the entries with keys >= from in ascending key order. O(log
// n) to start, then O(1) amortized per entry.
func (s *TreeSnapshot[K, V]) Ascend(from K) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { s.v.ascend(&from, s.capture, yield) }
}
