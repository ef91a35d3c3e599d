package statetable

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// shortKeyMax is the longest composite key held inline in the map's
// entries: 31 bytes take an int64 or a short string key with a time-window
// namespace (1 + 8 + 16 bytes for int64 keys).
const shortKeyMax = 31

// shortKey is a composite key of at most shortKeyMax bytes held in place.
// It has no pointers, so when the cell type has none either the leaves of
// the map have none: the garbage collector does not scan them, copying one
// on write needs no write barriers, and a lookup compares the key without
// a cache miss on separately allocated bytes. Bytes past n are zero, so ==
// compares keys.
type shortKey struct {
	n uint8
	b [shortKeyMax]byte
}

func makeShortKey(ck string) shortKey {
	k := shortKey{n: uint8(len(ck))}
	copy(k.b[:], ck)
	return k
}

// str returns the key's bytes as a string over k's own memory: valid while
// k is neither written nor freed.
func (k *shortKey) str() string { return unsafe.String(&k.b[0], int(k.n)) }

// cellMap is the storage of one state: composite key -> cell. Keys of at
// most shortKeyMax bytes live inline in short, longer ones as strings in
// long; a key is in exactly one of them, chosen by its length. Both maps
// share the table's owner, so one capture freezes both. Writer goroutine
// only.
type cellMap[C any] struct {
	short *cow.Map[shortKey, C]
	long  *cow.Map[string, C]
}

func newCellMap[C any](owner *cow.Owner, equal func(a, b C) bool) cellMap[C] {
	return cellMap[C]{
		short: cow.NewMap(owner, func(k shortKey) uint64 { return compositeHash(k.str()) }, equal),
		long:  cow.NewMap(owner, compositeHash, equal),
	}
}

func (m *cellMap[C]) len() int { return m.short.Len() + m.long.Len() }

// get returns the cell of composite key ck, whose entry hash is h.
func (m *cellMap[C]) get(h uint64, ck string) (C, bool) {
	if len(ck) <= shortKeyMax {
		return m.short.GetHashed(h, makeShortKey(ck))
	}
	return m.long.GetHashed(h, ck)
}

// set stores the cell of ck. With clone, a new long key is copied first
// (ck may alias a scratch buffer); otherwise the map keeps ck itself.
func (m *cellMap[C]) set(h uint64, ck string, cell C, clone bool) {
	if len(ck) <= shortKeyMax {
		m.short.SetHashed(h, makeShortKey(ck), cell, nil)
		return
	}
	var keep func(string) string
	if clone {
		keep = strings.Clone
	}
	m.long.SetHashed(h, ck, cell, keep)
}

// delete removes the cell of ck, if present.
func (m *cellMap[C]) delete(h uint64, ck string) {
	if len(ck) <= shortKeyMax {
		m.short.DeleteHashed(h, makeShortKey(ck))
		return
	}
	m.long.DeleteHashed(h, ck)
}

// all calls yield for every entry in entry-hash order until it returns
// false. ck is valid during the call only. The map must not be written
// meanwhile.
func (m *cellMap[C]) all(yield func(ck string, cell C) bool) {
	var buf [shortKeyMax]byte
	short := func(yield func(h uint64, ck string, cell C) bool) {
		for k, cell := range m.short.All() {
			n := copy(buf[:], k.str())
			if !yield(0, unsafe.String(&buf[0], n), cell) {
				return
			}
		}
	}
	long := func(yield func(h uint64, ck string, cell C) bool) {
		for ck, cell := range m.long.All() {
			if !yield(0, ck, cell) {
				return
			}
		}
	}
	// The live map gives no hashes; they are recomputed only when both
	// maps hold entries.
	if m.long.Len() == 0 || m.short.Len() == 0 {
		short(func(_ uint64, ck string, cell C) bool { return yield(ck, cell) })
		long(func(_ uint64, ck string, cell C) bool { return yield(ck, cell) })
		return
	}
	rehash := func(seq func(func(uint64, string, C) bool)) func(func(uint64, string, C) bool) {
		return func(yield func(uint64, string, C) bool) {
			seq(func(_ uint64, ck string, cell C) bool { return yield(compositeHash(ck), ck, cell) })
		}
	}
	mergeByHash(rehash(short), rehash(long), func(_ uint64, ck string, cell C) bool { return yield(ck, cell) })
}

// view returns both maps as frozen by c.
func (m *cellMap[C]) view(c *cow.Capture) cellView[C] {
	return cellView[C]{short: m.short.View(c), long: m.long.View(c)}
}

