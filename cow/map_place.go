package cow

import "unsafe"

// Place is where Map.Find found a key: Map.Store writes the key's new
// value there without walking down again, when nothing was written and no
// capture taken since the Find and the path to the key's leaf is the
// writer's; otherwise Store is Set. A Place is a value the caller keeps
// on its stack between the two calls; it holds no reference a capture or
// a later write depends on.
type Place[K comparable, V any] struct {
	e *mapEntry[K, V] // the key's entry; nil: Store walks (absent, or a path shared with a capture)
	// parent is the leaf's branch (nil for the root leaf, or when no
	// capture was live at the Find: the leaf is then the writer's and no
	// diff can need its bounds); slot the leaf's slot in it.
	parent   *mapBranch[K, V]
	slot     int32
	i, n     int32 // the entry's index in its leaf, the leaf's length
	copyLeaf bool  // the leaf is shared with a capture: Store copies it
	shared   bool  // present under a branch shared with a capture: Store copies the path
	rootLeaf bool  // the leaf is the root, found with a capture live
	writes   uint64
	epoch    uint64
}

// Find returns the value of k (hash h), whether it is present, and its
// Place, for a Store of the key's new value (a read-modify-write: one walk
// instead of a Get's and a Set's). It reads what Get reads, and with a
// capture live also the epochs of the branches on the way (as a Set's
// in-place path does). Writer goroutine only: the Place is for the
// writer's own Store.
func (m *Map[K, V]) Find(h uint64, k K) (V, Place[K, V], bool) {
	high := m.owner.high.Load()
	p := Place[K, V]{writes: m.owner.writes, epoch: m.owner.epoch}
	if high == 0 {
		// No capture live: every node the live root reaches is the
		// writer's (see SetHashed), so the entry is written where it is.
		v, e, _, ok := seekLeaf(&m.root, h, h, k)
		p.e = e
		return v, p, ok
	}
	return m.findLive(h, k, high, false)
}

// UpdateHashed sets k (hash h) to f(old, present), where old is k's value
// and present whether it has one (old is the zero V if not): a
// read-modify-write with one walk of the map, as Find then Store, but
// with nothing kept between the walk and the write but the entry's
// address, where Find returns a Place of ten words through memory for
// Store to read back (statetable's BenchmarkReadModifyWrite at 10M
// entries: 515-623 ns against 621-720, a lookup alone 340-351). With no
// capture live and k present, the value is written where the walk found
// it; with a capture live, so is a value in a leaf the writer owns
// (updateLive). If f wrote a structure of m's owner or took a capture,
// the address may be stale and the write walks again (SetHashed). keep
// is SetHashed's. Storing a value equal to the present one changes
// nothing. Writer goroutine only; f runs on it, outside any write.
func (m *Map[K, V]) UpdateHashed(h uint64, k K, f func(old V, present bool) V, keep func(K) K) {
	if high := m.owner.high.Load(); high != 0 && !m.copiedAll() {
		m.updateLive(h, k, high, f, keep)
		return
	}
	// No capture live: every node the live root reaches is the writer's
	// (see SetHashed), so the entry is written where it is.
	old, e, _, ok := seekLeaf(&m.root, h, h, k)
	if !ok {
		m.SetHashed(h, k, f(old, false), keep)
		return
	}
	writes, epoch := m.owner.writes, m.owner.epoch
	v := f(old, true)
	if m.owner.writes != writes || m.owner.epoch != epoch {
		m.SetHashed(h, k, v, keep) // f wrote or captured: e may be stale
		return
	}
	if m.sameValue(&old, &v) {
		return
	}
	m.owner.beginWrite()
	e.val = v // no diff can need the bounds (leafSame)
	m.owner.wroteAt(h)
	m.verify("Set")
	m.owner.endWrite()
}

