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
	// fired holds the bytes of a firing timer's key, then namespace, for
	// their codecs (which must not retain them): a conversion of each
	// string to []byte allocated twice a timer fired. Writer goroutine
	// only.
	fired []byte
	// namespace is the last namespace a timer was made for. A timer made
	// for the same namespace bytes shares its string, so that the queue's
	// compares of two such timers find one pointer and read no bytes (a
	// window's end timers all have the window's namespace).
	namespace string
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
	s.buf = s.nc.Append(s.buf[:0], ns)
	if string(s.buf) != s.namespace {
		s.namespace = string(s.buf)
	}
	return timerqueue.Timer{Timestamp: ts, Key: k, Namespace: s.namespace}, g, nil
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

// EventTimersDeleted returns how many event-time timers have been deleted
// from the service since it was created, by DeleteEventTime or by a
// restore replaying a delta (timers that fired are not counted). A caller
// that skips registering a timer it knows it registered (the window
// operator, for an element of a window it holds state for) checks that
// the count has not changed since. O(1); writer goroutine only.
func (s *NamespacedTimerService[K, N]) EventTimersDeleted() uint64 { return s.event.Deletes() }

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
	return s.advance(s.event, wm, nil, fire)
}

// EncodedPrefetcher is a state whose entry at an encoded key and
// namespace can be asked for ahead of a read: statetable.ReducingState and
// statetable.AggregatingState (PrefetchEncoded).
type EncodedPrefetcher interface {
	PrefetchEncoded(key, namespace string)
}

// AdvanceWatermarkReading is AdvanceWatermark for a callback that reads
// state, a state whose key and namespace codecs are the service's, at
// each timer's key and namespace (a window operator reading a window's
// contents when its end timer fires): a few timers before each fires,
// the state's entry for it is asked for (state.PrefetchEncoded), so that
// the callback's read does not wait for memory. What fires, in what
// order, and what the callback sees are AdvanceWatermark's; a nil state
// asks for nothing.
func (s *NamespacedTimerService[K, N]) AdvanceWatermarkReading(wm int64, state EncodedPrefetcher, fire func(key K, ns N, ts int64) error) (fired int, err error) {
	s.watermark = max(s.watermark, wm)
	var ahead func(timerqueue.Timer)
	if state != nil {
		ahead = func(t timerqueue.Timer) { state.PrefetchEncoded(t.Key, t.Namespace) }
	}
	return s.advance(s.event, wm, ahead, fire)
}

// AdvanceProcessingTime fires the processing-time timers due at the clock's
// current time, like AdvanceWatermark, then runs the incremental cleanup of
// TTL states with the budget Config.TTLCleanupPerAdvance (see
// Backend.CleanupExpired).
func (s *NamespacedTimerService[K, N]) AdvanceProcessingTime(fire func(key K, ns N, ts int64) error) (fired int, err error) {
	fired, err = s.advance(s.processing, s.b.ProcessingTime(), nil, fire)
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

func (s *NamespacedTimerService[K, N]) advance(q *timerqueue.Queue, upTo int64, ahead func(timerqueue.Timer), fire func(K, N, int64) error) (int, error) {
	var firstErr error
	var unfired []timerqueue.Timer
	var unfiredGroups []int
	fired := 0
	q.AdvanceAhead(upTo, ahead, func(t timerqueue.Timer, g int) {
		if firstErr == nil {
			var k K
			var n N
			s.fired = append(s.fired[:0], t.Key...)
			k, firstErr = s.kc.Decode(s.fired)
			if firstErr == nil {
				s.fired = append(s.fired[:0], t.Namespace...)
				n, firstErr = s.nc.Decode(s.fired)
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

// EventTimersAt returns the event-time timers of a snapshot in firing
// order; any goroutine while the snapshot is live. A snapshot of another
// backend (or nil) is an error matching ErrForeignSnapshot; a service
// registered after the snapshot was taken had no timers in it.
func (s *NamespacedTimerService[K, N]) EventTimersAt(snap *Snapshot) (iter.Seq[Timer[K, N]], error) {
	return s.timersAt(snap, true)
}

// ProcessingTimersAt returns the processing-time timers of a snapshot (see
// EventTimersAt).
func (s *NamespacedTimerService[K, N]) ProcessingTimersAt(snap *Snapshot) (iter.Seq[Timer[K, N]], error) {
	return s.timersAt(snap, false)
}

// Timer is a decoded timer.
type Timer[K, N any] struct {
	Timestamp int64
	Key       K
	Namespace N
}

func (s *NamespacedTimerService[K, N]) timersAt(snap *Snapshot, event bool) (iter.Seq[Timer[K, N]], error) {
	if snap == nil || snap.capture.Owner() != s.b.owner {
		return nil, fmt.Errorf("%w: timer service %q read at a snapshot of another backend, or nil", ErrForeignSnapshot, s.name)
	}
	v, ok := snap.timers[s.name]
	if !ok {
		return func(func(Timer[K, N]) bool) {}, nil // registered after the snapshot
	}
	q := v.processing
	if event {
		q = v.event
	}
	return func(yield func(Timer[K, N]) bool) { s.decodeAll(q.All(), yield) }, nil
}

// EventTimers yields the live event-time timers in firing order, as they
// were when the loop began: it reads a capture taken then and released
// when the loop ends, so the loop's body may register and delete timers
// and write any state. Writer goroutine only.
func (s *NamespacedTimerService[K, N]) EventTimers() iter.Seq[Timer[K, N]] { return s.live(true) }

// ProcessingTimers yields the live processing-time timers in firing order
// (see EventTimers).
func (s *NamespacedTimerService[K, N]) ProcessingTimers() iter.Seq[Timer[K, N]] { return s.live(false) }

func (s *NamespacedTimerService[K, N]) live(event bool) iter.Seq[Timer[K, N]] {
	return func(yield func(Timer[K, N]) bool) {
		q := s.processing
		if event {
			q = s.event
		}
		c := s.b.owner.Capture()
		defer c.Release()
		s.decodeAll(q.View(c).All(), yield)
	}
}

// decodeAll decodes and yields the timers of seq. Their keys and
// namespaces decode: the service encoded them, or a restore checked them
// (checkTimer).
func (s *NamespacedTimerService[K, N]) decodeAll(seq iter.Seq2[timerqueue.Timer, int], yield func(Timer[K, N]) bool) {
	for t := range seq {
		k, err := s.kc.Decode([]byte(t.Key))
		var n N
		if err == nil {
			n, err = s.nc.Decode([]byte(t.Namespace))
		}
		if err != nil {
			panic(fmt.Sprintf("cowstate: timer service %q: codecs %v cannot decode their own encoding: %v", s.name, s.codecs(), err))
		}
		if !yield(Timer[K, N]{t.Timestamp, k, n}) {
			return
		}
	}
}

// checkTimer returns an error unless the key and namespace of a timer read
// from a file decode with the service's codecs.
func (s *NamespacedTimerService[K, N]) checkTimer(key, ns string) error {
	if _, err := s.kc.Decode([]byte(key)); err != nil {
		return fmt.Errorf("timer service %q: a timer key its codec %s cannot decode: %v", s.name, s.kc.ID(), err)
	}
	if _, err := s.nc.Decode([]byte(ns)); err != nil {
		return fmt.Errorf("timer service %q: a timer namespace its codec %s cannot decode: %v", s.name, s.nc.ID(), err)
	}
	return nil
}
