package bench

import (
	"cmp"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// BenchmarkLeafLayout measures how fast a lookup can be in two layouts of
// a hash map's leaves, on their own: 1M random uint64 keys, each lookup
// called through an interface as BenchmarkGet calls every impl (the keys
// looked up are drawn ahead, so unlike BenchmarkGet's picker no load of
// the key itself misses), no trie
// walk in front (a flat directory of 32K leaves of about 32 entries, what
// cow.Map has at depth 3 at 1M), no writes, no snapshots.
//
//   - layout=sorted: today's cow.Map leaf, entries (hash, key, value)
//     sorted by hash, the position interpolated from the hash and
//     corrected by a short scan, behind a directory of 16-byte slots;
//   - layout=sorted/hash=func: the same with the hash called through a
//     function value, as cow.Map.Get calls it;
//   - layout=buckets: a leaf of sixteen 64-byte buckets chosen by hash
//     bits, each 7 tag bytes, a count and three key-value pairs, behind a
//     directory of 4-byte leaf indexes: one cache line a lookup (a key
//     whose bucket is full, about 11% of them at two keys a bucket on
//     average, is left out and looked up in no layout; a real design
//     would size or chain its buckets);
//   - layout=buckets/search=branchfree: the same buckets, the three slots
//     compared and the value selected with no branch;
//   - layout=buckets/alloc=perleaf: the branch-free buckets with each
//     leaf its own 1 KB heap object behind a directory of pointers, as
//     cow.Map allocates leaves;
//   - layout=gomap: the builtin map.
//
// It is the measurement behind docs/decisions/0025-lookup-layout-measurements.md:
// the layout a faster cow.Map would need, not code the engine runs.
func BenchmarkLeafLayout(b *testing.B) {
	const n, leafBits = 1 << 20, 15
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = r.Uint64()
	}
	sorted := newSortedLeaves(keys, leafBits)
	buckets := newBucketLeaves(keys, leafBits)
	gomap := make(map[uint64]uint64, n)
	for i, k := range keys {
		gomap[k] = uint64(i)
	}
	var present []uint64 // drawn keys every layout holds
	for len(present) < 1<<22 {
		if k := keys[r.IntN(n)]; buckets.has(k) {
			present = append(present, k)
		}
	}
	for _, c := range []struct {
		name string
		l    lookup
	}{
		{"layout=sorted", sortedLookup{sorted}},
		{"layout=sorted/hash=func", sortedFuncLookup{sorted, func(k uint64) uint64 { return mixCall(k) }}},
		{"layout=buckets", bucketLookup{buckets}},
		{"layout=buckets/search=branchfree", bucketSelectLookup{buckets}},
		{"layout=buckets/alloc=perleaf", newLeafBucketLookup(buckets)},
		{"layout=gomap", gomapLookup(gomap)},
	} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				v, ok := c.l.get(present[i&(len(present)-1)])
				if !ok {
					b.Fatal("present key not found")
				}
				sink += int64(v)
				i++
			}
		})
	}
}

type lookup interface{ get(k uint64) (uint64, bool) }

// mix is the layouts' hash: a multiply and a fold, inlined.
func mix(k uint64) uint64 {
	hi, lo := bits.Mul64(k, 0x9E3779B97F4A7C15)
	return hi ^ lo
}

//go:noinline
func mixCall(k uint64) uint64 { return mix(k) }

type layoutEntry struct{ hash, key, val uint64 }

// sortedLeaves is a directory of leaves sorted by hash.
type sortedLeaves struct {
	dir   []layoutSlot
	shift uint
}

type layoutSlot struct {
	p    unsafe.Pointer
	n, c int32
}

func newSortedLeaves(keys []uint64, leafBits uint) *sortedLeaves {
	leaves := make([][]layoutEntry, 1<<leafBits)
	for i, k := range keys {
		h := mix(k)
		leaves[h>>(64-leafBits)] = append(leaves[h>>(64-leafBits)], layoutEntry{h, k, uint64(i)})
	}
	s := &sortedLeaves{dir: make([]layoutSlot, len(leaves)), shift: 64 - leafBits}
	for i, l := range leaves {
		slices.SortFunc(l, func(a, b layoutEntry) int { return cmp.Compare(a.hash, b.hash) })
		l = slices.Clip(l)
		s.dir[i] = layoutSlot{unsafe.Pointer(unsafe.SliceData(l)), int32(len(l)), int32(cap(l))}
	}
	return s
}

// get looks k of hash h up as cow.Map's lookupAt searches a leaf.
func (s *sortedLeaves) get(h, k uint64) (uint64, bool) {
	slot := &s.dir[h>>s.shift]
	p, n := slot.p, uintptr(slot.n)
	if n == 0 {
		return 0, false
	}
	at := func(i uintptr) *layoutEntry {
		return (*layoutEntry)(unsafe.Add(p, i*unsafe.Sizeof(layoutEntry{})))
	}
	i := uintptr((h << (64 - s.shift) >> 32) * uint64(n) >> 32)
	if at(i).hash < h {
		for i++; i < n && at(i).hash < h; i++ {
		}
	} else {
		for i > 0 && at(i-1).hash >= h {
			i--
		}
	}
	for ; i < n; i++ {
		if e := at(i); e.hash != h {
			break
		} else if e.key == k {
			return e.val, true
		}
	}
	return 0, false
}

