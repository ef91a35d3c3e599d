package statetable

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/internal/layout"
)

// cells is one registered state seen from its typed API: it turns a
// (key, namespace) of types K and N into the composite key with the
// state's codecs, checks the key group against the table's range, and
// keeps the entries, of the kind's cell type C (the user value, a list, a
// map, an accumulator), in a cellMap. The typed states (ValueState,
// ListState...) are thin wrappers of it.
//
// The composite key is uvarint(len(key)) + key + namespace, with key and
// namespace in their codecs' encodings, and its hash is EntryHash: the
// entries of a state are ordered by key group, then key hash, then
// namespace hash.
type cells[K, N, C any] struct {
	t        *Table
	info     StateInfo
	kc       Codec[K]
	nc       Codec[N]
	m        cellMap[C]
	nillable bool   // N can be nil: check namespaces
	buf      []byte // scratch for composite keys; writer goroutine only
	cell     cellCodec[C]
	parts    *cellParts[C] // list and map states only
	ttl      *ttlHooks[C]  // states with a TTL only
	// fixedKey is the key codec's fixedInt when N is VoidNamespace: the
	// composite key is then built inline, as the key8 map's word for an
	// 8-byte key (locate8), else as a key15 (locateFixed).
	fixedKey fixedInt
	// keyFixed and nsFixed are the key's and the namespace's codecs'
	// fixedInt, whatever the namespace: locate encodes an integer key or
	// namespace itself, with no call through its codec.
	keyFixed, nsFixed fixedInt
	// prefetchFrom is the fewest cells for which prefetch locates keys
	// other than integers without a namespace: prefetchFarCells (tests
	// lower it to take that path on small states).
	prefetchFrom int
	// group is eachLocated's buffer of a group's composite keys, nil
	// while a call uses it (a nested call makes its own).
	group    *locatedGroup
	keyCheck keyCheck // what a restored composite key must decode as
	// migrate, for a state whose value codec is Evolving, returns the
	// transcoder of values an earlier codec wrote (valueMigration);
	// migrations caches what it returned by the earlier codec's ID.
	migrate    func(from string) (valueTranscoder, error)
	migrations map[string]valueTranscoder
}

func newCells[K, N, C any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], equal func(a, b C) bool) *cells[K, N, C] {
	c := &cells[K, N, C]{t: t, info: info, kc: kc, nc: nc, nillable: nillable[N](), keyCheck: newKeyCheck(kc, nc), prefetchFrom: prefetchFarCells}
	if _, void := any(nc).(voidCodec); void {
		c.fixedKey = fixedOf(kc)
	}
	c.keyFixed, c.nsFixed = fixedOf(kc), fixedOf(nc)
	c.m = newCellMap(t.owner, equal)
	return c
}

// locate encodes (key, ns) into the scratch buffer and returns the entry
// hash and the composite key, which aliases the buffer: valid until the
// next locate, and copied (keep) before the map stores it.
func (c *cells[K, N, C]) locate(key K, ns N) (uint64, string, error) {
	if c.nillable && isNil(ns) {
		return 0, "", fmt.Errorf("%w: state %q", ErrNilNamespace, c.info.Name)
	}
	b := c.buf[:0]
	b = append(b, 0, 0, 0, 0, 0) // room for the key length
	if f := c.keyFixed; f.w != 0 {
		b = appendFixed(b, f, unsafe.Pointer(&key))
	} else {
		b = c.kc.Append(b, key)
	}
	klen := len(b) - 5
	var lenBuf [binary.MaxVarintLen32]byte
	n := binary.PutUvarint(lenBuf[:], uint64(klen))
	start := 5 - n
	copy(b[start:], lenBuf[:n])
	keyHash := HashKey(b[5:])
	if err := c.checkGroup(keyHash); err != nil {
		c.buf = b
		return 0, "", err
	}
	nsStart := len(b)
	if f := c.nsFixed; f.w != 0 {
		b = appendFixed(b, f, unsafe.Pointer(&ns))
	} else {
		b = c.nc.Append(b, ns)
	}
	c.buf = b
	h := EntryHash(keyHash, b[nsStart:])
	ck := b[start:]
	return h, unsafe.String(unsafe.SliceData(ck), len(ck)), nil
}

