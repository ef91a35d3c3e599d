package cow

import (
	"fmt"
	"testing"
)

// BenchmarkEntryWidth measures what a narrower leaf entry would gain a
// job's updates: an int64 count per 8-byte key, updated in groups of
// eight (Prefetch, then UpdateHashed, as ValueState.UpdateEach does), at
// 1M and 10M entries.
//
//   - entry=24B: the map as the state table keeps 8-byte keys, the key
//     beside its hash and value;
//   - entry=16B: no key at all (K is struct{}). xxhash64 of eight bytes is
//     a bijection of the key, so the hash alone names it and a key could
//     be recomputed from it; the entry is its hash and value.
//
// capture=none updates with no capture; capture=held takes a capture
// every 3M updates (about a second of a job at 10M) and holds it until
// the next, so that first writes to a leaf copy it. ns/op is a group of
// eight updates. Decision 0053 records what it measured.
func BenchmarkEntryWidth(b *testing.B) {
	for _, size := range []int{1_000_000, 10_000_000} {
		for _, capture := range []string{"none", "held"} {
			every := 0
			if capture == "held" {
				every = 3_000_000
			}
			b.Run(fmt.Sprintf("size=%d/capture=%s/entry=24B", size, capture), func(b *testing.B) {
				entryWidthUpdates(b, size, every, func(u uint64) uint64 { return u })
			})
			b.Run(fmt.Sprintf("size=%d/capture=%s/entry=16B", size, capture), func(b *testing.B) {
				entryWidthUpdates(b, size, every, func(uint64) struct{} { return struct{}{} })
			})
		}
	}
}

// entryWidthUpdates loads size keys, then updates uniformly drawn keys in
// groups of eight, capturing every `every` updates (0: never).
func entryWidthUpdates[K comparable](b *testing.B, size, every int, keyOf func(uint64) K) {
	o := NewOwner()
	m := NewMap[K, int64](o, func(K) uint64 { panic("every call passes the hash") }, nil)
	m.SetCompactLeaves()
	key := func(i uint64) uint64 { return i * 0x9E3779B97F4A7C15 }
	for i := range uint64(size) {
		m.SetHashed(HashUint64(key(i)), keyOf(key(i)), 0, nil)
	}
	inc := func(v int64, present bool) int64 {
		if !present {
			b.Fatal("a loaded key is absent")
		}
		return v + 1
	}
	var hs [8]uint64
	var ks [8]K
	x := uint64(88172645463325252)
	var c *Capture
	done := 0
	b.ResetTimer()
	for b.Loop() {
		for j := range hs {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			u := key(x % uint64(size))
			hs[j], ks[j] = HashUint64(u), keyOf(u)
		}
		m.Prefetch(hs[:])
		for j := range hs {
			m.UpdateHashed(hs[j], ks[j], inc, nil)
		}
		done += len(hs)
		if every > 0 && done >= every {
			done = 0
			if c != nil {
				c.Release()
			}
			c = o.Capture()
		}
	}
	b.StopTimer()
	if c != nil {
		c.Release()
	}
	if m.Len() != size {
		b.Fatalf("%d entries after the updates, want %d", m.Len(), size)
	}
}
