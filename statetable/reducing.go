package statetable

import "fmt"

// ReducingState holds one value per (key, namespace), folded with a reduce
// function as values are added.
type ReducingState[K, N, V any] struct {
	*cells[K, N, V] // nil for a state with a TTL
	keyed[K, N]
	ttl    valueTTL[K, N, V] // nil for a state without a TTL
	reduce func(acc, v V) V
}

// NewReducing registers a reducing state. reduce(acc, v) returns the fold of
// the held value and a new one; it must not mutate acc (snapshots may hold
// it) and must be deterministic. Writer goroutine only.
func NewReducing[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], reduce func(acc, v V) V) (*ReducingState[K, N, V], error) {
	return registerReducing(t, name, kc, nc, vc, reduce, nil, func(s *ReducingState[K, N, V], info StateInfo) registered {
		s.cells, s.keyed = newValueCells(t, info, kc, nc, vc)
		return s
	})
}

// NewReducingWithTTL is NewReducing for a state whose values expire on
// their own (see TTL, and NewValueWithTTL for the errors); an Add to an
// expired value starts it over. Writer goroutine only.
func NewReducingWithTTL[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], reduce func(acc, v V) V, ttl TTL) (*ReducingState[K, N, V], error) {
	return registerReducing(t, name, kc, nc, vc, reduce, &ttl, func(s *ReducingState[K, N, V], info StateInfo) (reg registered) {
		s.ttl, s.keyed, reg = newValueTTL(t, info, kc, nc, vc, ttl, s)
		return reg
	})
}

func registerReducing[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], reduce func(acc, v V) V, ttl *TTL, fill func(*ReducingState[K, N, V], StateInfo) registered) (*ReducingState[K, N, V], error) {
	info := StateInfo{Name: name, Kind: KindReducing, Codec: []string{kc.ID(), nc.ID(), vc.ID()}, TTL: ttl != nil}
	return registerAs[*ReducingState[K, N, V]](t, info, ttl, func() registered {
		return fill(&ReducingState[K, N, V]{reduce: reduce}, info)
	})
}

func (s *ReducingState[K, N, V]) info() StateInfo { return s.cells.info }
func (s *ReducingState[K, N, V]) handle() any     { return s }

func (s *ReducingState[K, N, V]) ttlRuntime() *ttlRuntime { return runtimeOf(s.ttl) }

// Get returns the folded value of (key, ns) and whether there is one (with
// a TTL, by the TTL's rules, as ValueState.Lookup). Writer goroutine only.
func (s *ReducingState[K, N, V]) Get(key K, ns N) (V, bool, error) {
	if s.ttl != nil {
		return s.ttl.getLive(key, ns)
	}
	return s.get(key, ns)
}

// GetAt is Get on a snapshot; any goroutine.
func (s *ReducingState[K, N, V]) GetAt(snap *Snapshot, key K, ns N) (V, bool, error) {
	if s.ttl != nil {
		return s.ttl.getAtLive(snap, key, ns)
	}
	return s.getAt(snap, key, ns)
}

// Add folds v into the value of (key, ns) (v itself if there is none, or,
// with a TTL, if it has expired). Writer goroutine only.
func (s *ReducingState[K, N, V]) Add(key K, ns N, v V) error {
	_, err := s.AddCreating(key, ns, v)
	return err
}

// AddCreating is Add that also reports whether it created the value:
// (key, ns) had none, or with a TTL it had expired. Writer goroutine
// only.
func (s *ReducingState[K, N, V]) AddCreating(key K, ns N, v V) (created bool, err error) {
	if s.ttl != nil {
		return s.ttl.reduceNow(key, ns, v, s.reduce)
	}
	err = s.update(key, ns, func(old V, ok bool) V {
		created = !ok
		if ok {
			return s.reduce(old, v)
		}
		return v
	})
	return created && err == nil, err
}

// AddEach is Add of keys[0], keys[1], ... in turn, in namespace ns, with
// value(i) the value folded into keys[i]: the result of the calls of Add
// one by one, each group of keys prefetched first, as
// ValueState.UpdateEach does. An error stops it, the keys before the
// failing one added, and names the index. Writer goroutine only.
func (s *ReducingState[K, N, V]) AddEach(keys []K, ns N, value func(i int) V) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			s.addLocated(h, ck, value(i))
			return nil
		})
	}
	if s.ttl == nil && s.directEach() {
		s.updateEachDirect(keys, func(i int, old V, ok bool) V { return s.fold(old, ok, value(i)) }, nil)
		return nil
	}
	return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
		if err := s.Add(keys[i], ns, value(i)); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
		return nil
	})
}

