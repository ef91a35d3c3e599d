package cow

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"
)

// Shape of the hash trie. A branch at depth d splits on hash bits
// [64-mapBits*(d+1), 64-mapBits*d), most significant first, so an in-order
// walk visits entries in ascending hash order.
const (
	mapBits    = 5            // hash bits consumed per level
	mapFanout  = 1 << mapBits // slots per branch
	mapLeafMax = 48           // a subtree with at most this many entries is one leaf
	mapDepths  = 64 / mapBits // depth from which no hash bits are left to split on
)

// mapEntry is one key-value pair with its cached hash. Leaves keep entries
// sorted by hash; entries with equal hashes (true 64-bit collisions) stay in
// the order they were inserted.
type mapEntry[K comparable, V any] struct {
	hash uint64
	key  K
	val  V
}

// mapSlot is one subtree: a branch, a leaf, or nothing (p == nil). A leaf
// is a single array of entries sorted by hash, held directly by the slot
// that points to it (p, and in meta its n entries, capacity c and the
// starts of its eighths): one heap object per leaf, a lookup goes from the
// parent's slot straight to the few entries the slot says to compare, and
// a slot is two words, so a branch stays small enough to copy cheaply. A
// branch slot has meta == metaBranch.
//
// # Canonical shape
//
// A subtree is a leaf exactly when it holds at most mapLeafMax entries (or
// when no hash bits are left to split on); otherwise it is a branch. The shape
// therefore depends only on the set of keys, never on the order of inserts
// and deletes: inserts split a leaf that grows past mapLeafMax, deletes
// collapse a branch that shrinks to mapLeafMax. Equal key sets give equal
// shapes, which is what makes Diff exact and cheap.
//
// # Ownership
//
// A branch records the Owner epoch it was created in and is mutated in place
// only while owner.writable(epoch); otherwise a live capture may see it and
// the writer works on a copy stamped with the writer epoch. A leaf has no
// epoch of its own: its parent's owned bitmap says which leaves the writer
// allocated while that branch object was writable. Such a leaf is reachable
// from that branch only, and so from a capture only if the branch is; it is
// written in place exactly when the branch is writable and its bit is set.
// Copying a branch clears the bitmap: the copy shares every leaf until it
// writes it, and shares it only with the original, which only the captures
// live at the copy reach: with no live capture at all, every node the live
// root reaches is the writer's, and an update writes in place without
// reading epochs or bitmaps (Map.updateInPlace); so it is, with captures
// live, once the writer has copied every leaf since the newest (ownedAll).
// (The root leaf's epoch is kept by the Map.) Nothing reachable from a
// live capture is ever written, so any number of goroutines may read it.
type mapSlot[K comparable, V any] struct {
	p    unsafe.Pointer // *mapBranch[K, V] or the first mapEntry[K, V] of a leaf
	meta slotMeta       // branch mark, or the leaf's length, capacity and starts
}

// slotMeta is a slot's second word: metaBranch for a branch, 0 for
// nothing, and for a leaf its length n and capacity c, and, for a leaf of
// at most leafStartsMaxLen entries (every leaf of a trie whose hashes
// spread), where the entries of each eighth of its hash range start:
//
//	bits  0-6   c, or 127 if it is more (a leaf that shrank in place)
//	bit   7     metaStarts: bits 14-55 hold the starts
//	bits  8-13  0, the start of the first eighth
//	bits 14-55  the starts of eighths 1-7, six bits each
//	bits 56-61  n (up to 63)
//	bit   62    metaWide: n is bits 8-34 and c bits 35-61 (bits 0-7 are
//	            0), no starts
//	bit   63    metaBranch
//
// Eighth j of a leaf at depth d holds the hashes whose 3 bits below the
// d*mapBits of the leaf's prefix are j: entry start(j) is the first with a
// hash of eighth j or above. The walk reads the slot's line anyway, so a
// lookup learns there, with no load of its own, which few entries to
// compare: about 4 in a leaf of 30, 1 or 2 in a leaf of 10, where
// interpolating the position and counting over a window of eight (the
// search of a leaf without starts) reads two to four lines of entries, and
// a leaf of fewer than 16 is scanned with a branch on each compare
// (BenchmarkLeafStarts at 1M entries: 40.2-42.2 ns a lookup against
// 50.7-54.0; BenchmarkGet at 10K, all in cache: 21.2-22.1 against
// 36.1-38.4; docs/decisions/0069).
type slotMeta uint64

