package cow

import "iter"

// MapRoot is one version of a Map as a plain value: what a structure nested
// inside another one stores (the map state of a key, say). A MapRoot is
// immutable as long as the capture rules hold: the nodes it points to are
// written in place only while no live capture can see them, and then only by
// the writer that owns them, through the Map the root was taken from or
// given to with SetRoot. Two MapRoots are equal (==) when they are the same
// version, so storing a root that did not change is a no-op write.
//
// Never let two places hold the same writable root and write through both:
// take a capture first, or build a new map.
type MapRoot[K comparable, V any] struct {
	slot      mapSlot[K, V]
	len       int
	rootEpoch uint64
}

// Root returns the map's current version as a value. O(1). Writer goroutine
// only. From then on the map is a cursor and no longer reuses the leaves its
// copies replace (see map_reuse.go).
func (m *Map[K, V]) Root() MapRoot[K, V] {
	if !m.reuse.off {
		m.reuse.stop(m.owner)
	}
	m.branchesOff = true
	m.owned = ownedAll{}
	return MapRoot[K, V]{slot: m.root, len: m.len, rootEpoch: m.rootEpoch}
}

// SetRoot makes r the map's current version, for a Map used as a cursor over
// roots stored elsewhere (r must come from a map with the same owner, hash
// and equality). O(1). Writer goroutine only. The map becomes a cursor (see
// Root).
func (m *Map[K, V]) SetRoot(r MapRoot[K, V]) {
	m.owner.beginWrite()
	if !m.reuse.off {
		m.reuse.stop(m.owner)
	}
	m.branchesOff = true
	m.owned = ownedAll{}
	m.root, m.len, m.rootEpoch = r.slot, r.len, r.rootEpoch
	m.owner.wrote()
	m.owner.endWrite()
}

// Len returns the number of entries. O(1).
func (r MapRoot[K, V]) Len() int { return r.len }

// GetHashed returns the value of k, whose hash is h. Safe from any goroutine
// on a root read from a live capture.
func (r MapRoot[K, V]) GetHashed(h uint64, k K) (V, bool) { return r.slot.lookup(h, k) }

// All yields every entry in hash order.
func (r MapRoot[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { r.slot.all(yield, nil) }
}