// appendFixed appends the f.w-byte encoding of *p, a value of f.w bytes:
// what its codec's Append appends, with no call through the codec (an
// add of an int64 key in an int64 namespace, 1024 -> 994 instructions;
// callgrind at 1K keys, decision 0056).
func appendFixed(b []byte, f fixedInt, p unsafe.Pointer) []byte {
	n := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)[:n+f.w]
	f.encode(b[n:], p)
	return b
}

// checkGroup returns an error unless the table owns the key group of a
// key with hash keyHash.
func (c *cells[K, N, C]) checkGroup(keyHash uint64) error {
	if c.t.ownsAll {
		return nil
	}
	if g := KeyGroupOf(keyHash, c.t.maxPar); !c.t.owned.Contains(g) {
		return fmt.Errorf("%w: state %q: key in key group %d, table owns %v", ErrKeyGroupNotOwned, c.info.Name, g, c.t.owned)
	}
	return nil
}

// voidLow is the namespace part of the entry hash of VoidNamespace's
// encoding (nothing): see EntryHash.
var voidLow = EntryHash(0, nil)

// locateFixed is locate for a state whose key codec is fixed-width of
// other than 8 bytes and whose namespace is VoidNamespace (c.fixedKey.w
// != 0, 8): the composite key (the length byte, then the key's w bytes)
// is built in a key15 with no call through the codec and no scratch
// buffer. It returns what locate returns, the key as the map holds it.
func (c *cells[K, N, C]) locateFixed(key K) (uint64, key15, error) {
	h, k := c.locateFixedOwned(key)
	return h, k, c.checkFixedGroup(h)
}

// locateFixedOwned is locateFixed with no key-group check, for a table
// that owns every key group (as locate8).
func (c *cells[K, N, C]) locateFixedOwned(key K) (uint64, key15) {
	var k key15
	f := c.fixedKey
	b := (*[16]byte)(unsafe.Pointer(&k))
	b[0], b[1] = uint8(1+f.w), uint8(f.w)
	f.encode(b[2:2+f.w], unsafe.Pointer(&key))
	if f.w == 4 {
		return fixedEntryHash(cow.HashUint32(binary.LittleEndian.Uint32(b[2:6]))), k
	}
	return fixedEntryHash(HashKey(b[2 : 2+f.w])), k
}

// prefetchFixed locates each key of group (at most prefetchGroup keys of
// a state whose keys are fixed-width of other than 8 bytes, in a table
// that owns every key group) into hs and ks, and prefetches their
// entries: what the batch methods then hand to the key15 map.
func (c *cells[K, N, C]) prefetchFixed(group []K, hs *[prefetchGroup]uint64, ks *[prefetchGroup]key15) {
	for j, key := range group {
		hs[j], ks[j] = c.locateFixedOwned(key)
	}
	c.m.k15.Prefetch(hs[:len(group)])
}

// checkFixedGroup is checkGroup for the entry hash h of a key with no
// namespace, which keeps the key hash's leading keyHashBits bits, all
// that the key group depends on; the call is made only when the table
// does not own every key group.
func (c *cells[K, N, C]) checkFixedGroup(h uint64) error {
	if c.t.ownsAll {
		return nil
	}
	return c.checkGroup(h)
}

// locate8 returns the key8 map's hash of an 8-byte key (c.fixedKey.w ==
// 8) with no namespace (key8Hash: the key's hash, which the key8 map
// holds the entry under), with no key-group check: small
// enough to be inlined, so that get, put and update on a table that owns
// every key group make no call before the map's (BenchmarkReadModifyWrite
// at size=1000: decision 0041). Every state of int64, uint64 or float64
// keys without windows goes this way: the per-event path of BenchmarkJob.
func (c *cells[K, N, C]) locate8(key K) uint64 {
	k := bits.ReverseBytes64(*(*uint64)(unsafe.Pointer(&key)) ^ c.fixedKey.flip) // the big-endian bytes, read little-endian
	return key8Hash(k)
}