const (
	metaBranch slotMeta = 1 << 63
	metaWide   slotMeta = 1 << 62
	metaStarts slotMeta = 1 << 7

	metaLenShift   = 56
	metaStartShift = 8 // start(j) is at metaStartShift + startBits*j
	startBits      = 6
	startMask      = 1<<startBits - 1
	wideShift      = 8 // a wide leaf's n; its c is wideBits above
	wideBits       = 27
	wideMask       = 1<<wideBits - 1

	// leafStartsMaxLen is the longest leaf whose slot holds its starts:
	// the most a start's six bits can say (the longest leaf of a trie
	// whose hashes spread is mapLeafMax).
	leafStartsMaxLen = startMask
	// leafNarrowMaxCap is the most capacity the slot of a leaf with starts
	// records: the rest of a larger one goes unused.
	leafNarrowMaxCap = 127
)

// eighth returns the eighth of a leaf's hash range that rest falls in
// (rest: the hash with the leaf's prefix shifted out, seekLeaf's).
func eighth(rest uint64) uint { return uint(rest >> 61) }

// restAt returns hash h with the prefix of a leaf at depth shifted out:
// seekLeaf's rest, whose top bits say h's eighth.
func restAt(h uint64, depth int) uint64 { return h << min(63, mapBits*depth) }

// narrowCap is the capacity field of the meta of a leaf with starts for
// a capacity of c: c, or leafNarrowMaxCap if it is more.
func narrowCap(c int) slotMeta { return slotMeta(min(c, leafNarrowMaxCap)) }

// withCap returns the meta of a leaf with starts m with its capacity
// field set for a capacity of c.
func (m slotMeta) withCap(c int) slotMeta { return m&^leafNarrowMaxCap | narrowCap(c) }

// startsAbove is what an entry of eighth j adds to the starts of every
// later eighth (an insert adds it, a delete subtracts it): startsAbove[j]
// has a 1 in the field of each eighth after j.
var startsAbove = func() (a [8]slotMeta) {
	for j := range 8 {
		for k := j + 1; k < 8; k++ {
			a[j] |= 1 << (metaStartShift + startBits*k)
		}
	}
	return a
}()

// mapBranch is an interior node: one slot per value of the next mapBits hash
// bits, and the number of entries below it.
//
// id is unique among all branches of the process; a branch made by copying
// another records the original's id in origin and marks in dirty every slot
// written since the copy. The original is never written again (the live
// tree reaches the copy instead), so a diff of the original against the copy
// compares only the dirty slots.
type mapBranch[K comparable, V any] struct {
	epoch  uint64
	count  int
	owned  uint32 // leaves allocated under this branch object (see mapSlot)
	dirty  uint32 // slots written since this branch was copied from origin
	id     uint64
	origin uint64 // id of the branch this one is a copy of; 0 if none
	kids   [mapFanout]mapSlot[K, V]
	same   sameBounds // kept in a copy only (origin != 0)
}

// leafSame bounds from below how many leading (prefix) and trailing
// (suffix) entries of the leaf in slot slot-1 of a copied branch are, bit
// for bit, entries of the leaf in the same slot of the original: a diff of
// the original against the copy compares only what lies between, typically
// one entry of each leaf instead of all of both. Bounds saturate at 255;
// slot 0 marks an unused record.
//
// A copy has room for the bounds of leafSameMax slots, kept for the first
// slots it writes; a written slot with no record has bounds 0 (the diff
// compares its leaves whole). The record is made when the slot is first
// written, with what that write touched (narrow), and every later write of
// the slot or of its leaf lowers it; a write that replaces a leaf wholesale
// lowers it to 0. Writes made while no capture is live are not recorded (a
// put's fast path then reads no branch header): the original is then in no
// live capture, so no diff can pair it with the copy again. Nor are writes
// made once the writer has copied every node since the newest capture,
// which take the same paths: every copy's bounds are spent first
// (ownedAll), so a diff compares those leaves whole.
type leafSame struct{ slot, prefix, suffix uint8 }

// leafSameMax is how many slots a copy keeps bounds for: what fits in the
// room its size class leaves. A branch is 552 bytes without them, and the
// allocator puts an 8-byte header before an object of more than 512 bytes
// that holds pointers: 567 bytes and the header are the 576-byte class;
// one more record would make it 640. A checkpoint interval of a few writes
// per branch stays within.
const leafSameMax = 5

