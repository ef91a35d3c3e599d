package cow

import (
	"unsafe"

	"github.com/cowstate/cowstate/internal/prefetch"
)

// Node widths of the B+tree. Each node is one heap object holding fixed-size
// arrays, so copying a node for copy-on-write is one allocation and one
// struct copy, and the garbage collector scans one object per node. Nodes
// fill between half and full, except the root.
//
// 64 and 64: at 1e6 random int64 keys Get and Set are as fast as with
// 32-wide nodes or faster (one level less), iteration is faster, and a Set
// under a snapshot taken every 1000 writes (which copies about one leaf per
// write) costs about the same; 16-wide leaves are slower everywhere and
// 128-wide leaves make every copy twice as big for no gain elsewhere. An
// int64/int64 leaf is 1056 bytes, a branch 1568.
const (
	treeLeafWidth   = 64 // most entries in a leaf
	treeBranchWidth = 64 // most children of a branch
)

// treeRef points at a node: a leaf when the node sits at height 0, a branch
// otherwise. Exactly one field is set; which one is known from the height, so
// no type switch or interface is needed on the search paths. Two refs are
// equal exactly when they point at the same node, which the structural diff
// uses to skip shared subtrees.
type treeRef[K, V any] struct {
	leaf   *treeLeaf[K, V]
	branch *treeBranch[K, V]
}

func (r treeRef[K, V]) isZero() bool { return r.leaf == nil && r.branch == nil }

// # Ownership invariant of tree nodes
//
// Every node records in epoch the owner epoch it was created in. A node with
// owner.writable(epoch) (epoch > H, the newest live capture) is reachable from
// no live capture: the writer mutates it in place. Any other node may be
// shared with a snapshot and is immutable: the writer copies it (the copy is
// stamped with owner.Epoch(), so later writes of the same epoch mutate the
// copy in place) and then points a writable parent at the copy, copying the
// parent first if need be. Hence:
//
//   - a write copies at most the nodes on its path (and the siblings it
//     borrows from or merges with), and none if no capture is live;
//   - a write that changes nothing (Set of an equal value, Delete of an absent
//     key) copies nothing, so every node pointer stays the same;
//   - every node reachable from a capture c has epoch <= c.Epoch(), and no
//     node reachable from a live capture is written, so snapshots can be read
//     from other goroutines without locks.
//
// Slots past n are kept zero, so a removed key or value is not kept alive by
// the node that held it.

// treeLeaf holds between treeLeafMax/2 and treeLeafMax entries in ascending
// key order (a root leaf holds at least one). The arrays have one spare slot:
// an insert into a full leaf lands first, then the leaf splits.
type treeLeaf[K, V any] struct {
	epoch uint64
	n     int
	keys  [treeLeafWidth + 1]K
	vals  [treeLeafWidth + 1]V
}

// treeBranch holds between treeBranchMax/2 and treeBranchMax children (a root
// branch at least two). keys[i] separates kids[i] and kids[i+1]: every key in
// kids[i] is < keys[i] <= every key in kids[i+1]. Separators are bounds, not
// necessarily keys present in the tree (a delete does not update them). The
// arrays have one spare slot for the same reason as treeLeaf's.
type treeBranch[K, V any] struct {
	epoch uint64
	n     int // children
	keys  [treeBranchWidth]K
	kids  [treeBranchWidth + 1]treeRef[K, V]
}

