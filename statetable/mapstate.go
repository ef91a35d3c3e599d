package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/cow"
)

// userEntry is one entry of a user map: the user key as given (so iteration
// does not decode) and the value.
type userEntry[UK, UV any] struct {
	k UK
	v UV
}

// userMap is the cell of a map state: a persistent map from the encoded user
// key to the entry, itself a version of a cow.Map. A put into a map of n
// entries copies O(log n) nodes when a capture is live, never the map.
type userMap[UK, UV any] = cow.MapRoot[string, userEntry[UK, UV]]

// MapState holds a map from user keys UK to values UV per (key, namespace).
// An empty map is no state: removing the last entry clears the key.
type MapState[K, N, UK, UV any] struct {
	*cells[K, N, userMap[UK, UV]] // nil for a state with a TTL
	keyed[K, N]
	ukc    Codec[UK]
	cursor *cow.Map[string, userEntry[UK, UV]] // reads and writes roots in place
	ukBuf  []byte
	ttl    mapTTL[K, N, UK, UV] // nil for a state without a TTL
}

// mapTTL is a map state's TTL side (an interface, as listTTL).
type mapTTL[K, N, UK, UV any] interface {
	get(key K, ns N, uk UK) (UV, bool, error)
	put(key K, ns N, entries iter.Seq2[UK, UV]) error
	remove(key K, ns N, uk UK) error
	clear(key K, ns N) error
	len(key K, ns N) (int, error)
	iterate(key K, ns N) (iter.Seq2[UK, UV], error)
	iterateAt(snap *Snapshot, key K, ns N) (iter.Seq2[UK, UV], error)
	runtime() *ttlRuntime
}

// NewMapState registers a map state; ukc and uvc are the codecs of the user
// keys and values. Writer goroutine only.
func NewMapState[K, N, UK, UV any](t *Table, name string, kc Codec[K], nc Codec[N], ukc Codec[UK], uvc Codec[UV]) (*MapState[K, N, UK, UV], error) {
	info := StateInfo{Name: name, Kind: KindMap, Codec: []string{kc.ID(), nc.ID(), ukc.ID(), uvc.ID()}}
	return registerAs[*MapState[K, N, UK, UV]](t, info, nil, func() registered {
		return newMapState(t, info, kc, nc, ukc, uvc)
	})
}

// NewMapStateWithTTL is NewMapState for a state whose user keys' entries
// expire each on its own, as in Flink (see TTL, and NewValueWithTTL for
// the errors). Writer goroutine only.
func NewMapStateWithTTL[K, N, UK, UV any](t *Table, name string, kc Codec[K], nc Codec[N], ukc Codec[UK], uvc Codec[UV], ttl TTL) (*MapState[K, N, UK, UV], error) {
	info := StateInfo{Name: name, Kind: KindMap, Codec: []string{kc.ID(), nc.ID(), ukc.ID(), uvc.ID()}, TTL: true}
	return registerAs[*MapState[K, N, UK, UV]](t, info, &ttl, func() registered {
		return newTTLMap(t, info, kc, nc, ukc, uvc, ttl)
	})
}

// newMapState returns a map state that no table has registered.
func newMapState[K, N, UK, UV any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], ukc Codec[UK], uvc Codec[UV]) *MapState[K, N, UK, UV] {
	eqv := equalityFor[UV]()
	if eqv == nil {
		eqv = cow.BytesEqual[UV]
	}
	s := &MapState[K, N, UK, UV]{
		cells: newCells[K, N, userMap[UK, UV]](t, info, kc, nc, func(a, b userMap[UK, UV]) bool { return a == b }),
		ukc:   ukc,
		cursor: cow.NewMap(t.owner, xxhash.Sum64String,
			func(a, b userEntry[UK, UV]) bool { return eqv(a.v, b.v) }),
	}
	s.keyed = keyed[K, N]{s.cells}
	s.cell = cellCodec[userMap[UK, UV]]{enc: func(dst []byte, m userMap[UK, UV]) []byte {
		dst, _ = encodeUserMap(dst, m, uvc, nil)
		return dst
	}, dec: func(src []byte) (userMap[UK, UV], error) {
		return s.decodeCell(src, uvc.Decode)
	}}
	s.parts = &cellParts[userMap[UK, UV]]{diff: s.diffParts(uvc), apply: s.applyParts(uvc), empty: func(m userMap[UK, UV]) bool { return m.Len() == 0 }}
	s.migrate = valueMigration(uvc)
	return s
}

