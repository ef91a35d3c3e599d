package cow

import "iter"

// TreeRoot is one version of a Tree as a plain value: what a structure
// nested inside another one stores (the list state of a key, say). The same
// rules as MapRoot apply: its nodes are written in place only while no live
// capture can see them, by the writer that owns them; two TreeRoots are equal
// (==) when they are the same version; never write one writable root through
// two places.
type TreeRoot[K, V any] struct {
	root   treeRef[K, V]
	height int
	len    int
}

// Root returns the tree's current version as a value. O(1). Writer
// goroutine only.
func (t *Tree[K, V]) Root() TreeRoot[K, V] {
	return TreeRoot[K, V]{root: t.root, height: t.height, len: t.len}
}

// SetRoot makes r the tree's current version, for a Tree used as a cursor
// over roots stored elsewhere (r must come from a tree with the same owner,
// compare and equality). O(1). Writer goroutine only.
func (t *Tree[K, V]) SetRoot(r TreeRoot[K, V]) {
	t.owner.beginWrite()
	t.root, t.height, t.len = r.root, r.height, r.len
	t.owner.wrote()
	t.owner.endWrite()
}

// Len returns the number of entries. O(1).
func (r TreeRoot[K, V]) Len() int { return r.len }

// All yields every entry in key order. Safe from any goroutine on a root
// read from a live capture.
func (r TreeRoot[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if !r.root.isZero() {
			treeAscend(r.root, r.height, nil, nil, nil, yield)
		}
	}
}
