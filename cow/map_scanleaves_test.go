package cow

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMap_ScanLeaves: the leaves' entries, concatenated, are exactly what
// ScanRefs yields over the same range, in the same order; equal hashes
// come in one call; a false from yield stops the scan.
func TestMap_ScanLeaves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hash := hashInt
		if rapid.Bool().Draw(t, "colliding") {
			hash = hashColliding
		}
		m := newIntMap(hash)
		keys := rapid.SliceOfN(rapid.IntRange(0, 5000), 1, 600).Draw(t, "keys")
		for _, k := range keys {
			m.Set(k, -k)
		}
		s := m.Snapshot()
		defer s.Release()
		lo, hi := rapid.Uint64().Draw(t, "lo"), rapid.Uint64().Draw(t, "hi")
		switch rapid.IntRange(0, 2).Draw(t, "range") {
		case 0: // the whole map
			lo, hi = 0, ^uint64(0)
		case 1: // ends at keys' hashes, so within leaves
			lo = hash(rapid.SampledFrom(keys).Draw(t, "from")) + rapid.Uint64Range(0, 1).Draw(t, "+lo")
			hi = hash(rapid.SampledFrom(keys).Draw(t, "to")) - rapid.Uint64Range(0, 1).Draw(t, "-hi")
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		var want []MapEntry[int, int]
		s.ScanRefs(lo, hi, func(h uint64, k *int, v int) bool {
			want = append(want, MapEntry[int, int]{h, *k, v})
			return true
		})
		var got []MapEntry[int, int]
		calls := 0
		s.ScanLeaves(lo, hi, func(ents []MapEntry[int, int]) bool {
			if len(ents) == 0 {
				t.Fatalf("an empty leaf slice")
			}
			if len(got) > 0 && got[len(got)-1].Hash == ents[0].Hash {
				t.Fatalf("hash %#x split over two calls", ents[0].Hash)
			}
			got = append(got, ents...)
			calls++
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("ScanLeaves(%#x, %#x) = %d entries, ScanRefs %d", lo, hi, len(got), len(want))
		}
		if calls > 1 {
			stop := rapid.IntRange(1, calls-1).Draw(t, "stop")
			n := 0
			s.ScanLeaves(lo, hi, func([]MapEntry[int, int]) bool { n++; return n < stop })
			if n != stop {
				t.Fatalf("scan went on for %d calls after yield returned false at %d", n, stop)
			}
		}
	})
}
