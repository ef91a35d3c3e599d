package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// Composite keys are held in one of four maps by shape: an 8-byte key
// with no namespace (int64, uint64, float64 keys without windows: "\x08"
// and the key, the commonest state) as one word in a key8 entry; any
// other key of at most 15 bytes inline in key15 entries, of at most 31
// bytes in key31 entries, longer ones as strings. 15 bytes take an int32
// key with no namespace (1 + 4 bytes); 31 take an int64 one with a
// time-window namespace (1 + 8 + 16). An inline key has no pointers, so when the cell type has none
// either the leaves of its map have none: the garbage collector does not
// scan them, copying one on write needs no write barriers, and a lookup
// compares the key without a cache miss on separately allocated bytes.
// Several sizes because an entry's size is what a copy-on-write copies and
// a lookup reads: for int64 keys and values an entry is 24 bytes in the
// key8 map, 32 in the key15 map and 48 in the key31 one. The key8 map's
// entries are the smaller and its key compare is one word (decision 0042:
// BenchmarkReadModifyWrite, BenchmarkJob).
const (
	key15Max = 15
	key31Max = 31
)

// key15 and key31 are inline composite keys: in memory a length byte n,
// then n bytes, the rest zero, so == compares keys. Both have the layout
// inlineKey's functions rely on, and those functions read and write it as
// bytes. They are held as words, two and four: a key then travels in
// registers down to the leaf compare, which is two or four compares of
// words, where a struct holding a byte array goes through memory at
// every call and is compared by the runtime's compare of memory
// (BenchmarkReadModifyWrite at size=1000, instructions counted by
// callgrind: decision 0041 for key15; for key31, a reducing state's
// AddEach of int64 keys in an int64 namespace, 1074 -> 1024
// instructions an add, decision 0056).
type (
	key15 struct{ lo, hi uint64 }
	key31 struct{ w0, w1, w2, w3 uint64 }
)

// inlineLen returns the length of an inline key (its first byte).
func inlineLen[K inlineKey](k *K) int { return int(*(*uint8)(unsafe.Pointer(k))) }

// littleEndian says whether the machine stores a word's low byte first,
// which key15Of8 builds its words for.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// key15Of8 returns, as a key15, the composite key of the key8 map's key
// be (its length byte 8, then the key, whose bytes are those of be read
// as a little-endian word: 9 bytes in all), the layout of a snapshot's key
// blob. On a little-endian machine the words are built in registers.
func key15Of8(be uint64) key15 {
	if littleEndian {
		return key15{lo: 9 | 8<<8 | be<<16, hi: be >> 48}
	}
	return key15Of8Bytes(be)
}

// key15Of8Bytes is key15Of8 through the key's bytes, on any machine; a
// call of its own so that key15Of8 is inlined.
func key15Of8Bytes(be uint64) key15 {
	var k key15
	b := (*[16]byte)(unsafe.Pointer(&k))
	b[0], b[1] = 9, 8
	binary.LittleEndian.PutUint64(b[2:10], be)
	return k
}

type inlineKey interface{ key15 | key31 }

// isKey8 reports whether composite key ck is an 8-byte key with no
// namespace ("\x08" and the key's 8 bytes), the keys the key8 map holds.
func isKey8(ck string) bool { return len(ck) == 9 && ck[0] == 8 }

// key8Of returns the key8 map's key of ck (isKey8): the key's 8 bytes read
// as a little-endian word, on any machine.
func key8Of(ck string) uint64 { return binary.LittleEndian.Uint64(readOnlyBytes(ck[1:9])) }

// putKey8 writes the composite key of the key8 map's key k into b.
func putKey8(b *[9]byte, k uint64) {
	b[0] = 8
	binary.LittleEndian.PutUint64(b[1:], k)
}

// key8Str returns the composite key of the key8 map's key k as a new
// string.
func key8Str(k uint64) string {
	var b [9]byte
	putKey8(&b, k)
	return string(b[:])
}

