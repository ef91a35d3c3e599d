package cowstate

import (
	"fmt"
	"iter"

	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// NamespacedTimerService holds the event-time and processing-time timers of one named
// service, with keys K and namespaces N (windows). A timer is (timestamp,
// key, namespace); registering one twice keeps one. Timers fire in a
// defined order: by timestamp, then key bytes, then namespace bytes.
// Writer goroutine only, like the Backend.
type NamespacedTimerService[K, N any] struct {
	b                 *Backend
	name              string
	kc                statetable.Codec[K]
	nc                statetable.Codec[N]
	event, processing *timerqueue.Queue
	watermark         int64
	buf               []byte
}

// NamespacedTimers registers a timer service (or returns the one registered under the
// name, if its codecs match). Writer goroutine only.
func NamespacedTimers[K, N any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N]) (*NamespacedTimerService[K, N], error) {
	codecs := [2]string{kc.ID(), nc.ID()}
	if old, ok := b.services[name]; ok {
		s, same := old.(*NamespacedTimerService[K, N])
		if !same || old.codecs() != codecs {
			return nil, fmt.Errorf("%w: %q has codecs %v, not %v", ErrTimerService, name, old.codecs(), codecs)
		}
		return s, nil
	}
	s := &NamespacedTimerService[K, N]{b: b, name: name, kc: kc, nc: nc,
		event: timerqueue.New(b.owner), processing: timerqueue.New(b.owner), watermark: minTimestamp}
	b.services[name] = s
	b.names = append(b.names, name)
	return s, nil
}

const minTimestamp = -1 << 63

func (s *NamespacedTimerService[K, N]) codecs() [2]string { return [2]string{s.kc.ID(), s.nc.ID()} }
func (s *NamespacedTimerService[K, N]) queues() (*timerqueue.Queue, *timerqueue.Queue) {
	return s.event, s.processing
}

// timer encodes (key, ns, ts) and returns it with its key group, or an error
// if the backend does not own the key's key group.
func (s *NamespacedTimerService[K, N]) timer(key K, ns N, ts int64) (timerqueue.Timer, int, error) {
	s.buf = s.kc.Append(s.buf[:0], key)
	g := statetable.KeyGroupOfKey(s.buf, s.b.MaxParallelism())
	if !s.b.KeyGroups().Contains(g) {
		return timerqueue.Timer{}, 0, fmt.Errorf("%w: timer service %q: key in key group %d, backend owns %v",
			statetable.ErrKeyGroupNotOwned, s.name, g, s.b.KeyGroups())
	}
	k := string(s.buf)
	n := string(s.nc.Append(s.buf[:0], ns))
	return timerqueue.Timer{Timestamp: ts, Key: k, Namespace: n}, g, nil
}

// RegisterEventTime registers an event-time timer; it fires when the
// watermark reaches ts. It reports whether it was new. O(log n).
func (s *NamespacedTimerService[K, N]) RegisterEventTime(key K, ns N, ts int64) (bool, error) {
	t, g, err := s.timer(key, ns, ts)
	if err != nil {
		return false, err
	}
	return s.event.Register(t, g), nil
}

// DeleteEventTime deletes an event-time timer and reports whether it was
// there (deleting an absent timer is a no-op).
func (s *NamespacedTimerService[K, N]) DeleteEventTime(key K, ns N, ts int64) (bool, error) {
	t, _, err := s.timer(key, ns, ts)
	if err != nil {
		return false, err
	}
	return s.event.Delete(t), nil
}

// RegisterProcessingTime registers a processing-time timer; it fires when
// AdvanceProcessingTime runs at or after ts.
func (s *NamespacedTimerService[K, N]) RegisterProcessingTime(key K, ns N, ts int64) (bool, error) {
	t, g, err := s.timer(key, ns, ts)
	if err != nil {
		return false, err
	}
	return s.processing.Register(t, g), nil
}

// DeleteProcessingTime deletes a processing-time timer and reports whether
// it was there.
func (s *NamespacedTimerService[K, N]) DeleteProcessingTime(key K, ns N, ts int64) (bool, error) {
	t, _, err := s.timer(key, ns, ts)
	if err != nil {
		return false, err
	}
	return s.processing.Delete(t), nil
}

// CurrentWatermark returns the highest watermark AdvanceWatermark was given
// (the smallest int64 before the first).
func (s *NamespacedTimerService[K, N]) CurrentWatermark() int64 { return s.watermark }

// AdvanceWatermark fires every event-time timer with timestamp <= wm, in
// order, including timers that the callback itself registers with a
// timestamp <= wm; a timer the callback deletes does not fire. Each timer is
// removed before its callback runs, and the callback may read and write any
// state. If fire returns an error, the timers not yet handed to it (and the
// one that failed) stay registered, and the error is returned. A watermark
// below the current one does not lower CurrentWatermark (watermarks only go
// up, as in Flink); it fires the timers at or below it.
func (s *NamespacedTimerService[K, N]) AdvanceWatermark(wm int64, fire func(key K, ns N, ts int64) error) (fired int, err error) {
	s.watermark = max(s.watermark, wm)
	return s.advance(s.event, wm, fire)
}

