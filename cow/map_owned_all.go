package cow

// # When the writer has copied everything a capture shared
//
// A checkpoint's capture stays live until the next one (it is the next
// delta's base), so between two checkpoints every write takes the path
// for a live capture: it reads the leaf's parent to learn whether the
// leaf is the writer's, and tells a copied parent what it changed
// (narrow, for the diff's leafSame bounds). That path costs an update
// about 125 instructions more than the path with no capture live (545
// against 420 an UpdateEach event at 1M keys, callgrind). Yet once the
// writer has written every leaf since the capture, every node of the
// live tree is its own, as with no capture live: with uniform keys at 1M
// that is after about 2 writes a key, 20 ms at a job's pace. It pays
// where a capture is held while every leaf is written (a delta's base,
// a savepoint, a checkpoint uploaded slowly); not where some leaves go
// unwritten (skewed keys), nor for leaves written in place behind a
// snapshot's reader (MapSnapshot.Passed), which stay shared.
//
// ownedAll counts down the leaves the live tree may still share with a
// capture, one a copy (retireLeaf's caller copied one). When the count
// reaches zero the next write on a live path walks the branches
// (ownedNow, checkOwnedAll) and counts the shared leaves exactly: if there are
// none, it spends every copy's bounds and the map's writes take the
// no-capture paths until the next capture. A count that was off costs
// only a walk (a delete or a split of a shared leaf makes the count too
// high, and the map never switches in that epoch; too low, and the walk
// sets it right).
//
// The bounds (leafSame) are what the no-capture paths do not keep: a
// diff of a capture's tree against the next one reads them, and an
// in-place write that does not lower them would leave them claiming
// entries it changed. Spending them (sameBounds.spend) makes every slot
// of every copy read as bounds 0, so the diff compares those leaves
// whole, and leaves no room for a new record.
//
// A cursor (Root, SetRoot) never switches: SetRoot can install nodes a
// capture shares.
type ownedAll struct {
	// epoch is the writer epoch left counts in; a capture moves the
	// owner's on, so a count of an earlier epoch says nothing.
	epoch uint64
	// left is how many leaves may still be shared, as far as copies
	// tell; 0: walk at the next write; -1: the walk found none, and
	// the map's writes take the no-capture paths.
	left int
	// leaves is how many leaves the last walk found: the count a new
	// epoch starts from.
	leaves int
}

// copiedAll reports, for a write with a capture live, whether the
// writer has copied every node since that capture (see ownedAll): the
// write then takes the no-capture path. The write paths test it after
// the owner's H, inline, so that a write with no capture live reads
// nothing more. Writer goroutine only.
func (m *Map[K, V]) copiedAll() bool {
	return m.owned.left < 0 && m.owned.epoch == m.owner.epoch
}

// ownedNow reports, for a write on a live path (high, not 0) when the
// count of shared leaves is down (the caller tests owned.left == 0,
// inline), whether a walk finds none left: the write then takes the
// no-capture path.
func (m *Map[K, V]) ownedNow(high uint64) bool {
	return m.owned.epoch == m.owner.epoch && m.checkOwnedAll(high)
}

// copiedLeaf counts a leaf copied from one a capture may share.
func (m *Map[K, V]) copiedLeaf() {
	if o := &m.owned; o.epoch == m.owner.epoch {
		if o.left > 0 {
			o.left--
		}
		return
	}
	m.countFrom()
}

// countFrom starts the count of a new epoch at its first copy, from the
// leaves the last walk found (fewer than there are before any walk, so
// the first walk comes early and sets the count right). Not in a cursor.
func (m *Map[K, V]) countFrom() {
	if m.branchesOff {
		return
	}
	o := &m.owned
	o.epoch, o.left = m.owner.epoch, o.leaves
	if o.leaves == 0 {
		o.left = m.len / mapLeafMax
	}
	if o.left > 0 {
		o.left--
	}
}

// checkOwnedAll counts the leaves the live tree shares with a capture
// live at high; if none, it spends every copy's bounds, switches the
// map's writes to the no-capture paths and reports true, else it sets
// the count down from there. O(branches).
func (m *Map[K, V]) checkOwnedAll(high uint64) bool {
	leaves, shared := m.sharedLeaves(high)
	m.owned.leaves = leaves
	if shared > 0 {
		m.owned.left = shared
		return false
	}
	spendBounds(&m.root)
	m.owned.left = -1
	return true
}

// sharedLeaves returns how many leaves the live tree has and how many of
// them a write would copy first, with a capture live at high.
func (m *Map[K, V]) sharedLeaves(high uint64) (leaves, shared int) {
	return sharedLeaves(&m.root, high, m.root.isLeaf() && m.rootEpoch <= high)
}

// sharedLeaves returns how many leaves lie under s and how many of them
// a write would copy first: every leaf under a branch of epoch <= high
// (or under shared, s itself), or not owned by its parent.
func sharedLeaves[K comparable, V any](s *mapSlot[K, V], high uint64, shared bool) (leaves, sharedN int) {
	b := s.branch()
	if b == nil {
		if s.isLeaf() {
			leaves = 1
			if shared {
				sharedN = 1
			}
		}
		return leaves, sharedN
	}
	shared = shared || b.epoch <= high
	for i := range b.kids {
		kid := &b.kids[i]
		l, n := sharedLeaves(kid, high, shared || kid.isLeaf() && b.owned&(1<<i) == 0)
		leaves += l
		sharedN += n
	}
	return leaves, sharedN
}

// spendBounds spends the bounds of every copied branch under s.
func spendBounds[K comparable, V any](s *mapSlot[K, V]) {
	b := s.branch()
	if b == nil {
		return
	}
	if b.origin != 0 {
		b.same.spend()
	}
	for i := range b.kids {
		spendBounds(&b.kids[i])
	}
}

// spentSlot marks a spent record: no slot + 1 is ever 255, and no
// record is unused, so find matches no slot and narrow makes no record.
const spentSlot = 0xff

// spend makes every slot read as bounds 0 from now on (see ownedAll).
func (s *sameBounds) spend() {
	*s = sameBounds{}
	for j := range s.slot {
		s.slot[j] = spentSlot
	}
}
