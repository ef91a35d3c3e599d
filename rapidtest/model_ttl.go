package rapidtest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
)

// The model's TTL (contract.TTLBackend): states registered with a TTL keep
// an expiration timestamp per value (value, reducing, aggregating), per
// list element and per map user key, on the model's clock.
//
//   - A write stamps what it writes to expire the TTL after the clock's
//     time; with UpdateOnReadAndWrite a read of a live value, list or map
//     entry stamps it again (a list read: every element).
//   - Something is expired when its timestamp <= the clock. Every
//     operation on an entry first removes what of it has expired, so an
//     expired value reads as absent, an Add to an expired value starts
//     over, and a merge skips expired sources (a merged reducing or
//     aggregating value is stamped afresh; list elements keep theirs).
//   - StateEntries and views leave out what has expired (at the clock's
//     time, a view at its capture's), whether or not a backend's cleanup
//     has removed it yet: cleanup is not observable. CleanupExpired
//     changes nothing in the model.
//
// The model reads expired entries as absent (NeverReturnExpired) whatever
// the visibility asked for: with ReturnExpiredIfNotCleanedUp what a read
// returns depends on the backend's cleanup, which the contract leaves
// open.
type stamp struct {
	At   int64            // value, reducing, aggregating
	List []int64          // per element
	Map  map[string]int64 // per user key
}

func (s stamp) clone() stamp {
	s.List, s.Map = slices.Clone(s.List), maps.Clone(s.Map)
	return s
}

var _ contract.TTLBackend = (*Model)(nil)

// RegisterStateTTL registers a state with a TTL (see contract.TTLBackend).
func (m *Model) RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error {
	if ttl.Duration.Milliseconds() < 1 {
		return fmt.Errorf("%w: state %q: TTL %v", statetable.ErrConfig, name, ttl.Duration)
	}
	if old, ok := m.ttls[name]; ok && old != ttl {
		return fmt.Errorf("%w: %q has TTL %+v", statetable.ErrStateMismatch, name, old)
	}
	if _, ok := m.kinds[name]; ok {
		if _, had := m.ttls[name]; !had {
			return fmt.Errorf("%w: %q has no TTL", statetable.ErrStateMismatch, name)
		}
	}
	if err := m.RegisterState(name, kind); err != nil {
		return err
	}
	m.ttls[name] = ttl
	if m.stamps[name] == nil {
		m.stamps[name] = map[addr]stamp{}
	}
	return nil
}

// CleanupExpired changes nothing: the model leaves out what has expired
// wherever it is read.
func (m *Model) CleanupExpired(budget int) (visited, removed int) { return 0, 0 }

// expiry returns the expiration timestamp of what a state writes now, and
// whether the state has a TTL.
func (m *Model) expiry(state string) (int64, bool) {
	ttl, ok := m.ttls[state]
	if !ok {
		return 0, false
	}
	return addSat(m.clock(), ttl.Duration.Milliseconds()), true
}

// onRead reports whether reads of state refresh timestamps.
func (m *Model) onRead(state string) bool {
	ttl, ok := m.ttls[state]
	return ok && ttl.Update == statetable.UpdateOnReadAndWrite
}

// purge removes what of entry a of state has expired.
func (m *Model) purge(state string, a addr) {
	if _, ok := m.ttls[state]; !ok {
		return
	}
	es, st := m.entries[state], m.stamps[state]
	e, ok := es[a]
	if !ok {
		delete(st, a)
		return
	}
	if live, lst, ok := liveAt(m.kinds[state], e, st[a], m.clock()); ok {
		es[a], st[a] = live, lst
	} else {
		delete(es, a)
		delete(st, a)
	}
}

// liveAt returns what of e (stamped s) has not expired at now, and
// whether anything has not.
func liveAt(kind statetable.Kind, e contract.Entry, s stamp, now int64) (contract.Entry, stamp, bool) {
	e, s = cloneEntry(e), s.clone()
	switch kind {
	case statetable.KindList:
		var l []string
		var ls []int64
		for i, x := range e.List {
			if s.List[i] > now {
				l, ls = append(l, x), append(ls, s.List[i])
			}
		}
		e.List, s.List = l, ls
		return e, s, len(l) > 0
	case statetable.KindMap:
		for k := range e.Map {
			if s.Map[k] <= now {
				delete(e.Map, k)
				delete(s.Map, k)
			}
		}
		return e, s, len(e.Map) > 0
	}
	return e, s, s.At > now
}

// setStamp sets the stamp of entry a, or removes it if the entry is gone.
func (m *Model) setStamp(state string, a addr, s stamp) {
	if _, ok := m.entries[state][a]; !ok {
		delete(m.stamps[state], a)
		return
	}
	m.stamps[state][a] = s
}

// liveEntries returns the entries of state not expired at now, with their
// stamps (nil for a state without TTL).
func (m *Model) liveEntries(state string, now int64) ([]contract.Entry, []stamp) {
	es := m.entries[state]
	_, ttl := m.ttls[state]
	out := make([]contract.Entry, 0, len(es))
	var stamps []stamp
	for a, e := range es {
		if !ttl {
			out = append(out, cloneEntry(e))
			continue
		}
		if live, s, ok := liveAt(m.kinds[state], e, m.stamps[state][a], now); ok {
			out, stamps = append(out, live), append(stamps, s)
		}
	}
	return out, stamps
}
