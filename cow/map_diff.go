package cow

import (
	"iter"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// DiffMaps yields the changes that turn old into new: Added for keys only in
// new, Removed for keys only in old, Changed for keys in both whose values
// are not equal (by the maps' equal function). Changes come in ascending hash
// order.
//
// Cost: subtrees the two versions share by pointer are skipped whole, and the
// canonical shape means equal key ranges line up node for node, so for two
// versions of one map k writes apart the cost is O(k * depth), independent
// of the size: of a branch and its copy only the slots written since the
// copy are read, and of a leaf and its copy only the entries between those
// written (leafSame). Unrelated maps (built with the same hash function)
// diff correctly, only slower: O(size).
//
// Both snapshots must stay live during the iteration (reads panic otherwise).
// Safe from any goroutine.
func DiffMaps[K comparable, V any](old, new *MapSnapshot[K, V]) iter.Seq[Change[K, V]] {
	return func(yield func(Change[K, V]) bool) {
		old.capture.mustRead()
		new.capture.mustRead()
		old.mustNotBePassed(0)
		new.mustNotBePassed(0)
		d := mapDiff[K, V]{equal: new.equal, yield: yield, check: func() {
			old.capture.mustRead()
			new.capture.mustRead()
		}}
		d.slots(&old.root, &new.root, 0)
		runtime.KeepAlive(old)
		runtime.KeepAlive(new)
	}
}

// mapDiff carries one diff walk's parameters and counts what it visits.
type mapDiff[K comparable, V any] struct {
	equal   func(a, b V) bool
	yield   func(Change[K, V]) bool
	check   func()
	visited int // node pairs compared (tests assert the cost with it)
	entered int // leaf entries handed to entries (likewise)
	stopped bool
}

func (d *mapDiff[K, V]) emit(c Change[K, V]) bool {
	if d.stopped {
		return false
	}
	if !d.yield(c) {
		d.stopped = true
	}
	return !d.stopped
}

// slots diffs two subtrees at the same depth; false means the consumer
// stopped.
//
// Two versions k writes apart differ along k paths from the root, and in a
// big map the nodes on those paths are cache and TLB misses. Walked depth
// first, the misses of one path come one after the other: a branch pair must
// arrive before its differing kids are known. So the walk goes breadth
// first: it collects the differing kid pairs of a whole level (of a chunk of
// it, to bound the buffers) in hash order, and before comparing a run of
// pairs it loads every cache line of their nodes in one burst, so the misses
// of many paths overlap. Leaf pairs found at a level are carried down
// unchanged; once a level holds only pairs with a leaf they are merged in
// order, which keeps the changes in ascending hash order.
func (d *mapDiff[K, V]) slots(a, b *mapSlot[K, V], depth int) bool {
	if a.same(b) {
		return true
	}
	if a.meta != metaBranch || b.meta != metaBranch {
		d.visited++
		return d.leaf(a, b)
	}
	bufs := diffBufPool.Get().(*diffBufs)
	defer diffBufPool.Put(bufs)
	root := [1]diffPair{{rawSlot(a), rawSlot(b)}}
	return d.walk(bufs, root[:], 0)
}

// leaf diffs a pair of slots of which at least one is not a branch.
func (d *mapDiff[K, V]) leaf(a, b *mapSlot[K, V]) bool {
	d.check()
	if a.meta != metaBranch && b.meta != metaBranch {
		return d.entries(a.ents(), b.ents())
	}
	// A leaf against a branch: the key set crossed mapLeafMax between the
	// versions. Rare for close versions; flatten and merge.
	return d.entries(a.appendEntries(nil), b.appendEntries(nil))
}

const (
	// diffChunk is the most pairs a level of the breadth-first walk holds:
	// when a level's buffer is full, the walk finishes what it holds before
	// it reads more of the level above. The buffers are at most
	// (mapDepths+1)*diffChunk pairs however much two maps differ.
	diffChunk = 256
	// diffBurstBranches and diffBurstLeaves are how many pairs the walk
	// loads at once before comparing them. Every load that misses holds up
	// the instructions behind it, so loads spread between the compares
	// overlap with few others; loads issued back to back overlap with each
	// other. Measured: the size of a burst hardly matters beyond a few
	// pairs.
	diffBurstBranches = 8
	diffBurstLeaves   = 32
)

// diffSlot is a mapSlot stored without a pointer. The walk's buffers hold
// nodes of the two snapshots, which keep them alive for the whole diff;
// holding them as integers spares the GC from scanning the buffers and the
// walk from write barriers, and a pooled buffer keeps no node alive. The
// walk reads a stored node only before it yields the first change or after
// check() has confirmed that both snapshots are still live.
type diffSlot struct {
	p    uintptr
	meta slotMeta
}

// diffPair is the slots of one position in the two tries.
type diffPair struct{ a, b diffSlot }

// branches reports whether both slots hold a branch.
func (p diffPair) branches() bool { return p.a.meta == metaBranch && p.b.meta == metaBranch }

func rawSlot[K comparable, V any](s *mapSlot[K, V]) diffSlot {
	return *(*diffSlot)(unsafe.Pointer(s))
}

func slotOf[K comparable, V any](s *diffSlot) *mapSlot[K, V] {
	return (*mapSlot[K, V])(unsafe.Pointer(s))
}

// diffBufs holds a buffer per level of the walk, reused across diffs.
type diffBufs struct{ levels [][]diffPair }

var diffBufPool = sync.Pool{New: func() any { return new(diffBufs) }}

func (b *diffBufs) level(i int) []diffPair {
	for len(b.levels) <= i {
		b.levels = append(b.levels, make([]diffPair, 0, diffChunk))
	}
	return b.levels[i][:0]
}

// walk diffs the pairs of items, all at the depth level and in hash order.
func (d *mapDiff[K, V]) walk(bufs *diffBufs, items []diffPair, level int) bool {
	if !slices.ContainsFunc(items, diffPair.branches) {
		return d.leaves(items)
	}
	next := bufs.level(level)
	var sink uint64
	loaded := 0 // the nodes of items[:loaded] have been loaded
	for i := range items {
		if i == loaded {
			loaded = min(len(items), i+diffBurstBranches)
			for j := i; j < loaded; j++ {
				if p := &items[j]; p.branches() {
					sink += touchBranch[K, V](p.a.p) + touchBranch[K, V](p.b.p)
				}
			}
		}
		p := &items[i]
		if !p.branches() {
			next = append(next, *p) // merged in order further down
		} else {
			d.visited++
			ba, bb := slotOf[K, V](&p.a).branch(), slotOf[K, V](&p.b).branch()
			mask, copied := candidates(ba, bb)
			for m := mask; m != 0; m &= m - 1 {
				k := bits.TrailingZeros32(m)
				if ba.kids[k].same(&bb.kids[k]) {
					continue
				}
				kid := diffPair{rawSlot(&ba.kids[k]), rawSlot(&bb.kids[k])}
				if copied != nil && slotOf[K, V](&kid.a).isLeaf() && slotOf[K, V](&kid.b).isLeaf() && !narrowLeaves[K, V](&kid, copied.sameAt(k)) {
					continue
				}
				next = append(next, kid)
			}
		}
		if len(next) > diffChunk-mapFanout && i+1 < len(items) {
			if !d.walk(bufs, next, level+1) {
				return false
			}
			d.check() // that walk may have yielded, and items are read on
			next = next[:0]
		}
	}
	keep(sink)
	return d.walk(bufs, next, level+1)
}

// leaves diffs, in order, pairs of which at least one side is not a branch.
func (d *mapDiff[K, V]) leaves(items []diffPair) bool {
	var sink uint64
	loaded := 0
	for i := range items {
		if i == loaded {
			loaded = min(len(items), i+diffBurstLeaves)
			for j := i; j < loaded; j++ {
				sink += touchLeaf[K, V](&items[j].a) + touchLeaf[K, V](&items[j].b)
			}
		}
		d.visited++
		if !d.leaf(slotOf[K, V](&items[i].a), slotOf[K, V](&items[i].b)) {
			return false
		}
	}
	keep(sink)
	return true
}

// candidates returns the slots of two branches at one place that may
// differ: when one is a copy of the other, only the slots written since the
// copy (reading two or three cache lines instead of eighteen), and the
// copy, whose bounds say what its leaves share with the original's (see
// leafSame); else all slots, and no copy.
func candidates[K comparable, V any](a, b *mapBranch[K, V]) (uint32, *mapBranch[K, V]) {
	switch {
	case b.origin == a.id:
		return b.dirty, b
	case a.origin == b.id:
		return a.dirty, a
	}
	return ^uint32(0), nil
}

// narrowLeaves cuts from a pair of leaves the leading and trailing entries
// that s says the two share, so the diff reads only what lies between:
// typically one entry of each instead of every entry of both, which at 10M
// entries is most of the cache lines a change costs. It reports whether
// anything is left to compare.
func narrowLeaves[K comparable, V any](p *diffPair, s leafSame) bool {
	n := min(slotOf[K, V](&p.a).len(), slotOf[K, V](&p.b).len())
	pre := min(int(s.prefix), n)
	suf := min(int(s.suffix), n-pre)
	size := unsafe.Sizeof(mapEntry[K, V]{})
	for _, x := range [2]*diffSlot{&p.a, &p.b} {
		// A view of the middle of the leaf, without its starts: the diff
		// reads its entries in order and searches none.
		left := slotOf[K, V](x).len() - pre - suf
		x.p += uintptr(pre) * size
		x.meta = rawLeafSlot[K, V](nil, left, left).meta
	}
	return slotOf[K, V](&p.a).isLeaf() || slotOf[K, V](&p.b).isLeaf()
}

// touchSink keeps the loads of the touches from being optimized away.
var touchSink uint64

// keep makes sink, a sum of touched words, look used.
func keep(sink uint64) {
	if sink == 1<<63+1 { // a condition the compiler cannot drop
		touchSink++
	}
}

// touchBranch loads the first cache line of the branch at p and returns a
// word of it.
func touchBranch[K comparable, V any](p uintptr) uint64 {
	// The header line only: it says which slots to read (see candidates),
	// and a pair whose slots must all be compared is read in order, which
	// the hardware prefetches.
	return touchLines(p, 64)
}

// touchLeaf loads a word of every cache line of the entries of the leaf s
// (nothing for a branch or an empty slot).
func touchLeaf[K comparable, V any](s *diffSlot) uint64 {
	leaf := slotOf[K, V](s)
	if !leaf.isLeaf() {
		return 0
	}
	return touchLines(s.p, uintptr(leaf.len())*unsafe.Sizeof(mapEntry[K, V]{}))
}

// touchLines loads a word of every cache line of the size bytes at p (a
// multiple of 8: nodes start with a uint64).
func touchLines(p, size uintptr) uint64 {
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	var sum uint64
	for off := uintptr(0); off < size; off += 64 {
		sum += *(*uint64)(unsafe.Add(base, off))
	}
	return sum + *(*uint64)(unsafe.Add(base, size-8))
}

// entries merges two hash-sorted entry lists. Runs of equal hashes (true
// collisions) are matched key by key.
//
// Two versions of a leaf usually differ in one entry, so the common prefix
// and suffix of bitwise-identical entries are skipped first by comparing
// words (an entry whose bits did not change did not change), instead of
// comparing every entry and calling equal on its value.
func (d *mapDiff[K, V]) entries(x, y []mapEntry[K, V]) bool {
	d.entered += len(x) + len(y)
	p := samePrefix(x, y)
	x, y = x[p:], y[p:]
	q := sameSuffix(x, y)
	x, y = x[:len(x)-q], y[:len(y)-q]
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case j == len(y) || (i < len(x) && x[i].hash < y[j].hash):
			if !d.emit(Change[K, V]{Kind: Removed, Key: x[i].key, Hash: x[i].hash, Old: x[i].val}) {
				return false
			}
			i++
		case i == len(x) || y[j].hash < x[i].hash:
			if !d.emit(Change[K, V]{Kind: Added, Key: y[j].key, Hash: y[j].hash, New: y[j].val}) {
				return false
			}
			j++
		default:
			h := x[i].hash
			ie, je := i, j
			for ie < len(x) && x[ie].hash == h {
				ie++
			}
			for je < len(y) && y[je].hash == h {
				je++
			}
			if !d.run(x[i:ie], y[j:je]) {
				return false
			}
			i, j = ie, je
		}
	}
	return true
}