// leafEdit says what one write did to a leaf: how many leading and trailing
// entries of the new leaf are untouched entries of the old one.
type leafEdit struct{ prefix, suffix int }

// rebuilt is the edit of a write that may have changed any entry (or left
// no leaf).
var rebuilt leafEdit

// editAt is the edit of a write that updates or inserts entry i of a leaf
// holding n entries after the write. (A delete of entry i leaves i leading
// and n-1-i trailing entries of the n before it untouched: del makes its
// own.)
func editAt(i, n int) leafEdit { return leafEdit{i, n - 1 - i} }

// sameBounds is a copy's leafSame records, field by field: the five slot
// bytes side by side are compared with a slot's in one word (find).
// Scanning the records one by one cost each write under a copied branch
// up to 55 instructions, most when all five are taken by other slots, the
// common case between two captures (BenchmarkValueUpdate's loop with a
// capture held, callgrind at 1M keys: 482 -> 455 instructions an update).
type sameBounds struct {
	slot   [leafSameMax]uint8 // the record's slot + 1; 0: unused
	prefix [leafSameMax]uint8
	suffix [leafSameMax]uint8
}

// find returns the index of the first record whose slot byte is x, or -1.
// A byte of w^x·0x0101010101 is zero where the record's slot is x; the
// three bytes above the five are set, and the lowest zero byte is found
// by the borrow trick (a false positive can only lie above a true zero).
func (s *sameBounds) find(x uint8) int {
	w := uint64(binary.LittleEndian.Uint32(s.slot[:4])) | uint64(s.slot[4])<<32
	y := (w ^ 0x0101010101*uint64(x)) | 0xffffff<<40
	z := (y - 0x0101010101010101) &^ y & 0x8080808080808080
	if z == 0 {
		return -1
	}
	return bits.TrailingZeros64(z) >> 3
}

// narrow records edit e of slot i in a copy: it lowers the slot's bounds,
// or when first says the slot is written for the first time since the copy,
// makes its record (if there is room). Records are made in order and never
// removed, so a slot's record lies before any unused one.
func (b *mapBranch[K, V]) narrow(i int, e leafEdit, first bool) {
	if b.origin == 0 {
		return
	}
	s := &b.same
	if j := s.find(uint8(i + 1)); j >= 0 {
		s.prefix[j] = uint8(min(int(s.prefix[j]), e.prefix))
		s.suffix[j] = uint8(min(int(s.suffix[j]), e.suffix))
		return
	}
	// No record means bounds 0: a first write that leaves nothing to bound
	// (a rewrite, a branch) spends none.
	if first && e != rebuilt {
		if j := s.find(0); j >= 0 {
			s.slot[j], s.prefix[j], s.suffix[j] = uint8(i+1), uint8(min(255, e.prefix)), uint8(min(255, e.suffix))
		}
	}
}

// sameAt returns the bounds of slot i of a copy (0 and 0 without a record).
func (b *mapBranch[K, V]) sameAt(i int) leafSame {
	s := &b.same
	if j := s.find(uint8(i + 1)); j >= 0 {
		return leafSame{s.slot[j], s.prefix[j], s.suffix[j]}
	}
	return leafSame{}
}

// branchIDs numbers branches; ids must be unique across maps, since
// unrelated maps may be diffed.
var branchIDs atomic.Uint64

func branchSlot[K comparable, V any](b *mapBranch[K, V]) mapSlot[K, V] {
	return mapSlot[K, V]{p: unsafe.Pointer(b), meta: metaBranch}
}

// lenCap is the meta of a leaf of n entries (n > 0) and capacity c,
// without starts.
func lenCap(n, c int) slotMeta {
	if n <= leafStartsMaxLen {
		return slotMeta(n)<<metaLenShift | narrowCap(c)
	}
	if c > wideMask {
		// Only keys whose hashes share their first 60 bits share a leaf
		// past mapLeafMax entries.
		panic("cow: a leaf of 2^27 entries: the map's hash function gives too many keys the same hash")
	}
	return metaWide | slotMeta(c)<<(wideShift+wideBits) | slotMeta(n)<<wideShift
}

