package statetable

import (
	"fmt"
	"iter"
)

// Count returns the number of (key, namespace) entries of the state. O(1).
func (c *cells[K, N, C]) count() int { return c.m.len() }

// Keys yields the keys that have state in namespace ns, in entry-hash order
// (deterministic). The state must not be written during the iteration; use
// ForEachKey to write. O(entries of the state).
func (c *cells[K, N, C]) keys(ns N) iter.Seq[K] {
	return func(yield func(K) bool) {
		want := string(c.nc.Append(nil, ns))
		c.m.all(func(ck string, _ C) bool {
			kb, nb, err := splitComposite(ck)
			if err != nil {
				panic("statetable: BUG: " + err.Error())
			}
			return nb != want || yield(mustDecode(c.kc, kb, c.info))
		})
	}
}

// Pairs yields every (key, namespace) pair that has state, in entry-hash
// order. The state must not be written during the iteration.
func (c *cells[K, N, C]) pairs() iter.Seq2[K, N] {
	return func(yield func(K, N) bool) {
		c.m.all(func(ck string, _ C) bool {
			kb, nb, err := splitComposite(ck)
			if err != nil {
				panic("statetable: BUG: " + err.Error())
			}
			return yield(mustDecode(c.kc, kb, c.info), mustDecode(c.nc, nb, c.info))
		})
	}
}

// ForEachKey calls fn for every key that has state in namespace ns, in
// entry-hash order; fn may read, write and clear the state of that key (and
// any other state). It iterates a capture taken on entry, so it sees the
// keys as they were then, whatever fn does; the capture is released on
// return. The first error fn returns stops the iteration and is returned.
// Cost: O(entries) plus the copy-on-write of what fn writes.
func (c *cells[K, N, C]) forEachKey(ns N, fn func(key K) error) error {
	capture := c.t.owner.Capture()
	defer capture.Release()
	want := string(c.nc.Append(nil, ns))
	var err error
	c.m.view(capture).all(func(_ uint64, ck string, _ C) bool {
		kb, nb, e := splitComposite(ck)
		if e != nil {
			err = fmt.Errorf("state %q: %w", c.info.Name, e)
			return false
		}
		if nb != want {
			return true
		}
		k, e := c.kc.Decode([]byte(kb))
		if e != nil {
			err = fmt.Errorf("state %q: key: %w", c.info.Name, e)
			return false
		}
		err = fn(k)
		return err == nil
	})
	return err
}

// mustDecode decodes bytes this package encoded with c: failure means the
// codec cannot decode its own output, a bug in the codec.
func mustDecode[T any](c Codec[T], b string, info StateInfo) T {
	v, err := c.Decode([]byte(b))
	if err != nil {
		panic(fmt.Sprintf("statetable: codec %s of state %q cannot decode its own encoding: %v", c.ID(), info.Name, err))
	}
	return v
}

// PairsAt returns the (key, namespace) pairs that have state in snap, in
// entry-hash order: by key group, then key hash, then namespace hash, so
// the same logical state yields the same sequence whatever history built
// it. Read each pair's content with GetAt (or IterateAt). An error if snap
// does not hold the state (registered after it was taken). Cost: O(entries
// of the state) for a whole iteration, one key and namespace decoding per
// pair, nothing allocated up front; stopping early costs what was read.
// Any goroutine, concurrently with the writer, while snap is live.
func (c *cells[K, N, C]) pairsAt(snap *Snapshot) (iter.Seq2[K, N], error) {
	view, err := viewOf[C](snap, c.t, c.info)
	if err != nil {
		return nil, err
	}
	return func(yield func(K, N) bool) {
		view.all(func(_ uint64, ck string, _ C) bool {
			kb, nb, err := splitComposite(ck)
			if err != nil {
				panic("statetable: BUG: " + err.Error())
			}
			return yield(mustDecode(c.kc, kb, c.info), mustDecode(c.nc, nb, c.info))
		})
	}, nil
}

