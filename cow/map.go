package cow

import (
	"iter"
)

// Map is a persistent hash map with in-place writes between captures: a
// canonical hash trie (see mapNode) keyed by a caller-supplied 64-bit hash.
//
// The zero Map is not usable; create one with NewMap. All methods except
// those of the snapshots it hands out belong to the owner's single writer
// goroutine.
//
// Costs, for n entries: Get, Set and Delete are O(log32 n) node visits plus a
// binary search of one leaf of at most mapLeafMax entries; with no live
// capture they allocate only when a leaf grows. With a live capture the first
// write to a leaf in an epoch copies the leaf and its path (O(mapLeafMax +
// depth*mapFanout) words); later writes to it in the same epoch are in place.
type Map[K comparable, V any] struct {
	owner *Owner
	root  mapSlot[K, V]
	len   int
	hash  func(K) uint64
	equal func(a, b V) bool
}

// NewMap returns an empty map owned by owner (one Owner may be shared by many
// structures written by the same goroutine; pass NewOwner() for a standalone
// map). hash must be deterministic and should spread keys uniformly over 64
// bits (xxhash of the key's encoding, say); colliding keys are handled, only
// slower. equal is value equality: a Set of a value equal to the present one
// is a no-op that copies nothing, so a Diff reports only real changes.
func NewMap[K comparable, V any](owner *Owner, hash func(K) uint64, equal func(a, b V) bool) *Map[K, V] {
	if owner == nil || hash == nil || equal == nil {
		panic("cow: NewMap: owner, hash and equal must not be nil")
	}
	return &Map[K, V]{owner: owner, hash: hash, equal: equal}
}

// Equal is the equality of comparable values, for NewMap and NewTree.
func Equal[V comparable](a, b V) bool { return a == b }

// Owner returns the owner whose epochs the map's nodes carry.
func (m *Map[K, V]) Owner() *Owner { return m.owner }

// Len returns the number of entries. O(1).
func (m *Map[K, V]) Len() int { return m.len }

// Get returns the value of k and whether it is present.
func (m *Map[K, V]) Get(k K) (V, bool) {
	return m.root.lookup(m.hash(k), k)
}

// All yields every entry in hash order (deterministic for a given key set).
// The map must not be written during the iteration; iterate a snapshot to
// write meanwhile.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		m.root.all(yield, nil)
	}
}

// writeResult says what a write did to a subtree.
type writeResult uint8

const (
	unchanged writeResult = iota // nothing changed: every node kept
	updated                      // a value changed, the key set did not
	inserted                     // one entry was added
)

// Set sets k to v and reports whether k was already present. Setting a key
// to a value equal to its present one changes nothing and copies nothing.
func (m *Map[K, V]) Set(k K, v V) (replaced bool) {
	root, r := m.set(&m.root, 0, m.hash(k), k, v)
	switch r {
	case unchanged:
		return true
	case inserted:
		m.len++
	}
	m.root = root
	m.owner.wrote()
	m.verify("Set")
	return r == updated
}

// set writes k=v below s and returns the new value of the slot. Copies are
// made on the way back up, only when something below changed, so a no-op
// write keeps every node.
func (m *Map[K, V]) set(s *mapSlot[K, V], depth int, h uint64, k K, v V) (mapSlot[K, V], writeResult) {
	if b := s.branch; b != nil {
		i := slotAt(h, depth)
		kid, r := m.set(&b.kids[i], depth+1, h, k, v)
		if r == unchanged {
			return *s, unchanged
		}
		b = m.ownBranch(b)
		b.kids[i] = kid
		if r == inserted {
			b.count++
		}
		return mapSlot[K, V]{branch: b}, r
	}
	ents, epoch := s.ents, s.epoch
	i, found := findEntry(ents, h, k, depth)
	if found {
		if m.equal(ents[i].val, v) {
			return *s, unchanged
		}
		if !m.owner.writable(epoch) {
			ents, epoch = append([]mapEntry[K, V](nil), ents...), m.owner.epoch
		}
		ents[i].val = v
		return mapSlot[K, V]{ents: ents, epoch: epoch}, updated
	}
	e := mapEntry[K, V]{h, k, v}
	if len(ents) > 0 && m.owner.writable(epoch) {
		ents = insertAt(ents, i, e)
	} else {
		grown := make([]mapEntry[K, V], len(ents)+1)
		copy(grown, ents[:i])
		grown[i] = e
		copy(grown[i+1:], ents[i:])
		ents, epoch = grown, m.owner.epoch
	}
	if len(ents) > mapLeafMax && depth < mapDepths {
		return buildSlot(ents, depth, m.owner.epoch), inserted
	}
	return mapSlot[K, V]{ents: ents, epoch: epoch}, inserted
}

