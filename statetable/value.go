package statetable

import (
	"bytes"
	"fmt"

	"github.com/cowstate/cowstate/cow"
)

// ValueState holds one value per (key, namespace).
type ValueState[K, N, V any] struct {
	*cells[K, N, V] // nil for a state with a TTL
	keyed[K, N]
	ttl    valueTTL[K, N, V] // nil for a state without a TTL
	def    V
	defEnc []byte // def in the value codec's encoding
	// direct8: Get, Put and Update go to the key8 map directly (a state
	// without TTL, of 8-byte keys with no namespace, on a table that owns
	// every key group). They then locate the key inline and call the map,
	// the first case of cells.get, put and update written out so that an
	// event makes one call fewer (BenchmarkReadModifyWrite at size=1000,
	// decision 0042). Fixed at registration: one load where the test
	// reads three fields through two pointers.
	direct8 bool
}

// NewValue registers a value state (or returns the one registered under the
// name, if its kind, codecs and default match and it has no TTL). def is
// what Get returns for a key without a value. Registering the name again
// with another default (compared in the value codec's encoding) is an
// error matching ErrStateMismatch that names the state and both defaults.
// Cost: one encoding of def. Writer goroutine only.
func NewValue[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], def V) (*ValueState[K, N, V], error) {
	return registerValue(t, name, kc, nc, vc, def, nil, func(s *ValueState[K, N, V], info StateInfo) registered {
		s.cells, s.keyed = newValueCells(t, info, kc, nc, vc)
		return s
	})
}

// NewValueWithTTL is NewValue for a state whose values expire on their
// own (see TTL); an invalid ttl is an error matching ErrConfig, and a name
// registered without this TTL an error matching ErrStateMismatch. A
// program that registers no TTL state does not compile the TTL code
// (docs/decisions/0024-compile-cost-ttl-constructors.md). Writer goroutine
// only.
func NewValueWithTTL[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], def V, ttl TTL) (*ValueState[K, N, V], error) {
	return registerValue(t, name, kc, nc, vc, def, &ttl, func(s *ValueState[K, N, V], info StateInfo) (reg registered) {
		s.ttl, s.keyed, reg = newValueTTL(t, info, kc, nc, vc, ttl, s)
		return reg
	})
}

// registerValue registers a value state built by fill (with or without a
// TTL) and checks a state already registered under the name.
func registerValue[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], def V, ttl *TTL, fill func(*ValueState[K, N, V], StateInfo) registered) (*ValueState[K, N, V], error) {
	info := StateInfo{Name: name, Kind: KindValue, Codec: []string{kc.ID(), nc.ID(), vc.ID()}, TTL: ttl != nil}
	defEnc := vc.Append(nil, def)
	s, err := registerAs[*ValueState[K, N, V]](t, info, ttl, func() registered {
		s := &ValueState[K, N, V]{def: def, defEnc: defEnc}
		reg := fill(s, info)
		s.direct8 = s.ttl == nil && s.fixedKey.w == 8 && t.ownsAll
		return reg
	})
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(s.defEnc, defEnc) {
		return nil, fmt.Errorf("%w: value state %q is registered with default %v, not %v", ErrStateMismatch, name, s.def, def)
	}
	return s, nil
}

func (s *ValueState[K, N, V]) info() StateInfo { return s.cells.info }
func (s *ValueState[K, N, V]) handle() any     { return s }

func (s *ValueState[K, N, V]) ttlRuntime() *ttlRuntime { return runtimeOf(s.ttl) }

// Get returns the value of (key, ns), or the default. O(log n). With a
// TTL, an expired value is removed and reads as the default unless the
// TTL's visibility returns it once. Writer goroutine only.
func (s *ValueState[K, N, V]) Get(key K, ns N) (V, error) {
	if s.direct8 {
		if v, ok := s.m.k8.GetForSet(s.locate8(key), cow.NoKey{}); ok {
			return v, nil
		}
		return s.def, nil
	}
	var v V
	var ok bool
	var err error
	if s.ttl != nil { // Lookup written out: it is not inlined
		v, ok, err = s.ttl.getLive(key, ns)
	} else {
		v, ok, err = s.get(key, ns)
	}
	if !ok {
		return s.def, err
	}
	return v, nil
}