// encodeUserMap appends the encoding of a map cell, leaving out the
// entries skip reports (skip may be nil), and reports whether any entry
// was encoded. Canonical: hash order of the encoded user keys, ties by
// bytes.
func encodeUserMap[UK, UV any](dst []byte, m userMap[UK, UV], uvc Codec[UV], skip func(UV) bool) ([]byte, bool) {
	type kv struct {
		h  uint64
		ek string
		v  UV
	}
	all := make([]kv, 0, m.Len())
	m.Scan(0, ^uint64(0), func(h uint64, ek string, e userEntry[UK, UV]) bool {
		if skip == nil || !skip(e.v) {
			all = append(all, kv{h, ek, e.v})
		}
		return true
	})
	if len(all) == 0 && skip != nil {
		return dst, false
	}
	slices.SortStableFunc(all, func(a, b kv) int {
		if a.h != b.h {
			return cmp.Compare(a.h, b.h)
		}
		return strings.Compare(a.ek, b.ek)
	})
	dst = binary.AppendUvarint(dst, uint64(len(all)))
	var vb []byte
	for _, e := range all {
		dst = appendBlob(dst, []byte(e.ek))
		vb = uvc.Append(vb[:0], e.v)
		dst = appendBlob(dst, vb)
	}
	return dst, true
}

// decodeCell decodes a map cell whose values decode with dec.
func (s *MapState[K, N, UK, UV]) decodeCell(src []byte, dec func([]byte) (UV, error)) (userMap[UK, UV], error) {
	n, src, err := readCount(src, 2)
	if err != nil || n == 0 {
		return userMap[UK, UV]{}, fmt.Errorf("%w: map cell: bad entry count", ErrDecode)
	}
	s.cursor.SetRoot(userMap[UK, UV]{})
	defer s.cursor.SetRoot(userMap[UK, UV]{})
	for range n {
		var kb, vb []byte
		if kb, src, err = readBlob(src); err != nil {
			return userMap[UK, UV]{}, err
		}
		if vb, src, err = readBlob(src); err != nil {
			return userMap[UK, UV]{}, err
		}
		uk, err := s.ukc.Decode(kb)
		if err != nil {
			return userMap[UK, UV]{}, err
		}
		uv, err := dec(vb)
		if err != nil {
			return userMap[UK, UV]{}, err
		}
		s.cursor.SetHashed(xxhash.Sum64(kb), string(kb), userEntry[UK, UV]{uk, uv}, nil)
	}
	if len(src) != 0 || s.cursor.Len() != n {
		return userMap[UK, UV]{}, fmt.Errorf("%w: map cell: %d entries (%d distinct), %d bytes left over", ErrDecode, n, s.cursor.Len(), len(src))
	}
	return s.cursor.Root(), nil
}

func (s *MapState[K, N, UK, UV]) info() StateInfo { return s.cells.info }
func (s *MapState[K, N, UK, UV]) handle() any     { return s }

func (s *MapState[K, N, UK, UV]) ttlRuntime() *ttlRuntime {
	if s.ttl == nil {
		return nil
	}
	return s.ttl.runtime()
}

// userKey encodes uk into the scratch buffer: hash and a string aliasing it.
func (s *MapState[K, N, UK, UV]) userKey(uk UK) (uint64, string) {
	s.ukBuf = s.ukc.Append(s.ukBuf[:0], uk)
	return xxhash.Sum64(s.ukBuf), unsafe.String(unsafe.SliceData(s.ukBuf), len(s.ukBuf))
}

