package bench

import (
	"cmp"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// BenchmarkLeafLayout measures how fast a lookup can be in several layouts
// of a hash map's leaves, on their own: 1M random uint64 keys, each lookup
// called through an interface as BenchmarkGet calls every impl (the keys
// looked up are drawn ahead, with the values they must find, so unlike
// BenchmarkGet's picker no load of the key itself misses; every lookup's
// value is checked), no trie walk in front (a flat directory of 32K leaves
// of about 32 entries, what cow.Map has at depth 3 at 1M), no writes, no
// snapshots.
//
//   - layout=sorted: today's cow.Map leaf, entries (hash, key, value)
//     sorted by hash, the position interpolated from the hash and
//     corrected by a short scan, behind a directory of 16-byte slots, each
//     leaf one heap object of its length;
//   - layout=sorted/hash=func: the same with the hash called through a
//     function value, as cow.Map.Get calls it;
//   - layout=gapped/load=0.8, layout=gapped/load=0.67: a gapped sorted
//     leaf, order-preserving linear probing (gappedLeaves): the same
//     entries in hash order, entry j at max(home(h_j), pos_{j-1}+1) in a
//     leaf of C = n/load slots (rounded up), home(h) the hash bits below
//     the leaf's prefix scaled to C, empty slots marked by the hash
//     MaxUint64; a lookup scans forward from home(h) to the first hash
//     >= h, behind the same directory;
//   - layout=gapped/load=.../search=branchfree: the same leaves, the first
//     two slots from home compared with no branch on the outcome (the
//     scan goes on past them only when both hold smaller hashes);
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
// size=10000000/layout=...: sorted, gapped, buckets (in one arena and a
// heap object a leaf) and gomap at 10M keys behind a flat directory of
// 2^18 leaves of about 38 entries (the buckets keep sixteen to a leaf,
// about 2.4 keys a bucket, and leave out 15% of the keys; the directories
// are 4 MB of 16-byte slots for sorted and gapped, 2 MB of pointers for
// alloc=perleaf, 1 MB of indexes for the arena). Select one size with -bench
// 'BenchmarkLeafLayout/layout=' or 'BenchmarkLeafLayout/size='.
//
// Every layout reports B/entry, the live heap its directory and leaves
// take (after a collection, size classes included) over the entries it
// holds, and the layouts that search an entry array report lines/lookup,
// the 64-byte lines a lookup of a present key reads in the leaf (from the
// leaves' addresses, over 64K of the keys looked up; a bucket is one).
//
// It is the measurement behind docs/decisions/0025-lookup-layout-measurements.md:
// the layout a faster cow.Map would need, not code the engine runs.
func BenchmarkLeafLayout(b *testing.B) {
	benchLeafLayouts(b, 1<<20, 15, true)
	b.Run("size=10000000", func(b *testing.B) { benchLeafLayouts(b, 10_000_000, 18, false) })
}

// benchLeafLayouts runs BenchmarkLeafLayout's layouts over n keys in
// 1<<leafBits leaves; all adds the variants measured at 1M only.
func benchLeafLayouts(b *testing.B, n int, leafBits uint, all bool) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = r.Uint64()
	}
	type layout struct {
		name  string
		l     lookup
		bytes uint64 // live heap of the directory and leaves
		held  int    // entries the layout holds
		every bool   // measured at every size, not at 1M only
	}
	var layouts []layout
	add := func(name string, every bool, build func() lookup) lookup {
		before := liveHeap()
		l := build()
		layouts = append(layouts, layout{name, l, liveHeap() - before, n, every})
		return l
	}
	same := func(name string, every bool, l lookup) { // another search of the last layout's leaves
		last := layouts[len(layouts)-1]
		layouts = append(layouts, layout{name, l, last.bytes, last.held, every})
	}
	sorted := add("layout=sorted", true, func() lookup { return sortedLookup{newSortedLeaves(keys, leafBits)} }).(sortedLookup).s
	same("layout=sorted/hash=func", false, sortedFuncLookup{sorted, func(k uint64) uint64 { return mixCall(k) }})
	for _, load := range []struct {
		name string
		pct  int
	}{{"0.8", 80}, {"0.67", 67}} {
		name := "layout=gapped/load=" + load.name
		g := add(name, true, func() lookup { return gappedLookup{newGappedLeaves(keys, leafBits, load.pct)} }).(gappedLookup).g
		same(name+"/search=branchfree", true, gappedWindowLookup{g})
	}
	buckets := add("layout=buckets", true, func() lookup { return bucketLookup{newBucketLeaves(keys, leafBits)} }).(bucketLookup).l
	held := 0
	for _, k := range keys {
		if buckets.has(k) {
			held++
		}
	}
	layouts[len(layouts)-1].held = held
	same("layout=buckets/search=branchfree", false, bucketSelectLookup{buckets})
	add("layout=buckets/alloc=perleaf", true, func() lookup { return newLeafBucketLookup(buckets) })
	layouts[len(layouts)-1].held = held
	add("layout=gomap", true, func() lookup {
		gomap := make(map[uint64]uint64, n)
		for i, k := range keys {
			gomap[k] = uint64(i)
		}
		return gomapLookup(gomap)
	})
	var present []layoutProbe // drawn keys every layout holds, with their values
	for len(present) < 1<<22 {
		if i := r.IntN(n); buckets.has(keys[i]) {
			present = append(present, layoutProbe{keys[i], uint64(i)})
		}
	}
	for _, c := range layouts {
		if !all && !c.every {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			lookUp(b, c.l, present)
			b.ReportMetric(float64(c.bytes)/float64(c.held), "B/entry")
			if lc, ok := c.l.(lineCounter); ok {
				lines := 0
				for _, p := range present[:1<<16] {
					lines += lc.lines(p.key)
				}
				b.ReportMetric(float64(lines)/(1<<16), "lines/lookup")
			}
		})
	}
}

