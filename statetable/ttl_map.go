package statetable

import (
	"iter"
	"math"
)

// ttlMap is a map state with a TTL: a map state of stamped values, read and
// written with the TTL's rules.
type ttlMap[K, N, UK, UV any] struct {
	inner *MapState[K, N, UK, stamped[UV]]
	rt    *ttlRuntime
}

// newTTLMap returns the table's entry of a new map state with a TTL.
func newTTLMap[K, N, UK, UV any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], ukc Codec[UK], uvc Codec[UV], cfg TTL) registered {
	inner := newMapState(t, info, kc, nc, ukc, stampedCodec(uvc))
	m := &ttlMap[K, N, UK, UV]{inner: inner, rt: newTTLRuntime(t, cfg)}
	inner.cells.ttl = mapHooks(m, uvc)
	inner.cells.migrate = valueMigration(uvc) // of the user values, without their timestamps
	inner.cells.ttl.floor = math.MinInt64
	t.ttl = append(t.ttl, inner.cells)
	return ttlInner{inner, &MapState[K, N, UK, UV]{keyed: inner.keyed, ukc: ukc, ttl: m}}
}

// mapHooks are the TTL hooks of a map state: a cell is a map of stamped
// values, each user key's entry expiring on its own.
func mapHooks[K, N, UK, UV any](m *ttlMap[K, N, UK, UV], uvc Codec[UV]) *ttlHooks[userMap[UK, stamped[UV]]] {
	sc := stampedCodec(uvc)
	type cell = userMap[UK, stamped[UV]]
	return &ttlHooks[cell]{
		rt: m.rt,
		least: func(c cell) int64 {
			least := int64(math.MaxInt64)
			for _, e := range c.All() {
				least = min(least, e.v.exp)
			}
			return least
		},
		prune: func(c cell, now int64) (cell, bool) {
			type gone struct {
				h  uint64
				ek string
			}
			var expired []gone // collected first: the deletes may write c's nodes in place
			c.Scan(0, ^uint64(0), func(h uint64, ek string, e userEntry[UK, stamped[UV]]) bool {
				if e.v.expired(now) {
					expired = append(expired, gone{h, ek})
				}
				return true
			})
			cur := m.inner.cursor
			cur.SetRoot(c)
			defer cur.SetRoot(cell{})
			for _, g := range expired {
				cur.DeleteHashed(g.h, g.ek)
			}
			root := cur.Root()
			return root, root.Len() > 0
		},
		encLive: func(dst []byte, c cell, now int64) ([]byte, bool) {
			return encodeUserMap(dst, c, sc, func(v stamped[UV]) bool { return v.expired(now) })
		},
		decPlain: func(src []byte, exp int64) (cell, error) {
			return m.inner.decodeCell(src, func(b []byte) (stamped[UV], error) {
				v, err := uvc.Decode(b)
				return stamped[UV]{v, exp}, err
			})
		},
	}
}

func (m *ttlMap[K, N, UK, UV]) runtime() *ttlRuntime { return m.rt }

func (m *ttlMap[K, N, UK, UV]) clear(key K, ns N) error {
	if err := m.inner.clear(key, ns); err != nil {
		return err
	}
	m.after(m.inner.t.now())
	return nil
}

// after runs the per-access cleanup, if configured.
func (m *ttlMap[K, N, UK, UV]) after(now int64) {
	if n := m.rt.cfg.CleanupPerAccess; n > 0 {
		m.inner.cells.cleanupStep(n, now)
	}
}

// get implements MapState.Get.
func (m *ttlMap[K, N, UK, UV]) get(key K, ns N, uk UK) (UV, bool, error) {
	var zero UV
	s, ok, err := m.inner.Get(key, ns, uk)
	if err != nil {
		return zero, false, err
	}
	now := m.inner.t.now()
	if !ok {
		m.after(now)
		return zero, false, nil
	}
	switch {
	case s.expired(now):
		if err := m.inner.Remove(key, ns, uk); err != nil {
			return zero, false, err
		}
		if !m.rt.returnExpired() {
			s.v, ok = zero, false
		}
	case m.rt.onRead():
		if err := m.inner.Put(key, ns, uk, stamped[UV]{s.v, m.rt.expiry(now)}); err != nil {
			return zero, false, err
		}
	}
	m.after(now)
	return s.v, ok, nil
}

// put implements MapState.Put and PutAll.
func (m *ttlMap[K, N, UK, UV]) put(key K, ns N, entries iter.Seq2[UK, UV]) error {
	now := m.inner.t.now()
	exp := m.rt.expiry(now)
	err := m.inner.PutAll(key, ns, func(yield func(UK, stamped[UV]) bool) {
		for uk, uv := range entries {
			if !yield(uk, stamped[UV]{uv, exp}) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	m.after(now)
	return nil
}

// remove implements MapState.Remove.
func (m *ttlMap[K, N, UK, UV]) remove(key K, ns N, uk UK) error {
	if err := m.inner.Remove(key, ns, uk); err != nil {
		return err
	}
	m.after(m.inner.t.now())
	return nil
}

// len counts the entries of (key, ns) not expired.
func (m *ttlMap[K, N, UK, UV]) len(key K, ns N) (int, error) {
	c, _, err := m.inner.get(key, ns)
	if err != nil {
		return 0, err
	}
	now, n := m.inner.t.now(), 0
	for _, e := range c.All() {
		if !e.v.expired(now) {
			n++
		}
	}
	m.after(now)
	return n, nil
}

// iterate implements MapState.Iterate.
func (m *ttlMap[K, N, UK, UV]) iterate(key K, ns N) (iter.Seq2[UK, UV], error) {
	seq, err := m.inner.Iterate(key, ns)
	if err != nil {
		return nil, err
	}
	return func(yield func(UK, UV) bool) {
		now := m.inner.t.now()
		var expired, live []UK
		var liveV []UV
		for uk, s := range seq {
			if s.expired(now) {
				expired = append(expired, uk)
				if !m.rt.returnExpired() {
					continue
				}
			} else if m.rt.onRead() {
				live, liveV = append(live, uk), append(liveV, s.v)
			}
			if !yield(uk, s.v) {
				break
			}
		}
		// The writes after the iteration: the errors are those of key and
		// ns, which Iterate checked.
		for _, uk := range expired {
			_ = m.inner.Remove(key, ns, uk)
		}
		exp := m.rt.expiry(now)
		for i, uk := range live {
			_ = m.inner.Put(key, ns, uk, stamped[UV]{liveV[i], exp})
		}
		m.after(now)
	}, nil
}

// iterateAt implements MapState.IterateAt: entries expired at the
// snapshot's time are left out unless the visibility returns them.
func (m *ttlMap[K, N, UK, UV]) iterateAt(snap *Snapshot, key K, ns N) (iter.Seq2[UK, UV], error) {
	seq, err := m.inner.IterateAt(snap, key, ns)
	if err != nil {
		return nil, err
	}
	all := m.rt.returnExpired()
	return func(yield func(UK, UV) bool) {
		for uk, s := range seq {
			if (all || !s.expired(snap.now)) && !yield(uk, s.v) {
				return
			}
		}
	}, nil
}