// directEach reports whether the batch writes of a state without a TTL
// may go to the key8 or key15 map directly (updateEachDirect): its keys
// are fixed-width with no namespace, and its table owns every key group.
func (c *cells[K, N, C]) directEach() bool {
	return c.fixedKey.w != 0 && c.t.ownsAll
}

// updateEachDirect is the batch write of a state without a TTL for which
// directEach holds: each group of keys is located once, for the group's
// prefetch and for its writes, and then the cell of keys[i] is set to
// f(i, old, ok), where old and ok are its cell and whether it had one,
// and done(i, ok) is called, unless done is nil. Through eachInGroups the
// prefetch located a group's keys and each Add located its key again
// (BenchmarkUpdateEach, key=int64-reducing). f and done may use the
// state, as an Add's may, but not keys, which is read a group ahead.
// Writer goroutine only.
func (c *cells[K, N, C]) updateEachDirect(keys []K, f func(i int, old C, ok bool) C, done func(i int, existed bool)) {
	var (
		hs [prefetchGroup]uint64
		ks [prefetchGroup]key15
	)
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		if c.fixedKey.w == 8 {
			for j, key := range group {
				hs[j] = c.locate8(key)
			}
			c.m.k8.Prefetch(hs[:len(group)])
		} else {
			c.prefetchFixed(group, &hs, &ks)
		}
		for j := range group {
			i, existed := from+j, false
			write := func(old C, ok bool) C {
				existed = ok
				return f(i, old, ok)
			}
			if c.fixedKey.w == 8 {
				c.m.k8.UpdateHashed(hs[j], cow.NoKey{}, write, nil)
			} else {
				c.m.k15.UpdateHashed(hs[j], ks[j], write, nil)
			}
			if done != nil {
				done(i, existed)
			}
		}
	}
}

// fixedEntryHash is the entry hash of a key of hash keyHash with no
// namespace: EntryHash(keyHash, nil).
func fixedEntryHash(keyHash uint64) uint64 {
	const low = 1<<(64-keyHashBits) - 1
	return keyHash&^low | voidLow
}

// location is a located (key, ns): its hash and its key as one of the
// maps holds them: a key8 entry's hash alone (locate8), a key15 and its
// entry hash when the state's keys are fixed-width with no namespace
// (locateFixed), else the entry hash and the bytes locate returns (valid
// until the next locate).
type location struct {
	h     uint64
	ck    string
	k     key15
	class locClass
}

type locClass uint8

const (
	locBytes locClass = iota // ck
	locKey8                  // h alone
	locKey15                 // k
)

// find locates (key, ns) for several operations on one entry (a TTL
// read that removes or refreshes what it read).
func (c *cells[K, N, C]) find(key K, ns N) (location, error) {
	switch c.fixedKey.w {
	case 8:
		h := c.locate8(key)
		return location{h: h, class: locKey8}, c.checkFixedGroup(h)
	case 0:
		h, ck, err := c.locate(key, ns)
		return location{h: h, ck: ck}, err
	}
	h, k, err := c.locateFixed(key)
	return location{h: h, k: k, class: locKey15}, err
}

func (m *cellMap[C]) getLoc(l *location) (C, bool) {
	switch l.class {
	case locKey8:
		return m.k8.GetHashed(l.h, cow.NoKey{})
	case locKey15:
		return m.k15.GetHashed(l.h, l.k)
	}
	return m.get(l.h, l.ck)
}

func (m *cellMap[C]) setLoc(l *location, cell C) {
	switch l.class {
	case locKey8:
		m.k8.SetHashed(l.h, cow.NoKey{}, cell, nil)
	case locKey15:
		m.k15.SetHashed(l.h, l.k, cell, nil)
	default:
		m.set(l.h, l.ck, cell, true)
	}
}