// key8Hash is the hash the key8 map holds the entry of key k under: the
// key's own hash (cow.HashUint64 of the word, HashKey of the key's 8
// bytes), one to one on 64 bits, so the map keeps the hash alone
// (cow.NewHashKeyedMap) and recovers the key from it (cow.UnhashUint64):
// an entry of an int64 cell is 16 bytes, not 24 with the key beside its hash,
// which is a third less for a lookup to read, a copy-on-write to copy and
// the heap to hold (BenchmarkJob, BenchmarkMemory impl=state: decision
// 0057). The entry's entry hash (the order of scans, diffs and files) is
// fixedEntryHash of it: the key hash's leading keyHashBits bits, so the
// map's order is entry-hash order, and entries of one entry hash (keys
// whose 40-bit hashes collide) are adjacent, in the order of the rest of
// their key hashes.
func key8Hash(k uint64) uint64 { return cow.HashUint64(k) }

// lowBits are the bits of an entry hash below the key hash's leading
// keyHashBits.
const lowBits = 1<<(64-keyHashBits) - 1

// key8From returns the least key8 map hash whose entry hash is at least
// eh, and false if there is none.
func key8From(eh uint64) (uint64, bool) {
	top := eh &^ lowBits
	switch {
	case eh&lowBits <= voidLow:
		return top, true
	case top == ^uint64(lowBits):
		return 0, false
	}
	return top + lowBits + 1, true
}

// key8Through returns the greatest key8 map hash whose entry hash is at
// most eh, and false if there is none.
func key8Through(eh uint64) (uint64, bool) {
	top := eh &^ lowBits
	switch {
	case eh&lowBits >= voidLow:
		return top | lowBits, true
	case top == 0:
		return 0, false
	}
	return top - 1, true
}

// key8Range returns the key8 map hashes [lo8, hi8] of the entries whose
// entry hashes are in [lo, hi], and false if no entry can be.
func key8Range(lo, hi uint64) (lo8, hi8 uint64, ok bool) {
	lo8, okLo := key8From(lo)
	hi8, okHi := key8Through(hi)
	return lo8, hi8, okLo && okHi && lo8 <= hi8
}

// compareKey8 orders key8 map keys as their composite keys' bytes order.
func compareKey8(a, b uint64) int { return cmp.Compare(bits.ReverseBytes64(a), bits.ReverseBytes64(b)) }

// key8Strings hands out composite keys of key8 entries as strings cut
// from chunks it allocates, one per 256 keys: each string stays valid as
// long as it is referenced, as the keys of a scan must (mergeScan and
// cells.scan keep some past the call that passed them).
type key8Strings struct{ chunk []byte }

func (s *key8Strings) of(k uint64) string {
	if len(s.chunk) < 9 {
		s.chunk = make([]byte, 9*256)
	}
	b := (*[9]byte)(s.chunk)
	s.chunk = s.chunk[9:]
	putKey8(b, k)
	return unsafe.String(&b[0], 9)
}

// makeKey returns ck, which must fit, as an inline key.
func makeKey[K inlineKey](ck string) K {
	var k K
	p := unsafe.Pointer(&k)
	*(*uint8)(p) = uint8(len(ck))
	copy(unsafe.Slice((*byte)(unsafe.Add(p, 1)), unsafe.Sizeof(k)-1), ck)
	return k
}

// keyStr returns an inline key's bytes as a string over k's own memory:
// valid while k is neither written nor freed.
func keyStr[K inlineKey](k *K) string {
	p := unsafe.Pointer(k)
	return unsafe.String((*byte)(unsafe.Add(p, 1)), int(*(*uint8)(p)))
}

func inlineHash[K inlineKey](k K) uint64 { return compositeHash(keyStr(&k)) }

// cellMap is where one state's entries are stored, untyped above the
// cell: composite key bytes -> cell, in four maps by key shape (see
// key15Max); a key is in exactly one of them. The
// maps share the table's owner, so one capture freezes all four. Writer
// goroutine only.
type cellMap[C any] struct {
	owner *cow.Owner
	k8    *cow.Map[cow.NoKey, C] // by key8Hash
	k15   *cow.Map[key15, C]
	k31   *cow.Map[key31, C]
	long  *cow.Map[string, C]
}