type sortedLookup struct{ s *sortedLeaves }

func (l sortedLookup) get(k uint64) (uint64, bool) { return l.s.get(mix(k), k) }

type sortedFuncLookup struct {
	s    *sortedLeaves
	hash func(uint64) uint64
}

func (l sortedFuncLookup) get(k uint64) (uint64, bool) { return l.s.get(l.hash(k), k) }

// bucketLeaves is a directory of 4-byte leaf indexes into an arena of
// leaves of 1<<bucketBits 64-byte buckets.
type bucketLeaves struct {
	dir   []uint32
	arena []layoutBucket
	shift uint
}

const bucketBits = 4

type layoutBucket struct {
	tags [7]uint8
	n    uint8
	kv   [3][2]uint64
	_    [8]byte
}

func newBucketLeaves(keys []uint64, leafBits uint) *bucketLeaves {
	l := &bucketLeaves{dir: make([]uint32, 1<<leafBits), arena: make([]layoutBucket, 1<<(leafBits+bucketBits)), shift: 64 - leafBits}
	for i := range l.dir {
		l.dir[i] = uint32(i)
	}
	for i, k := range keys {
		b := l.bucket(mix(k))
		if b.n < 3 {
			b.tags[b.n], b.kv[b.n] = uint8(mix(k)), [2]uint64{k, uint64(i)}
			b.n++
		}
	}
	return l
}

func (l *bucketLeaves) bucket(h uint64) *layoutBucket {
	leaf := l.dir[h>>l.shift]
	return &l.arena[leaf<<bucketBits|uint32(h>>(l.shift-bucketBits))&(1<<bucketBits-1)]
}

func (l *bucketLeaves) has(k uint64) bool { _, ok := l.get(k); return ok }

func (l *bucketLeaves) get(k uint64) (uint64, bool) {
	b := l.bucket(mix(k))
	for j := range int(b.n) {
		if b.kv[j][0] == k {
			return b.kv[j][1], true
		}
	}
	return 0, false
}

// getSelect is get with no branch on which slot holds k: all three are
// compared and the value selected, so no mispredicted branch waits on the
// bucket's cache miss. An unused slot holds key 0, which no drawn key is
// (a real design would mark free slots by their tag).
func (l *bucketLeaves) getSelect(k uint64) (uint64, bool) {
	b := l.bucket(mix(k))
	m0, m1, m2 := eqMask(b.kv[0][0], k), eqMask(b.kv[1][0], k), eqMask(b.kv[2][0], k)
	return b.kv[0][1]&m0 | b.kv[1][1]&m1 | b.kv[2][1]&m2, m0|m1|m2 != 0
}

// eqMask is all ones when a == b and 0 otherwise, with no branch.
func eqMask(a, b uint64) uint64 {
	_, borrow := bits.Sub64(a^b, 1, 0)
	return -borrow
}

type bucketLookup struct{ l *bucketLeaves }

// leafBucketLookup holds the same buckets with each leaf its own 1 KB heap
// object behind a directory of pointers, as cow.Map allocates leaves (the
// arena is one 32 MB object).
type leafBucketLookup struct {
	dir   []*[1 << bucketBits]layoutBucket
	shift uint
}

func newLeafBucketLookup(l *bucketLeaves) leafBucketLookup {
	d := leafBucketLookup{dir: make([]*[1 << bucketBits]layoutBucket, len(l.dir)), shift: l.shift}
	for i, leaf := range l.dir {
		p := new([1 << bucketBits]layoutBucket)
		copy(p[:], l.arena[leaf<<bucketBits:(leaf+1)<<bucketBits])
		d.dir[i] = p
	}
	return d
}

func (l leafBucketLookup) get(k uint64) (uint64, bool) {
	h := mix(k)
	b := &l.dir[h>>l.shift][h>>(l.shift-bucketBits)&(1<<bucketBits-1)]
	m0, m1, m2 := eqMask(b.kv[0][0], k), eqMask(b.kv[1][0], k), eqMask(b.kv[2][0], k)
	return b.kv[0][1]&m0 | b.kv[1][1]&m1 | b.kv[2][1]&m2, m0|m1|m2 != 0
}

type bucketSelectLookup struct{ l *bucketLeaves }

func (b bucketSelectLookup) get(k uint64) (uint64, bool) { return b.l.getSelect(k) }

func (b bucketLookup) get(k uint64) (uint64, bool) { return b.l.get(k) }

type gomapLookup map[uint64]uint64

func (g gomapLookup) get(k uint64) (uint64, bool) { v, ok := g[k]; return v, ok }