// leafSlot returns the slot of a leaf at depth holding ents (nothing if
// empty), with the starts of its eighths exactly when it has at most
// leafStartsMaxLen entries. O(len(ents)): a write that moves no entry
// keeps its slot's starts (withEntries), one that inserts or deletes one
// entry shifts them (inserted, deleted).
func leafSlot[K comparable, V any](ents []mapEntry[K, V], depth int) mapSlot[K, V] {
	if len(ents) == 0 {
		return mapSlot[K, V]{}
	}
	meta := lenCap(len(ents), cap(ents))
	if meta&metaWide == 0 {
		meta |= leafStarts(ents, depth)
	}
	return mapSlot[K, V]{p: unsafe.Pointer(unsafe.SliceData(ents)), meta: meta}
}

// leafStarts returns the starts of the eighths of a leaf at depth holding
// ents (at most leafStartsMaxLen), with metaStarts.
func leafStarts[K comparable, V any](ents []mapEntry[K, V], depth int) slotMeta {
	meta := metaStarts
	for i := range ents {
		meta += startsAbove[eighth(restAt(ents[i].hash, depth))]
	}
	return meta
}

// rawLeafSlot returns the slot of the leaf of n entries at p with
// capacity c, without starts: for a view of part of a leaf (a diff's),
// which a search reads by interpolation, or a leaf of more than
// leafStartsMaxLen entries.
func rawLeafSlot[K comparable, V any](p unsafe.Pointer, n, c int) mapSlot[K, V] {
	if n == 0 {
		return mapSlot[K, V]{}
	}
	return mapSlot[K, V]{p: p, meta: lenCap(n, c)}
}

// withEntries returns the slot of ents, a leaf holding the entries of the
// leaf of s in the same places (s's entries or a copy of them, values
// changed or not): s's length and starts, ents' address and capacity.
func (s *mapSlot[K, V]) withEntries(ents []mapEntry[K, V]) mapSlot[K, V] {
	if s.meta&metaStarts == 0 { // a leaf of the tree without starts is wide
		return rawLeafSlot[K, V](unsafe.Pointer(unsafe.SliceData(ents)), len(ents), cap(ents))
	}
	return mapSlot[K, V]{p: unsafe.Pointer(unsafe.SliceData(ents)), meta: s.meta.withCap(cap(ents))}
}

// inserted returns the slot of ents, the leaf of s at depth with one
// entry of hash h inserted: s's starts shifted past h's eighth, in O(1),
// when s has starts and ents still fits them.
func (s *mapSlot[K, V]) inserted(ents []mapEntry[K, V], h uint64, depth int) mapSlot[K, V] {
	if s.meta&metaStarts == 0 || len(ents) > leafStartsMaxLen {
		return leafSlot(ents, depth)
	}
	meta := s.meta.withCap(cap(ents))
	meta += 1<<metaLenShift + startsAbove[eighth(restAt(h, depth))]
	return mapSlot[K, V]{p: unsafe.Pointer(unsafe.SliceData(ents)), meta: meta}
}

// deleted returns the slot of ents, the leaf of s at depth with its entry
// of hash h deleted (nothing if ents is empty), in O(1) as inserted.
func (s *mapSlot[K, V]) deleted(ents []mapEntry[K, V], h uint64, depth int) mapSlot[K, V] {
	if len(ents) == 0 {
		return mapSlot[K, V]{}
	}
	if s.meta&metaStarts == 0 {
		return leafSlot(ents, depth)
	}
	meta := s.meta.withCap(cap(ents))
	meta -= 1<<metaLenShift + startsAbove[eighth(restAt(h, depth))]
	return mapSlot[K, V]{p: unsafe.Pointer(unsafe.SliceData(ents)), meta: meta}
}

// branch returns the slot's branch, or nil.
func (s *mapSlot[K, V]) branch() *mapBranch[K, V] {
	if s.meta != metaBranch {
		return nil
	}
	return (*mapBranch[K, V])(s.p)
}

// isBranch reports whether the slot holds a branch: the sign of its meta,
// a test and a jump where a compare with metaBranch needs the constant
// loaded first, at each level of a walk.
func (s *mapSlot[K, V]) isBranch() bool { return int64(s.meta) < 0 }

// isLeaf reports whether the slot holds a leaf.
func (s *mapSlot[K, V]) isLeaf() bool { return int64(s.meta) > 0 }

