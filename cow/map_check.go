package cow

import (
	"fmt"
	"unsafe"
)

// Check verifies every structural invariant of the map and returns the first
// broken one (matching ErrInvariant), or nil. It checks the canonical shape
// (a subtree is a leaf exactly when it has at most mapLeafMax entries),
// subtree counts against Len, hash order and hash prefixes of every entry
// against its path, that each cached hash is the key's hash, that no key
// appears twice (in a hash-keyed map, no hash), that no branch carries an epoch newer than the owner's, and
// that a branch's owned bitmap marks leaves only, and that no branch the
// writer may write (epoch above the newest live capture's) lies under one
// it may not: a write copies the whole path to what it writes, and the
// in-place paths read only the leaf's parent (getForSetLive); and that no
// branch of the live tree waits or is free in the owner's pool of retired
// branches, and no free one points at a subtree.
// Cost O(n); writer goroutine only (or with the writer quiescent).
func (m *Map[K, V]) Check() error {
	if n := m.root.count(); n != m.len {
		return fmt.Errorf("%w: root holds %d entries, Len %d", ErrInvariant, n, m.len)
	}
	c := mapChecker[K, V]{m: m, seen: make(map[K]struct{}, m.len), high: m.owner.high.Load()}
	var err error
	if c.retired, err = m.owner.retiredBranches(); err != nil {
		return err
	}
	if err := c.slot(&m.root, 0, 0, false); err != nil {
		return err
	}
	return m.checkOwnsAll(c.high)
}

// checkOwnsAll verifies what the no-capture paths rely on while a
// capture is live (ownedAll): no leaf of the live tree is one a write
// would copy, and no copy keeps bounds an in-place write would not lower.
func (m *Map[K, V]) checkOwnsAll(high uint64) error {
	if high == 0 || !m.copiedAll() {
		return nil
	}
	if _, shared := m.sharedLeaves(high); shared > 0 {
		return fmt.Errorf("%w: writes take the no-capture paths, but %d leaves are shared with a capture", ErrInvariant, shared)
	}
	return spentBounds(&m.root, 0)
}

// spentBounds returns an error naming the first copy under s (at depth)
// whose bounds are not spent.
func spentBounds[K comparable, V any](s *mapSlot[K, V], depth int) error {
	b := s.branch()
	if b == nil {
		return nil
	}
	if b.origin != 0 {
		for _, x := range b.same.slot {
			if x != spentSlot {
				return fmt.Errorf("%w: writes take the no-capture paths, but a copy at depth %d keeps bounds on its leaves", ErrInvariant, depth)
			}
		}
	}
	for i := range b.kids {
		if err := spentBounds(&b.kids[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

type mapChecker[K comparable, V any] struct {
	m       *Map[K, V]
	seen    map[K]struct{}
	high    uint64                 // the owner's, loaded once: a capture released meanwhile lowers it
	retired map[*branchNode]string // branches waiting or free in the owner's pool
}

// slot checks the subtree s at depth, whose entries' hashes must all start
// with the mapBits*depth bits of prefix; sharedAbove says a branch above it
// may be shared with a live capture.
func (c *mapChecker[K, V]) slot(s *mapSlot[K, V], depth int, prefix uint64, sharedAbove bool) error {
	if b := s.branch(); b != nil {
		if what, ok := c.retired[(*branchNode)(unsafe.Pointer(b))]; ok {
			return fmt.Errorf("%w: branch at depth %d is in the live tree and %s for reuse", ErrInvariant, depth, what)
		}
		shared := b.epoch <= c.high
		if sharedAbove && !shared {
			return fmt.Errorf("%w: writable branch at depth %d under a branch shared with a capture", ErrInvariant, depth)
		}
		if err := c.epoch(b.epoch, depth); err != nil {
			return err
		}
		if depth >= mapDepths {
			return fmt.Errorf("%w: branch at depth %d, past the last hash bit", ErrInvariant, depth)
		}
		if b.count <= mapLeafMax {
			return fmt.Errorf("%w: branch at depth %d has %d entries, should be a leaf", ErrInvariant, depth, b.count)
		}
		if b.origin == 0 && b.same != (sameBounds{}) {
			return fmt.Errorf("%w: branch at depth %d is no copy but bounds what its leaves share with an original", ErrInvariant, depth)
		}
		sum := 0
		for i := range b.kids {
			if b.owned&(1<<i) != 0 && !b.kids[i].isLeaf() {
				return fmt.Errorf("%w: branch at depth %d owns slot %d, which holds no leaf", ErrInvariant, depth, i)
			}
			if err := c.slot(&b.kids[i], depth+1, prefix<<mapBits|uint64(i), shared); err != nil {
				return err
			}
			sum += b.kids[i].count()
		}
		if sum != b.count {
			return fmt.Errorf("%w: branch at depth %d counts %d, kids hold %d", ErrInvariant, depth, b.count, sum)
		}
		return nil
	}
	if s.p == nil {
		if s.meta != 0 {
			return fmt.Errorf("%w: empty slot at depth %d has meta %#x", ErrInvariant, depth, uint64(s.meta))
		}
		return nil
	}
	if !s.isLeaf() || s.len() <= 0 || s.len() > s.capacity() {
		return fmt.Errorf("%w: leaf at depth %d has %d entries, capacity %d (meta %#x)", ErrInvariant, depth, s.len(), s.capacity(), uint64(s.meta))
	}
	ents := s.ents()
	if want := leafSlot(ents, depth).meta; s.meta != want {
		return fmt.Errorf("%w: leaf at depth %d of %d entries has meta %#x, its entries make %#x (the starts of its eighths)", ErrInvariant, depth, len(ents), uint64(s.meta), uint64(want))
	}
	if len(ents) > mapLeafMax && depth < mapDepths {
		return fmt.Errorf("%w: leaf at depth %d has %d entries, more than %d", ErrInvariant, depth, len(ents), mapLeafMax)
	}
	for i, e := range ents {
		if c.m.hashKeyed {
			if i > 0 && ents[i-1].hash == e.hash {
				return fmt.Errorf("%w: hash %#x appears twice in a hash-keyed map", ErrInvariant, e.hash)
			}
		} else if h := c.m.hash(e.key); h != e.hash {
			return fmt.Errorf("%w: entry %v cached hash %#x, hash is %#x", ErrInvariant, e.key, e.hash, h)
		}
		if i > 0 && ents[i-1].hash > e.hash {
			return fmt.Errorf("%w: leaf at depth %d: entry %d out of hash order", ErrInvariant, depth, i)
		}
		if depth > 0 && e.hash>>(64-mapBits*depth) != prefix {
			return fmt.Errorf("%w: entry %v at depth %d does not match its path", ErrInvariant, e.key, depth)
		}
		if c.m.hashKeyed {
			continue // its hash is its key: the order checks above find twins
		}
		if _, dup := c.seen[e.key]; dup {
			return fmt.Errorf("%w: key %v appears twice", ErrInvariant, e.key)
		}
		c.seen[e.key] = struct{}{}
	}
	return nil
}

func (c *mapChecker[K, V]) epoch(e uint64, depth int) error {
	if e == 0 || e > c.m.owner.epoch {
		return fmt.Errorf("%w: node at depth %d has epoch %d, owner epoch %d", ErrInvariant, depth, e, c.m.owner.epoch)
	}
	return nil
}
