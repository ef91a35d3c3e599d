package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// AppendKeyGroupEntries appends to dst every entry of the named state in
// key group g of snap, as KeyGroupEntries yields them and a snapshot
// section holds them: per entry a key blob (uvarint length, composite key)
// and a cell blob (uvarint length, cell encoding), in canonical order. It
// returns the extended slice and the number of entries. A state whose keys
// are all inline and at most 15 bytes long (an integer key, no namespace)
// is encoded leaf by leaf in one loop with no call per entry but the cell
// codec's, and none at all for a fixed-width cell (fixedInt); others go
// through KeyGroupEntries. A state with a TTL leaves
// out what had expired at the snapshot's time (Snapshot.Time): list
// elements and map entries one by one, and entries with nothing left
// whole, so no file holds expired state. Cost O(entries of g + their
// bytes). Any goroutine while snap is live.
func (snap *Snapshot) AppendKeyGroupEntries(dst []byte, name string, g int) ([]byte, int, error) {
	r, ok := snap.regs[name]
	if !ok {
		return dst, 0, fmt.Errorf("%w %q in snapshot", ErrUnknownState, name)
	}
	lo, hi, err := snap.groupHashes(g)
	if err != nil {
		return dst, 0, err
	}
	dst, n := r.appendEntries(snap.views[name], lo, hi, snap.now, dst)
	return dst, n, nil
}

// Passed promises that no reader of snap reads the entries of key groups
// up to g of the named state again, through any view of snap's capture:
// the table's writer may then update those entries in place rather than
// copy what the capture shares with the live table (cow.MapSnapshot.Passed,
// whose terms apply: a capture read once, in key-group order, and nothing
// else; a read behind the promise panics, cow.ErrPassed). A snapshot write
// that releases its snapshot when done calls it after each key group's
// section (cowstate.WriteSnapshotAndRelease). Cost O(1); the reader's
// goroutine.
func (snap *Snapshot) Passed(name string, g int) error {
	r, ok := snap.regs[name]
	if !ok {
		return fmt.Errorf("%w %q in snapshot", ErrUnknownState, name)
	}
	_, hi, err := snap.groupHashes(g)
	if err != nil || hi == ^uint64(0) {
		return err // the last key group: the write is at its end
	}
	r.passed(snap.views[name], hi+1)
	return nil
}

// groupHashes returns the entry hashes [lo, hi] of key group g.
func (snap *Snapshot) groupHashes(g int) (lo, hi uint64, err error) {
	if g < 0 || g >= snap.maxPar {
		return 0, 0, fmt.Errorf("%w: key group %d, max parallelism %d", ErrConfig, g, snap.maxPar)
	}
	lo, _ = KeyGroupStart(g, snap.maxPar)
	hi, ok := KeyGroupStart(g+1, snap.maxPar)
	if ok {
		hi--
	} else {
		hi = ^uint64(0)
	}
	return lo, hi, nil
}

// appendEntries implements AppendKeyGroupEntries for a view's hashes in
// [lo, hi]; a TTL state leaves out what has expired at now.
func (c *cells[K, N, C]) appendEntries(view any, lo, hi uint64, now int64, dst []byte) ([]byte, int) {
	v := view.(cellView[C])
	n := 0
	var live *int64
	if c.ttl != nil {
		live = &now
	}
	if live != nil || v.k31.Len() > 0 || v.long.Len() > 0 || v.k8.Len() > 0 && v.k15.Len() > 0 {
		c.scan(view, lo, hi, live, func(key, cell []byte) bool {
			dst = appendBlob(appendBlob(dst, key), cell)
			n++
			return true
		})
		return dst, n
	}
	// All entries are in one map of small keys: its leaves are encoded
	// as they are, an entry's key blob written from the key held.
	cc := &c.cell
	if v.k8.Len() > 0 {
		lo8, hi8, ok := key8Range(lo, hi)
		if !ok {
			return dst, 0
		}
		return appendKey8(dst, v.k8, lo8, hi8, cc)
	}
	var order []int // a run of equal hashes, sorted by key
	v.k15.ScanLeaves(lo, hi, func(ents []cow.MapEntry[key15, C]) bool {
		n += len(ents)
		for i := 0; i < len(ents); i++ {
			if i+1 == len(ents) || ents[i+1].Hash != ents[i].Hash {
				dst = appendEntry15(dst, &ents[i].Key, &ents[i].Val, cc)
				continue
			}
			j := equalHashRun(ents, i, &order, func(a, b *key15) int { return cmp.Compare(keyStr(a), keyStr(b)) })
			for _, x := range order {
				dst = appendEntry15(dst, &ents[x].Key, &ents[x].Val, cc)
			}
			i = j - 1
		}
		return true
	})
	return dst, n
}