// len returns the number of entries of a leaf slot (0 for a branch or
// nothing).
func (s *mapSlot[K, V]) len() int {
	if s.meta&metaWide != 0 {
		return int(s.meta >> wideShift & wideMask)
	}
	return int(s.meta >> metaLenShift & startMask)
}

// capacity returns the capacity of a leaf slot (0 for a branch or
// nothing).
func (s *mapSlot[K, V]) capacity() int {
	if s.meta&metaWide != 0 {
		return int(s.meta >> (wideShift + wideBits) & wideMask)
	}
	return int(s.meta & leafNarrowMaxCap)
}

// ents returns the entries of a leaf slot (nil for a branch or nothing),
// with the leaf's spare capacity.
func (s *mapSlot[K, V]) ents() []mapEntry[K, V] {
	if !s.isLeaf() {
		return nil
	}
	return unsafe.Slice((*mapEntry[K, V])(s.p), s.capacity())[:s.len()]
}

// count returns the number of entries in the subtree.
func (s *mapSlot[K, V]) count() int {
	if b := s.branch(); b != nil {
		return b.count
	}
	return s.len()
}

// same reports whether two slots are the same subtree by identity. Captured
// nodes are never written, so for two captures identity implies equal
// contents.
func (s *mapSlot[K, V]) same(o *mapSlot[K, V]) bool { return s.p == o.p && s.len() == o.len() }

// slotAt returns the slot of hash h in a branch at depth.
func slotAt(h uint64, depth int) int {
	return int(h << (mapBits * depth) >> (64 - mapBits))
}

// leafAt returns the i-th entry of the leaf whose first entry is at p.
// No bounds check: callers keep i below the leaf's length.
func leafAt[K comparable, V any](p unsafe.Pointer, i uintptr) *mapEntry[K, V] {
	return (*mapEntry[K, V])(unsafe.Add(p, i*unsafe.Sizeof(mapEntry[K, V]{})))
}