// Put sets the value of (key, ns) (and, with a TTL, its expiration: the
// TTL after the current processing time). The state keeps v as given: do
// not mutate what it references afterwards. Putting an equal value (see
// equalityFor) changes nothing. O(log n); after a Get of the same key
// with nothing written between, O(1) plus the copy of the entry's leaf
// if a live snapshot shares it: the Put writes where the Get found the
// entry (cow.Map.SetAfterGet), and a Get then a Put costs about one
// Update. Writer goroutine only.
func (s *ValueState[K, N, V]) Put(key K, ns N, v V) error {
	if s.direct8 {
		s.m.k8.SetAfterGet(s.locate8(key), cow.NoKey{}, v, nil)
		return nil
	}
	if s.ttl != nil {
		return s.ttl.putNow(key, ns, v)
	}
	return s.put(key, ns, v)
}

// Update sets the value of (key, ns) to f of its value (the default if it
// has none): a read-modify-write, Get then Put, with the key encoded and
// hashed once and one walk of the map (cow.Map.UpdateHashed), written in
// place when the entry's leaf is the writer's (BenchmarkReadModifyWrite).
// f may read and write states of the backend, this one included (the
// write then walks again); what f returns is kept as Put keeps it, and an
// equal value changes nothing. With a TTL, as Get then Put (the Put
// writing where the Get found the entry). Writer goroutine only.
func (s *ValueState[K, N, V]) Update(key K, ns N, f func(V) V) error {
	apply := func(old V, ok bool) V {
		if !ok {
			old = s.def
		}
		return f(old)
	}
	if s.direct8 {
		s.m.k8.UpdateHashed(s.locate8(key), cow.NoKey{}, apply, nil)
		return nil
	}
	if s.ttl != nil {
		v, err := s.Get(key, ns)
		if err != nil {
			return err
		}
		return s.ttl.putNow(key, ns, f(v))
	}
	return s.update(key, ns, apply)
}

// UpdateEach is Update of keys[0], keys[1], ... in turn, in namespace ns:
// the new value of keys[i] is f(i, old), where old is its value (the
// default if it has none), so that f can fold in the payload of the
// event at i. The result is exactly that of the calls of Update one by
// one: a key twice in keys sees its first update at its second, and f
// may read and write states of the backend as Update's f may (but not
// keys itself, which is read a group of keys ahead of f).
//
// What it adds is speed at scale: before updating a group of keys it
// prefetches their entries (cow.Map.Prefetch), so the cache misses of
// the group overlap where one Update after another waits on each in
// turn. The prefetch is a hint, with no effect on the result. Each key
// is encoded and hashed once, for its prefetch and its update (an integer
// key with no namespace inline, with no call through its codec), except
// with a TTL or in a table that does not own every key group, where the
// update locates it again. A key other than an integer with no namespace
// (a string, a key in a namespace) is prefetched only in a state of 32K
// cells or more (prefetchFarCells), which no longer stays in a core's
// cache. Cost: one Update a key, less the misses the group overlaps
// (BenchmarkJob at 10M keys, decision 0045; BenchmarkUpdateEach for
// string and int32 keys and keys in a namespace, decision 0059).
//
// An error stops it: the keys before the one that failed are updated, the
// rest are not, and the error names the index and matches what Update's
// would. Writer goroutine only.
func (s *ValueState[K, N, V]) UpdateEach(keys []K, ns N, f func(i int, old V) V) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			s.m.update(h, ck, true, func(old V, ok bool) V {
				if !ok {
					old = s.def
				}
				return f(i, old)
			})
			return nil
		})
	}
	if s.directFixed() {
		return s.updateEachFixed(keys, f)
	}
	if !s.direct8 {
		return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
			if err := s.Update(keys[i], ns, func(old V) V { return f(i, old) }); err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			return nil
		})
	}
	var hs [prefetchGroup]uint64
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		for j, key := range group {
			hs[j] = s.locate8(key)
		}
		s.m.k8.Prefetch(hs[:len(group)])
		for j := range group {
			i := from + j
			s.m.k8.UpdateHashed(hs[j], cow.NoKey{}, func(old V, ok bool) V {
				if !ok {
					old = s.def
				}
				return f(i, old)
			}, nil)
		}
	}
	return nil
}