func (m *cellMap[C]) deleteLoc(l *location) {
	switch l.class {
	case locKey8:
		m.k8.DeleteHashed(l.h, cow.NoKey{})
	case locKey15:
		m.k15.DeleteHashed(l.h, l.k)
	default:
		m.delete(l.h, l.ck)
	}
}

// get returns the cell of (key, ns).
func (c *cells[K, N, C]) get(key K, ns N) (C, bool, error) {
	if c.fixedKey.w == 8 {
		h := c.locate8(key)
		if err := c.checkFixedGroup(h); err != nil {
			var zero C
			return zero, false, err
		}
		v, ok := c.m.k8.GetForSet(h, cow.NoKey{})
		return v, ok, nil
	}
	if c.fixedKey.w != 0 {
		h, k, err := c.locateFixed(key)
		if err != nil {
			var zero C
			return zero, false, err
		}
		v, ok := c.m.k15.GetForSet(h, k)
		return v, ok, nil
	}
	h, ck, err := c.locate(key, ns)
	if err != nil {
		var zero C
		return zero, false, err
	}
	v, ok := c.m.get(h, ck)
	return v, ok, nil
}

// put stores the cell of (key, ns).
func (c *cells[K, N, C]) put(key K, ns N, v C) error {
	if c.fixedKey.w == 8 {
		h := c.locate8(key)
		err := c.checkFixedGroup(h)
		if err == nil {
			c.m.k8.SetAfterGet(h, cow.NoKey{}, v, nil)
		}
		return err
	}
	if c.fixedKey.w != 0 {
		h, k, err := c.locateFixed(key)
		if err == nil {
			c.m.k15.SetAfterGet(h, k, v, nil)
		}
		return err
	}
	h, ck, err := c.locate(key, ns)
	if err != nil {
		return err
	}
	c.m.set(h, ck, v, true)
	return nil
}

// update stores f(old, ok) as the cell of (key, ns), where old and ok are
// its cell and whether it has one: the key is encoded and hashed once, and
// the map walked once when the leaf is the writer's (cellMap.update). f
// may use the state itself (the scratch buffer is set aside meanwhile).
func (c *cells[K, N, C]) update(key K, ns N, f func(old C, ok bool) C) error {
	if c.fixedKey.w == 8 {
		h := c.locate8(key)
		err := c.checkFixedGroup(h)
		if err == nil {
			c.m.k8.UpdateHashed(h, cow.NoKey{}, f, nil)
		}
		return err
	}
	if c.fixedKey.w != 0 {
		h, k, err := c.locateFixed(key)
		if err != nil {
			return err
		}
		c.m.k15.UpdateHashed(h, k, f, nil)
		return nil
	}
	h, ck, err := c.locate(key, ns)
	if err != nil {
		return err
	}
	buf := c.buf
	c.buf = nil // ck aliases it: a locate inside f gets a buffer of its own
	c.m.update(h, ck, true, f)
	c.buf = buf
	return nil
}

// prefetchFarCells is the fewest cells for which prefetch locates a key
// that is not an integer without a namespace: with fewer, a few hundred
// kilobytes to a megabyte, the state stays in a core's cache, and the
// second encoding and hash cost more than the misses saved
// (BenchmarkUpdateEach at 10K keys: a string key 155 ns an update
// against 126 without; at 1M, 342-366 against 506-596).
const prefetchFarCells = 1 << 15

// prefetch loads the map entries of keys in namespace ns (at most
// prefetchGroup of them) into the CPU's cache (cow.Map.Prefetch), for any
// key and namespace codec: an integer key with no namespace is located
// inline, any other (a string key, a key in a namespace) by the encoding
// and hash its read or write will compute again. A key whose group the
// table does not own, or that does not encode, is skipped. A hint:
// nothing changes.
func (c *cells[K, N, C]) prefetch(keys []K, ns N) {
	var hs [prefetchGroup]uint64
	n := 0
	switch c.fixedKey.w {
	case 0:
		if c.m.len() < c.prefetchFrom {
			return // in cache: locating twice would cost more than it saves
		}
		var classes [prefetchGroup]keyClass
		for _, key := range keys {
			if h, ck, err := c.locate(key, ns); err == nil {
				hs[n], classes[n], n = mapHash(h, ck), classOf(ck), n+1
			}
		}
		c.m.prefetch(hs[:n], classes[:n])
	case 8:
		for _, key := range keys {
			h := c.locate8(key)
			if c.checkFixedGroup(h) == nil {
				hs[n], n = h, n+1
			}
		}
		c.m.k8.Prefetch(hs[:n])
	default:
		for _, key := range keys {
			if h, _, err := c.locateFixed(key); err == nil {
				hs[n], n = h, n+1
			}
		}
		c.m.k15.Prefetch(hs[:n])
	}
}

