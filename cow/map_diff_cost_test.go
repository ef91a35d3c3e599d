package cow

import (
	"testing"
	"math/rand/v2"
	"encoding/binary"
	"fmt"
	"github.com/cespare/xxhash/v2"
)

// mapDiff carries one diff walk's parameters and counts what it visits.
type oldMapDiff[K comparable, V any] struct {
	equal   func(a, b V) bool
	yield   func(Change[K, V]) bool
	check   func()
	visited int // node pairs compared (tests assert the cost with it)
	stopped bool
}

func (d *oldMapDiff[K, V]) emit(c Change[K, V]) bool {
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
func (d *oldMapDiff[K, V]) slots(a, b *mapSlot[K, V], depth int) bool {
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
				oldTouch(&ba.kids[i])
				oldTouch(&bb.kids[i])
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

// oldTouchSink keeps touch's loads from being optimized away.
var oldTouchSink uint64

// touch loads the first word of the node of s (a branch and a leaf's first
// entry both start with a uint64) so that it is in cache when the walk gets
// there.
func oldTouch[K comparable, V any](s *mapSlot[K, V]) {
	if s.p != nil && *(*uint64)(s.p) == 1<<63+1 { // a condition the compiler cannot drop
		oldTouchSink++
	}
}

// entries merges two hash-sorted entry lists. Runs of equal hashes (true
// collisions) are matched key by key.
//
// Two versions of a leaf usually differ in one entry, so the common prefix
// and suffix of bitwise-identical entries are skipped first with a few
// memory compares (an entry whose bits did not change did not change),
// instead of comparing every entry and calling equal on its value.
func (d *oldMapDiff[K, V]) entries(x, y []mapEntry[K, V]) bool {
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
func (d *oldMapDiff[K, V]) run(x, y []mapEntry[K, V]) bool {
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


func abKeys(n int) []int64 {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	seen := make(map[int64]struct{}, n)
	keys := make([]int64, 0, n)
	for len(keys) < n {
		k := r.Int64()
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			keys = append(keys, k)
		}
	}
	return keys
}

func abHash(k int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(k))
	return xxhash.Sum64(b[:])
}

func BenchmarkABDiff(b *testing.B) {
	for _, size := range []int{100_000, 10_000_000} {
		keys := abKeys(size)
		m := NewMap(NewOwner(), abHash, Equal[int64])
		for i, k := range keys {
			m.Set(k, int64(i))
		}
		old := m.Snapshot()
		for i := range 800 {
			m.Set(keys[i], -1-int64(i))
		}
		for i := 800; i < 900; i++ {
			m.Delete(keys[i])
		}
		r := rand.New(rand.NewPCG(7, 7))
		for range 100 {
			m.Set(r.Int64(), 7)
		}
		cur := m.Snapshot()
		for rep := range 3 {
			b.Run(fmt.Sprintf("size=%d/impl=old/rep=%d", size, rep), func(b *testing.B) {
				for b.Loop() {
					n := 0
					d := oldMapDiff[int64, int64]{equal: Equal[int64], yield: func(Change[int64, int64]) bool { n++; return true }, check: func() {}}
					d.slots(&old.root, &cur.root, 0)
					if n != 1000 {
						b.Fatal(n)
					}
				}
			})
			b.Run(fmt.Sprintf("size=%d/impl=new/rep=%d", size, rep), func(b *testing.B) {
				for b.Loop() {
					n := 0
					for range DiffMaps(old, cur) {
						n++
					}
					if n != 1000 {
						b.Fatal(n)
					}
				}
			})
		}
	}
}