// seekLeaf walks from slot s down to the leaf of hash h and finds key k
// in it: it returns the key's value, entry and index, and true; or the
// zero V, nil, the index of the first entry with hash >= h (where k would
// go; 0 in an empty subtree) and false. rest is h with the bits of s's
// prefix shifted out (the bits below it at the top). A caller whose own
// walk found the leaf (checking epochs on the way, say) passes the leaf's
// slot, and the walk here does nothing; a lookup passes the root, and
// the walk and the search are one function with no call between them:
// 18 instructions fewer a lookup than a walk that calls the search
// (callgrind, BenchmarkGet at size=10000; decision 0058), which lets the next lookups'
// misses start sooner at 1M entries (see the last paragraph).
//
// In a leaf whose slot holds the starts of its eighths (slotMeta: every
// leaf of up to 63 entries), the search counts the hashes below h among
// the startWindow entries from the start of h's eighth, with no branch on
// the outcome, and scans on only if all are below. Without them:
// the hashes of a leaf at depth share their first mapBits*depth bits and are
// spread uniformly below, so the position is interpolated from the remaining
// bits (the error of the guess grows as the square root of the leaf size,
// about three entries at 30). In a leaf of leafWindow entries or more, the
// entries with a smaller hash are counted among the leafWindow around the
// guess with no branch on the outcome, and only a count of none or all
// scans on: a branch on each compare, which the leaf's cache miss decides,
// is mispredicted about once a lookup, and its flush ends the CPU's run
// ahead into the next lookups (BenchmarkJob, keys=1000000, every=none:
// 194-214 ns an event with the branching scan, 179-189 with the count,
// side by side; BenchmarkGet at size=1000000 175-189 against 153-166).
//
// The leaf is addressed by pointer with no bounds checks, and the function
// calls nothing (no stack check, nothing saved around a call): this is the
// innermost loop of every read and write. The value is returned with the
// entry because reading it through the entry after the return would wait
// on the leaf's load again.
// Every instruction here counts twice: an event whose instructions
// overflow the CPU's reorder window cannot start its cache miss while
// the event before it waits on its own (decision 0041).
func seekLeaf[K comparable, V any](s *mapSlot[K, V], h, rest uint64, k K) (V, *mapEntry[K, V], uintptr, bool) {
	for s.isBranch() {
		s = &(*mapBranch[K, V])(s.p).kids[rest>>(64-mapBits)]
		rest <<= mapBits
	}
	var p unsafe.Pointer
	var n, i uintptr // i: the first entry with a hash >= h
	if meta := s.meta; meta&metaStarts != 0 {
		// The entries of h's eighth start at lo: every entry before lo
		// has a smaller hash. Count those below h among startWindow
		// entries from lo (or the leaf's last ones, all below h up to lo)
		// with no branch; only a count of all scans on.
		p, n = s.p, uintptr(meta>>metaLenShift&startMask)
		lo := uintptr(meta >> (metaStartShift + startBits*eighth(rest)) & startMask)
		i = lo
		if n >= startWindow {
			j := min(lo, n-startWindow)
			w := unsafe.Pointer(leafAt[K, V](p, j))
			_, c0 := bits.Sub64(leafAt[K, V](w, 0).hash, h, 0)
			_, c1 := bits.Sub64(leafAt[K, V](w, 1).hash, h, 0)
			_, c2 := bits.Sub64(leafAt[K, V](w, 2).hash, h, 0)
			_, c3 := bits.Sub64(leafAt[K, V](w, 3).hash, h, 0)
			c := uintptr(c0 + c1 + c2 + c3)
			i = j + c
			if c == startWindow {
				for ; i < n && leafAt[K, V](p, i).hash < h; i++ {
				}
			}
		} else {
			for ; i < n && leafAt[K, V](p, i).hash < h; i++ {
			}
		}
	} else {
		if meta == 0 {
			var zero V
			return zero, nil, 0, false
		}
		p, n = s.p, uintptr(s.len())
		i = uintptr((rest >> 32) * uint64(n) >> 32)
		if n >= leafWindowMin {
			j := min(i-min(i, leafWindow/2), n-leafWindow)
			// Count the window's hashes below h with no branch, each one
			// load at a constant offset from the window's first entry w.
			// Written out: a loop's compares measured 8% slower
			// (BenchmarkJob), and as a function of its own, with hashes
			// addressed by index from p, the walk, search and window took
			// 161 instructions a lookup against 127 here (instructions
			// counted by callgrind at 1K keys, decision 0041).
			w := unsafe.Pointer(leafAt[K, V](p, j))
			_, c0 := bits.Sub64(leafAt[K, V](w, 0).hash, h, 0)
			_, c1 := bits.Sub64(leafAt[K, V](w, 1).hash, h, 0)
			_, c2 := bits.Sub64(leafAt[K, V](w, 2).hash, h, 0)
			_, c3 := bits.Sub64(leafAt[K, V](w, 3).hash, h, 0)
			_, c4 := bits.Sub64(leafAt[K, V](w, 4).hash, h, 0)
			_, c5 := bits.Sub64(leafAt[K, V](w, 5).hash, h, 0)
			_, c6 := bits.Sub64(leafAt[K, V](w, 6).hash, h, 0)
			_, c7 := bits.Sub64(leafAt[K, V](w, 7).hash, h, 0)
			c := uintptr(c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7)
			i = j + c
			if c == 0 {
				for i > 0 && leafAt[K, V](p, i-1).hash >= h {
					i--
				}
			} else if c == leafWindow {
				for ; i < n && leafAt[K, V](p, i).hash < h; i++ {
				}
			}
		} else if leafAt[K, V](p, i).hash < h {
			for i++; i < n && leafAt[K, V](p, i).hash < h; i++ {
			}
		} else {
			for i > 0 && leafAt[K, V](p, i-1).hash >= h {
				i--
			}
		}
	}
	for j := i; j < n; j++ {
		e := leafAt[K, V](p, j)
		if e.hash != h {
			break
		}
		if e.key == k {
			return e.val, e, j, true
		}
	}
	var zero V
	return zero, nil, i, false
}

// leafWindow is how many entries around the interpolated position a leaf
// search compares with no branch on the outcome (seekLeaf): four entries
// on either side of the guess (24 or 32 bytes each for a state's int64
// keys and values), where the guess is off by three or fewer in most
// lookups at the leaf sizes of 1M-10M entries.
const leafWindow = 8

// leafWindowMin is the least leaf length searched by a window: in a
// shorter leaf (about 10 entries at 10M) the window would read most of the
// leaf's lines where the scan reads one or two, and gain nothing
// (BenchmarkJob, keys=10000000).
const leafWindowMin = 2 * leafWindow

