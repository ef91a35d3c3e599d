package cow

import (
	"iter"
	"unsafe"

	"github.com/cowstate/cowstate/internal/invariants"
)

// Entry is a key and its value, as returned by Tree.PopMinUntil.
type Entry[K, V any] struct {
	Key K
	Val V
}

// Tree is a persistent copy-on-write B+tree: a sorted map from K to V whose
// versions can be captured in O(1) (Snapshot, or Owner.Capture and View) and
// compared in time proportional to what changed (DiffTrees).
//
// A tree belongs to its Owner's writer goroutine: every method of Tree,
// including the read-only ones, must be called from that goroutine. Readers on
// other goroutines use a TreeSnapshot. With no live capture the tree is
// mutated in place like an ordinary B+tree; while a capture is live, a write
// copies the nodes on its path that the capture can see, once per node and
// capture (see the ownership invariant in tree_node.go).
//
// Keys are ordered by the compare function given to NewTree; values are
// never mutated by the tree.
type Tree[K, V any] struct {
	treeVersion[K, V]
	owner *Owner
	// Node widths: treeLeafWidth and treeBranchWidth, except in tests that
	// want deep trees from few keys.
	leafMax, branchMax int
	checks             invariants.Budget // when verify runs Check (-race, invariants tag)
}

// treeVersion is what a tree and its snapshots have in common: one version
// of the tree and its read paths.
type treeVersion[K, V any] struct {
	root    treeRef[K, V] // zero when the tree is empty
	height  int           // levels above the leaves: 0 when the root is a leaf
	len     int
	compare func(a, b K) int
	equal   func(a, b V) bool
}

// far reports whether the version's keys are too many bytes to stay in a
// core's cache (treeFarBytes), so that each node a search reads is likely
// a miss: its searches then prefetch each node's keys before probing them.
// A tree of 1M timers (BenchmarkTimers): 828-960 -> 697-718 ms to register
// and fire them all; in cache, at 10K, the prefetches cost 7%, so a
// smaller tree goes without (decision 0049).
func (v *treeVersion[K, V]) far() bool {
	var k K
	return uintptr(v.len)*unsafe.Sizeof(k) >= treeFarBytes
}

// treeFarBytes is the size of a second-level cache on the machines the
// trees are tuned for (1 MB a core on the AMD EPYC VM).
const treeFarBytes = 1 << 20

// NewTree returns an empty tree owned by owner. compare orders keys: it
// returns a negative number, zero or a positive number as a < b, a == b or
// a > b, consistently (a total order, as cmp.Compare gives);
// equal reports whether two values are equal, so that a write of an equal
// value changes nothing, copies nothing and shows in no diff (use
// Equal[V] for comparable values). compare must be non-nil; equal may be
// nil for a V with no pointers and no padding, whose values then compare
// by their bytes (BytesEqual). O(1).
func NewTree[K, V any](owner *Owner, compare func(a, b K) int, equal func(a, b V) bool) *Tree[K, V] {
	return newTreeWidths(owner, compare, equal, treeLeafWidth, treeBranchWidth)
}

// newTreeWidths is NewTree with smaller node widths, for tests.
func newTreeWidths[K, V any](owner *Owner, compare func(a, b K) int, equal func(a, b V) bool, leafMax, branchMax int) *Tree[K, V] {
	switch {
	case owner == nil:
		panic("cow: NewTree: nil owner")
	case compare == nil:
		panic("cow: NewTree: nil compare")
	case leafMax < 4 || leafMax > treeLeafWidth || branchMax < 4 || branchMax > treeBranchWidth:
		panic("cow: NewTree: bad node widths")
	}
	equal, _, ok := valueEquality(equal)
	if !ok {
		panic("cow: NewTree: a nil equal needs a value type with no pointers and no padding")
	}
	return &Tree[K, V]{
		treeVersion: treeVersion[K, V]{compare: compare, equal: equal},
		owner:       owner,
		leafMax:     leafMax,
		branchMax:   branchMax,
	}
}

// Owner returns the tree's owner. Safe from any goroutine.
func (t *Tree[K, V]) Owner() *Owner { return t.owner }

// Len returns the number of entries. O(1). Writer goroutine only.
func (t *Tree[K, V]) Len() int { return t.len }

// Get returns the value of k and whether it is present. O(log n). Writer
// goroutine only.
func (t *Tree[K, V]) Get(k K) (V, bool) { return t.get(k) }

// Min returns the smallest key and its value; ok is false if the tree is
// empty. O(log n). Writer goroutine only.
func (t *Tree[K, V]) Min() (k K, v V, ok bool) { return t.edge(false) }

// Max returns the largest key and its value; ok is false if the tree is
// empty. O(log n). Writer goroutine only.
func (t *Tree[K, V]) Max() (k K, v V, ok bool) { return t.edge(true) }

