package statetable

import (
	"fmt"
	"iter"
)

// Count returns the number of (key, namespace) entries of the state. O(1).
func (c *cells[K, N, C]) count() int { return c.m.len() }

// keys yields the keys that have state in namespace ns, in entry-hash
// order (deterministic), as they were when the iteration began: it reads a
// capture taken then and released when it ends, so the loop's body may
// read, write and clear any state. A nil namespace has no keys.
// O(entries of the state), plus the copy-on-write of what the body writes.
func (c *cells[K, N, C]) keys(ns N) iter.Seq[K] {
	return func(yield func(K) bool) {
		if c.nillable && isNil(ns) {
			return
		}
		want := string(c.nc.Append(nil, ns))
		capture := c.t.owner.Capture()
		defer capture.Release()
		c.m.view(capture).all(func(_ uint64, ck string, _ C) bool {
			kb, nb := mustSplit(ck, c.info)
			return nb != want || yield(mustDecode(c.kc, kb, c.info))
		})
	}
}

// pairs yields every (key, namespace) pair that has state, in entry-hash
// order, as they were when the iteration began (see keys).
func (c *cells[K, N, C]) pairs() iter.Seq2[K, N] {
	return func(yield func(K, N) bool) {
		capture := c.t.owner.Capture()
		defer capture.Release()
		c.m.view(capture).all(func(_ uint64, ck string, _ C) bool {
			kb, nb := mustSplit(ck, c.info)
			return yield(mustDecode(c.kc, kb, c.info), mustDecode(c.nc, nb, c.info))
		})
	}
}

// mustSplit splits a composite key this package built or a restore
// checked (keyCheck): failure is a bug.
func mustSplit(ck string, info StateInfo) (key, ns string) {
	kb, nb, err := splitComposite(ck)
	if err != nil {
		panic(fmt.Sprintf("statetable: BUG: state %q: %v", info.Name, err))
	}
	return kb, nb
}

// mustDecode decodes bytes this package encoded with c, or that a restore
// checked decode (keyCheck): failure means the
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
			kb, nb := mustSplit(ck, c.info)
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
			kb, nb := mustSplit(ck, c.info)
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
// (deterministic), as they were when the loop began: the loop's body may
// read, write and clear any state, this key's included. A nil namespace
// has no keys. O(entries of the state), plus the copy-on-write of what
// the body writes. Writer goroutine only.
func (k keyed[K, N]) Keys(ns N) iter.Seq[K] { return k.enum.keys(ns) }

// Pairs yields every (key, namespace) pair that has state, in entry-hash
// order, as they were when the loop began (the body may write, as in
// Keys). Writer goroutine only.
func (k keyed[K, N]) Pairs() iter.Seq2[K, N] { return k.enum.pairs() }

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