// Get returns the value of uk in the map of (key, ns). O(log n). With a
// TTL, an expired entry is removed and returned only if the TTL's
// visibility allows; with UpdateOnReadAndWrite a live one is refreshed.
// Writer goroutine only.
func (s *MapState[K, N, UK, UV]) Get(key K, ns N, uk UK) (UV, bool, error) {
	if s.ttl != nil {
		return s.ttl.get(key, ns, uk)
	}
	m, _, err := s.get(key, ns)
	if err != nil {
		var zero UV
		return zero, false, err
	}
	h, ek := s.userKey(uk)
	e, ok := m.GetHashed(h, ek)
	return e.v, ok, nil
}

// Contains reports whether the map of (key, ns) has uk.
func (s *MapState[K, N, UK, UV]) Contains(key K, ns N, uk UK) (bool, error) {
	_, ok, err := s.Get(key, ns, uk)
	return ok, err
}

// Put sets uk to uv in the map of (key, ns). O(log n) time and allocation.
func (s *MapState[K, N, UK, UV]) Put(key K, ns N, uk UK, uv UV) error {
	if s.ttl != nil {
		return s.ttl.put(key, ns, func(yield func(UK, UV) bool) { yield(uk, uv) })
	}
	return s.update(key, ns, func(c *cow.Map[string, userEntry[UK, UV]]) {
		h, ek := s.userKey(uk)
		c.SetHashed(h, ek, userEntry[UK, UV]{uk, uv}, strings.Clone)
	})
}

// PutAll sets every entry of entries in the map of (key, ns).
func (s *MapState[K, N, UK, UV]) PutAll(key K, ns N, entries iter.Seq2[UK, UV]) error {
	if s.ttl != nil {
		return s.ttl.put(key, ns, entries)
	}
	return s.update(key, ns, func(c *cow.Map[string, userEntry[UK, UV]]) {
		for uk, uv := range entries {
			h, ek := s.userKey(uk)
			c.SetHashed(h, ek, userEntry[UK, UV]{uk, uv}, strings.Clone)
		}
	})
}

// Remove deletes uk from the map of (key, ns); removing the last entry
// clears the state of (key, ns).
func (s *MapState[K, N, UK, UV]) Remove(key K, ns N, uk UK) error {
	if s.ttl != nil {
		return s.ttl.remove(key, ns, uk)
	}
	return s.update(key, ns, func(c *cow.Map[string, userEntry[UK, UV]]) {
		h, ek := s.userKey(uk)
		c.DeleteHashed(h, ek)
	})
}

// update applies write to the map of (key, ns) through the cursor and
// stores the new root (a no-op if nothing changed).
func (s *MapState[K, N, UK, UV]) update(key K, ns N, write func(*cow.Map[string, userEntry[UK, UV]])) error {
	m, _, err := s.get(key, ns)
	if err != nil {
		return err
	}
	s.cursor.SetRoot(m)
	write(s.cursor)
	root := s.cursor.Root()
	s.cursor.SetRoot(userMap[UK, UV]{}) // the cursor never keeps a root alive
	if root.Len() == 0 {
		return s.clear(key, ns)
	}
	return s.put(key, ns, root)
}

// IsEmpty reports whether the map of (key, ns) has no entry (with a TTL,
// no entry not expired: O(entries), and nothing is cleaned up).
func (s *MapState[K, N, UK, UV]) IsEmpty(key K, ns N) (bool, error) {
	if s.ttl != nil {
		n, err := s.ttl.len(key, ns)
		return n == 0, err
	}
	_, ok, err := s.get(key, ns)
	return !ok, err
}

// Len returns the number of entries in the map of (key, ns) (with a TTL,
// of entries not expired: O(entries), and nothing is cleaned up).
func (s *MapState[K, N, UK, UV]) Len(key K, ns N) (int, error) {
	if s.ttl != nil {
		return s.ttl.len(key, ns)
	}
	m, _, err := s.get(key, ns)
	return m.Len(), err
}