// All yields every entry in ascending key order. O(n) for the whole
// sequence. Writer goroutine only. Writing the tree during the iteration is
// memory-safe but may make it miss or repeat entries; iterate a snapshot to
// write while iterating.
func (t *Tree[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { t.ascend(nil, nil, yield) }
}

// Ascend yields the entries with keys >= from in ascending key order, under
// the same rules as All. O(log n) to start, then O(1) amortized per entry.
func (t *Tree[K, V]) Ascend(from K) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { t.ascend(&from, nil, yield) }
}

// treeSet carries one Set down the tree and its outcome back up.
type treeSet[K, V any] struct {
	key      K
	val      V
	replaced bool // the key was present
	noop     bool // ... with an equal value: nothing was written
	// A node that split on the way up leaves its new right sibling here, and
	// the separator between the two, for its parent to insert.
	sep   K
	right treeRef[K, V]
}

// Set sets the value of k to v and reports whether k was present. If k was
// present with a value equal to v (by the equal function), Set writes
// nothing: no node is copied or allocated, and snapshots and diffs see no
// change. O(log n); while a capture is live, the first write to a path
// copies its nodes. Writer goroutine only.
func (t *Tree[K, V]) Set(k K, v V) (replaced bool) {
	t.owner.beginWrite() // endWrite before each return (see Map.SetHashed)
	if t.root.isZero() {
		l := &treeLeaf[K, V]{epoch: t.owner.epoch, n: 1}
		l.keys[0], l.vals[0] = k, v
		t.root, t.height, t.len = treeRef[K, V]{leaf: l}, 0, 1
		t.owner.wrote()
		t.verify("Set")
		t.owner.endWrite()
		return false
	}
	op := treeSet[K, V]{key: k, val: v}
	root := t.setIn(t.root, t.height, &op)
	if op.noop {
		t.owner.endWrite()
		return true
	}
	if !op.right.isZero() {
		b := &treeBranch[K, V]{epoch: t.owner.epoch, n: 2}
		b.keys[0], b.kids[0], b.kids[1] = op.sep, root, op.right
		root = treeRef[K, V]{branch: b}
		t.height++
	}
	t.root = root
	if !op.replaced {
		t.len++
	}
	t.owner.wrote()
	t.verify("Set")
	t.owner.endWrite()
	return op.replaced
}

// setIn applies op to the subtree r at height h and returns the subtree's
// new root (r itself unless r had to be copied).
func (t *Tree[K, V]) setIn(r treeRef[K, V], h int, op *treeSet[K, V]) treeRef[K, V] {
	if h == 0 {
		return treeRef[K, V]{leaf: t.setLeaf(r.leaf, op)}
	}
	b := r.branch
	if t.far() {
		b.prefetchKeys()
	}
	i := b.index(op.key, t.compare)
	old := b.kids[i]
	kid := t.setIn(old, h-1, op)
	if kid == old && op.right.isZero() {
		return r // nothing written, or written in place below
	}
	b = t.ownBranch(b)
	b.kids[i] = kid
	if !op.right.isZero() {
		sep, right := op.sep, op.right
		op.right = treeRef[K, V]{}
		b.insertKid(i, sep, right)
		if b.n > t.branchMax {
			var nb *treeBranch[K, V]
			op.sep, nb = t.splitBranch(b)
			op.right = treeRef[K, V]{branch: nb}
		}
	}
	return treeRef[K, V]{branch: b}
}

func (t *Tree[K, V]) setLeaf(l *treeLeaf[K, V], op *treeSet[K, V]) *treeLeaf[K, V] {
	if t.far() {
		l.prefetchKeys()
	}
	i, found := l.search(op.key, t.compare)
	if found {
		op.replaced = true
		if t.equal(l.vals[i], op.val) {
			op.noop = true
			return l
		}
		l = t.ownLeaf(l)
		l.vals[i] = op.val
		return l
	}
	l = t.ownLeaf(l)
	l.insert(i, op.key, op.val)
	if l.n > t.leafMax {
		r := t.splitLeaf(l)
		op.sep, op.right = r.keys[0], treeRef[K, V]{leaf: r}
	}
	return l
}

// treeRunKind says which entries a treeRun removes.
type treeRunKind uint8

const (
	treeRunKey   treeRunKind = iota // the entry with key lo, if any
	treeRunRange                    // the entries with keys in [lo, hi)
	treeRunMin                      // the max smallest entries, only keys <= hi if hasHi
)

