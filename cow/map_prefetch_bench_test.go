package cow

import (
	"fmt"
	"testing"
)

// BenchmarkPrefetch measures a read-modify-write (UpdateHashed) of a
// present key at 1M and 10M entries with no capture live, alone
// (group=1) and with the hashes of each group of keys prefetched before
// the group's updates: what the group's overlapping misses save, and
// where a group grows too large for its lines to stay in the first-level
// cache until their updates come. Decision 0045 records what it measured.
func BenchmarkPrefetch(b *testing.B) {
	for _, size := range []int{1 << 20, 10_000_000} {
		for _, group := range []int{1, 4, 8, 16, 64} {
			b.Run(fmt.Sprintf("size=%d/group=%d", size, group), func(b *testing.B) {
				u := updateOwnedSetup(b, size)
				hs := make([]uint64, len(u.keys))
				for i, k := range u.keys {
					hs[i] = u.hashes[k]
				}
				inc := func(v int64, _ bool) int64 { return v + 1 }
				mask := len(u.keys) - 1
				i := 0
				for b.Loop() {
					j := i & mask
					if group > 1 && j%group == 0 {
						u.m.Prefetch(hs[j:min(j+group, len(hs))])
					}
					u.m.UpdateHashed(hs[j], u.keys[j], inc, nil)
					i++
				}
			})
		}
	}
}
