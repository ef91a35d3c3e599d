package statetable

import (
	"encoding/binary"
	"iter"
	"math"
	"slices"
)

// ttlList is a list state with a TTL: a list state of stamped elements,
// read and written with the TTL's rules.
type ttlList[K, N, E any] struct {
	inner *ListState[K, N, stamped[E]]
	rt    *ttlRuntime
}

// newTTLList returns the table's entry of a new list state with a TTL.
func newTTLList[K, N, E any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], ec Codec[E], cfg TTL) registered {
	inner := newListState(t, info, kc, nc, stampedCodec(ec))
	l := &ttlList[K, N, E]{inner: inner, rt: newTTLRuntime(t, cfg)}
	inner.cells.ttl = listHooks(l, ec)
	inner.cells.migrate = valueMigration(ec) // of the elements, without their timestamps
	inner.cells.ttl.floor = math.MinInt64
	t.ttl = append(t.ttl, inner.cells)
	return ttlInner{inner, &ListState[K, N, E]{keyed: inner.keyed, ttl: l}}
}

func (l *ttlList[K, N, E]) runtime() *ttlRuntime { return l.rt }

func (l *ttlList[K, N, E]) prefetch(keys []K, ns N) { l.inner.cells.prefetch(keys, ns) }
func (l *ttlList[K, N, E]) prefetchEncoded(key, ns string) {
	l.inner.cells.prefetchEncoded(key, ns)
}

func (l *ttlList[K, N, E]) clear(key K, ns N) error {
	if err := l.inner.clear(key, ns); err != nil {
		return err
	}
	l.after(l.inner.t.now())
	return nil
}

func (l *ttlList[K, N, E]) merge(key K, target N, sources []N) error {
	l.inner.cells.ttl.taint() // elements keep their timestamps: they may move behind the cleanup's cursor
	return l.inner.MergeNamespaces(key, target, sources...)
}

// listHooks are the TTL hooks of a list state: a cell is a list of
// stamped elements, each expiring on its own.
func listHooks[K, N, E any](l *ttlList[K, N, E], ec Codec[E]) *ttlHooks[list[stamped[E]]] {
	sc := stampedCodec(ec)
	return &ttlHooks[list[stamped[E]]]{
		rt: l.rt,
		least: func(c list[stamped[E]]) int64 {
			least := int64(math.MaxInt64)
			for e := range c.All() {
				least = min(least, e.exp)
			}
			return least
		},
		prune: func(c list[stamped[E]], now int64) (list[stamped[E]], bool) {
			live := liveElements(c, now)
			return l.inner.appendTo(list[stamped[E]]{}, live), len(live) > 0
		},
		encLive: func(dst []byte, c list[stamped[E]], now int64) ([]byte, bool) {
			n := 0
			for e := range c.All() {
				if !e.expired(now) {
					n++
				}
			}
			if n == 0 {
				return dst, false
			}
			dst = binary.AppendUvarint(dst, uint64(n))
			var eb []byte
			for e := range c.All() {
				if !e.expired(now) {
					eb = sc.Append(eb[:0], e)
					dst = appendBlob(dst, eb)
				}
			}
			return dst, true
		},
		decPlain: func(src []byte, exp int64) (list[stamped[E]], error) {
			es, err := decodeList(src, ec)
			if err != nil {
				return list[stamped[E]]{}, err
			}
			ss := make([]stamped[E], len(es))
			for i, e := range es {
				ss[i] = stamped[E]{e, exp}
			}
			return l.inner.appendTo(list[stamped[E]]{}, ss), nil
		},
	}
}

// liveElements returns the elements of c not expired at now.
func liveElements[E any](c list[stamped[E]], now int64) []stamped[E] {
	var live []stamped[E]
	for e := range c.All() {
		if !e.expired(now) {
			live = append(live, e)
		}
	}
	return live
}

// after runs the per-access cleanup, if configured.
func (l *ttlList[K, N, E]) after(now int64) {
	if n := l.rt.cfg.CleanupPerAccess; n > 0 {
		l.inner.cells.cleanupStep(n, now)
	}
}

// add appends es, stamped to expire the TTL after now, to the list of
// (key, ns), or replaces the list with them.
func (l *ttlList[K, N, E]) add(key K, ns N, es []E, replace bool) error {
	now := l.inner.t.now()
	exp := l.rt.expiry(now)
	ss := make([]stamped[E], len(es))
	for i, e := range es {
		ss[i] = stamped[E]{e, exp}
	}
	var err error
	if replace {
		err = l.inner.Update(key, ns, slices.Values(ss))
	} else {
		err = l.inner.AddAll(key, ns, slices.Values(ss))
	}
	if err != nil {
		return err
	}
	l.after(now)
	return nil
}

// get implements ListState.Get: the expired elements are removed (and
// returned only with ReturnExpiredIfNotCleanedUp), the live ones refreshed
// with UpdateOnReadAndWrite.
func (l *ttlList[K, N, E]) get(key K, ns N) (iter.Seq[E], error) {
	c, ok, err := l.inner.get(key, ns)
	if err != nil {
		return func(func(E) bool) {}, err
	}
	now := l.inner.t.now()
	if !ok {
		l.after(now)
		return func(func(E) bool) {}, nil
	}
	expired := l.inner.cells.ttl.expired(c, now)
	if !expired && !l.rt.onRead() {
		l.after(now)
		return func(yield func(E) bool) {
			pin := l.inner.t.owner.Capture()
			defer pin.Release()
			c, _, _ := l.inner.get(key, ns) // the list as the loop begins (it succeeded above)
			for e := range c.All() {
				if !yield(e.v) {
					return
				}
			}
		}, nil
	}
	var out []E
	var keep []stamped[E]
	exp := l.rt.expiry(now)
	for e := range c.All() {
		if !e.expired(now) {
			if l.rt.onRead() {
				e.exp = exp
			}
			keep = append(keep, e)
		} else if !l.rt.returnExpired() {
			continue
		}
		out = append(out, e.v)
	}
	if err := l.inner.store(key, ns, l.inner.appendTo(list[stamped[E]]{}, keep)); err != nil {
		return nil, err
	}
	l.after(now)
	return slices.Values(out), nil
}

// getAt implements ListState.GetAt: the elements expired at the
// snapshot's time are left out unless the visibility returns them.
func (l *ttlList[K, N, E]) getAt(snap *Snapshot, key K, ns N) (iter.Seq[E], error) {
	c, _, err := l.inner.getAt(snap, key, ns)
	if err != nil {
		return nil, err
	}
	all := l.rt.returnExpired()
	return func(yield func(E) bool) {
		for e := range c.All() {
			if (all || !e.expired(snap.now)) && !yield(e.v) {
				return
			}
		}
	}, nil
}

// len implements ListState.Len: the elements not expired.
func (l *ttlList[K, N, E]) len(key K, ns N) (int, error) {
	c, _, err := l.inner.get(key, ns)
	if err != nil {
		return 0, err
	}
	now := l.inner.t.now()
	n := 0
	for e := range c.All() {
		if !e.expired(now) {
			n++
		}
	}
	l.after(now)
	return n, nil
}