// updateLive is UpdateHashed with a capture live (high, not 0). One walk
// down, and the epoch and owned bits of the leaf's parent (see
// getForSetLive), tell what the write may do with the key's entry:
//   - in a leaf the writer owns, under a parent it owns (the common case
//     between two captures): write it in place as with no capture, its
//     parent told of the edit (leafSame);
//   - in a leaf the reader of the only live capture has passed
//     (MapSnapshot.Passed): write it in place, with no bounds to tell;
//   - otherwise (a leaf or a path shared with a capture, or an absent
//     key): store it through the Place the walk found, which copies.
//
// The three share the walk: looking again for each (the owned walk, the
// frontier's, then Find's) cost two more walks and a leaf search on every
// update of a leaf ahead of a streamed checkpoint's reader (BenchmarkJob,
// keys=10000000, every=1s). The call of f and the checks after it are
// written out here and in UpdateHashed: the same lines as a helper, which
// the compiler does not inline, cost the no-capture path 641-740 ns
// against 530-583 at 10M entries (statetable's BenchmarkReadModifyWrite,
// op=update, side by side).
func (m *Map[K, V]) updateLive(h uint64, k K, high uint64, f func(old V, present bool) V, keep func(K) K) {
	if m.owned.left == 0 && m.ownedNow(high) {
		m.UpdateHashed(h, k, f, keep) // every node is the writer's now
		return
	}
	s := &m.root
	rest := h // the bits below the current node's prefix, at the top
	var parent *mapBranch[K, V]
	slot, depth := 0, 0
	for s.isBranch() {
		parent = (*mapBranch[K, V])(s.p)
		slot = int(rest >> (64 - mapBits))
		s = &parent.kids[slot]
		rest <<= mapBits
		depth++
	}
	// The leaf's parent alone says what may be written (getForSetLive).
	writable := m.rootEpoch > high
	if parent != nil {
		writable = parent.epoch > high
	}
	var old V
	var e *mapEntry[K, V]
	var i uintptr
	ok := false
	if s.isLeaf() {
		old, e, i, ok = seekLeaf(s, h, rest, k)
	}
	if !ok {
		m.SetHashed(h, k, f(old, false), keep)
		return
	}
	n := s.len()
	if !writable || parent != nil && parent.owned&(1<<slot) == 0 {
		if !m.passedLeaf(h, depth, high) {
			p := Place[K, V]{writes: m.owner.writes, epoch: m.owner.epoch}
			if writable {
				p.e, p.parent, p.slot, p.i, p.n = e, parent, int32(slot), int32(i), int32(n)
				p.copyLeaf = true // parent != nil: the root leaf is owned when writable
			} else {
				p.shared = true
			}
			m.store(&p, h, k, f(old, true), keep, false)
			return
		}
		parent = nil // written as an owned leaf, with no bounds to tell
	}
	writes, epoch := m.owner.writes, m.owner.epoch
	v := f(old, true)
	if m.owner.writes != writes || m.owner.epoch != epoch {
		m.SetHashed(h, k, v, keep) // f wrote or captured: e may be stale
		return
	}
	if m.sameValue(&old, &v) {
		return
	}
	m.owner.beginWrite()
	e.val = v
	if parent != nil {
		parent.narrow(slot, editAt(int(i), n), false)
	}
	m.owner.wroteAt(h)
	m.verify("Set")
	m.owner.endWrite()
}

// leafSlot walks from the root to the slot of hash h's leaf (or of where
// it would be) and returns it, its parent (nil for the root) and index
// there, and h with the path's bits shifted out (seekLeaf's rest). Small
// enough to inline.
func (m *Map[K, V]) leafSlot(h uint64) (s *mapSlot[K, V], parent *mapBranch[K, V], slot int, rest uint64) {
	s, rest = &m.root, h
	for s.isBranch() {
		parent = (*mapBranch[K, V])(s.p)
		slot = int(rest >> (64 - mapBits))
		s = &parent.kids[slot]
		rest <<= mapBits
	}
	return s, parent, slot, rest
}

// findLive is Find with a capture live (high, the newest live capture's
// epoch, not 0): a Place with an entry only when the leaf's parent is the
// writer's, and with it every branch above (see getForSetLive). With
// placeOnly it reports the key absent when the parent is shared, without
// reading the leaf: a Set's in-place path then leaves the leaf to the
// copying walk, which reads it once (BenchmarkPut, snap=every1000).
func (m *Map[K, V]) findLive(h uint64, k K, high uint64, placeOnly bool) (V, Place[K, V], bool) {
	p := Place[K, V]{writes: m.owner.writes, epoch: m.owner.epoch}
	s, parent, slot, rest := m.leafSlot(h)
	// The leaf's parent alone says what may be written (getForSetLive).
	writable := m.rootEpoch > high
	if parent != nil {
		writable = parent.epoch > high
	}
	var zero V
	if !writable && placeOnly {
		return zero, p, false
	}
	if !s.isLeaf() {
		return zero, p, false
	}
	v, e, i, ok := seekLeaf(s, h, rest, k)
	if !ok {
		return zero, p, false
	}
	if writable {
		// A kid branch's own epoch said whether it was writable;
		// owned bits are kept for leaves only.
		p.e, p.parent, p.slot, p.i, p.n = e, parent, int32(slot), int32(i), int32(s.len())
		p.copyLeaf = parent != nil && parent.owned&(1<<slot) == 0
		p.rootLeaf = parent == nil
	} else {
		p.shared = true
	}
	return v, p, true
}