func newCellMap[C any](owner *cow.Owner, equal func(a, b C) bool) cellMap[C] {
	return cellMap[C]{
		owner: owner,
		k8:    cow.NewHashKeyedMap(owner, equal),
		k15:   cow.NewMap(owner, inlineHash[key15], equal),
		k31:   cow.NewMap(owner, inlineHash[key31], equal),
		long:  cow.NewMap(owner, compositeHash, equal),
	}
}

// compact makes the maps grow leaves by smaller steps (cow.Map.SetCompactLeaves),
// for cells of TTL states, larger by their expiration timestamp.
func (m *cellMap[C]) compact() {
	m.k8.SetCompactLeaves()
	m.k15.SetCompactLeaves()
	m.k31.SetCompactLeaves()
	m.long.SetCompactLeaves()
}

func (m *cellMap[C]) len() int { return m.k8.Len() + m.k15.Len() + m.k31.Len() + m.long.Len() }

// keyClass names the map of cellMap that holds a composite key.
type keyClass uint8

const (
	class8 keyClass = iota
	class15
	class31
	classLong
)

// classOf returns the class of composite key ck, as get, set, update and
// delete choose its map.
func classOf(ck string) keyClass {
	switch {
	case isKey8(ck):
		return class8
	case len(ck) <= key15Max:
		return class15
	case len(ck) <= key31Max:
		return class31
	}
	return classLong
}

// prefetch asks for the entries of the hashes hs, hs[i] in the map of
// class classes[i] (cow.Map.Prefetch), a map at a time in the order the
// hashes come: each the hash its map holds the entry under (mapHash). A
// hint.
func (m *cellMap[C]) prefetch(hs []uint64, classes []keyClass) {
	for from := 0; from < len(hs); {
		to := from + 1
		for to < len(hs) && classes[to] == classes[from] {
			to++
		}
		switch classes[from] {
		case class8:
			m.k8.Prefetch(hs[from:to])
		case class15:
			m.k15.Prefetch(hs[from:to])
		case class31:
			m.k31.Prefetch(hs[from:to])
		default:
			m.long.Prefetch(hs[from:to])
		}
		from = to
	}
}

// mapHash returns the hash the map of composite key ck holds its entry
// under, for an entry hash h: h, or a key8 entry's key8Hash.
func mapHash(h uint64, ck string) uint64 {
	if isKey8(ck) {
		return key8Hash(key8Of(ck))
	}
	return h
}

// get returns the cell of composite key ck, whose entry hash is h, and
// notes where it found it for a set of ck after it (cow.Map.GetForSet).
func (m *cellMap[C]) get(h uint64, ck string) (C, bool) {
	switch {
	case isKey8(ck):
		return m.k8.GetForSet(key8Hash(key8Of(ck)), cow.NoKey{})
	case len(ck) <= key15Max:
		return m.k15.GetForSet(h, makeKey[key15](ck))
	case len(ck) <= key31Max:
		return m.k31.GetForSet(h, makeKey[key31](ck))
	}
	return m.long.GetForSet(h, ck)
}

// set stores the cell of ck. With clone, a new long key is copied first
// (ck may alias a scratch buffer); otherwise the map keeps ck itself. A
// get of ck just before, with nothing written between, saves the walk
// (cow.Map.SetAfterGet).
func (m *cellMap[C]) set(h uint64, ck string, cell C, clone bool) {
	switch {
	case isKey8(ck):
		m.k8.SetAfterGet(key8Hash(key8Of(ck)), cow.NoKey{}, cell, nil)
	case len(ck) <= key15Max:
		m.k15.SetAfterGet(h, makeKey[key15](ck), cell, nil)
	case len(ck) <= key31Max:
		m.k31.SetAfterGet(h, makeKey[key31](ck), cell, nil)
	case clone:
		m.long.SetAfterGet(h, ck, cell, strings.Clone)
	default:
		m.long.SetAfterGet(h, ck, cell, nil)
	}
}

