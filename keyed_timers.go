package cowstate

import (
	"iter"

	"github.com/cowstate/cowstate/statetable"
)

// TimerService holds the event-time and processing-time timers of one named
// service, per key: a timer is (timestamp, key), and registering one twice
// keeps one. It is a NamespacedTimerService over VoidNamespace, for the
// timers of a keyed process function (a timeout per key, a daily flush);
// the window operator keeps its own per window. Timers fire by timestamp,
// then key bytes. Writer goroutine only, like the Backend.
type TimerService[K any] struct {
	s *NamespacedTimerService[K, VoidNamespace]
}

// Timers registers a timer service keyed by K, whose codec is inferred as
// a state's key codec is (WithKeyCodec for another; no other option
// applies). A second registration under the name with the same codec
// returns the same service; with another, an error matching
// ErrTimerService. Writer goroutine only.
func Timers[K any](b *Backend, name string, opts ...StateOption) (*TimerService[K], error) {
	o, err := parseOptions("timer service", name, opts, "key codec")
	if err != nil {
		return nil, err
	}
	kc, err := codec[K](o, "key codec")
	if err != nil {
		return nil, err
	}
	s, err := NamespacedTimers(b, name, kc, statetable.Void)
	if err != nil {
		return nil, err
	}
	return &TimerService[K]{s}, nil
}

// RegisterEventTime registers an event-time timer of key: it fires when
// the watermark reaches ts. It reports whether it was new. O(log n).
func (t *TimerService[K]) RegisterEventTime(key K, ts int64) (bool, error) {
	return t.s.RegisterEventTime(key, noNamespace, ts)
}

// RegisterProcessingTime registers a processing-time timer of key: it
// fires when AdvanceProcessingTime runs at or after ts.
func (t *TimerService[K]) RegisterProcessingTime(key K, ts int64) (bool, error) {
	return t.s.RegisterProcessingTime(key, noNamespace, ts)
}

// DeleteEventTime deletes an event-time timer and reports whether it was
// there.
func (t *TimerService[K]) DeleteEventTime(key K, ts int64) (bool, error) {
	return t.s.DeleteEventTime(key, noNamespace, ts)
}

// DeleteProcessingTime deletes a processing-time timer and reports whether
// it was there.
func (t *TimerService[K]) DeleteProcessingTime(key K, ts int64) (bool, error) {
	return t.s.DeleteProcessingTime(key, noNamespace, ts)
}

// AdvanceWatermark fires, in order, every event-time timer with timestamp
// <= wm, as NamespacedTimerService.AdvanceWatermark does (callbacks may
// read and write state and register timers; an error stops it with the
// timers not yet fired kept). A watermark below the current one does not
// lower CurrentWatermark; it fires the timers at or below it (registered
// since the higher one), as the higher one would have.
func (t *TimerService[K]) AdvanceWatermark(wm int64, fire func(key K, ts int64) error) (fired int, err error) {
	return t.s.AdvanceWatermark(wm, func(key K, _ VoidNamespace, ts int64) error { return fire(key, ts) })
}

// AdvanceProcessingTime fires the processing-time timers due at the
// backend's clock, as NamespacedTimerService.AdvanceProcessingTime does.
func (t *TimerService[K]) AdvanceProcessingTime(fire func(key K, ts int64) error) (fired int, err error) {
	return t.s.AdvanceProcessingTime(func(key K, _ VoidNamespace, ts int64) error { return fire(key, ts) })
}

// CurrentWatermark returns the highest watermark AdvanceWatermark was given
// (the smallest int64 before the first).
func (t *TimerService[K]) CurrentWatermark() int64 { return t.s.CurrentWatermark() }

// NextEventTime returns the timestamp of the earliest event-time timer.
func (t *TimerService[K]) NextEventTime() (int64, bool) { return t.s.NextEventTime() }

// NextProcessingTime returns the instant the earliest processing-time
// timer is due.
func (t *TimerService[K]) NextProcessingTime() (int64, bool) { return t.s.NextProcessingTime() }

// EventTimers yields the live event-time timers in firing order, as they
// were when the loop began: the body may register and delete timers.
// Writer goroutine only.
func (t *TimerService[K]) EventTimers() iter.Seq[Timer[K, VoidNamespace]] {
	return t.s.EventTimers()
}

// ProcessingTimers yields the live processing-time timers in firing order
// (see EventTimers).
func (t *TimerService[K]) ProcessingTimers() iter.Seq[Timer[K, VoidNamespace]] {
	return t.s.ProcessingTimers()
}

// EventTimersAt returns the event-time timers of a snapshot in firing
// order; any goroutine while the snapshot is live. A snapshot of another
// backend (or nil) is an error matching ErrForeignSnapshot.
func (t *TimerService[K]) EventTimersAt(snap *Snapshot) (iter.Seq[Timer[K, VoidNamespace]], error) {
	return t.s.EventTimersAt(snap)
}

// ProcessingTimersAt returns the processing-time timers of a snapshot (see
// EventTimersAt).
func (t *TimerService[K]) ProcessingTimersAt(snap *Snapshot) (iter.Seq[Timer[K, VoidNamespace]], error) {
	return t.s.ProcessingTimersAt(snap)
}

// Namespaced returns the service with namespaces, all VoidNamespace.
func (t *TimerService[K]) Namespaced() *NamespacedTimerService[K, VoidNamespace] { return t.s }
