package cow

import (
	"iter"
	"unsafe"
)

// DiffMaps yields the changes that turn old into new: Added for keys only in
// new, Removed for keys only in old, Changed for keys in both whose values
// are not equal (by the maps' equal function). Changes come in ascending hash
// order.
//
// Cost: subtrees the two versions share by pointer are skipped whole, and the
// canonical shape means equal key ranges line up node for node, so for two
// versions of one map k writes apart the cost is O(k * (depth*mapFanout +
// mapLeafMax)), independent of the size. Unrelated maps (built with the same
// hash function) diff correctly, only slower: O(size).
//
// Both snapshots must stay live during the iteration (reads panic otherwise).
// Safe from any goroutine.
func DiffMaps[K comparable, V any](old, new *MapSnapshot[K, V]) iter.Seq[Change[K, V]] {
	return func(yield func(Change[K, V]) bool) {
		old.capture.mustRead()
		new.capture.mustRead()
		d := mapDiff[K, V]{equal: new.equal, yield: yield, check: func() {
			old.capture.mustRead()
			new.capture.mustRead()
		}}
		d.slots(&old.root, &new.root, 0)
	}
}

// mapDiff carries one diff walk's parameters and counts what it visits.
type mapDiff[K comparable, V any] struct {
	equal   func(a, b V) bool
	yield   func(Change[K, V]) bool
	check   func()
	visited int // node pairs compared (tests assert the cost with it)
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
// stopped. For a pair of branches it first finds every kid pair that
// differs and touches their nodes, then descends into them: the cache misses
// of siblings overlap instead of following each other.
func (d *mapDiff[K, V]) slots(a, b *mapSlot[K, V], depth int) bool {
	if a.same(b) {
		return true
	}
	d.visited++
	switch {
	case a.n == branchMark && b.n == branchMark:
		ba, bb := a.branch(), b.branch()
		var differ [mapFanout]uint8
		nd := 0
		for i := range ba.kids {
			if !ba.kids[i].same(&bb.kids[i]) {
				touch(&ba.kids[i])
				touch(&bb.kids[i])
				differ[nd] = uint8(i)
				nd++
			}
		}
		for _, i := range differ[:nd] {
			if !d.slots(&ba.kids[i], &bb.kids[i], depth+1) {
				return false
			}
		}
		return true
	case a.n != branchMark && b.n != branchMark:
		d.check()
		return d.entries(a.ents(), b.ents())
	default:
		// A leaf against a branch: the key set crossed mapLeafMax between
		// the versions. Rare for close versions; flatten and merge.
		d.check()
		return d.entries(a.appendEntries(nil), b.appendEntries(nil))
	}
}

// touchSink keeps touch's loads from being optimized away.
var touchSink uint64

// touch loads the first word of the node of s (a branch and a leaf's first
// entry both start with a uint64) so that it is in cache when the walk gets
// there.
func touch[K comparable, V any](s *mapSlot[K, V]) {
	if s.p != nil && *(*uint64)(s.p) == 1<<63+1 { // a condition the compiler cannot drop
		touchSink++
	}
}

// entries merges two hash-sorted entry lists. Runs of equal hashes (true
// collisions) are matched key by key.
//
// Two versions of a leaf usually differ in one entry, so the common prefix
// and suffix of bitwise-identical entries are skipped first with a few
// memory compares (an entry whose bits did not change did not change),
// instead of comparing every entry and calling equal on its value.
func (d *mapDiff[K, V]) entries(x, y []mapEntry[K, V]) bool {
	p := samePrefix(x, y)
	x, y = x[p:], y[p:]
	q := sameSuffix(x, y)
	x, y = x[:len(x)-q], y[:len(y)-q]
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case j == len(y) || (i < len(x) && x[i].hash < y[j].hash):
			if !d.emit(Change[K, V]{Kind: Removed, Key: x[i].key, Old: x[i].val}) {
				return false
			}
			i++
		case i == len(x) || y[j].hash < x[i].hash:
			if !d.emit(Change[K, V]{Kind: Added, Key: y[j].key, New: y[j].val}) {
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
		return d.emit(Change[K, V]{Kind: Changed, Key: x[0].key, Old: x[0].val, New: y[0].val})
	}
	for _, ex := range x {
		c := Change[K, V]{Kind: Removed, Key: ex.key, Old: ex.val}
		for _, ey := range y {
			if ey.key == ex.key {
				if d.equal(ex.val, ey.val) {
					c.Kind = 0
				} else {
					c = Change[K, V]{Kind: Changed, Key: ex.key, Old: ex.val, New: ey.val}
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
		if !found && !d.emit(Change[K, V]{Kind: Added, Key: ey.key, New: ey.val}) {
			return false
		}
	}
	return true
}

// entryBytes returns the memory of ents as a string, for comparing.
func entryBytes[K comparable, V any](ents []mapEntry[K, V]) string {
	var e mapEntry[K, V]
	return unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(ents))), len(ents)*int(unsafe.Sizeof(e)))
}

// samePrefix returns how many leading entries x and y have bitwise
// identical: a binary search over memory compares.
func samePrefix[K comparable, V any](x, y []mapEntry[K, V]) int {
	n := min(len(x), len(y))
	if entryBytes(x[:n]) == entryBytes(y[:n]) {
		return n
	}
	lo, hi := 0, n // x[:lo] and y[:lo] are identical, x[:hi] and y[:hi] are not
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if entryBytes(x[lo:mid]) == entryBytes(y[lo:mid]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// sameSuffix returns how many trailing entries x and y have bitwise
// identical.
func sameSuffix[K comparable, V any](x, y []mapEntry[K, V]) int {
	n := min(len(x), len(y))
	xs, ys := x[len(x)-n:], y[len(y)-n:]
	if entryBytes(xs) == entryBytes(ys) {
		return n
	}
	lo, hi := 0, n // the last lo entries are identical, the last hi are not
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if entryBytes(xs[n-mid:n-lo]) == entryBytes(ys[n-mid:n-lo]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