// update stores f(old, ok) as the cell of ck, where old and ok are its
// cell and whether it has one: one walk of the map when the leaf is the
// writer's (cow.Map.Find, Store). With clone, a new long key is copied
// first, as set. f may read and write other states; the store then walks
// again.
func (m *cellMap[C]) update(h uint64, ck string, clone bool, f func(old C, ok bool) C) {
	switch {
	case isKey8(ck):
		m.k8.UpdateHashed(key8Hash(key8Of(ck)), cow.NoKey{}, f, nil)
	case len(ck) <= key15Max:
		m.k15.UpdateHashed(h, makeKey[key15](ck), f, nil)
	case len(ck) <= key31Max:
		m.k31.UpdateHashed(h, makeKey[key31](ck), f, nil)
	default:
		var keep func(string) string
		if clone {
			keep = strings.Clone
		}
		m.long.UpdateHashed(h, ck, f, keep)
	}
}

// delete removes the cell of ck, if present.
func (m *cellMap[C]) delete(h uint64, ck string) {
	switch {
	case isKey8(ck):
		m.k8.DeleteHashed(key8Hash(key8Of(ck)), cow.NoKey{})
	case len(ck) <= key15Max:
		m.k15.DeleteHashed(h, makeKey[key15](ck))
	case len(ck) <= key31Max:
		m.k31.DeleteHashed(h, makeKey[key31](ck))
	default:
		m.long.DeleteHashed(h, ck)
	}
}

// all calls yield for every entry in entry-hash order until it returns
// false. It reads through a capture held for the call: the state is not
// written meanwhile, and once the capture is released later writes run in
// place again; writes to other states during the call copy what they
// touch, as under any capture. ck is valid during the call only.
func (m *cellMap[C]) all(yield func(ck string, cell C) bool) {
	c := m.owner.Capture()
	defer c.Release()
	m.view(c).all(func(_ uint64, ck string, cell C) bool { return yield(ck, cell) })
}

// view returns the maps as frozen by c.
func (m *cellMap[C]) view(c *cow.Capture) cellView[C] {
	return cellView[C]{k8: m.k8.View(c), k15: m.k15.View(c), k31: m.k31.View(c), long: m.long.View(c)}
}

// cellRun collects restored entries for a cellMap (n expected, each key
// once, best in hash order; a long ck is kept, not copied): each key
// class's entries go into one array that becomes its map's leaves
// (cellMap.storeRun, cow.Map.SetRun), sorted first if they came out of
// order.
type cellRun[C any] struct {
	n, added int
	r8       runOf[cow.NoKey, C] // by key8Hash
	r15      runOf[key15, C]
	r31      runOf[key31, C]
	long     runOf[string, C]
}

// room returns how many entries the run of a class takes room for when
// its first entry comes, counting one more added: all those still
// expected (all n for a state of one key class).
func (r *cellRun[C]) room() int {
	room := max(r.n-r.added, 1)
	r.added++
	return room
}

// add appends an entry, written straight into its class's run (no copy
// of a whole entry through a temporary).
func (r *cellRun[C]) add(h uint64, ck string, cell C) {
	room := r.room()
	switch {
	case isKey8(ck):
		r.r8.next(room, key8Hash(key8Of(ck)), ck, noKeyRef).Val = cell
	case len(ck) <= key15Max:
		e := r.r15.next(room, h, ck, keyStr[key15])
		e.Key, e.Val = makeKey[key15](ck), cell
	case len(ck) <= key31Max:
		e := r.r31.next(room, h, ck, keyStr[key31])
		e.Key, e.Val = makeKey[key31](ck), cell
	default:
		e := r.long.next(room, h, ck, func(k *string) string { return *k })
		e.Key, e.Val = ck, cell
	}
}

// storeRun stores what r collected; r must not be used afterwards.
func (m *cellMap[C]) storeRun(r *cellRun[C]) {
	m.k8.SetRun(r.r8.finish(noKeyRef))
	m.k15.SetRun(r.r15.finish(keyStr[key15]))
	m.k31.SetRun(r.r31.finish(keyStr[key31]))
	m.long.SetRun(r.long.finish(func(k *string) string { return *k }))
	*r = cellRun[C]{}
}

// noKeyRef reads the key of the key8 map's run as runOf compares keys, on
// equal hashes only: there, equal keys (key8Hash is one to one).
func noKeyRef(*cow.NoKey) string { return "" }

// runOf collects a run of restored entries for cow.Map.SetRun.
type runOf[K comparable, C any] struct {
	run      []cow.MapEntry[K, C]
	unsorted bool
}