// lookUp looks up probes in turn (their count a power of two) with l, one
// per iteration, each checked against the value it must find.
func lookUp(b *testing.B, l lookup, probes []layoutProbe) {
	i := 0
	for b.Loop() {
		p := probes[i&(len(probes)-1)]
		v, ok := l.get(p.key)
		if !ok || v != p.val {
			b.Fatalf("key %#x: got %d, %v, want %d", p.key, v, ok, p.val)
		}
		sink += int64(v)
		i++
	}
}

// layoutProbe is a key looked up and the value it must find.
type layoutProbe struct{ key, val uint64 }

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// lineCounter is a lookup that can tell which 64-byte lines its search of
// key k reads in the leaf.
type lineCounter interface{ lines(k uint64) int }

// linesSpanned is how many 64-byte lines the bytes [from, to) touch.
func linesSpanned(from, to uintptr) int { return int((to-1)/64 - from/64 + 1) }

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
		l = slices.Clone(l) // one object of the leaf's size, not append's
		s.dir[i] = layoutSlot{unsafe.Pointer(unsafe.SliceData(l)), int32(len(l)), int32(cap(l))}
	}
	return s
}

// get looks k of hash h up as cow.Map's seekLeaf searches a leaf.
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

// lines is how many 64-byte lines get's search of k reads in its leaf:
// the entries from the interpolated guess to k's, the one below k's when
// the scan goes down.
func (s *sortedLeaves) lines(k uint64) int {
	h := mix(k)
	slot := &s.dir[h>>s.shift]
	ents := unsafe.Slice((*layoutEntry)(slot.p), slot.n)
	i := int((h << (64 - s.shift) >> 32) * uint64(slot.n) >> 32)
	pos, _ := slices.BinarySearchFunc(ents, h, func(e layoutEntry, h uint64) int { return cmp.Compare(e.hash, h) })
	lo, hi := i, pos
	if pos <= i {
		lo, hi = max(pos-1, 0), i
	}
	return entryLines(ents, lo, hi, pos)
}

// entryLines is how many 64-byte lines a search reads that compares the
// hashes of ents[lo..hi] and reads the whole entry at pos.
func entryLines(ents []layoutEntry, lo, hi, pos int) int {
	at := func(i int) uintptr { return uintptr(unsafe.Pointer(&ents[i])) }
	return linesSpanned(at(lo), max(at(hi)+8, at(pos)+unsafe.Sizeof(layoutEntry{})))
}

type sortedLookup struct{ s *sortedLeaves }

func (l sortedLookup) lines(k uint64) int { return l.s.lines(k) }

func (l sortedLookup) get(k uint64) (uint64, bool) { return l.s.get(mix(k), k) }

type sortedFuncLookup struct {
	s    *sortedLeaves
	hash func(uint64) uint64
}

func (l sortedFuncLookup) get(k uint64) (uint64, bool) { return l.s.get(l.hash(k), k) }

// gappedLeaves is a directory of gapped sorted leaves: order-preserving
// linear probing. A leaf of n entries has C = n/load slots (rounded up)
// and its entries in hash order, entry j at pos_j = max(home(h_j),
// pos_{j-1}+1), home(h) the hash bits below the leaf's prefix as a
// fraction of C; the slots past C that entries are pushed into are
// allocated as the last position needs, with one empty slot after it. The
// layout is a function of the entries and C, so it is canonical.
//
// An empty slot holds the hash gappedEmpty, MaxUint64, and real hashes are
// kept below it (gappedHash). An empty slot then compares >= every hash, so
// from home(h) the slots hold a run of hashes < h and then only hashes >= h
// or empties: a present key sits in the occupied run that starts at or
// before its home, so the scan to the first slot >= h stops at an empty
// slot for an absent key, needs no bound (the empty slot after the last
// entry ends it), and can count its first slots with no branch; and the
// loop over equal hashes never takes an empty slot for an entry.
type gappedLeaves struct {
	dir   []layoutSlot // n is the leaf's C, c its slot count
	shift uint
}

// gappedEmpty is the hash of an empty slot.
const gappedEmpty = math.MaxUint64

// gappedWindow is how many slots from home a branch-free search compares.
const gappedWindow = 2

// gappedHash is k's hash in gapped leaves: mix, kept below gappedEmpty.
func gappedHash(k uint64) uint64 { return min(mix(k), gappedEmpty-1) }