// Store sets k (hash h) to v, where p is the Place a Find of the same key
// returned. It is Set (SetHashed with no keep), in place at p when the
// Find's walk still holds: no write to a structure of the owner and no
// capture since, and the path was the writer's. Storing a value equal to
// the present one changes nothing. Writer goroutine only.
func (m *Map[K, V]) Store(p *Place[K, V], h uint64, k K, v V, keep func(K) K) {
	m.store(p, h, k, v, keep, true)
}

// store is Store; passed says whether to look for the key behind a
// reader's frontier (passedEntry) before copying, which a caller that
// just looked need not do again.
func (m *Map[K, V]) store(p *Place[K, V], h uint64, k K, v V, keep func(K) K, passed bool) {
	if p.writes != m.owner.writes || p.epoch != m.owner.epoch || (p.e == nil && !p.shared) {
		m.SetHashed(h, k, v, keep)
		return
	}
	if passed && (p.shared || p.copyLeaf) {
		if e := m.passedEntry(h, k, m.owner.high.Load()); e != nil {
			m.owner.beginWrite()
			m.writePassed(e, v)
			m.owner.endWrite()
			return
		}
	}
	if p.shared {
		// The first write under a capture to this part of the map: the
		// in-place path of SetHashed would walk down to find what Find
		// found, that a branch is shared, so the copying walk goes first.
		m.owner.beginWrite()
		m.setWalk(h, k, v, keep)
		return
	}
	if m.sameValue(&p.e.val, &v) {
		return
	}
	m.owner.beginWrite()
	m.storeAt(p, v)
	m.owner.endWrite()
}

// storeAt writes v, which differs from the present value, at p, a Place
// whose walk still holds, within a write begun: in place, or into a copy
// of the leaf when the leaf is shared with a capture.
func (m *Map[K, V]) storeAt(p *Place[K, V], v V) {
	e := p.e
	switch {
	case p.copyLeaf:
		parent, slot := p.parent, int(p.slot)
		old := parent.kids[slot]
		i, n := int(p.i), int(p.n)
		ents := m.newLeaf(unsafe.Slice((*mapEntry[K, V])(old.p), n), n, n)
		ents[i].val = v
		parent.setKid(slot, old.withEntries(ents), true, editAt(i, n))
		m.retireLeaf(old)
	case p.parent != nil:
		e.val = v
		// With a capture live, a copy's bounds on what its leaves share
		// with the original must hear of every write (leafSame).
		p.parent.narrow(int(p.slot), editAt(int(p.i), int(p.n)), false)
	default:
		// No capture live at the Find, or the root leaf: no branch keeps
		// bounds for the leaf.
		e.val = v
	}
	m.owner.wroteAt(e.hash)
	m.verify("Set")
}

// recentEntry is what GetForSet found: with no capture live, the entry
// and the owner's write count (while the count is unchanged, nothing has
// moved the entry); with one live, the Place getForSetLive filled in,
// valid while the write count and the epoch are unchanged.
type recentEntry[K comparable, V any] struct {
	e      *mapEntry[K, V] // nil: none
	h      uint64
	writes uint64
	place  Place[K, V] // found with a capture live
	placeH uint64
	placed bool
}

// GetForSet is GetHashed for a read that a SetAfterGet of the same key
// may follow (a read-modify-write written as two calls, as a state's Get
// then Put): it notes where it found k. With no capture live that is
// the entry, three words stored in the map; with one live, the Place a
// Find would return (getForSetLive). Writer goroutine only.
func (m *Map[K, V]) GetForSet(h uint64, k K) (V, bool) {
	if high := m.owner.high.Load(); high != 0 && !m.copiedAll() {
		return m.getForSetLive(h, k, high)
	}
	v, e, _, ok := seekLeaf(&m.root, h, h, k)
	m.recent.e, m.recent.h, m.recent.writes = e, h, m.owner.writes
	return v, ok
}

