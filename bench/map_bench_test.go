package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/benbjohnson/immutable"
	"github.com/cowstate/cowstate/cow"
	tbtree "github.com/tidwall/btree"
)

// randomKeys returns n distinct random int64 keys, the same for every run.
func randomKeys(n int) []int64 {
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

// build returns impl holding keys[i] -> i.
func build(impl string, keys []int64) kv {
	if impl == "immutable" { // its builder is the fast way to load it
		bld := immutable.NewMapBuilder[int64, int64](nil)
		for i, k := range keys {
			bld.Set(k, int64(i))
		}
		return &immutableKV{m: bld.Map()}
	}
	s := newKV(impl)
	for i, k := range keys {
		s.Put(k, int64(i))
	}
	return s
}

// picker draws indexes in [0, n) with a xorshift generator: cheap and equal
// for every implementation.
type picker struct{ x, n uint64 }

func newPicker(n int) *picker { return &picker{x: 0x9e3779b97f4a7c15, n: uint64(n)} }

func (p *picker) next() int {
	p.x ^= p.x << 13
	p.x ^= p.x >> 7
	p.x ^= p.x << 17
	return int(p.x % p.n)
}

// BenchmarkPut overwrites random keys of a map of size entries, with no
// snapshot (snap=none) or with a snapshot captured and the previous one
// released every 1000 puts (snap=every1000): the copy tax of snapshots.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		for _, snap := range []string{"none", "every1000"} {
			for _, impl := range impls {
				b.Run(fmt.Sprintf("size=%d/snap=%s/impl=%s", size, snap, impl), func(b *testing.B) {
					s := build(impl, keys)
					if snap == "every1000" {
						s.Snapshot()
					}
					p := newPicker(size)
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						s.Put(keys[p.next()], int64(i))
						i++
						if snap == "every1000" && i%1000 == 0 {
							s.Snapshot()
							s.Release()
						}
					}
					if s.Len() != size {
						b.Fatalf("size %d after overwrites, want %d", s.Len(), size)
					}
				})
			}
		}
	}
}

var sink int64

// BenchmarkGet looks up random present keys: at size=10000 everything is
// in the core's cache and the figure is the lookup's own work; at 1M most
// of it is cache misses.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{10_000, 1_000_000} {
		keys := randomKeys(size)
		for _, impl := range impls {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				s := build(impl, keys)
				p := newPicker(size)
				b.ReportAllocs()
				for b.Loop() {
					v, ok := s.Get(keys[p.next()])
					if !ok {
						b.Fatal("present key not found")
					}
					sink += v
				}
			})
		}
	}
}

// BenchmarkCapture takes a snapshot and releases it: O(1) for the persistent
// structures, a deep copy for gomap.
func BenchmarkCapture(b *testing.B) {
	for _, size := range []int{1_000, 100_000, 1_000_000, 10_000_000} {
		keys := randomKeys(size)
		for _, impl := range impls {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				s := build(impl, keys)
				// The build's garbage collected now, not by a cycle that
				// would run through the timed captures: at 1000 captures of
				// about 100 ns, one mark phase's assists are most of the
				// time, and which size it lands on is luck.
				runtime.GC()
				b.ReportAllocs()
				for b.Loop() {
					s.Snapshot()
					s.Release()
				}
				runtime.KeepAlive(s)
			})
		}
		keys = nil
		runtime.GC()
	}
}

// diffChanges applies 1000 changes to a map holding keys[i] -> i: 800 values
// changed, 100 keys deleted, 100 keys added.
func diffChanges(keys []int64, put func(k, v int64), del func(k int64)) {
	for i := range 800 {
		put(keys[i], -1-int64(i))
	}
	for i := 800; i < 900; i++ {
		del(keys[i])
	}
	fresh := randomKeys(len(keys) + 100)
	added := 0
	for _, k := range fresh {
		if added == 100 {
			break
		}
		if _, dup := findKey(keys, k); !dup {
			put(k, 7)
			added++
		}
	}
}

// findKey is a linear scan, used once per benchmark setup only.
func findKey(keys []int64, k int64) (int, bool) {
	for i, x := range keys {
		if x == k {
			return i, true
		}
	}
	return -1, false
}

