package cow

import "iter"

// This file diffs versions nested inside other structures (MapRoot,
// TreeRoot), which carry no capture of their own.

// rootReads stands for the capture of nested roots: the caller keeps the
// captures the roots were read from live for the whole diff.
var rootReads = &Capture{}

// DiffRoots yields the changes that turn the version old into new, like
// DiffMaps, for two roots of maps with m's hash and equality (m serves only
// as their description; it is neither read nor written). Both roots must be
// read from captures that stay live during the iteration, or be roots no
// writer can change. Cost as DiffMaps. Safe from any goroutine.
func (m *Map[K, V]) DiffRoots(old, new MapRoot[K, V]) iter.Seq[Change[K, V]] {
	a := &MapSnapshot[K, V]{root: old.slot, len: old.len, hash: m.hash, equal: m.equal, capture: rootReads}
	b := &MapSnapshot[K, V]{root: new.slot, len: new.len, hash: m.hash, equal: m.equal, capture: rootReads}
	return DiffMaps(a, b)
}

// DiffRoots yields the changes that turn the version old into new, like
// DiffTrees, for two roots of trees with t's compare and equality (t serves
// only as their description). The same liveness rules as Map.DiffRoots
// apply. Cost as DiffTrees. Safe from any goroutine.
func (t *Tree[K, V]) DiffRoots(old, new TreeRoot[K, V]) iter.Seq[Change[K, V]] {
	version := func(r TreeRoot[K, V]) treeVersion[K, V] {
		return treeVersion[K, V]{root: r.root, height: r.height, len: r.len, compare: t.compare, equal: t.equal}
	}
	a := &TreeSnapshot[K, V]{v: version(old), capture: rootReads, leafMax: t.leafMax, branchMax: t.branchMax}
	b := &TreeSnapshot[K, V]{v: version(new), capture: rootReads, leafMax: t.leafMax, branchMax: t.branchMax}
	return DiffTrees(a, b)
}