// appendKey8 appends the entries of a key8 map's version m with map
// hashes in [lo8, hi8] (whole runs of entry hashes, as key8Range gives
// them) in a file's order, entry hash then key, and returns how many.
//
// The map holds the keys of one entry hash (keys whose 40-bit hashes
// collide) in the order of the rest of their key hashes, adjacent: a
// leaf puts them in key order (key8Run). Such a run crosses leaves only
// when more than a leaf's worth of keys share their entry hash: their
// leaves are below the 40 bits of the entry hash, so every entry of each
// has that entry hash. A leaf of one entry hash is therefore held back
// (carry) until a leaf of another entry hash comes, and the run is put in
// key order whole; any other leaf holds whole runs and is written as it
// comes.
func appendKey8[C any](dst []byte, m *cow.MapSnapshot[cow.NoKey, C], lo8, hi8 uint64, cc *cellCodec[C]) ([]byte, int) {
	words := littleEndian && cc.fixed.w == 8
	var order []int
	var carry []cow.MapEntry[cow.NoKey, C]
	put := func(ents []cow.MapEntry[cow.NoKey, C]) { // whole runs
		if words && distinctEntryHashes8(ents) {
			dst = appendLeaf8(dst, ents, cc.fixed.flip)
			return
		}
		for i := 0; i < len(ents); i++ {
			j := key8Run(ents, i, &order)
			for _, x := range order {
				k := key15Of8(cow.UnhashUint64(ents[x].Hash))
				dst = appendEntry15(dst, &k, &ents[x].Val, cc)
			}
			i = j - 1
		}
	}
	n := 0
	m.ScanLeaves(lo8, hi8, func(ents []cow.MapEntry[cow.NoKey, C]) bool {
		if len(ents) == 0 {
			return true
		}
		n += len(ents)
		oneRun := ents[0].Hash^ents[len(ents)-1].Hash <= lowBits
		if len(carry) > 0 && (!oneRun || ents[0].Hash^carry[0].Hash > lowBits) {
			put(carry)
			carry = carry[:0]
		}
		if oneRun {
			carry = append(carry, ents...)
		} else {
			put(ents)
		}
		return true
	})
	if len(carry) > 0 {
		put(carry)
	}
	return dst, n
}

// distinctEntryHashes8 reports whether no two neighbours of a key8 map's
// leaf share their entry hash, the leading keyHashBits bits of the key
// hashes the map holds (keys whose 40-bit hashes collide, which a file
// orders by key).
func distinctEntryHashes8[C any](ents []cow.MapEntry[cow.NoKey, C]) bool {
	for i := 1; i < len(ents); i++ {
		if ents[i].Hash^ents[i-1].Hash <= lowBits {
			return false
		}
	}
	return true
}

// key8Run is equalHashRun for a key8 map's leaf: the end of the run of
// entries from ents[i] that share its entry hash, with *order set to
// their indexes in key order. The map holds them in the order of the
// rest of their key hashes.
func key8Run[C any](ents []cow.MapEntry[cow.NoKey, C], i int, order *[]int) int {
	j := i + 1
	for j < len(ents) && ents[j].Hash^ents[i].Hash <= lowBits {
		j++
	}
	o := (*order)[:0]
	for k := i; k < j; k++ {
		o = append(o, k)
	}
	if len(o) > 1 {
		slices.SortFunc(o, func(a, b int) int { return compareKey8(cow.UnhashUint64(ents[a].Hash), cow.UnhashUint64(ents[b].Hash)) })
	}
	*order = o
	return j
}