// locatedGroup is what eachLocated keeps of a group of keys between
// locating them and writing them: their entry hashes, locate's errors,
// and their composite keys, one after another in buf (ends[j] is where
// key j's ends).
type locatedGroup struct {
	h    [prefetchGroup]uint64
	err  [prefetchGroup]error
	ends [prefetchGroup]int
	buf  []byte
}

// eachLocated is eachInGroups for the batch writes of a state whose keys
// locate builds (c.fixedKey.w == 0: a key in a namespace, a string key):
// each group of prefetchGroup keys is located once, its entries
// prefetched (in a state of prefetchFrom cells or more), and then
// op(i, h, ck, err) called for each key in turn with what locate returned
// for it. Through eachInGroups the prefetch located a group's keys and
// each write located its key again: two encodings and four hashes a key
// where this makes one and two. A reducing state's AddEach of int64 keys
// in an int64 namespace, prefetching: 1366 -> 1074 instructions an add
// (callgrind at 1K keys); the window state of BenchmarkWindowJob is keyed
// so, by a key and a window, and BenchmarkUpdateEach's key=string and
// key=int64-in-namespace take this path.
// ck aliases a buffer the next group reuses: op must not keep it (the
// maps copy what they store). op may use this state again, a batch
// included, which then locates into a buffer of its own. An error of op
// stops it and is returned as op returned it. Writer goroutine only.
func (c *cells[K, N, C]) eachLocated(keys []K, ns N, op func(i int, h uint64, ck string, err error) error) error {
	g := c.group
	if g == nil {
		g = new(locatedGroup)
	}
	c.group = nil
	defer func() { c.group = g }()
	var hs [prefetchGroup]uint64
	var classes [prefetchGroup]keyClass
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		g.buf = g.buf[:0]
		n := 0
		for j, key := range group {
			h, ck, err := c.locate(key, ns)
			g.h[j], g.err[j] = h, err
			g.buf = append(g.buf, ck...)
			g.ends[j] = len(g.buf)
			if err == nil {
				hs[n], classes[n], n = mapHash(h, ck), classOf(ck), n+1
			}
		}
		if c.m.len() >= c.prefetchFrom {
			c.m.prefetch(hs[:n], classes[:n])
		}
		start := 0
		for j := range group {
			ck := ""
			if end := g.ends[j]; end > start {
				ck = unsafe.String(&g.buf[start], end-start)
			}
			start = g.ends[j]
			if err := op(from+j, g.h[j], ck, g.err[j]); err != nil {
				clear(g.err[:])
				return err
			}
		}
		clear(g.err[:])
	}
	return nil
}

// prefetchEncoded loads the map entry of the key and namespace whose
// encodings by the state's codecs are key and ns into the CPU's cache
// (cow.Map.Prefetch), as prefetch does for typed keys: for a caller that
// holds the encodings, such as a timer of a service with the state's
// codecs. It does nothing for an integer key without a namespace (held
// inline) and in a state of fewer than prefetchFarCells cells. A hint:
// nothing changes, and encodings of another codec only waste the request.
func (c *cells[K, N, C]) prefetchEncoded(key, ns string) {
	if c.fixedKey.w != 0 || c.m.len() < c.prefetchFrom {
		return
	}
	h, class := locateEncoded(key, ns)
	c.m.prefetch([]uint64{h}, []keyClass{class})
}