// AdvanceProcessingTime fires the processing-time timers due at the clock's
// current time, like AdvanceWatermark, then runs the incremental cleanup of
// TTL states with the budget Config.TTLCleanupPerAdvance (see
// Backend.CleanupExpired).
func (s *NamespacedTimerService[K, N]) AdvanceProcessingTime(fire func(key K, ns N, ts int64) error) (fired int, err error) {
	fired, err = s.advance(s.processing, s.b.ProcessingTime(), fire)
	if err == nil {
		s.b.table.CleanupExpired(s.b.table.TTLCleanupPerAdvance())
	}
	return fired, err
}

// NextProcessingTime returns the instant the earliest processing-time timer
// is due: the one physical timer a runtime needs to set.
func (s *NamespacedTimerService[K, N]) NextProcessingTime() (int64, bool) {
	t, ok := s.processing.Next()
	return t.Timestamp, ok
}

// NextEventTime returns the timestamp of the earliest event-time timer.
func (s *NamespacedTimerService[K, N]) NextEventTime() (int64, bool) {
	t, ok := s.event.Next()
	return t.Timestamp, ok
}

func (s *NamespacedTimerService[K, N]) advance(q *timerqueue.Queue, upTo int64, fire func(K, N, int64) error) (int, error) {
	var firstErr error
	var unfired []timerqueue.Timer
	var unfiredGroups []int
	fired := 0
	q.Advance(upTo, func(t timerqueue.Timer, g int) {
		if firstErr == nil {
			var k K
			var n N
			k, firstErr = s.kc.Decode([]byte(t.Key))
			if firstErr == nil {
				n, firstErr = s.nc.Decode([]byte(t.Namespace))
			}
			if firstErr == nil {
				firstErr = fire(k, n, t.Timestamp)
			}
			if firstErr == nil {
				fired++
				return
			}
		}
		unfired = append(unfired, t)
		unfiredGroups = append(unfiredGroups, g)
	})
	for i, t := range unfired { // after an error: nothing is lost
		q.Register(t, unfiredGroups[i])
	}
	if firstErr != nil {
		return fired, fmt.Errorf("timer service %q: %w", s.name, firstErr)
	}
	return fired, nil
}

// EventTimersAt yields the event-time timers of a snapshot in firing order;
// any goroutine while the snapshot is live. A snapshot of another backend
// (or nil) yields one error matching ErrForeignSnapshot.
func (s *NamespacedTimerService[K, N]) EventTimersAt(snap *Snapshot) iter.Seq2[Timer[K, N], error] {
	return s.timersAt(snap, true)
}

// ProcessingTimersAt yields the processing-time timers of a snapshot.
func (s *NamespacedTimerService[K, N]) ProcessingTimersAt(snap *Snapshot) iter.Seq2[Timer[K, N], error] {
	return s.timersAt(snap, false)
}

// Timer is a decoded timer.
type Timer[K, N any] struct {
	Timestamp int64
	Key       K
	Namespace N
}

func (s *NamespacedTimerService[K, N]) timersAt(snap *Snapshot, event bool) iter.Seq2[Timer[K, N], error] {
	return func(yield func(Timer[K, N], error) bool) {
		if snap == nil || snap.capture.Owner() != s.b.owner {
			yield(Timer[K, N]{}, fmt.Errorf("%w: timer service %q read at a snapshot of another backend, or nil", ErrForeignSnapshot, s.name))
			return
		}
		v, ok := snap.timers[s.name]
		if !ok {
			return // registered after the snapshot: it had no timers
		}
		q := v.processing
		if event {
			q = v.event
		}
		s.decodeAll(q.All(), yield)
	}
}

// EventTimers yields the live event-time timers in firing order. Do not
// register or delete timers during the iteration.
func (s *NamespacedTimerService[K, N]) EventTimers() iter.Seq2[Timer[K, N], error] {
	return func(yield func(Timer[K, N], error) bool) { s.decodeAll(s.event.All(), yield) }
}

// ProcessingTimers yields the live processing-time timers in firing order.
func (s *NamespacedTimerService[K, N]) ProcessingTimers() iter.Seq2[Timer[K, N], error] {
	return func(yield func(Timer[K, N], error) bool) { s.decodeAll(s.processing.All(), yield) }
}

// decodeAll decodes the timers of seq; a decode error is yielded and ends
// the iteration.
func (s *NamespacedTimerService[K, N]) decodeAll(seq iter.Seq2[timerqueue.Timer, int], yield func(Timer[K, N], error) bool) {
	for t := range seq {
		k, err := s.kc.Decode([]byte(t.Key))
		var n N
		if err == nil {
			n, err = s.nc.Decode([]byte(t.Namespace))
		}
		if !yield(Timer[K, N]{t.Timestamp, k, n}, err) || err != nil {
			return
		}
	}
}