// next appends a zero entry of hash h for a key that reads as ck (str
// reads a stored key) and returns it for the caller to fill; the first one
// allocates room for n.
func (r *runOf[K, C]) next(n int, h uint64, ck string, str func(*K) string) *cow.MapEntry[K, C] {
	l := len(r.run)
	switch {
	case l == 0 && r.run == nil:
		r.run = make([]cow.MapEntry[K, C], 0, n)
	case l > 0:
		if last := &r.run[l-1]; h < last.Hash || h == last.Hash && ck <= str(&last.Key) {
			r.unsorted = true
		}
	}
	if l < cap(r.run) {
		r.run = r.run[:l+1]
	} else {
		r.run = append(r.run, cow.MapEntry[K, C]{})
	}
	e := &r.run[l]
	e.Hash = h
	return e
}

// finish returns the run in canonical order: by hash, then key, keeping
// the last of repeated keys.
//
// The run's array becomes the leaves and lives as long as any of them: an
// array that came out more than a quarter larger than the run (a state of
// mixed key classes, or fewer entries than announced) is copied to its
// size first.
func (r *runOf[K, C]) finish(str func(*K) string) []cow.MapEntry[K, C] {
	run := r.run
	if cap(run) > len(run)+len(run)/4 {
		run = slices.Clone(run)
	}
	if !r.unsorted {
		return run
	}
	slices.SortStableFunc(run, func(a, b cow.MapEntry[K, C]) int {
		return cmp.Or(cmp.Compare(a.Hash, b.Hash), strings.Compare(str(&a.Key), str(&b.Key)))
	})
	out := run[:0]
	for i, e := range run {
		if i+1 < len(run) && run[i+1].Hash == e.Hash && run[i+1].Key == e.Key {
			continue
		}
		out = append(out, e)
	}
	return out
}

// cellView is a cellMap frozen by a capture. Any goroutine while the
// capture is live.
type cellView[C any] struct {
	k8   *cow.MapSnapshot[cow.NoKey, C] // by key8Hash
	k15  *cow.MapSnapshot[key15, C]
	k31  *cow.MapSnapshot[key31, C]
	long *cow.MapSnapshot[string, C]
}

func (v cellView[C]) len() int { return v.k8.Len() + v.k15.Len() + v.k31.Len() + v.long.Len() }

// passed is cow.MapSnapshot.Passed of each of the view's maps.
func (v cellView[C]) passed(below uint64) {
	if below8, ok := key8From(below); ok {
		v.k8.Passed(below8)
	} else {
		v.k8.Passed(math.MaxUint64)
	}
	v.k15.Passed(below)
	v.k31.Passed(below)
	v.long.Passed(below)
}

func (v cellView[C]) get(h uint64, ck string) (C, bool) {
	switch {
	case isKey8(ck):
		return v.k8.GetHashed(key8Hash(key8Of(ck)), cow.NoKey{})
	case len(ck) <= key15Max:
		return v.k15.GetHashed(h, makeKey[key15](ck))
	case len(ck) <= key31Max:
		return v.k31.GetHashed(h, makeKey[key31](ck))
	}
	return v.long.GetHashed(h, ck)
}

// scan calls yield for every entry whose hash is in [lo, hi], in hash order
// (entries of equal hash adjacent), until it returns false. ck aliases the
// view's memory, valid until the capture is released, or (a key8 entry's)
// memory of its own.
func (v cellView[C]) scan(lo, hi uint64, yield func(h uint64, ck string, cell C) bool) {
	mergeScan([]scanSource[C]{
		key8Source(v.k8),
		inlineSource(v.k15),
		inlineSource(v.k31),
		{v.long.Len(), v.long.Scan},
	}, lo, hi, yield)
}

// all is scan over every hash.
func (v cellView[C]) all(yield func(h uint64, ck string, cell C) bool) {
	v.scan(0, math.MaxUint64, yield)
}