// search returns the index of the first key >= k and whether it equals k.
func (l *treeLeaf[K, V]) search(k K, compare func(a, b K) int) (int, bool) {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compare(l.keys[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < l.n && compare(l.keys[lo], k) == 0
}

// upper returns the index of the first key > k at or after from.
func (l *treeLeaf[K, V]) upper(from int, k K, compare func(a, b K) int) int {
	lo, hi := from, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compare(l.keys[m], k) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// lower returns the index of the first key >= k at or after from.
func (l *treeLeaf[K, V]) lower(from int, k K, compare func(a, b K) int) int {
	lo, hi := from, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compare(l.keys[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// insert puts (k, v) at i; the leaf must have a free slot (the spare one
// counts).
func (l *treeLeaf[K, V]) insert(i int, k K, v V) {
	copy(l.keys[i+1:l.n+1], l.keys[i:l.n])
	copy(l.vals[i+1:l.n+1], l.vals[i:l.n])
	l.keys[i], l.vals[i] = k, v
	l.n++
}

// remove deletes the entries [p, q) and clears the vacated slots.
func (l *treeLeaf[K, V]) remove(p, q int) {
	copy(l.keys[p:], l.keys[q:l.n])
	copy(l.vals[p:], l.vals[q:l.n])
	m := l.n - (q - p)
	clear(l.keys[m:l.n])
	clear(l.vals[m:l.n])
	l.n = m
}

// index returns the child whose key range holds k: the number of separators
// <= k.
func (b *treeBranch[K, V]) index(k K, compare func(a, b K) int) int {
	lo, hi := 0, b.n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compare(b.keys[m], k) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// prefetchKeys asks for the lines of the leaf's keys with prefetch
// instructions, for a search of a tree too large for the core's cache
// (treeVersion.far): the search's probes, each on another line, then wait
// for one miss together rather than for one miss each.
func (l *treeLeaf[K, V]) prefetchKeys() {
	prefetch.Range(unsafe.Pointer(&l.keys[0]), uintptr(l.n)*unsafe.Sizeof(l.keys[0]))
}

// prefetchKeys is treeLeaf.prefetchKeys for a branch's separators.
func (b *treeBranch[K, V]) prefetchKeys() {
	prefetch.Range(unsafe.Pointer(&b.keys[0]), uintptr(b.n-1)*unsafe.Sizeof(b.keys[0]))
}

// insertKid puts kid right after kids[i], separated from it by sep; the
// branch must have a free slot (the spare one counts).
func (b *treeBranch[K, V]) insertKid(i int, sep K, kid treeRef[K, V]) {
	copy(b.keys[i+1:b.n], b.keys[i:b.n-1])
	copy(b.kids[i+2:b.n+1], b.kids[i+1:b.n])
	b.keys[i], b.kids[i+1] = sep, kid
	b.n++
}

// removeKid deletes kids[i] and one separator next to it (the one on its
// left, or the first if i is 0). Both possible separators bound the
// neighbours correctly, so either is fine.
func (b *treeBranch[K, V]) removeKid(i int) {
	k := max(i-1, 0)
	copy(b.keys[k:], b.keys[k+1:b.n-1])
	copy(b.kids[i:], b.kids[i+1:b.n])
	b.n--
	clear(b.keys[b.n-1 : b.n])
	b.kids[b.n] = treeRef[K, V]{}
}

// ownLeaf returns l if the writer may mutate it in place, else a copy of it
// stamped with the current epoch (see the ownership invariant above).
func (t *Tree[K, V]) ownLeaf(l *treeLeaf[K, V]) *treeLeaf[K, V] {
	if t.owner.writable(l.epoch) {
		return l
	}
	c := new(treeLeaf[K, V])
	*c = *l
	c.epoch = t.owner.epoch
	return c
}

// ownBranch is ownLeaf for branches.
func (t *Tree[K, V]) ownBranch(b *treeBranch[K, V]) *treeBranch[K, V] {
	if t.owner.writable(b.epoch) {
		return b
	}
	c := new(treeBranch[K, V])
	*c = *b
	c.epoch = t.owner.epoch
	return c
}

// splitLeaf moves the upper half of l, which holds one entry too many, into
// a new leaf and returns it. l must be writable.
func (t *Tree[K, V]) splitLeaf(l *treeLeaf[K, V]) *treeLeaf[K, V] {
	m := l.n / 2
	r := &treeLeaf[K, V]{epoch: t.owner.epoch, n: l.n - m}
	copy(r.keys[:], l.keys[m:l.n])
	copy(r.vals[:], l.vals[m:l.n])
	clear(l.keys[m:l.n])
	clear(l.vals[m:l.n])
	l.n = m
	return r
}

// splitBranch moves the upper half of b, which holds one child too many,
// into a new branch; it returns the separator between the halves and the new
// branch. b must be writable.
func (t *Tree[K, V]) splitBranch(b *treeBranch[K, V]) (K, *treeBranch[K, V]) {
	m := b.n / 2 // children kept in b
	r := &treeBranch[K, V]{epoch: t.owner.epoch, n: b.n - m}
	sep := b.keys[m-1]
	copy(r.keys[:], b.keys[m:b.n-1])
	copy(r.kids[:], b.kids[m:b.n])
	clear(b.keys[m-1 : b.n-1])
	clear(b.kids[m:b.n])
	b.n = m
	return sep, r
}

// underfull reports whether the node r at height h holds fewer entries or
// children than a non-root node may.
func (t *Tree[K, V]) underfull(r treeRef[K, V], h int) bool {
	if h == 0 {
		return r.leaf.n < t.leafMax/2
	}
	return r.branch.n < t.branchMax/2
}

// rebalance fixes the underfull child i of b, which sits at height h (b's
// children at h-1), by merging it with a sibling if both fit in one node,
// else sharing the entries of both evenly. b must be writable and have at least two children; the sibling is
// valid (at least half full), so every outcome is at least half full. b may
// become underfull in turn: its parent sees to that.
func (t *Tree[K, V]) rebalance(b *treeBranch[K, V], h, i int) {
	li := i // the pair to fix is kids[li] and kids[li+1]
	if i == b.n-1 {
		li = i - 1
	}
	if h == 1 {
		t.rebalanceLeaves(b, li)
	} else {
		t.rebalanceBranches(b, li)
	}
}

func (t *Tree[K, V]) rebalanceLeaves(b *treeBranch[K, V], li int) {
	l, r := b.kids[li].leaf, b.kids[li+1].leaf
	if l.n+r.n <= t.leafMax {
		// Merge r into l; r is only read, so it is not copied.
		l = t.ownLeaf(l)
		copy(l.keys[l.n:], r.keys[:r.n])
		copy(l.vals[l.n:], r.vals[:r.n])
		l.n += r.n
		b.kids[li].leaf = l
		b.removeKid(li + 1)
		return
	}
	l, r = t.ownLeaf(l), t.ownLeaf(r)
	b.kids[li].leaf, b.kids[li+1].leaf = l, r
	half := (l.n + r.n) / 2
	if l.n < half {
		m := half - l.n // move r's first m entries to l's end
		copy(l.keys[l.n:], r.keys[:m])
		copy(l.vals[l.n:], r.vals[:m])
		l.n += m
		r.remove(0, m)
	} else {
		m := l.n - half // move l's last m entries to r's front
		copy(r.keys[m:], r.keys[:r.n])
		copy(r.vals[m:], r.vals[:r.n])
		copy(r.keys[:m], l.keys[half:l.n])
		copy(r.vals[:m], l.vals[half:l.n])
		r.n += m
		l.remove(half, l.n)
	}
	b.keys[li] = r.keys[0]
}

func (t *Tree[K, V]) rebalanceBranches(b *treeBranch[K, V], li int) {
	l, r := b.kids[li].branch, b.kids[li+1].branch
	sep := b.keys[li]
	if l.n+r.n <= t.branchMax {
		l = t.ownBranch(l)
		l.keys[l.n-1] = sep
		copy(l.keys[l.n:], r.keys[:r.n-1])
		copy(l.kids[l.n:], r.kids[:r.n])
		l.n += r.n
		b.kids[li].branch = l
		b.removeKid(li + 1)
		return
	}
	l, r = t.ownBranch(l), t.ownBranch(r)
	b.kids[li].branch, b.kids[li+1].branch = l, r
	half := (l.n + r.n) / 2
	if l.n < half {
		// Rotate r's first m children through the parent to l's end.
		m := half - l.n
		l.keys[l.n-1] = sep
		copy(l.keys[l.n:], r.keys[:m-1])
		copy(l.kids[l.n:], r.kids[:m])
		l.n += m
		b.keys[li] = r.keys[m-1]
		copy(r.keys[:], r.keys[m:r.n-1])
		copy(r.kids[:], r.kids[m:r.n])
		clear(r.keys[r.n-1-m : r.n-1])
		clear(r.kids[r.n-m : r.n])
		r.n -= m
	} else {
		// Rotate l's last m children through the parent to r's front.
		m := l.n - half
		copy(r.keys[m:], r.keys[:r.n-1])
		copy(r.kids[m:], r.kids[:r.n])
		copy(r.keys[:m-1], l.keys[half:l.n-1])
		copy(r.kids[:m], l.kids[half:l.n])
		r.keys[m-1] = sep
		r.n += m
		b.keys[li] = l.keys[half-1]
		clear(l.keys[half-1 : l.n-1])
		clear(l.kids[half:l.n])
		l.n = half
	}
}
