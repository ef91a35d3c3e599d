package pebblestate

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

type timer = contract.Timer

// compareTimers is the firing order: timestamp, key bytes, namespace bytes.
func compareTimers(a, b timer) int {
	return cmp.Or(cmp.Compare(a.Timestamp, b.Timestamp), strings.Compare(a.Key, b.Key), strings.Compare(a.Namespace, b.Namespace))
}

// service is a registered timer service: for each domain, the head (first
// timer in firing order) of each owned key group's queue, as far as known.
// The timers themselves are in the database; the heads are a cache, so
// that the next due timer is found without a seek per key group: a head is
// unknown after it fires or is deleted, and looked up again when next
// needed. A domain's heads are allocated when it first fires (O(owned key
// groups) memory).
type service struct {
	name  string
	owned statetable.KeyGroupRange
	heads [2][]head // by domain, by key group - owned.First
}

type head struct {
	known, present bool
	t              timer
}

func newService(name string, owned statetable.KeyGroupRange) *service {
	return &service{name: name, owned: owned}
}

// head returns the cached head of key group kg, or nil if the domain has
// none yet.
func (s *service) head(d timerqueue.Domain, kg int) *head {
	if s.heads[d] == nil {
		return nil
	}
	return &s.heads[d][kg-s.owned.First]
}

func (b *Backend) service(name string, d timerqueue.Domain) (*service, error) {
	if b.closed {
		return nil, ErrClosed
	}
	s, ok := b.services[name]
	if !ok {
		return nil, fmt.Errorf("%w: no timer service %q registered", contract.ErrUnknownTimerService, name)
	}
	if d != timerqueue.EventTime && d != timerqueue.ProcessingTime {
		return nil, fmt.Errorf("%w: unknown time domain %d", contract.ErrUnknownTimerService, d)
	}
	return s, nil
}

// RegisterTimer implements contract.Backend.RegisterTimer.
func (b *Backend) RegisterTimer(name string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := b.service(name, d)
	if err != nil {
		return false, err
	}
	kg, err := b.keyGroup(key)
	if err != nil {
		return false, err
	}
	k := timerKey(kg, name, d, key, ns, ts)
	if _, err := b.get(b.db, k); err == nil {
		return false, nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return false, err
	}
	if err := b.db.Set(k, nil, b.wo); err != nil {
		return false, err
	}
	t := timer{Timestamp: ts, Key: key, Namespace: ns}
	if h := s.head(d, kg); h != nil && h.known && (!h.present || compareTimers(t, h.t) < 0) {
		*h = head{known: true, present: true, t: t}
	}
	return true, nil
}

// DeleteTimer implements contract.Backend.DeleteTimer.
func (b *Backend) DeleteTimer(name string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := b.service(name, d)
	if err != nil {
		return false, err
	}
	kg, err := b.keyGroup(key)
	if err != nil {
		return false, err
	}
	k := timerKey(kg, name, d, key, ns, ts)
	if _, err := b.get(b.db, k); errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := b.db.Delete(k, b.wo); err != nil {
		return false, err
	}
	if h := s.head(d, kg); h != nil && h.known && h.present && h.t == (timer{Timestamp: ts, Key: key, Namespace: ns}) {
		h.known = false
	}
	return true, nil
}

// AdvanceWatermark implements contract.Backend.AdvanceWatermark.
func (b *Backend) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return b.advance(service, timerqueue.EventTime, func() int64 { return wm }, fire)
}

// AdvanceProcessingTime implements contract.Backend.AdvanceProcessingTime
// at the configured clock's time, read once.
func (b *Backend) AdvanceProcessingTime(service string, fire contract.FireFunc) (int, error) {
	now := b.clock()
	return b.advance(service, timerqueue.ProcessingTime, func() int64 { return now }, fire)
}

func (b *Backend) advance(name string, d timerqueue.Domain, upTo func() int64, fire contract.FireFunc) (int, error) {
	s, err := b.service(name, d)
	if err != nil {
		return 0, err
	}
	for fired := 0; ; fired++ {
		i, err := b.next(s, d)
		if err != nil {
			return fired, err
		}
		if i < 0 || s.heads[d][i].t.Timestamp > upTo() {
			return fired, nil
		}
		t, kg := s.heads[d][i].t, b.owned.First+i
		k := timerKey(kg, name, d, t.Key, t.Namespace, t.Timestamp)
		if err := b.db.Delete(k, b.wo); err != nil {
			return fired, err
		}
		s.heads[d][i].known = false
		if err := fire(t.Key, t.Namespace, t.Timestamp); err != nil {
			if _, rerr := b.RegisterTimer(name, d, t.Key, t.Namespace, t.Timestamp); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return fired, fmt.Errorf("pebblestate: timer service %q: timer (%d, %q, %q): %w", name, t.Timestamp, t.Key, t.Namespace, err)
		}
	}
}

// next returns the index of the key group whose head is the first timer in
// firing order, or -1 if there is none, looking up the heads not known: a
// seek that lands in a later key group (or past the queue) makes the heads
// of the key groups before it known to be empty.
func (b *Backend) next(s *service, d timerqueue.Domain) (int, error) {
	if s.heads[d] == nil {
		s.heads[d] = make([]head, b.owned.Len())
	}
	heads := s.heads[d]
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	best := -1
	for i := 0; i < len(heads); i++ {
		h := &heads[i]
		if !h.known {
			if it == nil {
				var err error
				if it, err = b.db.NewIter(nil); err != nil {
					return -1, err
				}
			}
			kg := b.owned.First + i
			p := queuePrefix(kg, s.name, d)
			ok := it.SeekGE(p)
			if err := it.Error(); err != nil {
				return -1, err
			}
			switch {
			case ok && bytes.HasPrefix(it.Key(), p):
				pk, err := parseKey(it.Key())
				if err != nil || !pk.timer {
					return -1, fmt.Errorf("%w: timer key %x: %v", ErrCorrupt, it.Key(), err)
				}
				*h = head{known: true, present: true, t: timer{Timestamp: pk.ts, Key: pk.key, Namespace: pk.ns}}
			default:
				// Nothing of this queue from kg up to the key the seek
				// landed on (or up to the end).
				last := len(heads) - 1
				if ok && keyGroupOfKey(it.Key()) <= b.owned.Last {
					last = max(i, keyGroupOfKey(it.Key())-b.owned.First-1)
				}
				for j := i; j <= last; j++ {
					if !heads[j].known {
						heads[j] = head{known: true}
					}
				}
			}
		}
		if h.present && (best < 0 || compareTimers(h.t, heads[best].t) < 0) {
			best = i
		}
	}
	return best, nil
}

// forgetHeads makes every head unknown (after a restore).
func (b *Backend) forgetHeads() {
	for _, s := range b.services {
		for d := range s.heads {
			clear(s.heads[d])
		}
	}
}