func newGappedLeaves(keys []uint64, leafBits uint, loadPct int) *gappedLeaves {
	ents := make([]layoutEntry, len(keys))
	for i, k := range keys {
		ents[i] = layoutEntry{gappedHash(k), k, uint64(i)}
	}
	return buildGappedLeaves(ents, leafBits, loadPct)
}

// buildGappedLeaves lays ents, whose hashes are below gappedEmpty, out in
// 1<<leafBits gapped leaves at a load of loadPct percent.
func buildGappedLeaves(ents []layoutEntry, leafBits uint, loadPct int) *gappedLeaves {
	leaves := make([][]layoutEntry, 1<<leafBits)
	for _, e := range ents {
		leaves[e.hash>>(64-leafBits)] = append(leaves[e.hash>>(64-leafBits)], e)
	}
	g := &gappedLeaves{dir: make([]layoutSlot, len(leaves)), shift: 64 - leafBits}
	var pos []int
	for i, l := range leaves {
		slices.SortFunc(l, func(a, b layoutEntry) int { return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.key, b.key)) })
		c := (len(l)*100 + loadPct - 1) / loadPct
		pos, last := pos[:0], -1
		for _, e := range l {
			last = max(int(g.home(e.hash, uintptr(c))), last+1)
			pos = append(pos, last)
		}
		slots := make([]layoutEntry, max(last+2, max(c, 1)+gappedWindow-1))
		for j := range slots {
			slots[j].hash = gappedEmpty
		}
		for j, e := range l {
			slots[pos[j]] = e
		}
		g.dir[i] = layoutSlot{unsafe.Pointer(unsafe.SliceData(slots)), int32(c), int32(len(slots))}
	}
	return g
}

// home is the slot that hash h's scan starts at in a leaf of c slots.
func (g *gappedLeaves) home(h uint64, c uintptr) uintptr {
	return uintptr((h << (64 - g.shift) >> 32) * uint64(c) >> 32)
}

// slots is the leaf that holds hash h, empty slots included.
func (g *gappedLeaves) slots(h uint64) []layoutEntry {
	slot := &g.dir[h>>g.shift]
	return unsafe.Slice((*layoutEntry)(slot.p), slot.c)
}

// get looks k of hash h up: a scan from home(h) to the first hash >= h.
func (g *gappedLeaves) get(h, k uint64) (uint64, bool) {
	slot := &g.dir[h>>g.shift]
	p := slot.p
	at := func(i uintptr) *layoutEntry {
		return (*layoutEntry)(unsafe.Add(p, i*unsafe.Sizeof(layoutEntry{})))
	}
	i := g.home(h, uintptr(slot.n))
	for at(i).hash < h {
		i++
	}
	for ; at(i).hash == h; i++ {
		if e := at(i); e.key == k {
			return e.val, true
		}
	}
	return 0, false
}

// getWindow is get with the first gappedWindow slots from home compared
// with no branch: the count of hashes below h among them is where the
// first hash >= h is, unless all are below h and the scan goes on.
func (g *gappedLeaves) getWindow(h, k uint64) (uint64, bool) {
	slot := &g.dir[h>>g.shift]
	p := slot.p
	at := func(i uintptr) *layoutEntry {
		return (*layoutEntry)(unsafe.Add(p, i*unsafe.Sizeof(layoutEntry{})))
	}
	i := g.home(h, uintptr(slot.n))
	_, c0 := bits.Sub64(at(i).hash, h, 0)
	_, c1 := bits.Sub64(at(i+1).hash, h, 0)
	for i += uintptr(c0 + c1); at(i).hash < h; i++ {
	}
	for ; at(i).hash == h; i++ {
		if e := at(i); e.key == k {
			return e.val, true
		}
	}
	return 0, false
}

// lines is how many 64-byte lines the search of k reads in its leaf,
// comparing the hashes of at least window slots from home.
func (g *gappedLeaves) lines(k uint64, window int) int {
	h := gappedHash(k)
	slots := g.slots(h)
	i := int(g.home(h, uintptr(g.dir[h>>g.shift].n)))
	pos := i
	for slots[pos].key != k || slots[pos].hash != h {
		pos++
	}
	return entryLines(slots, i, max(pos, i+window-1), pos)
}

type gappedLookup struct{ g *gappedLeaves }

func (l gappedLookup) get(k uint64) (uint64, bool) { return l.g.get(gappedHash(k), k) }

func (l gappedLookup) lines(k uint64) int { return l.g.lines(k, 1) }

type gappedWindowLookup struct{ g *gappedLeaves }

func (l gappedWindowLookup) get(k uint64) (uint64, bool) { return l.g.getWindow(gappedHash(k), k) }

func (l gappedWindowLookup) lines(k uint64) int { return l.g.lines(k, gappedWindow) }

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

func (b bucketLookup) lines(k uint64) int {
	p := uintptr(unsafe.Pointer(b.l.bucket(mix(k))))
	return linesSpanned(p, p+unsafe.Sizeof(layoutBucket{}))
}

type gomapLookup map[uint64]uint64

func (g gomapLookup) get(k uint64) (uint64, bool) { v, ok := g[k]; return v, ok }
