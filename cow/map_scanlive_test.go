package cow

import (
	"math"
	"testing"
)

// TestMap_ScanLive scans the current version of a map with and without a
// capture, over a sub-range, and checks that a scan leaves writes in place.
func TestMap_ScanLive(t *testing.T) {
	o := NewOwner()
	m := NewMap[uint64, int64](o, func(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 }, nil)
	for k := range uint64(5000) {
		m.Set(k, int64(k))
	}
	c := o.Capture()
	for k := range uint64(100) {
		m.Delete(k)
	}
	want := map[uint64]bool{}
	for k := uint64(100); k < 5000; k++ {
		want[k] = true
	}
	prev, n := uint64(0), 0
	m.ScanLive(0, math.MaxUint64, func(h uint64, k *uint64, v int64) bool {
		if !want[*k] || int64(*k) != v || h < prev {
			t.Fatalf("entry %d=%d (hash %x after %x) not in the live map, or out of order", *k, v, h, prev)
		}
		prev = h
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("scanned %d entries, want %d", n, len(want))
	}
	c.Release()
	lo, hi := uint64(1)<<62, uint64(1)<<63
	inRange := 0
	for k := range want {
		if h := k * 0x9e3779b97f4a7c15; h >= lo && h <= hi {
			inRange++
		}
	}
	n = 0
	m.ScanLive(lo, hi, func(h uint64, _ *uint64, _ int64) bool {
		if h < lo || h > hi {
			t.Fatalf("hash %x outside [%x, %x]", h, lo, hi)
		}
		n++
		return true
	})
	if n != inRange {
		t.Fatalf("scanned %d entries in range, want %d", n, inRange)
	}
	stopped := 0
	m.ScanLive(0, math.MaxUint64, func(uint64, *uint64, int64) bool { stopped++; return stopped < 3 })
	if stopped != 3 {
		t.Fatalf("scan went on after yield returned false: %d calls", stopped)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestMap_SetCompactLeaves checks that a compact map's leaves grow by an
// eighth: at most n/8+2 spare entries after n inserts into one leaf,
// against a quarter without.
func TestMap_SetCompactLeaves(t *testing.T) {
	for _, compact := range []bool{false, true} {
		m := NewMap[uint64, int64](NewOwner(), func(k uint64) uint64 { return k << 40 }, nil)
		if compact {
			m.SetCompactLeaves()
		}
		maxSpare := 0
		for k := range uint64(mapLeafMax) {
			m.Set(k, 1)
			ents := m.root.ents()
			maxSpare = max(maxSpare, cap(ents)-len(ents))
		}
		limit := mapLeafMax/4 + 2
		if compact {
			limit = mapLeafMax/8 + 2
		}
		if maxSpare > limit {
			t.Fatalf("compact %v: %d spare entries in a leaf, want at most %d", compact, maxSpare, limit)
		}
		if !compact && maxSpare <= mapLeafMax/8+2 {
			t.Fatalf("default growth left at most %d spare entries: not a quarter", maxSpare)
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	}
}
