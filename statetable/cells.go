package statetable

import (
	"encoding/binary"
	"fmt"
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
}

func newCells[K, N, C any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], equal func(a, b C) bool) *cells[K, N, C] {
	c := &cells[K, N, C]{t: t, info: info, kc: kc, nc: nc, nillable: nillable[N]()}
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
	b = c.kc.Append(b, key)
	klen := len(b) - 5
	var lenBuf [binary.MaxVarintLen32]byte
	n := binary.PutUvarint(lenBuf[:], uint64(klen))
	start := 5 - n
	copy(b[start:], lenBuf[:n])
	keyHash := HashKey(b[5:])
	if g := KeyGroupOf(keyHash, c.t.maxPar); !c.t.owned.Contains(g) {
		c.buf = b
		return 0, "", fmt.Errorf("%w: state %q: key in key group %d, table owns %v", ErrKeyGroupNotOwned, c.info.Name, g, c.t.owned)
	}
	nsStart := len(b)
	b = c.nc.Append(b, ns)
	c.buf = b
	h := EntryHash(keyHash, b[nsStart:])
	ck := b[start:]
	return h, unsafe.String(unsafe.SliceData(ck), len(ck)), nil
}

// get returns the cell of (key, ns).
func (c *cells[K, N, C]) get(key K, ns N) (C, bool, error) {
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
	h, ck, err := c.locate(key, ns)
	if err != nil {
		return err
	}
	c.m.set(h, ck, v, true)
	return nil
}

// clear removes the cell of (key, ns).
func (c *cells[K, N, C]) clear(key K, ns N) error {
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