// GetEach calls f(i, v) for keys[0], keys[1], ... in turn, in namespace
// ns, where v is the value of keys[i] (the default if it has none): the
// values Get of each key in turn would return, with f called between
// them, so that f may read and write states of the backend (this one
// included: a later key then reads what f wrote) but not keys itself,
// which is read a group of keys ahead of f.
//
// What it adds is speed at scale, as UpdateEach: each group of keys is
// prefetched (cow.Map.Prefetch) before it is read, so the group's cache
// misses overlap where one Get after another waits on each in turn, as
// UpdateEach. Cost: one Get a key, less the
// misses a group overlaps (BenchmarkValueGet).
//
// An error stops it: f has been called for the keys before the one that
// failed and not after, and the error names the index and matches what
// Get's would. Writer goroutine only.
func (s *ValueState[K, N, V]) GetEach(keys []K, ns N, f func(i int, v V)) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			v, ok := s.m.get(h, ck)
			if !ok {
				v = s.def
			}
			f(i, v)
			return nil
		})
	}
	if s.directFixed() {
		return s.getEachFixed(keys, f)
	}
	if !s.direct8 {
		return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
			v, err := s.Get(keys[i], ns)
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			f(i, v)
			return nil
		})
	}
	var hs [prefetchGroup]uint64
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		for j, key := range group {
			hs[j] = s.locate8(key)
		}
		s.m.k8.Prefetch(hs[:len(group)])
		for j := range group {
			v, ok := s.m.k8.GetHashed(hs[j], cow.NoKey{})
			if !ok {
				v = s.def
			}
			f(from+j, v)
		}
	}
	return nil
}

// directFixed reports whether the batch methods may take the key15 map
// directly: a state with no TTL whose keys are fixed-width integers of
// other than 8 bytes (int32, uint16, ...) with no namespace, in a table
// that owns every key group.
func (s *ValueState[K, N, V]) directFixed() bool {
	return s.ttl == nil && s.fixedKey.w != 0 && s.fixedKey.w != 8 && s.t.ownsAll
}

// updateEachFixed is UpdateEach for directFixed: each key of a group is
// encoded and hashed once, for the group's prefetch and for its update,
// where an Update of each would locate it again (BenchmarkUpdateEach,
// key=int32). It is cells.updateEachDirect written out: through that
// one's function value, which the default value needs wrapped round f,
// an update takes 22 instructions more (560 against 538, callgrind).
func (s *ValueState[K, N, V]) updateEachFixed(keys []K, f func(i int, old V) V) error {
	var (
		hs [prefetchGroup]uint64
		ks [prefetchGroup]key15
	)
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		s.prefetchFixed(group, &hs, &ks)
		for j := range group {
			i := from + j
			s.m.k15.UpdateHashed(hs[j], ks[j], func(old V, ok bool) V {
				if !ok {
					old = s.def
				}
				return f(i, old)
			}, nil)
		}
	}
	return nil
}

// getEachFixed is GetEach for directFixed, each key located once.
func (s *ValueState[K, N, V]) getEachFixed(keys []K, f func(i int, v V)) error {
	var (
		hs [prefetchGroup]uint64
		ks [prefetchGroup]key15
	)
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		s.prefetchFixed(group, &hs, &ks)
		for j := range group {
			v, ok := s.m.k15.GetHashed(hs[j], ks[j])
			if !ok {
				v = s.def
			}
			f(from+j, v)
		}
	}
	return nil
}

// prefetchGroup is how many keys UpdateEach prefetches before it updates
// them: groups of 4-8 keys do best at 1M-10M entries, a larger group's
// lines leave the first-level cache before their update (BenchmarkPrefetch
// in cow, decision 0045).
const prefetchGroup = 8