// locateEncoded returns the hash its map holds the entry under (mapHash)
// and the map of the composite key of a key and namespace encoded as key
// and ns: what locate returns for the typed key and namespace (class as
// classOf of its composite key), without building the composite key.
func locateEncoded(key, ns string) (uint64, keyClass) {
	h := EntryHash(HashKey(readOnlyBytes(key)), readOnlyBytes(ns))
	// The composite key is the key's length (a uvarint: one byte below
	// 128, and a key of 128 bytes or more is long either way), the key,
	// the namespace.
	switch n := 1 + len(key) + len(ns); {
	case n == 9 && len(key) == 8:
		return key8Hash(binary.LittleEndian.Uint64(readOnlyBytes(key))), class8
	case n <= key15Max:
		return h, class15
	case n <= key31Max:
		return h, class31
	}
	return h, classLong
}

// clear removes the cell of (key, ns).
func (c *cells[K, N, C]) clear(key K, ns N) error {
	if c.fixedKey.w == 8 {
		h := c.locate8(key)
		err := c.checkFixedGroup(h)
		if err == nil {
			c.m.k8.DeleteHashed(h, cow.NoKey{})
		}
		return err
	}
	if c.fixedKey.w != 0 {
		h, k, err := c.locateFixed(key)
		if err == nil {
			c.m.k15.DeleteHashed(h, k)
		}
		return err
	}
	h, ck, err := c.locate(key, ns)
	if err != nil {
		return err
	}
	c.m.delete(h, ck)
	return nil
}

// splitComposite returns the key and namespace bytes of a composite key.
func splitComposite(ck string) (key, ns string, err error) {
	klen, n := binary.Uvarint(readOnlyBytes(ck[:min(len(ck), binary.MaxVarintLen32)]))
	if n <= 0 || klen > uint64(len(ck)-n) {
		return "", "", fmt.Errorf("%w composite key: bad key length prefix in %d bytes", ErrDecode, len(ck))
	}
	return ck[n : n+int(klen)], ck[n+int(klen):], nil
}

// compositeHash is the entry hash of a composite key; the map uses it only
// to check itself, since every access passes the hash locate computed.
func compositeHash(ck string) uint64 {
	kb, nb, err := splitComposite(ck)
	if err != nil {
		return 0
	}
	return EntryHash(HashKey(readOnlyBytes(kb)), readOnlyBytes(nb))
}

// readOnlyBytes returns the bytes of s without a copy, for reading only:
// a string's bytes must never be written.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// nillable reports whether values of N can be nil.
func nillable[N any]() bool {
	switch reflect.TypeFor[N]().Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.Func, reflect.Chan:
		return true
	}
	return false
}

func isNil[N any](ns N) bool {
	return reflect.ValueOf(&ns).Elem().IsNil()
}

// equalityFor returns the equality the state maps use to detect writes that
// change nothing (so they copy nothing and diffs stay exact): bytewise for
// types without pointers or padding, == for strings, and "never equal"
// otherwise (a value holding a slice may have been changed through it;
// treating it as changed is always safe). Bytewise is nil, which the cow
// structures take as cow.BytesEqual and, for one-word values, compare
// inline; a caller that calls the equality itself uses cow.BytesEqual.
func equalityFor[V any]() func(a, b V) bool {
	t := reflect.TypeFor[V]()
	switch {
	case t.Kind() == reflect.String:
		return func(a, b V) bool { return *(*string)(unsafe.Pointer(&a)) == *(*string)(unsafe.Pointer(&b)) }
	case layout.PointerFree(t) && layout.Unpadded(t): // equal values, equal bytes
		return nil
	}
	return func(a, b V) bool { return false }
}

// view returns the state's map as frozen by c.
func (c *cells[K, N, C]) view(c2 *cow.Capture) any { return c.m.view(c2) }

// viewLen returns the number of entries of a view.
func (c *cells[K, N, C]) viewLen(v any) int { return v.(cellView[C]).len() }

func (c *cells[K, N, C]) passed(v any, below uint64) { v.(cellView[C]).passed(below) }