// getForSetLive is GetForSet with a capture live (high, not 0): it walks
// as a Get does and notes in m.recent.place what a write of the key's
// value may do there, from the leaf's parent alone: write in place (the
// parent is the writer's, epoch above high, and owns the leaf), copy the
// leaf into the parent (the parent is the writer's, the leaf shared), or
// copy the path (the parent is shared). An update changes no count, so
// no branch above the parent is written, and none needs reading: a
// branch above a writable one is writable too (a branch is made writable
// by a write, which copied the path to it; Check verifies it). Reading
// each level's epoch on the way down, and a Place built and copied into
// the map, cost the Get then Put with a capture held 601 instructions
// against 481 (BenchmarkValueUpdate's loop, callgrind at 1M keys). It is
// findLive filling the note in place rather than returning a Place:
// findLive filling a Place through a pointer, for both, cost this loop 18
// instructions more (458 -> 477).
func (m *Map[K, V]) getForSetLive(h uint64, k K, high uint64) (V, bool) {
	if m.owned.left == 0 && m.ownedNow(high) {
		return m.GetForSet(h, k) // every node is the writer's now
	}
	s, parent, slot, rest := m.leafSlot(h)
	n := int32(s.len())
	v, e, i, ok := seekLeaf(s, h, rest, k)
	r := &m.recent
	if !ok {
		r.placed = false
		return v, false
	}
	p := &r.place
	p.e, p.parent, p.slot, p.i, p.n = e, parent, int32(slot), int32(i), n
	p.writes, p.epoch = m.owner.writes, m.owner.epoch
	if parent != nil {
		writable := parent.epoch > high
		p.shared = !writable
		p.copyLeaf = writable && parent.owned&(1<<slot) == 0
		p.rootLeaf = false
	} else {
		p.shared, p.copyLeaf, p.rootLeaf = m.rootEpoch <= high, false, true
	}
	r.placeH, r.placed = h, true
	return v, true
}

// SetAfterGet is SetHashed for a write that may follow a GetForSet of the
// same key: if nothing was written between the two, the value is written
// where the Get found the key, without walking down and searching the
// leaf again (statetable's BenchmarkValueUpdate, ttl=off: 454 -> 351
// instructions an update, callgrind at 1M keys; 705 -> 481 with a
// capture held). With a capture live, the Get's Place is stored as Store
// stores it (in place, or into a copy of what a capture shares), if
// nothing was written or captured since. Otherwise it is SetHashed, at
// the cost of a few compares and a call; SetHashed itself makes no check,
// which would cost every put about nine instructions (BenchmarkPut at 1M,
// snap=none). Writer goroutine only.
func (m *Map[K, V]) SetAfterGet(h uint64, k K, v V, keep func(K) K) (replaced bool) {
	if m.owner.high.Load() == 0 || m.copiedAll() {
		if e := m.recentFor(h, k); e != nil {
			// SetHashed's in-place write, written out: as a helper, even
			// inlined, it cost the Get then Put 16 instructions more
			// (BenchmarkValueUpdate ttl=off, 348 -> 364, callgrind).
			m.owner.beginWrite()
			if !m.sameValue(&e.val, &v) {
				e.val = v // no diff can need the bounds (leafSame)
				m.owner.wroteAt(h)
				m.verify("Set")
			}
			m.owner.endWrite()
			return true
		}
	} else if r := &m.recent; r.placed && r.placeH == h && r.place.writes == m.owner.writes &&
		r.place.epoch == m.owner.epoch && r.place.e.key == k {
		// Found at the Get and nothing written or captured since.
		r.placed = false
		p := &r.place
		if p.shared || p.copyLeaf {
			m.store(p, h, k, v, keep, true)
			return true
		}
		// A leaf the writer owns: storeAt's in-place write, written out
		// for the same reason as above.
		m.owner.beginWrite()
		if !m.sameValue(&p.e.val, &v) {
			p.e.val = v
			if p.parent != nil {
				// A copy's bounds on what its leaves share with the
				// original hear of every write (leafSame).
				p.parent.narrow(int(p.slot), editAt(int(p.i), int(p.n)), false)
			}
			m.owner.wroteAt(h)
			m.verify("Set")
		}
		m.owner.endWrite()
		return true
	}
	return m.SetHashed(h, k, v, keep)
}

// recentFor returns the entry GetForSet noted for k (hash h) if nothing
// was written since, or nil. Called with no capture live: the entry is
// then in a leaf of the writer's, whatever captures were taken and
// released since the note (a capture taken moves nothing, and one
// released leaves no node of the live tree shared).
func (m *Map[K, V]) recentFor(h uint64, k K) *mapEntry[K, V] {
	r := &m.recent
	if r.e != nil && r.h == h && r.writes == m.owner.writes && r.e.key == k {
		return r.e
	}
	return nil
}