// restorer returns add, which takes restored entries (n expected, each
// key once, best in hash order; a long ck is kept, not copied), and done,
// which stores them: each map's entries go into one array that becomes its
// leaves (cow.Map.SetRun), sorted first if they came out of order.
func (m *cellMap[C]) restorer(n int) (add func(h uint64, ck string, cell C), done func()) {
	var short runOf[shortKey, C]
	var long runOf[string, C]
	add = func(h uint64, ck string, cell C) {
		if len(ck) > shortKeyMax {
			e := long.next(n, h, ck, func(k *string) string { return *k })
			e.Key, e.Val = ck, cell
			return
		}
		// The key is written straight into the run, which becomes the
		// leaves: no copy of a 48-byte entry through a temporary.
		e := short.next(n, h, ck, (*shortKey).str)
		e.Key.n = uint8(copy(e.Key.b[:], ck))
		e.Val = cell
	}
	done = func() {
		m.short.SetRun(short.finish((*shortKey).str))
		m.long.SetRun(long.finish(func(k *string) string { return *k }))
		short, long = runOf[shortKey, C]{}, runOf[string, C]{}
	}
	return add, done
}

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
func (r *runOf[K, C]) finish(str func(*K) string) []cow.MapEntry[K, C] {
	if !r.unsorted {
		return r.run
	}
	run := r.run
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
	short *cow.MapSnapshot[shortKey, C]
	long  *cow.MapSnapshot[string, C]
}

func (v cellView[C]) len() int { return v.short.Len() + v.long.Len() }

func (v cellView[C]) get(h uint64, ck string) (C, bool) {
	if len(ck) <= shortKeyMax {
		return v.short.GetHashed(h, makeShortKey(ck))
	}
	return v.long.GetHashed(h, ck)
}

// scan calls yield for every entry whose hash is in [lo, hi], in hash order
// (entries of equal hash adjacent), until it returns false. ck aliases the
// view's memory: valid until the capture is released.
func (v cellView[C]) scan(lo, hi uint64, yield func(h uint64, ck string, cell C) bool) {
	short := func(yield func(uint64, string, C) bool) {
		v.short.ScanRefs(lo, hi, func(h uint64, k *shortKey, cell C) bool { return yield(h, k.str(), cell) })
	}
	long := func(yield func(uint64, string, C) bool) { v.long.Scan(lo, hi, yield) }
	mergeByHash(short, long, yield)
}

// all is scan over every hash.
func (v cellView[C]) all(yield func(h uint64, ck string, cell C) bool) {
	v.scan(0, math.MaxUint64, yield)
}

// diff yields the changes from prev to v in entry-hash order (the order
// DiffState promises). Keys alias the views' memory.
func (v cellView[C]) diff(prev cellView[C], yield func(cow.Change[string, C]) bool) {
	short := func(yield func(uint64, string, cow.Change[string, C]) bool) {
		for ch := range cow.DiffMaps(prev.short, v.short) {
			ck := string(ch.Key.str()) // ch is a copy: its key must be too
			if !yield(compositeHash(ck), ck, cow.Change[string, C]{Kind: ch.Kind, Key: ck, Old: ch.Old, New: ch.New}) {
				return
			}
		}
	}
	long := func(yield func(uint64, string, cow.Change[string, C]) bool) {
		for ch := range cow.DiffMaps(prev.long, v.long) {
			if !yield(compositeHash(ch.Key), ch.Key, ch) {
				return
			}
		}
	}
	mergeByHash(short, long, func(_ uint64, _ string, ch cow.Change[string, C]) bool { return yield(ch) })
}

// mergeByHash calls yield for the items of a and b, two sequences in hash
// order, in hash order (a's first among equal hashes), until it returns
// false. b is collected first: it is the long-key map, most often empty.
func mergeByHash[T any](a, b func(func(uint64, string, T) bool), yield func(h uint64, ck string, x T) bool) {
	type item struct {
		h  uint64
		ck string
		x  T
	}
	var rest []item
	b(func(h uint64, ck string, x T) bool {
		rest = append(rest, item{h, ck, x})
		return true
	})
	if len(rest) == 0 {
		a(yield)
		return
	}
	stopped := false
	a(func(h uint64, ck string, x T) bool {
		for len(rest) > 0 && rest[0].h < h {
			if !yield(rest[0].h, rest[0].ck, rest[0].x) {
				stopped = true
				return false
			}
			rest = rest[1:]
		}
		if !yield(h, ck, x) {
			stopped = true
			return false
		}
		return true
	})
	for _, it := range rest {
		if stopped || !yield(it.h, it.ck, it.x) {
			return
		}
	}
}

// check verifies both maps' invariants and that each key is in the map its
// length chooses.
func (m *cellMap[C]) check() error {
	if err := m.short.Check(); err != nil {
		return err
	}
	if err := m.long.Check(); err != nil {
		return err
	}
	for k := range m.short.All() {
		if k.n > shortKeyMax || strings.Trim(string(k.b[k.n:]), "\x00") != "" {
			return fmt.Errorf("statetable: BUG: short key of length %d with bytes past it", k.n)
		}
	}
	for ck := range m.long.All() {
		if len(ck) <= shortKeyMax {
			return fmt.Errorf("statetable: BUG: key of %d bytes in the long-key map", len(ck))
		}
	}
	return nil
}