// run diffs entries that share one hash: almost always one on each side.
func (d *mapDiff[K, V]) run(x, y []mapEntry[K, V]) bool {
	if len(x) == 1 && len(y) == 1 && x[0].key == y[0].key {
		if d.equal(x[0].val, y[0].val) {
			return true
		}
		return d.emit(Change[K, V]{Kind: Changed, Key: x[0].key, Hash: x[0].hash, Old: x[0].val, New: y[0].val})
	}
	for _, ex := range x {
		c := Change[K, V]{Kind: Removed, Key: ex.key, Hash: ex.hash, Old: ex.val}
		for _, ey := range y {
			if ey.key == ex.key {
				if d.equal(ex.val, ey.val) {
					c.Kind = 0
				} else {
					c = Change[K, V]{Kind: Changed, Key: ex.key, Hash: ex.hash, Old: ex.val, New: ey.val}
				}
				break
			}
		}
		if c.Kind != 0 && !d.emit(c) {
			return false
		}
	}
	for _, ey := range y {
		found := false
		for _, ex := range x {
			if ex.key == ey.key {
				found = true
				break
			}
		}
		if !found && !d.emit(Change[K, V]{Kind: Added, Key: ey.key, Hash: ey.hash, New: ey.val}) {
			return false
		}
	}
	return true
}