// Delete removes k and reports whether it was present. Deleting an absent
// key changes nothing and copies nothing.
func (m *Map[K, V]) Delete(k K) (old V, deleted bool) {
	root, old, ok := m.del(&m.root, 0, m.hash(k), k)
	if !ok {
		return old, false
	}
	m.root = root
	m.len--
	m.owner.wrote()
	m.verify("Delete")
	return old, true
}

// del removes k below s and returns the new value of the slot, the removed
// value and whether k was present.
func (m *Map[K, V]) del(s *mapSlot[K, V], depth int, h uint64, k K) (mapSlot[K, V], V, bool) {
	if b := s.branch; b != nil {
		i := slotAt(h, depth)
		kid, old, found := m.del(&b.kids[i], depth+1, h, k)
		if !found {
			return *s, old, false
		}
		if b.count-1 <= mapLeafMax {
			// The subtree shrank to one leaf's worth: every kid is a leaf
			// (canonical shape), so the collapse is a concatenation.
			ents := make([]mapEntry[K, V], 0, b.count-1)
			for j := range b.kids {
				if j == i {
					ents = append(ents, kid.ents...)
				} else {
					ents = append(ents, b.kids[j].ents...)
				}
			}
			return mapSlot[K, V]{ents: ents, epoch: m.owner.epoch}, old, true
		}
		b = m.ownBranch(b)
		b.kids[i] = kid
		b.count--
		return mapSlot[K, V]{branch: b}, old, true
	}
	i, found := findEntry(s.ents, h, k, depth)
	if !found {
		var zero V
		return *s, zero, false
	}
	old := s.ents[i].val
	switch {
	case len(s.ents) == 1:
		return mapSlot[K, V]{}, old, true
	case m.owner.writable(s.epoch):
		return mapSlot[K, V]{ents: removeAt(s.ents, i), epoch: s.epoch}, old, true
	}
	ents := make([]mapEntry[K, V], len(s.ents)-1)
	copy(ents, s.ents[:i])
	copy(ents[i:], s.ents[i+1:])
	return mapSlot[K, V]{ents: ents, epoch: m.owner.epoch}, old, true
}

// ownBranch returns b if the writer may mutate it, else a copy stamped with
// the writer epoch (sharing b's kids until they are written).
func (m *Map[K, V]) ownBranch(b *mapBranch[K, V]) *mapBranch[K, V] {
	if m.owner.writable(b.epoch) {
		return b
	}
	c := *b
	c.epoch = m.owner.epoch
	return &c
}

// Clear removes every entry in O(1); captured versions keep theirs.
func (m *Map[K, V]) Clear() {
	if m.len == 0 {
		return
	}
	m.root, m.len = mapSlot[K, V]{}, 0
	m.owner.wrote()
}

// verify runs Check after a mutation under the invariants build tag.
func (m *Map[K, V]) verify(op string) {
	if invariants {
		if err := m.Check(); err != nil {
			panic("cow: Map invariant broken after " + op + ": " + err.Error())
		}
	}
}

// insertAt inserts v at i, growing the backing array by a quarter rather
// than doubling it: leaves are many and small, so slack is memory.
func insertAt[T any](s []T, i int, v T) []T {
	if len(s) == cap(s) {
		grown := make([]T, len(s), len(s)+len(s)/4+2)
		copy(grown, s)
		s = grown
	}
	s = s[:len(s)+1]
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// removeAt removes element i in place and clears the vacated slot so the
// garbage collector does not keep what it referenced.
func removeAt[T any](s []T, i int) []T {
	copy(s[i:], s[i+1:])
	var zero T
	s[len(s)-1] = zero
	return s[:len(s)-1]
}