// Clear removes the whole map of (key, ns).
func (s *MapState[K, N, UK, UV]) Clear(key K, ns N) error {
	if s.ttl != nil {
		return s.ttl.clear(key, ns)
	}
	return s.clear(key, ns)
}

// Iterate yields the entries of the map of (key, ns) in hash order of their
// encoded keys (deterministic). The iteration runs over the version current
// when it starts, pinned by a capture that it releases when it ends, so the
// loop body may put and remove entries (of this map too) without disturbing
// it. Values yielded are those stored: do not mutate what they reference.
// The error is that of a bad key or namespace. With a TTL, expired entries
// are yielded only if the TTL's visibility allows, and removed (and, with
// UpdateOnReadAndWrite, the live ones refreshed) when the iteration ends.
// Writer goroutine only.
func (s *MapState[K, N, UK, UV]) Iterate(key K, ns N) (iter.Seq2[UK, UV], error) {
	if s.ttl != nil {
		return s.ttl.iterate(key, ns)
	}
	if _, _, err := s.locate(key, ns); err != nil {
		return nil, err
	}
	return func(yield func(UK, UV) bool) {
		pin := s.t.owner.Capture()
		defer pin.Release()
		m, _, _ := s.get(key, ns) // locate succeeded above

		for _, e := range m.All() {
			if !yield(e.k, e.v) {
				return
			}
		}
	}, nil
}

// IterateAt is Iterate on a snapshot; any goroutine.
func (s *MapState[K, N, UK, UV]) IterateAt(snap *Snapshot, key K, ns N) (iter.Seq2[UK, UV], error) {
	if s.ttl != nil {
		return s.ttl.iterateAt(snap, key, ns)
	}
	m, _, err := s.getAt(snap, key, ns)
	if err != nil {
		return nil, err
	}
	return func(yield func(UK, UV) bool) {
		for _, e := range m.All() {
			if !yield(e.k, e.v) {
				return
			}
		}
	}, nil
}

// diffParts returns the part diff of two map cells: the user keys put or
// removed, while the patch stays small.
func (s *MapState[K, N, UK, UV]) diffParts(uvc Codec[UV]) func(old, new userMap[UK, UV]) ([]Part, bool) {
	return func(old, new userMap[UK, UV]) ([]Part, bool) {
		limit := max(new.Len()/patchMaxShare, 1)
		var parts []Part
		for ch := range s.cursor.DiffRoots(old, new) {
			if len(parts) == limit {
				return nil, false
			}
			p := Part{Key: []byte(ch.Key)}
			if ch.Kind == cow.Removed {
				p.Deleted = true
			} else {
				p.Value = uvc.Append(nil, ch.New.v)
			}
			parts = append(parts, p)
		}
		return parts, true
	}
}

// applyParts returns the map old with parts applied.
func (s *MapState[K, N, UK, UV]) applyParts(uvc Codec[UV]) func(old userMap[UK, UV], parts []Part) (userMap[UK, UV], error) {
	return func(old userMap[UK, UV], parts []Part) (userMap[UK, UV], error) {
		s.cursor.SetRoot(old)
		defer s.cursor.SetRoot(userMap[UK, UV]{}) // the cursor never keeps a root alive
		for _, p := range parts {
			h := xxhash.Sum64(p.Key)
			if p.Deleted {
				s.cursor.DeleteHashed(h, string(p.Key))
				continue
			}
			uk, err := s.ukc.Decode(p.Key)
			if err != nil {
				return userMap[UK, UV]{}, fmt.Errorf("map patch: user key: %w", err)
			}
			uv, err := uvc.Decode(p.Value)
			if err != nil {
				return userMap[UK, UV]{}, fmt.Errorf("map patch: user value: %w", err)
			}
			s.cursor.SetHashed(h, string(p.Key), userEntry[UK, UV]{uk, uv}, nil)
		}
		return s.cursor.Root(), nil
	}
}
