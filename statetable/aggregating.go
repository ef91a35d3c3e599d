package statetable

import "fmt"

// AggregateFunction is the user's aggregation for an AggregatingState: IN
// values are added to an accumulator ACC, and OUT is read from it. None of
// the methods may mutate an accumulator it is given (snapshots may hold it):
// return a new one, or use value types.
type AggregateFunction[IN, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(in IN, acc ACC) ACC
	Result(acc ACC) OUT
	Merge(a, b ACC) ACC
}

// AggregatingState holds one accumulator per (key, namespace).
type AggregatingState[K, N, IN, ACC, OUT any] struct {
	*cells[K, N, ACC] // nil for a state with a TTL
	keyed[K, N]
	ttl valueTTL[K, N, ACC] // nil for a state without a TTL
	fn  AggregateFunction[IN, ACC, OUT]
}

// NewAggregating registers an aggregating state; ac is the accumulator's
// codec. The type parameters are inferred from the arguments (IN, ACC and
// OUT from fn's methods): a call names none. Writer goroutine only.
func NewAggregating[K, N, IN, ACC, OUT any](t *Table, name string, kc Codec[K], nc Codec[N], ac Codec[ACC], fn AggregateFunction[IN, ACC, OUT]) (*AggregatingState[K, N, IN, ACC, OUT], error) {
	return registerAggregating(t, name, kc, nc, ac, fn, nil, func(s *AggregatingState[K, N, IN, ACC, OUT], info StateInfo) registered {
		s.cells, s.keyed = newValueCells(t, info, kc, nc, ac)
		return s
	})
}

// NewAggregatingWithTTL is NewAggregating for a state whose accumulators
// expire on their own (see TTL, and NewValueWithTTL for the errors); an
// Add to an expired one starts a new accumulator. Writer goroutine only.
func NewAggregatingWithTTL[K, N, IN, ACC, OUT any](t *Table, name string, kc Codec[K], nc Codec[N], ac Codec[ACC], fn AggregateFunction[IN, ACC, OUT], ttl TTL) (*AggregatingState[K, N, IN, ACC, OUT], error) {
	return registerAggregating(t, name, kc, nc, ac, fn, &ttl, func(s *AggregatingState[K, N, IN, ACC, OUT], info StateInfo) (reg registered) {
		s.ttl, s.keyed, reg = newValueTTL(t, info, kc, nc, ac, ttl, s)
		return reg
	})
}

func registerAggregating[K, N, IN, ACC, OUT any](t *Table, name string, kc Codec[K], nc Codec[N], ac Codec[ACC], fn AggregateFunction[IN, ACC, OUT], ttl *TTL, fill func(*AggregatingState[K, N, IN, ACC, OUT], StateInfo) registered) (*AggregatingState[K, N, IN, ACC, OUT], error) {
	info := StateInfo{Name: name, Kind: KindAggregating, Codec: []string{kc.ID(), nc.ID(), ac.ID()}, TTL: ttl != nil}
	return registerAs[*AggregatingState[K, N, IN, ACC, OUT]](t, info, ttl, func() registered {
		return fill(&AggregatingState[K, N, IN, ACC, OUT]{fn: fn}, info)
	})
}

func (s *AggregatingState[K, N, IN, ACC, OUT]) info() StateInfo { return s.cells.info }
func (s *AggregatingState[K, N, IN, ACC, OUT]) handle() any     { return s }

func (s *AggregatingState[K, N, IN, ACC, OUT]) ttlRuntime() *ttlRuntime { return runtimeOf(s.ttl) }

// Add adds in to the accumulator of (key, ns), creating it if needed (or,
// with a TTL, if it has expired). Writer goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) Add(key K, ns N, in IN) error {
	_, err := s.AddCreating(key, ns, in)
	return err
}

// AddCreating is Add that also reports whether it created the
// accumulator: (key, ns) had none, or with a TTL it had expired. Writer
// goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) AddCreating(key K, ns N, in IN) (created bool, err error) {
	if s.ttl != nil {
		now := s.ttl.now()
		acc, ok, err := s.ttl.getFresh(key, ns, now)
		if err != nil {
			return false, err
		}
		if !ok {
			acc = s.fn.CreateAccumulator()
		}
		err = s.ttl.putLive(key, ns, s.fn.Add(in, acc), now)
		return !ok && err == nil, err
	}
	err = s.update(key, ns, func(acc ACC, ok bool) ACC {
		if !ok {
			created = true
			acc = s.fn.CreateAccumulator()
		}
		return s.fn.Add(in, acc)
	})
	return created && err == nil, err
}

