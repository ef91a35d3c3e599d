package cow

import (
	"reflect"
	"unsafe"
)

// Scan calls yield for every entry of the snapshot whose hash is in
// [lo, hi] (inclusive), in hash order, with the entry's hash, until yield
// returns false. Subtrees outside the range are skipped, so scanning one key
// group's hash range costs that range, not the map. Any goroutine while the
// snapshot is live.
func (s *MapSnapshot[K, V]) Scan(lo, hi uint64, yield func(h uint64, k K, v V) bool) {
	s.ScanRefs(lo, hi, func(h uint64, k *K, v V) bool { return yield(h, *k, v) })
}

// ScanRefs is Scan passing each key by pointer into the snapshot's own
// memory, which no write touches while the snapshot is live: the pointer,
// and anything made from it without copying (a string over a key's bytes),
// stays valid and unchanged until Release, and must not be written
// through. It spares the copy of a large key per entry.
func (s *MapSnapshot[K, V]) ScanRefs(lo, hi uint64, yield func(h uint64, k *K, v V) bool) {
	s.capture.mustRead()
	s.mustNotBePassed(lo)
	s.root.scan(0, 0, lo, hi, yield, s.capture.mustRead)
}

// Scan is MapSnapshot.Scan for a root value (all hashes: lo 0, hi
// math.MaxUint64 for the whole map).
func (r MapRoot[K, V]) Scan(lo, hi uint64, yield func(h uint64, k K, v V) bool) {
	r.slot.scan(0, 0, lo, hi, func(h uint64, k *K, v V) bool { return yield(h, *k, v) }, nil)
}

// scan visits the entries below s (at depth, covering hashes that start with
// the mapBits*depth bits of prefix) whose hash is in [lo, hi].
func (s *mapSlot[K, V]) scan(depth int, prefix, lo, hi uint64, yield func(uint64, *K, V) bool, check func()) bool {
	if b := s.branch(); b != nil {
		shift := 64 - mapBits*(depth+1)
		touchLeaves(b, prefix, shift, lo, hi)
		for i := range b.kids {
			p := prefix | uint64(i)<<shift
			end := p | (uint64(1)<<shift - 1)
			if end < lo || p > hi {
				continue
			}
			if !b.kids[i].scan(depth+1, p, lo, hi, yield, check) {
				return false
			}
		}
		return true
	}
	ents := s.ents()
	if len(ents) > 0 && check != nil {
		check()
	}
	from := 0
	if lo > prefix { // only a leaf the range starts in needs a search
		from = searchHashFrom(ents, lo)
	}
	if stringKeys[K]() {
		touchKeys(ents[from:])
	}
	for i := from; i < len(ents) && ents[i].hash <= hi; i++ {
		if !yield(ents[i].hash, &ents[i].key, ents[i].val) {
			return false
		}
	}
	return true
}