// BenchmarkDiff computes the difference of two versions 1000 changes apart.
// impl=cow is the structural diff, skipping shared subtrees; impl=merge is a
// full ordered merge of two tidwall/btree versions (Copy, then the same
// changes), the best a structure without structural diff can do.
func BenchmarkDiff(b *testing.B) {
	const changes = 1000
	for _, size := range []int{100_000, 1_000_000, 10_000_000} {
		keys := randomKeys(size)
		b.Run(fmt.Sprintf("size=%d/changes=%d/impl=cow", size, changes), func(b *testing.B) {
			m := cow.NewMap(cow.NewOwner(), hashInt64, cow.Equal[int64])
			for i, k := range keys {
				m.Set(k, int64(i))
			}
			old := m.Snapshot()
			diffChanges(keys, func(k, v int64) { m.Set(k, v) }, func(k int64) { m.Delete(k) })
			cur := m.Snapshot()
			settle(func() {
				for range cow.DiffMaps(old, cur) {
				}
			})
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for range cow.DiffMaps(old, cur) {
					n++
				}
				if n != changes {
					b.Fatalf("diff found %d changes, want %d", n, changes)
				}
			}
		})
		if size > 1_000_000 {
			continue // a full merge of 10M entries a run says nothing new
		}
		b.Run(fmt.Sprintf("size=%d/changes=%d/impl=merge", size, changes), func(b *testing.B) {
			old := tbtree.NewMap[int64, int64](0)
			for i, k := range keys {
				old.Set(k, int64(i))
			}
			cur := old.Copy()
			diffChanges(keys, func(k, v int64) { cur.Set(k, v) }, func(k int64) { cur.Delete(k) })
			settle(func() { mergeDiff(old, cur) })
			b.ReportAllocs()
			for b.Loop() {
				if n := mergeDiff(old, cur); n != changes {
					b.Fatalf("merge found %d changes, want %d", n, changes)
				}
			}
		})
	}
}

// settle readies a benchmark that runs few iterations (the diffs run 20
// in the targets tool): it collects the garbage of the setup, whose
// concurrent marking of a multi-GB heap would otherwise run during the
// timed loop, and runs op once, so the loop does not measure first-use
// costs. The collection itself evicts the caches: at 10M entries the diffs
// after it take about ten runs to fall from 250-750 µs to their steady
// 70-100 µs (at 100K, one), so 20 timed runs carry part of that recovery,
// as a checkpoint that follows a collection does.
func settle(op func()) {
	runtime.GC()
	op()
}

// mergeDiff walks two ordered versions side by side and counts the keys
// added, removed or changed.
func mergeDiff(a, b *tbtree.Map[int64, int64]) int {
	ia, ib := a.Iter(), b.Iter()
	okA, okB := ia.First(), ib.First()
	n := 0
	for okA || okB {
		switch {
		case !okB || (okA && ia.Key() < ib.Key()):
			n++
			okA = ia.Next()
		case !okA || ib.Key() < ia.Key():
			n++
			okB = ib.Next()
		default:
			if ia.Value() != ib.Value() {
				n++
			}
			okA, okB = ia.Next(), ib.Next()
		}
	}
	return n
}

// heapPerEntry reports the live heap, bytes and objects per entry, that
// build allocates and keeps: build returns how many entries it built (which
// must be size) and what holds them.
func heapPerEntry(b *testing.B, size int, build func() (entries int, keep any)) {
	var bytes, objects float64
	runs := 0
	for b.Loop() {
		before := heapStats()
		n, keep := build()
		after := heapStats()
		if n != size {
			b.Fatalf("built %d entries, want %d", n, size)
		}
		bytes += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		objects += float64(after.HeapObjects) - float64(before.HeapObjects)
		runs++
		runtime.KeepAlive(keep)
	}
	b.ReportMetric(bytes/float64(runs*size), "B/entry")
	b.ReportMetric(objects/float64(runs*size), "objects/entry")
}

// BenchmarkMemory builds a map of size entries by inserts and reports the
// live heap it holds: bytes and heap objects per entry. The impl=state runs
// are a value state with its TTL off and on (see memoryTTL).
func BenchmarkMemory(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		for _, impl := range impls {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				heapPerEntry(b, size, func() (int, any) {
					s := build(impl, keys)
					return s.Len(), s
				})
			})
		}
		memoryTTL(b, size, keys)
	}
}

func heapStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}
