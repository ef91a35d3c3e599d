package cow

import "iter"

// DiffTrees yields the changes that turn old into new, in ascending key
// order: Added for keys only in new, Removed for keys only in old, Changed
// for keys in both whose values are not equal (by the trees' equal
// function). Both snapshots must order keys by the same compare function;
// they need not come from the same tree or owner.
//
// Cost: the walk skips whole every subtree that both versions share by
// pointer and reach at the same key, so for two versions of one tree k
// writes apart it costs O(k * depth * fanout), independent of the size.
// Unrelated trees diff correctly, only slower: O(size of both).
//
// Both snapshots must stay live during the iteration (reads panic
// otherwise). Safe from any goroutine.
func DiffTrees[K, V any](old, new *TreeSnapshot[K, V]) iter.Seq[Change[K, V]] {
	return func(yield func(Change[K, V]) bool) { treeDiff(old, new, nil, yield) }
}

// treeDiffStats counts the nodes a diff reads, so tests can assert its cost.
type treeDiffStats struct {
	nodes int
}

// treeDiff walks both trees in key order with one cursor each. A cursor is
// either at the start of a subtree it has not read yet, or at an entry of a
// leaf. When both cursors sit at the start of the same node at the same
// height, every key before it has been consumed on both sides and the node's
// entries are the same on both sides: both cursors skip it. When both sit at
// the start of different nodes, the one higher up reads one level further
// down (both, at equal heights), so two versions that share structure meet
// at the top-most shared node on each path. A cursor at the start of a
// subtree facing a cursor inside a leaf peeks the subtree's first key down
// its left edge without entering it, and enters it only once the other
// side's keys have caught up: it does not give up skipping the subtree just
// because the other side has smaller keys to emit first. If the cursors get
// out of step (one entered a subtree the other reaches whole later), they
// meet again at the next node boundary they share, at the cost of one leaf
// compared entry by entry.
func treeDiff[K, V any](old, new *TreeSnapshot[K, V], st *treeDiffStats, yield func(Change[K, V]) bool) {
	compare, equal := new.v.compare, new.v.equal
	a := newTreeCursor(&old.v, st)
	b := newTreeCursor(&new.v, st)
	for {
		old.capture.mustRead()
		new.capture.mustRead()
		switch {
		case a.done() && b.done():
			return
		case a.done():
			if b.leaf == nil {
				b.expand()
				continue
			}
			if !yield(Change[K, V]{Kind: Added, Key: b.key(), New: b.val()}) {
				return
			}
			b.next()
		case b.done():
			if a.leaf == nil {
				a.expand()
				continue
			}
			if !yield(Change[K, V]{Kind: Removed, Key: a.key(), Old: a.val()}) {
				return
			}
			a.next()
		case a.leaf == nil && b.leaf == nil:
			if a.h == b.h && a.at == b.at {
				a.advance()
				b.advance()
				continue
			}
			ha, hb := a.h, b.h
			if ha >= hb {
				a.expand()
			}
			if hb >= ha {
				b.expand()
			}
		case a.leaf == nil:
			if compare(a.first(), b.key()) <= 0 {
				a.expand()
				continue
			}
			if !yield(Change[K, V]{Kind: Added, Key: b.key(), New: b.val()}) {
				return
			}
			b.next()
		case b.leaf == nil:
			if compare(a.key(), b.first()) >= 0 {
				b.expand()
				continue
			}
			if !yield(Change[K, V]{Kind: Removed, Key: a.key(), Old: a.val()}) {
				return
			}
			a.next()
		default:
			switch c := compare(a.key(), b.key()); {
			case c < 0:
				if !yield(Change[K, V]{Kind: Removed, Key: a.key(), Old: a.val()}) {
					return
				}
				a.next()
			case c > 0:
				if !yield(Change[K, V]{Kind: Added, Key: b.key(), New: b.val()}) {
					return
				}
				b.next()
			default:
				if ov, nv := a.val(), b.val(); !equal(ov, nv) {
					if !yield(Change[K, V]{Kind: Changed, Key: a.key(), Old: ov, New: nv}) {
						return
					}
				}
				a.next()
				b.next()
			}
		}
	}
}

// treeCursor walks one tree in key order for treeDiff. It is in one of
// three states: at the start of the unread subtree at (height h), inside
// leaf at entry i, or done.
type treeCursor[K, V any] struct {
	stack []treeFrame[K, V] // the branches above the position, root first
	rootH int
	at    treeRef[K, V]
	h     int
	leaf  *treeLeaf[K, V]
	i     int
	// The first key of at, once peeked. Entering at does not change it.
	firstKey K
	hasFirst bool
	stats    *treeDiffStats
}

// treeFrame is a branch on a cursor's path and the child being visited.
type treeFrame[K, V any] struct {
	b *treeBranch[K, V]
	i int
}

func newTreeCursor[K, V any](v *treeVersion[K, V], st *treeDiffStats) *treeCursor[K, V] {
	return &treeCursor[K, V]{
		stack: make([]treeFrame[K, V], 0, v.height),
		rootH: v.height,
		at:    v.root,
		h:     v.height,
		stats: st,
	}
}

func (c *treeCursor[K, V]) done() bool { return c.leaf == nil && c.at.isZero() }
func (c *treeCursor[K, V]) key() K     { return c.leaf.keys[c.i] }
func (c *treeCursor[K, V]) val() V     { return c.leaf.vals[c.i] }

func (c *treeCursor[K, V]) visit() {
	if c.stats != nil {
		c.stats.nodes++
	}
}

// first returns the first key of the unread subtree at.
func (c *treeCursor[K, V]) first() K {
	if !c.hasFirst {
		r := c.at
		for h := c.h; h > 0; h-- {
			c.visit()
			r = r.branch.kids[0]
		}
		c.visit()
		c.firstKey, c.hasFirst = r.leaf.keys[0], true
	}
	return c.firstKey
}

// expand enters the unread subtree at: its first child becomes the unread
// subtree, or, for a leaf, the cursor moves to its first entry.
func (c *treeCursor[K, V]) expand() {
	c.visit()
	if c.h == 0 {
		c.leaf, c.i, c.at = c.at.leaf, 0, treeRef[K, V]{}
		return
	}
	b := c.at.branch
	c.stack = append(c.stack, treeFrame[K, V]{b: b})
	c.at, c.h = b.kids[0], c.h-1
}

// next moves to the next entry, leaving the leaf after its last one.
func (c *treeCursor[K, V]) next() {
	c.i++
	if c.i == c.leaf.n {
		c.advance()
	}
}

// advance moves past the current subtree (unread, or the leaf being read) to
// the start of the next one in key order.
func (c *treeCursor[K, V]) advance() {
	c.at, c.leaf, c.hasFirst = treeRef[K, V]{}, nil, false
	var zero K
	c.firstKey = zero
	for n := len(c.stack); n > 0; n = len(c.stack) {
		f := &c.stack[n-1]
		f.i++
		if f.i < f.b.n {
			c.at, c.h = f.b.kids[f.i], c.rootH-n
			return
		}
		c.stack = c.stack[:n-1]
	}
}