// AddEach is Add of keys[0], keys[1], ... in turn, in namespace ns, with
// in(i) the input added to keys[i]'s accumulator: the result of the calls
// of Add one by one, each group of keys prefetched first, as
// ValueState.UpdateEach does. An error stops it, the keys before the
// failing one added, and names the index. Writer goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) AddEach(keys []K, ns N, in func(i int) IN) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			s.addLocated(h, ck, in(i))
			return nil
		})
	}
	if s.ttl == nil && s.directEach() {
		s.updateEachDirect(keys, func(i int, acc ACC, ok bool) ACC { return s.fold(acc, ok, in(i)) }, nil)
		return nil
	}
	return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
		if err := s.Add(keys[i], ns, in(i)); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
		return nil
	})
}

// addLocated is AddCreating without a TTL for the key that locate made
// ck (hash h), for a batch that located it already (eachLocated).
func (s *AggregatingState[K, N, IN, ACC, OUT]) addLocated(h uint64, ck string, in IN) (created bool) {
	s.m.update(h, ck, true, func(acc ACC, ok bool) ACC {
		created = !ok
		return s.fold(acc, ok, in)
	})
	return created
}

// fold returns what an Add of in makes of the accumulator acc (ok: there
// is one; else a new one takes in).
func (s *AggregatingState[K, N, IN, ACC, OUT]) fold(acc ACC, ok bool, in IN) ACC {
	if !ok {
		acc = s.fn.CreateAccumulator()
	}
	return s.fn.Add(in, acc)
}

// AddEachCreating is AddEach that calls added(i, created) once keys[i]
// is added, created saying whether the add created the accumulator (as
// AddCreating). An error stops it: the keys added are those added was
// called for, and the error is Add's, as it returned it. Writer goroutine
// only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) AddEachCreating(keys []K, ns N, in func(i int) IN, added func(i int, created bool)) error {
	if s.ttl == nil && s.fixedKey.w == 0 {
		return s.eachLocated(keys, ns, func(i int, h uint64, ck string, err error) error {
			if err != nil {
				return err
			}
			added(i, s.addLocated(h, ck, in(i)))
			return nil
		})
	}
	if s.ttl == nil && s.directEach() {
		s.updateEachDirect(keys, func(i int, acc ACC, ok bool) ACC { return s.fold(acc, ok, in(i)) },
			func(i int, existed bool) { added(i, !existed) })
		return nil
	}
	return eachInGroups(prefetcherOf(s.cells, s.ttl), keys, ns, func(i int) error {
		created, err := s.AddCreating(keys[i], ns, in(i))
		if err == nil {
			added(i, created)
		}
		return err
	})
}

// Get returns the result of the accumulator of (key, ns), and whether there
// is one (with a TTL, by the TTL's rules, as ValueState.Lookup). Writer
// goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) Get(key K, ns N) (OUT, bool, error) {
	var acc ACC
	var ok bool
	var err error
	if s.ttl != nil {
		acc, ok, err = s.ttl.getLive(key, ns)
	} else {
		acc, ok, err = s.get(key, ns)
	}
	if !ok || err != nil {
		var zero OUT
		return zero, false, err
	}
	return s.fn.Result(acc), true, nil
}

// GetAt is Get on a snapshot; any goroutine.
func (s *AggregatingState[K, N, IN, ACC, OUT]) GetAt(snap *Snapshot, key K, ns N) (OUT, bool, error) {
	var acc ACC
	var ok bool
	var err error
	if s.ttl != nil {
		acc, ok, err = s.ttl.getAtLive(snap, key, ns)
	} else {
		acc, ok, err = s.getAt(snap, key, ns)
	}
	if !ok || err != nil {
		var zero OUT
		return zero, false, err
	}
	return s.fn.Result(acc), true, nil
}

// PrefetchEncoded asks the CPU for the entry of the key and namespace
// whose encodings by the state's codecs are key and namespace, ahead of
// a read or write of it (as ReducingState.PrefetchEncoded). A hint:
// nothing changes. Writer goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) PrefetchEncoded(key, namespace string) {
	prefetcherOf(s.cells, s.ttl).prefetchEncoded(key, namespace)
}

// Clear removes the accumulator of (key, ns). Writer goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) Clear(key K, ns N) error {
	if s.ttl != nil {
		return s.ttl.clear(key, ns)
	}
	return s.clear(key, ns)
}

// MergeNamespaces merges the accumulators of key in the source namespaces
// into the target's (Merge(target, source), in the order given) and clears
// the sources. Sources without an accumulator are skipped; if none has one,
// the target is unchanged. A source equal to the target is ignored. With a
// TTL, as ReducingState.MergeNamespaces. Writer goroutine only.
func (s *AggregatingState[K, N, IN, ACC, OUT]) MergeNamespaces(key K, target N, sources ...N) error {
	if s.ttl != nil {
		return s.ttl.mergeLive(key, target, sources, s.fn.Merge)
	}
	return s.mergeNamespaces(key, target, sources, s.fn.Merge)
}