// prefetcher asks for the entries of a group of keys in namespace ns
// (cells.prefetch): a state's cells, or with a TTL its TTL side's.
type prefetcher[K, N any] interface {
	prefetch(keys []K, ns N)
	prefetchEncoded(key, ns string)
}

// prefetcherOf returns the prefetcher of a state with cells c and TTL
// side ttl (nil without a TTL, and then c is not).
func prefetcherOf[K, N, C, V any](c *cells[K, N, C], ttl valueTTL[K, N, V]) prefetcher[K, N] {
	if ttl != nil {
		return ttl
	}
	return c
}

// eachInGroups calls op(i) for every index i of keys in turn, a group of
// prefetchGroup keys at a time, each group's entries prefetched first (a
// hint). An error stops it and is returned as op returned it.
func eachInGroups[K, N any](p prefetcher[K, N], keys []K, ns N, op func(i int) error) error {
	for from := 0; from < len(keys); from += prefetchGroup {
		group := keys[from:min(from+prefetchGroup, len(keys))]
		p.prefetch(group, ns)
		for j := range group {
			if err := op(from + j); err != nil {
				return err
			}
		}
	}
	return nil
}

// Clear removes the value of (key, ns). Writer goroutine only.
func (s *ValueState[K, N, V]) Clear(key K, ns N) error {
	if s.ttl != nil {
		return s.ttl.clear(key, ns)
	}
	return s.clear(key, ns)
}

// Lookup returns the value of (key, ns) and true, or the zero V and false
// if it has none: unlike Get, it tells a stored value equal to the default
// from an absent one. O(log n). With a TTL, as Get. Writer goroutine only.
func (s *ValueState[K, N, V]) Lookup(key K, ns N) (V, bool, error) {
	if s.ttl != nil {
		return s.ttl.getLive(key, ns)
	}
	return s.get(key, ns)
}

// GetAt returns the value of (key, ns) in a snapshot, or the default. snap
// must be a snapshot of this state's table (else an error matching
// ErrForeignSnapshot). With a TTL, a value expired at the snapshot's
// capture reads as the default unless the TTL's visibility returns it.
// Safe from any goroutine while the snapshot is live.
func (s *ValueState[K, N, V]) GetAt(snap *Snapshot, key K, ns N) (V, error) {
	v, ok, err := s.LookupAt(snap, key, ns)
	if !ok {
		return s.def, err
	}
	return v, nil
}

// LookupAt is Lookup on a snapshot of this state's table; any goroutine
// while the snapshot is live.
func (s *ValueState[K, N, V]) LookupAt(snap *Snapshot, key K, ns N) (V, bool, error) {
	if s.ttl != nil {
		return s.ttl.getAtLive(snap, key, ns)
	}
	return s.getAt(snap, key, ns)
}

// registerAs registers a state and asserts the handle's Go type (two states
// can share codec IDs and differ in Go types). ttl is the TTL asked for
// (nil: none): an invalid one is an error matching ErrConfig, and a state
// already registered with another an error matching ErrStateMismatch.
func registerAs[S interface{ ttlRuntime() *ttlRuntime }](t *Table, info StateInfo, ttl *TTL, make func() registered) (S, error) {
	var zero S
	if ttl != nil {
		if err := ttl.check(info.Name); err != nil {
			return zero, err
		}
	}
	h, err := t.register(info, make)
	if err != nil {
		return zero, err
	}
	s, ok := h.(S)
	if !ok {
		return zero, fmt.Errorf("%w: %v is registered with other Go types (%T)", ErrStateMismatch, info, h)
	}
	if err := checkTTL(info.Name, s.ttlRuntime(), ttl); err != nil {
		return zero, err
	}
	return s, nil
}

// newValueCells returns the cells of a value, reducing or aggregating
// state without a TTL: one value of vc per entry.
func newValueCells[K, N, V any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], vc Codec[V]) (*cells[K, N, V], keyed[K, N]) {
	c := newCells[K, N, V](t, info, kc, nc, equalityFor[V]())
	c.cell = valueCell(vc)
	c.migrate = valueMigration(vc)
	return c, keyed[K, N]{c}
}