// diff yields the changes from prev to v in entry-hash order (the order
// DiffState promises), until yield returns false. The changes of the map
// with the most entries stream; those of the others, collected first,
// are merged in.
func (v cellView[C]) diff(prev cellView[C], yield func(cow.Change[string, C]) bool) {
	type change = cow.Change[string, C]
	diffs := []diffSource[C]{
		key8Diff(prev.k8, v.k8),
		inlineDiff(prev.k15, v.k15),
		inlineDiff(prev.k31, v.k31),
		{v.long.Len() + prev.long.Len(), func(yield func(uint64, string, change) bool) {
			for ch := range cow.DiffMaps(prev.long, v.long) {
				if !yield(ch.Hash, ch.Key, ch) {
					return
				}
			}
		}},
	}
	big := 0
	for i := range diffs {
		if diffs[i].len > diffs[big].len {
			big = i
		}
	}
	var rest []hashed[change]
	for i := range diffs {
		if i != big {
			diffs[i].diff(func(h uint64, ck string, ch change) bool {
				rest = append(rest, hashed[change]{h, ck, ch})
				return true
			})
		}
	}
	slices.SortStableFunc(rest, func(a, b hashed[change]) int { return cmp.Compare(a.h, b.h) })
	merge(diffs[big].diff, rest, func(_ uint64, _ string, ch change) bool { return yield(ch) })
}

// inlineSource is a map of inline keys as a scanSource: keys as strings
// over the snapshot's memory (cow.MapSnapshot.ScanRefs).
func inlineSource[K inlineKey, C any](m *cow.MapSnapshot[K, C]) scanSource[C] {
	return scanSource[C]{m.Len(), func(lo, hi uint64, yield func(uint64, string, C) bool) {
		m.ScanRefs(lo, hi, func(h uint64, k *K, cell C) bool { return yield(h, keyStr(k), cell) })
	}}
}

// key8Source is the key8 map as a scanSource: keys as strings of their
// own (key8Strings), recovered from the hashes the map holds.
func key8Source[C any](m *cow.MapSnapshot[cow.NoKey, C]) scanSource[C] {
	return scanSource[C]{m.Len(), func(lo, hi uint64, yield func(uint64, string, C) bool) {
		lo8, hi8, ok := key8Range(lo, hi)
		if !ok {
			return
		}
		var strs key8Strings
		m.ScanRefs(lo8, hi8, func(h uint64, _ *cow.NoKey, cell C) bool {
			return yield(fixedEntryHash(h), strs.of(cow.UnhashUint64(h)), cell)
		})
	}}
}

// diffSource is the diff of one of two views' maps, each change with its
// entry hash and composite key, and the entries of the two versions.
type diffSource[C any] struct {
	len  int
	diff func(yield func(uint64, string, cow.Change[string, C]) bool)
}

// inlineDiff is the diff of two versions of a map of inline keys as a
// diffSource; a change's key is copied (the change holds a copy of it).
func inlineDiff[K inlineKey, C any](prev, next *cow.MapSnapshot[K, C]) diffSource[C] {
	return diffSource[C]{prev.Len() + next.Len(), func(yield func(uint64, string, cow.Change[string, C]) bool) {
		for ch := range cow.DiffMaps(prev, next) {
			ck := string(keyStr(&ch.Key))
			if !yield(ch.Hash, ck, cow.Change[string, C]{Kind: ch.Kind, Key: ck, Hash: ch.Hash, Old: ch.Old, New: ch.New}) {
				return
			}
		}
	}}
}

// key8Diff is inlineDiff of two versions of the key8 map.
func key8Diff[C any](prev, next *cow.MapSnapshot[cow.NoKey, C]) diffSource[C] {
	return diffSource[C]{prev.Len() + next.Len(), func(yield func(uint64, string, cow.Change[string, C]) bool) {
		var strs key8Strings
		for ch := range cow.DiffMaps(prev, next) {
			ck, h := strs.of(cow.UnhashUint64(ch.Hash)), fixedEntryHash(ch.Hash)
			if !yield(h, ck, cow.Change[string, C]{Kind: ch.Kind, Key: ck, Hash: h, Old: ch.Old, New: ch.New}) {
				return
			}
		}
	}}
}

// scanSource is one of a view's maps as a scan over a hash range, with its
// number of entries.
type scanSource[C any] struct {
	len  int
	scan func(lo, hi uint64, yield func(uint64, string, C) bool)
}

