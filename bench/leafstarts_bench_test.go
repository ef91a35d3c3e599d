package bench

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// BenchmarkLeafStarts measures the search of a sorted leaf by what its
// slot tells, in the shape cow.Map has at 1M entries (2^15 leaves of
// about 32) and at 10M (2^20 leaves of about 10), behind a flat directory
// of 16-byte slots, lookups through an interface as in BenchmarkLeafLayout
// (uint64 keys, drawn ahead with the values they must find):
//
//   - search=window: the slot holds the leaf's length; the position is
//     interpolated from the hash and the hashes below it are counted in a
//     window of eight around it with no branch (in leaves of 16 entries
//     or more; a scan from the guess in shorter ones): cow.Map's search
//     of a leaf without starts;
//   - search=starts: the slot's second word also holds where each eighth
//     of the leaf's hash range starts; the hashes below the key's are
//     counted among four entries from its eighth's start: cow.Map's
//     search of a leaf with starts (cow.slotMeta);
//   - search=gomap: the builtin map.
//
// It is the measurement behind docs/decisions/0069.
func BenchmarkLeafStarts(b *testing.B) {
	for _, size := range []struct {
		n        int
		leafBits uint
	}{{1 << 20, 15}, {10_000_000, 20}} {
		r := rand.New(rand.NewPCG(1, 2))
		keys := make([]uint64, size.n)
		for i := range keys {
			keys[i] = r.Uint64()
		}
		sorted := newSortedLeaves(keys, size.leafBits)
		gomap := make(map[uint64]uint64, size.n)
		for i, k := range keys {
			gomap[k] = uint64(i)
		}
		probes := make([]layoutProbe, 1<<22)
		for i := range probes {
			j := r.IntN(size.n)
			probes[i] = layoutProbe{keys[j], uint64(j)}
		}
		for _, c := range []struct {
			name string
			l    lookup
		}{
			{"window", windowLookup{sorted}},
			{"starts", startsLookup{newStartsLeaves(sorted)}},
			{"gomap", gomapLookup(gomap)},
		} {
			b.Run(fmt.Sprintf("size=%d/search=%s", size.n, c.name), func(b *testing.B) {
				lookUp(b, c.l, probes)
			})
		}
	}
}

// entryAt is the i-th entry of the leaf whose first entry is at p.
func entryAt(p unsafe.Pointer, i uintptr) *layoutEntry {
	return (*layoutEntry)(unsafe.Add(p, i*unsafe.Sizeof(layoutEntry{})))
}

// getWindow looks k of hash h up as cow.Map searches a leaf whose slot
// holds no starts.
func (s *sortedLeaves) getWindow(h, k uint64) (uint64, bool) {
	slot := &s.dir[h>>s.shift]
	p, n := slot.p, uintptr(slot.n)
	if n == 0 {
		return 0, false
	}
	rest := h << (64 - s.shift)
	i := uintptr((rest >> 32) * uint64(n) >> 32)
	if n >= 16 {
		j := min(i-min(i, 4), n-8)
		w := unsafe.Pointer(entryAt(p, j))
		_, c0 := bits.Sub64(entryAt(w, 0).hash, h, 0)
		_, c1 := bits.Sub64(entryAt(w, 1).hash, h, 0)
		_, c2 := bits.Sub64(entryAt(w, 2).hash, h, 0)
		_, c3 := bits.Sub64(entryAt(w, 3).hash, h, 0)
		_, c4 := bits.Sub64(entryAt(w, 4).hash, h, 0)
		_, c5 := bits.Sub64(entryAt(w, 5).hash, h, 0)
		_, c6 := bits.Sub64(entryAt(w, 6).hash, h, 0)
		_, c7 := bits.Sub64(entryAt(w, 7).hash, h, 0)
		c := uintptr(c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7)
		i = j + c
		if c == 0 {
			for i > 0 && entryAt(p, i-1).hash >= h {
				i--
			}
		} else if c == 8 {
			for ; i < n && entryAt(p, i).hash < h; i++ {
			}
		}
	} else if entryAt(p, i).hash < h {
		for i++; i < n && entryAt(p, i).hash < h; i++ {
		}
	} else {
		for i > 0 && entryAt(p, i-1).hash >= h {
			i--
		}
	}
	return findEqual(p, i, n, h, k)
}

// findEqual looks for k among the entries of hash h from i, the first
// entry of the n at p with a hash >= h.
func findEqual(p unsafe.Pointer, i, n uintptr, h, k uint64) (uint64, bool) {
	for ; i < n; i++ {
		if e := entryAt(p, i); e.hash != h {
			break
		} else if e.key == k {
			return e.val, true
		}
	}
	return 0, false
}

type windowLookup struct{ s *sortedLeaves }

func (l windowLookup) get(k uint64) (uint64, bool) { return l.s.getWindow(mix(k), k) }

// startsLeaves are sortedLeaves behind slots that hold, beside the leaf's
// length (bits 56-61), the index of the first entry of each eighth j of
// the leaf's hash range (bits 8+6j; eighth 0 starts at 0).
type startsLeaves struct {
	dir   []startsSlot
	shift uint
}

type startsSlot struct {
	p    unsafe.Pointer
	meta uint64
}

func newStartsLeaves(s *sortedLeaves) *startsLeaves {
	l := &startsLeaves{dir: make([]startsSlot, len(s.dir)), shift: s.shift}
	for i, slot := range s.dir {
		if slot.n > 63 {
			panic("leaf of more than 63 entries: no room for its starts")
		}
		meta := uint64(slot.n) << 56
		for _, e := range unsafe.Slice((*layoutEntry)(slot.p), slot.n) {
			for j := (e.hash << (64 - s.shift)) >> 61; j < 7; j++ {
				meta += 1 << (8 + 6*(j+1)) // one more entry before eighth j+1
			}
		}
		l.dir[i] = startsSlot{slot.p, meta}
	}
	return l
}

func (l *startsLeaves) get(h, k uint64) (uint64, bool) {
	slot := &l.dir[h>>l.shift]
	p, meta := slot.p, slot.meta
	n := uintptr(meta >> 56 & 63)
	rest := h << (64 - l.shift)
	lo := uintptr(meta >> (8 + 6*(rest>>61)) & 63)
	i := lo
	if n >= 4 {
		j := min(lo, n-4)
		w := unsafe.Pointer(entryAt(p, j))
		_, c0 := bits.Sub64(entryAt(w, 0).hash, h, 0)
		_, c1 := bits.Sub64(entryAt(w, 1).hash, h, 0)
		_, c2 := bits.Sub64(entryAt(w, 2).hash, h, 0)
		_, c3 := bits.Sub64(entryAt(w, 3).hash, h, 0)
		c := uintptr(c0 + c1 + c2 + c3)
		i = j + c
		if c == 4 {
			for ; i < n && entryAt(p, i).hash < h; i++ {
			}
		}
	} else {
		for ; i < n && entryAt(p, i).hash < h; i++ {
		}
	}
	return findEqual(p, i, n, h, k)
}

type startsLookup struct{ l *startsLeaves }

func (l startsLookup) get(k uint64) (uint64, bool) { return l.l.get(mix(k), k) }