// entryWords returns the memory of ents as words. An entry starts with its
// uint64 hash, so its size is a whole number of words.
func entryWords[K comparable, V any](ents []mapEntry[K, V]) []uint64 {
	var e mapEntry[K, V]
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(ents))), len(ents)*int(unsafe.Sizeof(e)/8))
}

// samePrefix returns how many leading entries x and y have bitwise
// identical. It compares word by word: a leaf holds at most mapLeafMax
// entries (but for true collisions), and one loop over their words costs
// less than the calls of a binary search over memory compares
// (BenchmarkDiff).
func samePrefix[K comparable, V any](x, y []mapEntry[K, V]) int {
	n := min(len(x), len(y))
	if n == 0 {
		return 0
	}
	xw, yw := entryWords(x[:n]), entryWords(y[:n])
	yw = yw[:len(xw)]
	for i, w := range xw {
		if w != yw[i] {
			return i / (len(xw) / n)
		}
	}
	return n
}

// sameSuffix returns how many trailing entries x and y have bitwise
// identical, comparing word by word as samePrefix does.
func sameSuffix[K comparable, V any](x, y []mapEntry[K, V]) int {
	n := min(len(x), len(y))
	if n == 0 {
		return 0
	}
	xw, yw := entryWords(x[len(x)-n:]), entryWords(y[len(y)-n:])
	yw = yw[:len(xw)]
	for i := len(xw) - 1; i >= 0; i-- {
		if xw[i] != yw[i] {
			return (len(xw) - 1 - i) / (len(xw) / n)
		}
	}
	return n
}
