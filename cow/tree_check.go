package cow

import (
	"fmt"
	"reflect"
	"slices"
)

// Check verifies every structural invariant of the tree and returns the first
// broken one (matching ErrInvariant), or nil:
//
//   - keys ascend strictly within every node and across nodes: every key of
//     a subtree lies within the bounds its ancestors' separators give it;
//   - every node is between half full and full, except the root (a root leaf
//     holds at least one entry, a root branch at least two children);
//   - every leaf is at the same depth, Len counts the entries, and slots past
//     the end of a node are zero (nothing removed is kept alive);
//   - epochs: every node's epoch is between 1 and the owner's epoch, and a
//     node that a live capture may share (epoch <= the capture's epoch) has
//     no descendant newer than that capture: what the capture sees was not
//     written after it was taken.
//
// Cost O(n); writer goroutine only. Under the invariants build tag, every
// mutation runs it and panics if it fails.
func (t *Tree[K, V]) Check() error {
	c := treeChecker[K, V]{
		compare:   t.compare,
		leafMax:   t.leafMax,
		branchMax: t.branchMax,
		maxEpoch:  t.owner.epoch,
		live:      treeLiveEpochs(t.owner),
	}
	return c.version(&t.treeVersion)
}

// check verifies the snapshot as Check does a tree, with the capture's epoch
// as the newest epoch allowed: nothing written after the capture is
// reachable from it. Safe from any goroutine while the snapshot is live.
func (s *TreeSnapshot[K, V]) check() error {
	s.capture.mustRead()
	c := treeChecker[K, V]{
		compare:   s.v.compare,
		leafMax:   s.leafMax,
		branchMax: s.branchMax,
		maxEpoch:  s.capture.epoch,
	}
	return c.version(&s.v)
}

// treeLiveEpochs returns the epochs of the owner's live captures, ascending.
func treeLiveEpochs(o *Owner) []uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.live)
}

type treeChecker[K, V any] struct {
	compare            func(a, b K) int
	leafMax, branchMax int
	maxEpoch           uint64   // no node may be newer
	live               []uint64 // epochs of live captures, ascending
	entries            int
}

func (c *treeChecker[K, V]) version(v *treeVersion[K, V]) error {
	if v.root.isZero() {
		if v.len != 0 || v.height != 0 {
			return fmt.Errorf("%w: tree: empty root, but Len %d and height %d", ErrInvariant, v.len, v.height)
		}
		return nil
	}
	if _, err := c.node(v.root, v.height, true, nil, nil); err != nil {
		return err
	}
	if c.entries != v.len {
		return fmt.Errorf("%w: tree: Len %d, but the leaves hold %d entries", ErrInvariant, v.len, c.entries)
	}
	return nil
}

// node checks the subtree r at height h, whose keys must lie in [lo, hi) (nil
// means unbounded), and returns the newest epoch in it.
func (c *treeChecker[K, V]) node(r treeRef[K, V], h int, root bool, lo, hi *K) (uint64, error) {
	if h == 0 {
		if r.leaf == nil || r.branch != nil {
			return 0, fmt.Errorf("%w: tree: the node at height 0 is not a leaf", ErrInvariant)
		}
		return c.leaf(r.leaf, root, lo, hi)
	}
	if r.branch == nil || r.leaf != nil {
		return 0, fmt.Errorf("%w: tree: a node at height %d is not a branch (leaves at unequal depths)", ErrInvariant, h)
	}
	b := r.branch
	where := func() string { return fmt.Sprintf("branch at height %d (epoch %d, %d children)", h, b.epoch, b.n) }
	if err := c.epoch(b.epoch, where); err != nil {
		return 0, err
	}
	least := c.branchMax / 2
	if root {
		least = 2
	}
	if b.n < least || b.n > c.branchMax {
		return 0, fmt.Errorf("%w: tree: %s: want between %d and %d children", ErrInvariant, where(), least, c.branchMax)
	}
	if !treeZero(b.keys[b.n-1:]) || !treeZero(b.kids[b.n:]) {
		return 0, fmt.Errorf("%w: tree: %s: slots past the end are not zero", ErrInvariant, where())
	}
	for i := range b.n - 1 {
		s := &b.keys[i]
		if i > 0 && c.compare(b.keys[i-1], *s) >= 0 || lo != nil && c.compare(*lo, *s) >= 0 || hi != nil && c.compare(*s, *hi) >= 0 {
			return 0, fmt.Errorf("%w: tree: %s: separator %d (%v) out of order", ErrInvariant, where(), i, *s)
		}
	}
	newest := b.epoch
	for i := range b.n {
		klo, khi := lo, hi
		if i > 0 {
			klo = &b.keys[i-1]
		}
		if i < b.n-1 {
			khi = &b.keys[i]
		}
		e, err := c.node(b.kids[i], h-1, false, klo, khi)
		if err != nil {
			return 0, err
		}
		newest = max(newest, e)
	}
	if err := c.shared(b.epoch, newest, where); err != nil {
		return 0, err
	}
	return newest, nil
}

func (c *treeChecker[K, V]) leaf(l *treeLeaf[K, V], root bool, lo, hi *K) (uint64, error) {
	where := func() string { return fmt.Sprintf("leaf (epoch %d, %d entries)", l.epoch, l.n) }
	if err := c.epoch(l.epoch, where); err != nil {
		return 0, err
	}
	least := c.leafMax / 2
	if root {
		least = 1
	}
	if l.n < least || l.n > c.leafMax {
		return 0, fmt.Errorf("%w: tree: %s: want between %d and %d entries", ErrInvariant, where(), least, c.leafMax)
	}
	if !treeZero(l.keys[l.n:]) || !treeZero(l.vals[l.n:]) {
		return 0, fmt.Errorf("%w: tree: %s: slots past the end are not zero", ErrInvariant, where())
	}
	for i := range l.n {
		k := &l.keys[i]
		if i > 0 && c.compare(l.keys[i-1], *k) >= 0 {
			return 0, fmt.Errorf("%w: tree: %s: key %d (%v) not above key %d (%v)", ErrInvariant, where(), i, *k, i-1, l.keys[i-1])
		}
		if lo != nil && c.compare(*k, *lo) < 0 || hi != nil && c.compare(*k, *hi) >= 0 {
			return 0, fmt.Errorf("%w: tree: %s: key %d (%v) outside the bounds its separators give", ErrInvariant, where(), i, *k)
		}
	}
	c.entries += l.n
	return l.epoch, nil
}

// epoch checks a node's own epoch.
func (c *treeChecker[K, V]) epoch(e uint64, where func() string) error {
	if e == 0 || e > c.maxEpoch {
		return fmt.Errorf("%w: tree: %s: epoch not in [1, %d]", ErrInvariant, where(), c.maxEpoch)
	}
	return nil
}

// shared checks a node of epoch e whose subtree's newest epoch is newest:
// if a live capture may share the node (its epoch is >= e), the whole
// subtree must predate the capture.
func (c *treeChecker[K, V]) shared(e, newest uint64, where func() string) error {
	i, _ := slices.BinarySearch(c.live, e)
	if i < len(c.live) && c.live[i] < newest {
		return fmt.Errorf("%w: tree: %s: may be shared with live capture %d but holds a node of epoch %d", ErrInvariant, where(), c.live[i], newest)
	}
	return nil
}

// treeZero reports whether every element of s is its type's zero value.
func treeZero[T any](s []T) bool {
	for i := range s {
		if !reflect.ValueOf(&s[i]).Elem().IsZero() {
			return false
		}
	}
	return true
}