// treeRun carries one removal down the tree and its outcome back up. Every
// removal removes a run of consecutive entries of one leaf per descent, then
// rebalances on the way up exactly as a single-key delete does; a run that
// spans leaves takes one descent per leaf (see removeRun).
type treeRun[K, V any] struct {
	kind    treeRunKind
	lo, hi  K
	hasHi   bool
	max     int           // treeRunMin: entries still to remove
	collect bool          // append the removed entries to dst
	dst     []Entry[K, V] //
	removed int           // entries removed so far
	key     K             // the last entry removed
	val     V             //
	next    K             // set on the way down: the separator right of the current leaf...
	hasNext bool          // ... if there is one
	more    bool          // the run reached the end of its leaf and may go on in the next
}

// Delete removes k and returns the value it had; ok is false, and nothing is
// written, if k was absent. O(log n). Writer goroutine only.
func (t *Tree[K, V]) Delete(k K) (v V, ok bool) {
	op := treeRun[K, V]{kind: treeRunKey, lo: k}
	if !t.removeRun(&op, "Delete") {
		return v, false
	}
	return op.val, true
}

// DeleteMin removes the smallest key and returns it with its value; ok is
// false if the tree is empty. O(log n). Writer goroutine only.
func (t *Tree[K, V]) DeleteMin() (k K, v V, ok bool) {
	op := treeRun[K, V]{kind: treeRunMin, max: 1}
	if !t.removeRun(&op, "DeleteMin") {
		return k, v, false
	}
	return op.key, op.val, true
}

// PopMinUntil removes up to max entries with keys <= bound, smallest first,
// appends them to dst in ascending key order and returns the extended slice.
// It is how a timer queue fires: PopMinUntil(now, batch, buf[:0]). If no key
// is <= bound (or max <= 0) it writes nothing. Cost O(log n) per leaf it
// empties, plus O(1) per entry: entries are taken a leaf at a time. Writer
// goroutine only.
func (t *Tree[K, V]) PopMinUntil(bound K, max int, dst []Entry[K, V]) []Entry[K, V] {
	if max <= 0 {
		return dst
	}
	op := treeRun[K, V]{kind: treeRunMin, hi: bound, hasHi: true, max: max, collect: true, dst: dst}
	t.removeRun(&op, "PopMinUntil")
	return op.dst
}

// DeleteRange removes every key in [lo, hi) and returns how many it removed.
// If there is none (or lo >= hi) it writes nothing. Cost O(log n) per leaf
// it touches, plus O(1) per entry. Writer goroutine only.
func (t *Tree[K, V]) DeleteRange(lo, hi K) int {
	if t.compare(lo, hi) >= 0 {
		return 0
	}
	op := treeRun[K, V]{kind: treeRunRange, lo: lo, hi: hi}
	t.removeRun(&op, "DeleteRange")
	return op.removed
}

// removeRun runs op to completion, one leaf per descent, and reports whether
// it removed anything. Each descent leaves a valid tree, so a run spanning
// many leaves needs no special rebalancing; the descents after the first
// find their path already owned by the current epoch and copy nothing.
func (t *Tree[K, V]) removeRun(op *treeRun[K, V], name string) bool {
	t.owner.beginWrite() // endWrite before each return (see Map.SetHashed)
	for !t.root.isZero() {
		op.more, op.hasNext = false, false
		root, changed := t.removeIn(t.root, t.height, op)
		if changed {
			t.root = root
			t.collapseRoot()
		}
		if !op.more {
			break
		}
		if op.kind == treeRunRange {
			// Every key left in [lo, hi) is >= the separator right of the
			// leaf just done; a stale separator may also have sent this
			// descent to a leaf whose keys are all < lo.
			if t.compare(op.next, op.hi) >= 0 {
				break
			}
			op.lo = op.next
		}
	}
	if op.removed == 0 {
		t.owner.endWrite()
		return false
	}
	t.len -= op.removed
	t.owner.wrote()
	t.verify(name)
	t.owner.endWrite()
	return true
}

// removeIn applies one descent of op to the subtree r at height h. It
// returns the subtree's new root and whether anything in it changed; the
// new root may be underfull, which the caller fixes, and is zero if the
// subtree was a leaf and is now empty.
func (t *Tree[K, V]) removeIn(r treeRef[K, V], h int, op *treeRun[K, V]) (treeRef[K, V], bool) {
	if h == 0 {
		l, changed := t.removeLeaf(r.leaf, op)
		return treeRef[K, V]{leaf: l}, changed // zero if the leaf was emptied
	}
	b := r.branch
	i := 0
	if op.kind != treeRunMin {
		if t.far() {
			b.prefetchKeys()
		}
		i = b.index(op.lo, t.compare)
	}
	if i < b.n-1 {
		op.next, op.hasNext = b.keys[i], true
	}
	old := b.kids[i]
	kid, changed := t.removeIn(old, h-1, op)
	if !changed {
		return r, false
	}
	if kid.isZero() {
		b = t.ownBranch(b)
		b.removeKid(i)
		return treeRef[K, V]{branch: b}, true
	}
	underfull := t.underfull(kid, h-1)
	if kid == old && !underfull {
		return r, true // written in place below, nothing to fix here
	}
	b = t.ownBranch(b)
	b.kids[i] = kid
	if underfull {
		t.rebalance(b, h, i)
	}
	return treeRef[K, V]{branch: b}, true
}