// searchHashFrom returns the first index of ents with hash >= h (binary
// search: ranges start anywhere in a leaf).
func searchHashFrom[K comparable, V any](ents []mapEntry[K, V], h uint64) int {
	lo, hi := 0, len(ents)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ents[m].hash < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// touchLeaves loads every line of every leaf of b (a branch covering
// prefix, whose kids split on the bits above shift) with hashes in
// [lo, hi], before the scan visits them: the leaves of a branch are
// scattered in memory, so each is a cache miss, and loads issued together
// overlap where loads issued as the scan reaches each leaf come one after
// the other (snapshot write of 1M entries 43 -> 36 ms with the first word
// of each leaf loaded and the search below skipped; every line rather
// than the first word: BenchmarkSnapshotWrite 18.0-20.3 -> 14.1-15.7 ms at
// 1M, 246-265 -> 207-228 at 10M, side by side; touching the next
// branch's leaves a branch ahead as well gained nothing).
func touchLeaves[K comparable, V any](b *mapBranch[K, V], prefix uint64, shift int, lo, hi uint64) {
	var sink uint64
	for i := range b.kids {
		p := prefix | uint64(i)<<shift
		if k := &b.kids[i]; k.isLeaf() && p|(uint64(1)<<shift-1) >= lo && p <= hi {
			sink += touchLines(uintptr(k.p), uintptr(k.len())*unsafe.Sizeof(mapEntry[K, V]{}))
		}
	}
	keep(sink)
}

// stringKeys reports whether K is a string type: their bytes live apart
// from the entry, one cache miss each in a big map.
func stringKeys[K comparable]() bool {
	return reflect.TypeFor[K]().Kind() == reflect.String
}

// touchKeys loads the first byte of every key of a leaf of string keys
// before the leaf is visited: the loads are independent, so their cache
// misses overlap instead of coming one per entry as the consumer copies
// each key.
func touchKeys[K comparable, V any](ents []mapEntry[K, V]) {
	var sink uint64
	for i := range ents {
		k := *(*string)(unsafe.Pointer(&ents[i].key))
		if len(k) > 0 {
			sink += uint64(*unsafe.StringData(k))
		}
	}
	keep(sink)
}

// ScanLeaves is ScanRefs a leaf at a time: it calls yield with the
// entries of each leaf whose hash is in [lo, hi], in hash order, as a
// slice of the snapshot's own memory, until yield returns false. Entries
// of equal hash are always in one call. A consumer that loops over the
// slice makes no call per entry: a snapshot write's encoder runs so. The
// slice must not be written, and stays valid and unchanged until Release.
// Any goroutine while the snapshot is live.
func (s *MapSnapshot[K, V]) ScanLeaves(lo, hi uint64, yield func(ents []MapEntry[K, V]) bool) {
	s.capture.mustRead()
	s.mustNotBePassed(lo)
	s.root.scanLeaves(0, 0, lo, hi, yield, s.capture.mustRead)
}

// scanLeaves is scan a leaf at a time (see ScanLeaves).
func (s *mapSlot[K, V]) scanLeaves(depth int, prefix, lo, hi uint64, yield func([]MapEntry[K, V]) bool, check func()) bool {
	if b := s.branch(); b != nil {
		shift := 64 - mapBits*(depth+1)
		touchLeaves(b, prefix, shift, lo, hi)
		for i := range b.kids {
			p := prefix | uint64(i)<<shift
			end := p | (uint64(1)<<shift - 1)
			if end < lo || p > hi {
				continue
			}
			if !b.kids[i].scanLeaves(depth+1, p, lo, hi, yield, check) {
				return false
			}
		}
		return true
	}
	ents := s.ents()
	if len(ents) == 0 {
		return true
	}
	check()
	from, to := 0, len(ents)
	if lo > prefix { // only leaves a range starts or ends in need a search
		from = searchHashFrom(ents, lo)
	}
	if ents[to-1].hash > hi {
		to = from + searchHashFrom(ents[from:], hi+1) // hi+1 does not wrap: a hash is above hi
	}
	if stringKeys[K]() {
		touchKeys(ents[from:to])
	}
	if from == to {
		return true
	}
	return yield(publicEntries(ents[from:to]))
}

// publicEntries is mapEntries backwards: leaf entries as MapEntry values.
func publicEntries[K comparable, V any](ents []mapEntry[K, V]) []MapEntry[K, V] {
	return unsafe.Slice((*MapEntry[K, V])(unsafe.Pointer(unsafe.SliceData(ents))), len(ents))
}

// ScanLive is Scan of the map's current version, without a capture: it
// calls yield for every entry whose hash is in [lo, hi], in hash order,
// until yield returns false. k points into the map's own memory and is
// valid only during the call. yield must not write the map (collect what
// to change and write after the scan returns). It takes nothing the map
// keeps: no capture (so later writes stay in place) and no cursor state
// (unlike Root). Cost: the entries visited plus one descent to lo.
// Writer goroutine only.
func (m *Map[K, V]) ScanLive(lo, hi uint64, yield func(h uint64, k *K, v V) bool) {
	m.root.scan(0, 0, lo, hi, yield, nil)
}