// mergeChunk bounds what mergeScan buffers: about this many entries of the
// smaller maps per piece of the range.
const mergeChunk = 512

// mergeScan calls yield for the entries of srcs with hash in [lo, hi] in
// hash order until it returns false. A lone non-empty source is scanned
// straight through. Otherwise the range is cut into pieces holding about
// mergeChunk entries of the smaller sources; per piece their entries are
// collected and merged into a scan of the largest. ck must stay valid
// until yield returns (scans of captured maps give keys in the capture).
func mergeScan[C any](srcs []scanSource[C], lo, hi uint64, yield func(uint64, string, C) bool) {
	big, nonEmpty, total := 0, 0, 0
	for i := range srcs {
		if srcs[i].len > 0 {
			nonEmpty++
			total += srcs[i].len
		}
		if srcs[i].len > srcs[big].len {
			big = i
		}
	}
	if nonEmpty <= 1 {
		srcs[big].scan(lo, hi, yield)
		return
	}
	span := hi - lo
	others := float64(total - srcs[big].len)
	pieces := uint64(others*(float64(span)/math.MaxUint64)/mergeChunk) + 1
	if pieces > span {
		pieces = max(span, 1)
	}
	width := span / pieces
	var buf []hashed[C]
	for p := range pieces {
		plo := lo + p*width
		phi := hi
		if p+1 < pieces {
			phi = plo + width - 1
		}
		buf = buf[:0]
		for i := range srcs {
			if i != big && srcs[i].len > 0 {
				srcs[i].scan(plo, phi, func(h uint64, ck string, cell C) bool {
					buf = append(buf, hashed[C]{h, ck, cell})
					return true
				})
			}
		}
		slices.SortStableFunc(buf, func(a, b hashed[C]) int { return cmp.Compare(a.h, b.h) })
		if !merge(func(yield func(uint64, string, C) bool) { srcs[big].scan(plo, phi, yield) }, buf, yield) {
			return
		}
	}
}

// hashed is an item of a merge: an entry or change with its hash and key.
type hashed[T any] struct {
	h  uint64
	ck string
	x  T
}

// merge calls yield for the items of seq and of rest, both in hash order,
// in hash order (seq's first among equal hashes), until it returns false;
// it reports whether it went to the end.
func merge[T any](seq func(func(uint64, string, T) bool), rest []hashed[T], yield func(uint64, string, T) bool) bool {
	stopped := false
	seq(func(h uint64, ck string, x T) bool {
		for len(rest) > 0 && rest[0].h < h {
			if !yield(rest[0].h, rest[0].ck, rest[0].x) {
				stopped = true
				return false
			}
			rest = rest[1:]
		}
		if !yield(h, ck, x) {
			stopped = true
		}
		return !stopped
	})
	for _, it := range rest {
		if stopped || !yield(it.h, it.ck, it.x) {
			return false
		}
	}
	return !stopped
}

// check verifies the maps' invariants and that each key is in the map its
// shape chooses, inline keys zero past their length.
func (m *cellMap[C]) check() error {
	for _, err := range []error{m.k8.Check(), m.k15.Check(), m.k31.Check(), m.long.Check()} {
		if err != nil {
			return err
		}
	}
	for k := range m.k15.All() {
		b, n := (*[16]byte)(unsafe.Pointer(&k)), inlineLen(&k)
		if n > key15Max || strings.Trim(string(b[1+n:]), "\x00") != "" {
			return fmt.Errorf("statetable: BUG: key15 of length %d with bytes past it", n)
		}
		if isKey8(keyStr(&k)) {
			return fmt.Errorf("statetable: BUG: an 8-byte key with no namespace in the key15 map")
		}
	}
	for k := range m.k31.All() {
		b, n := (*[32]byte)(unsafe.Pointer(&k)), inlineLen(&k)
		if n <= key15Max || n > key31Max || strings.Trim(string(b[1+n:]), "\x00") != "" {
			return fmt.Errorf("statetable: BUG: key31 of length %d (or with bytes past it)", n)
		}
	}
	for ck := range m.long.All() {
		if len(ck) <= key31Max {
			return fmt.Errorf("statetable: BUG: key of %d bytes in the long-key map", len(ck))
		}
	}
	return nil
}