// startWindow is how many entries from the start of a hash's eighth a
// leaf search compares with no branch on the outcome, in a leaf whose
// slot holds the starts: an eighth of a leaf of 30 entries holds about
// four.
const startWindow = 4

// findEntry returns the index of key k with hash h in the leaf of slot s
// at depth, or the index where it would be inserted.
func findEntry[K comparable, V any](s *mapSlot[K, V], h uint64, k K, depth int) (int, bool) {
	if !s.isLeaf() {
		return 0, false
	}
	_, _, i, found := seekLeaf(s, h, restAt(h, depth), k)
	return int(i), found
}

// lookup finds k (hash h) below s. Read-only: safe on captured nodes.
// The writer's lookups that return the entry to write it call seekLeaf
// from the root themselves, and so does this: a helper between them and
// seekLeaf is a call the compiler does not inline.
func (s *mapSlot[K, V]) lookup(h uint64, k K) (V, bool) {
	v, _, _, ok := seekLeaf(s, h, h, k)
	return v, ok
}

// appendEntries appends every entry below s in hash order.
func (s *mapSlot[K, V]) appendEntries(dst []mapEntry[K, V]) []mapEntry[K, V] {
	b := s.branch()
	if b == nil {
		return append(dst, s.ents()...)
	}
	for i := range b.kids {
		dst = b.kids[i].appendEntries(dst)
	}
	return dst
}

// all yields every entry below s in hash order, calling check (if not nil)
// before each leaf; false means the consumer stopped.
func (s *mapSlot[K, V]) all(yield func(K, V) bool, check func()) bool {
	if b := s.branch(); b != nil {
		for i := range b.kids {
			if !b.kids[i].all(yield, check) {
				return false
			}
		}
		return true
	}
	ents := s.ents()
	if len(ents) > 0 && check != nil {
		check()
	}
	for i := range ents {
		if !yield(ents[i].key, ents[i].val) {
			return false
		}
	}
	return true
}

// slotEnd returns the end of the run of entries from i on that fall into
// slot s at depth, for entries sorted by hash that share their prefix above
// depth, with slotAt(ents[i].hash, depth) == s. The end is guessed from the
// slots the rest of the entries span, as if they were spread evenly (hashes
// are uniform), and corrected by a scan: a few entries are read per kid
// where a scan from i reads them all, on each level a restore builds
// (BenchmarkRestore). Any distribution gives the right end, a skewed one
// only more slowly.
func slotEnd[K comparable, V any](ents []mapEntry[K, V], i, s, depth int) int {
	n := len(ents)
	span := slotAt(ents[n-1].hash, depth) - s + 1
	j := min(n, i+max(1, (n-i)/span))
	if slotAt(ents[j-1].hash, depth) == s {
		for j < n && slotAt(ents[j].hash, depth) == s {
			j++
		}
		return j
	}
	for slotAt(ents[j-1].hash, depth) != s { // ents[i] is in s: stops at i+1
		j--
	}
	return j
}

// buildSlot returns the canonical subtree at depth for entries sorted by
// hash, with branches stamped with epoch and every leaf freshly allocated
// (owned by its new parent).
func buildSlot[K comparable, V any](ents []mapEntry[K, V], depth int, epoch uint64) mapSlot[K, V] {
	return build(ents, depth, epoch, true)
}

// build returns the canonical subtree of ents at depth; its leaves are
// copies of their runs of ents (clone), or slices of ents itself, each
// capped at its own length so that an in-place insert into one never
// spills into the next.
func build[K comparable, V any](ents []mapEntry[K, V], depth int, epoch uint64, clone bool) mapSlot[K, V] {
	if len(ents) == 0 {
		return mapSlot[K, V]{}
	}
	if len(ents) <= mapLeafMax || depth >= mapDepths {
		if clone {
			return leafSlot(slices.Clone(ents), depth)
		}
		return leafSlot(ents[:len(ents):len(ents)], depth)
	}
	b := &mapBranch[K, V]{epoch: epoch, count: len(ents), id: branchIDs.Add(1)}
	// Entries sorted by hash are grouped by slot: each kid is one run.
	for i := 0; i < len(ents); {
		s := slotAt(ents[i].hash, depth)
		j := slotEnd(ents, i, s, depth)
		b.kids[s] = build(ents[i:j], depth+1, epoch, clone)
		if b.kids[s].isLeaf() {
			b.owned |= 1 << s
		}
		i = j
	}
	return branchSlot(b)
}