// addLocated is AddCreating without a TTL for the key that locate made
// ck (hash h), for a batch that located it already (eachLocated).
func (s *ReducingState[K, N, V]) addLocated(h uint64, ck string, v V) (created bool) {
	s.m.update(h, ck, true, func(old V, ok bool) V {
		created = !ok
		return s.fold(old, ok, v)
	})
	return created
}

// fold returns what an Add of v makes of the value old (ok: there is one).
func (s *ReducingState[K, N, V]) fold(old V, ok bool, v V) V {
	if ok {
		return s.reduce(old, v)
	}
	return v
}

// AddEachCreating is AddEach that calls added(i, created) once keys[i] is
// added, created saying whether the add created the value (as
// AddCreating). An error stops it: the keys added are those added was
// called for, and the error is Add's, as it returned it. Writer goroutine
// only.
func (s *ReducingState[K, N, V]) AddEachCreating(keys []K, ns N, value func(i int) V, added func(i int, created bool)) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return err
			}
			added(i, s.addLocated(h, ck, value(i)))
			return nil
		})
	}
	if s.ttl == nil && s.directEach() {
		s.updateEachDirect(keys, func(i int, old V, ok bool) V { return s.fold(old, ok, value(i)) },
			func(i int, existed bool) { added(i, !existed) })
		return nil
	}
	return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
		created, err := s.AddCreating(keys[i], ns, value(i))
		if err == nil {
			added(i, created)
		}
		return err
	})
}

// PrefetchEncoded asks the CPU for the entry of the key and namespace
// whose encodings by the state's codecs are key and namespace, ahead of
// a read or write of it: for a caller that holds encodings, such as a
// timer service with the state's codecs firing a timer whose callback
// reads the state (NamespacedTimerService.AdvanceWatermarkReading). It
// does nothing in a state small enough to stay in cache, and for an
// integer key without a namespace. A hint: nothing changes. Writer
// goroutine only.
func (s *ReducingState[K, N, V]) PrefetchEncoded(key, namespace string) {
	prefetcherOf(s.cells, s.ttl).prefetchEncoded(key, namespace)
}

// Clear removes the value of (key, ns). Writer goroutine only.
func (s *ReducingState[K, N, V]) Clear(key K, ns N) error {
	if s.ttl != nil {
		return s.ttl.clear(key, ns)
	}
	return s.clear(key, ns)
}

// MergeNamespaces folds the values of key in every source namespace into the
// target namespace (in the order given, after the target's own value) and
// clears the sources. Sources without a value are skipped; if none has one,
// the target is unchanged. A source equal to the target is ignored. With a
// TTL, expired values are cleared and skipped, and a merged value expires
// the TTL after now. Writer goroutine only.
func (s *ReducingState[K, N, V]) MergeNamespaces(key K, target N, sources ...N) error {
	if s.ttl != nil {
		return s.ttl.mergeLive(key, target, sources, s.reduce)
	}
	return s.mergeNamespaces(key, target, sources, s.reduce)
}

// mergeNamespaces folds the cells of key in sources into target's with
// combine, in order, clearing the sources; sources without a cell, and a
// source equal to the target, are skipped. If no cell is found the target
// is left unchanged.
func (c *cells[K, N, C]) mergeNamespaces(key K, target N, sources []N, combine func(acc, v C) C) error {
	acc, have, err := c.get(key, target)
	if err != nil {
		return err
	}
	want := string(c.nc.Append(nil, target))
	for _, src := range sources {
		if string(c.nc.Append(nil, src)) == want {
			continue // merging the target into itself changes nothing
		}
		v, ok, err := c.get(key, src)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := c.clear(key, src); err != nil {
			return err
		}
		if have {
			acc = combine(acc, v)
		} else {
			acc, have = v, true
		}
	}
	if !have {
		return nil
	}
	return c.put(key, target, acc)
}