// entry8Len is the bytes of an entry of an 8-byte key and an 8-byte
// fixed-width cell in a file: the key blob (length 9, the composite key's
// length byte 8, the key) and the cell blob (length 8, the cell).
const entry8Len = 1 + 1 + 8 + 1 + 8

// appendLeaf8 appends the entries of a key8 map's leaf whose cells are
// 8 bytes wide with a fixed-width codec (flip its fixedInt's flip), on a
// little-endian machine: each entry is three overlapping word stores,
// built in registers from the key and the cell, where appendEntry15 makes
// a 16-byte copy, a length read and a cell encode: BenchmarkSnapshotWrite
// at 10M keys 148-158 ms against 208-231, at 1M 8.7-9.0 against
// 13.9-16.2, side by side (decision 0054).
func appendLeaf8[C any](dst []byte, ents []cow.MapEntry[cow.NoKey, C], flip uint64) []byte {
	l := len(dst)
	dst = slices.Grow(dst, len(ents)*entry8Len+5) // the last entry's third word
	b := dst[l : l+len(ents)*entry8Len+5]
	for i := range ents {
		k := cow.UnhashUint64(ents[i].Hash)
		c := bits.ReverseBytes64(*(*uint64)(unsafe.Pointer(&ents[i].Val)) ^ flip)
		e := b[i*entry8Len : i*entry8Len+24]
		binary.LittleEndian.PutUint64(e[0:], 9|8<<8|k<<16)
		binary.LittleEndian.PutUint64(e[8:], k>>48|8<<16|c<<24)
		binary.LittleEndian.PutUint64(e[16:], c>>40)
	}
	return dst[:l+len(ents)*entry8Len]
}

// equalHashRun returns the end of the run of entries from ents[i] that
// have its hash (keys whose 40-bit hashes collide), and sets *order to
// their indexes sorted by compare: the map holds them in insertion order,
// a file in key order.
func equalHashRun[K comparable, C any](ents []cow.MapEntry[K, C], i int, order *[]int, compare func(a, b *K) int) int {
	j := i + 1
	for j < len(ents) && ents[j].Hash == ents[i].Hash {
		j++
	}
	o := (*order)[:0]
	for k := i; k < j; k++ {
		o = append(o, k)
	}
	slices.SortFunc(o, func(a, b int) int { return compare(&ents[a].Key, &ents[b].Key) })
	*order = o
	return j
}

// appendEntry15 appends the key blob and the cell blob of an entry of an
// inline key of at most 15 bytes. The key blob is the key's own first
// n+1 bytes, n its length byte (which is the blob's one-byte length), copied as
// one 16-byte store. A cell of a fixed-width codec is encoded inline
// (fixedInt.encode), with no call through the codec: BenchmarkSnapshotWrite
// at 1M takes 16.4-17.0 ms against 18.6-19.0 through the codec, side by
// side. Otherwise the cell's length byte is reserved before the codec
// appends the cell, and the cell moved only if its length takes more.
func appendEntry15[C any](dst []byte, k *key15, cell *C, cc *cellCodec[C]) []byte {
	l := len(dst)
	if cap(dst)-l < 16+1+8 {
		dst = slices.Grow(dst, 16+1+8+l/4)
	}
	dst = dst[:l+16]
	*(*[16]byte)(dst[l:]) = *(*[16]byte)(unsafe.Pointer(k))
	l += inlineLen(k) + 1
	if w := cc.fixed.w; w != 0 {
		dst = dst[:l+1+w]
		dst[l] = byte(w)
		cc.fixed.encode(dst[l+1:], unsafe.Pointer(cell))
		return dst
	}
	dst = cc.enc(dst[:l+1], *cell)
	switch cl := len(dst) - l - 1; {
	case cl < 0x80:
		dst[l] = byte(cl)
	default:
		var lb [binary.MaxVarintLen64]byte
		m := binary.PutUvarint(lb[:], uint64(cl))
		dst = append(dst, lb[:m-1]...)
		copy(dst[l+m:], dst[l+1:l+1+cl])
		copy(dst[l:], lb[:m])
	}
	return dst
}