// KeysAt returns the keys that have state in namespace ns in snap, in
// entry-hash order (see PairsAt). Cost: O(entries of the state, every
// namespace) for a whole iteration, one key decoding per key yielded. Any
// goroutine while snap is live.
func (c *cells[K, N, C]) keysAt(snap *Snapshot, ns N) (iter.Seq[K], error) {
	if c.nillable && isNil(ns) {
		return nil, fmt.Errorf("%w: state %q", ErrNilNamespace, c.info.Name)
	}
	view, err := viewOf[C](snap, c.t, c.info)
	if err != nil {
		return nil, err
	}
	want := string(c.nc.Append(nil, ns))
	return func(yield func(K) bool) {
		view.all(func(_ uint64, ck string, _ C) bool {
			kb, nb, err := splitComposite(ck)
			if err != nil {
				panic("statetable: BUG: " + err.Error())
			}
			return nb != want || yield(mustDecode(c.kc, kb, c.info))
		})
	}, nil
}

// enumerator is the enumeration of a state's (key, namespace) pairs,
// whatever its cell type (cells implement it).
type enumerator[K, N any] interface {
	count() int
	keys(ns N) iter.Seq[K]
	pairs() iter.Seq2[K, N]
	forEachKey(ns N, fn func(key K) error) error
	pairsAt(snap *Snapshot) (iter.Seq2[K, N], error)
	keysAt(snap *Snapshot, ns N) (iter.Seq[K], error)
}

// keyed gives every state kind its enumeration methods, through the cells
// that store it (with or without TTL). For a TTL state they report the
// entries held, expired ones not cleaned up yet included: read an entry
// to apply the TTL's rules to it.
type keyed[K, N any] struct{ enum enumerator[K, N] }

// Count returns the number of (key, namespace) entries of the state. O(1).
func (k keyed[K, N]) Count() int { return k.enum.count() }

// Keys yields the keys that have state in namespace ns, in entry-hash order
// (deterministic). The state must not be written during the iteration; use
// ForEachKey to write. O(entries of the state).
func (k keyed[K, N]) Keys(ns N) iter.Seq[K] { return k.enum.keys(ns) }

// Pairs yields every (key, namespace) pair that has state, in entry-hash
// order. The state must not be written during the iteration.
func (k keyed[K, N]) Pairs() iter.Seq2[K, N] { return k.enum.pairs() }

// ForEachKey calls fn for every key that has state in namespace ns, in
// entry-hash order; fn may read, write and clear the state of that key (and
// any other state). It iterates a capture taken on entry, so it sees the
// keys as they were then, whatever fn does; the capture is released on
// return. The first error fn returns stops the iteration and is returned.
// Cost: O(entries) plus the copy-on-write of what fn writes.
func (k keyed[K, N]) ForEachKey(ns N, fn func(key K) error) error { return k.enum.forEachKey(ns, fn) }

// PairsAt returns the (key, namespace) pairs that have state in snap, in
// entry-hash order: by key group, then key hash, then namespace hash, so
// the same logical state yields the same sequence whatever history built
// it. Read each pair's content with GetAt (or IterateAt). An error if snap
// does not hold the state (registered after it was taken). Cost: O(entries
// of the state) for a whole iteration, one key and namespace decoding per
// pair, nothing allocated up front; stopping early costs what was read.
// Any goroutine, concurrently with the writer, while snap is live.
func (k keyed[K, N]) PairsAt(snap *Snapshot) (iter.Seq2[K, N], error) { return k.enum.pairsAt(snap) }

// KeysAt returns the keys that have state in namespace ns in snap, in
// entry-hash order (see PairsAt). Cost: O(entries of the state, every
// namespace) for a whole iteration, one key decoding per key yielded. Any
// goroutine while snap is live.
func (k keyed[K, N]) KeysAt(snap *Snapshot, ns N) (iter.Seq[K], error) {
	return k.enum.keysAt(snap, ns)
}