func (t *Tree[K, V]) removeLeaf(l *treeLeaf[K, V], op *treeRun[K, V]) (*treeLeaf[K, V], bool) {
	var p, q int // remove l's entries [p, q)
	switch op.kind {
	case treeRunKey:
		if t.far() {
			l.prefetchKeys()
		}
		i, found := l.search(op.lo, t.compare)
		if !found {
			return l, false
		}
		p, q = i, i+1
	case treeRunRange:
		p = l.lower(0, op.lo, t.compare)
		q = l.lower(p, op.hi, t.compare)
		op.more = q == l.n && op.hasNext
	case treeRunMin:
		q = min(l.n, op.max)
		if op.hasHi {
			q = min(q, l.upper(0, op.hi, t.compare))
		}
		op.max -= q
		op.more = q == l.n && op.hasNext && op.max > 0
	}
	if p == q {
		return l, false
	}
	if op.collect {
		for i := p; i < q; i++ {
			op.dst = append(op.dst, Entry[K, V]{Key: l.keys[i], Val: l.vals[i]})
		}
	}
	op.key, op.val = l.keys[q-1], l.vals[q-1]
	op.removed += q - p
	if p == 0 && q == l.n {
		return nil, true // emptied: the parent drops it, no need to copy it
	}
	l = t.ownLeaf(l)
	l.remove(p, q)
	return l, true
}

// collapseRoot restores the root after a removal: a root branch left with one
// child is replaced by that child. (An emptied root leaf is already zero.)
func (t *Tree[K, V]) collapseRoot() {
	for t.height > 0 && t.root.branch.n == 1 {
		t.root = t.root.branch.kids[0]
		t.height--
	}
}

// verify runs Check after a mutation: after every one under the
// invariants build tag, on a Budget under -race.
func (t *Tree[K, V]) verify(op string) {
	if invariants.Enabled && t.checks.Due(t.len) {
		if err := t.Check(); err != nil {
			panic("cow: Tree invariant broken after " + op + ": " + err.Error())
		}
	}
}

// get returns the value of k in this version.
func (v *treeVersion[K, V]) get(k K) (val V, ok bool) {
	r := v.root
	if r.isZero() {
		return val, false
	}
	far := v.far()
	for h := v.height; h > 0; h-- {
		b := r.branch
		if far {
			b.prefetchKeys()
		}
		r = b.kids[b.index(k, v.compare)]
	}
	l := r.leaf
	if far {
		l.prefetchKeys()
	}
	if i, found := l.search(k, v.compare); found {
		return l.vals[i], true
	}
	return val, false
}

// edge returns the smallest entry, or the largest if last.
func (v *treeVersion[K, V]) edge(last bool) (k K, val V, ok bool) {
	r := v.root
	if r.isZero() {
		return k, val, false
	}
	for h := v.height; h > 0; h-- {
		b := r.branch
		if last {
			r = b.kids[b.n-1]
		} else {
			r = b.kids[0]
		}
	}
	l := r.leaf
	i := 0
	if last {
		i = l.n - 1
	}
	return l.keys[i], l.vals[i], true
}

// ascend yields the entries with keys >= *from (all if from is nil) in
// order. If c is not nil, it checks c is live before reading each entry.
func (v *treeVersion[K, V]) ascend(from *K, c *Capture, yield func(K, V) bool) {
	if c != nil {
		c.mustRead()
	}
	if !v.root.isZero() {
		treeAscend(v.root, v.height, from, v.compare, c, yield)
	}
}

func treeAscend[K, V any](r treeRef[K, V], h int, from *K, compare func(a, b K) int, c *Capture, yield func(K, V) bool) bool {
	if h == 0 {
		l := r.leaf
		i := 0
		if from != nil {
			i, _ = l.search(*from, compare)
		}
		for ; i < l.n; i++ {
			if c != nil {
				c.mustRead()
			}
			if !yield(l.keys[i], l.vals[i]) {
				return false
			}
		}
		return true
	}
	b := r.branch
	i := 0
	if from != nil {
		i = b.index(*from, compare)
	}
	for ; i < b.n; i++ {
		if !treeAscend(b.kids[i], h-1, from, compare, c, yield) {
			return false
		}
		from = nil
	}
	return true
}
