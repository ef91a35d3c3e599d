package main

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/window"
)

// SessionResult is what the job emits when a session window closes: the
// user's events in [Start, End) (event time, ms), how many and their total.
type SessionResult struct {
	User       string
	Start, End int64
	Count, Sum int64
}

// sessionAcc is the accumulator of a session window: a value type, so the
// aggregate function never mutates one it was given.
type sessionAcc struct{ Count, Sum int64 }

// sessionAgg is the AggregateFunction of the session windows.
type sessionAgg struct{}

func (sessionAgg) CreateAccumulator() sessionAcc { return sessionAcc{} }
func (sessionAgg) Add(amount int64, a sessionAcc) sessionAcc {
	return sessionAcc{a.Count + 1, a.Sum + amount}
}
func (sessionAgg) Result(a sessionAcc) sessionAcc { return a }
func (sessionAgg) Merge(a, b sessionAcc) sessionAcc {
	return sessionAcc{a.Count + b.Count, a.Sum + b.Sum}
}

// sessionAccCodec encodes an accumulator as two big-endian int64s.
var sessionAccCodec = statetable.FuncCodec("demo.sessionAcc/v1",
	func(dst []byte, a sessionAcc) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(dst, uint64(a.Count)), uint64(a.Sum))
	},
	func(src []byte) (sessionAcc, error) {
		if len(src) != 16 {
			return sessionAcc{}, fmt.Errorf("%w: session accumulator of %d bytes", statetable.ErrDecode, len(src))
		}
		return sessionAcc{int64(binary.BigEndian.Uint64(src)), int64(binary.BigEndian.Uint64(src[8:]))}, nil
	})

var void = statetable.VoidNamespace{}

// sessionJob is the keyed operator of the demo, one instance per backend
// (operator subtask): per-user session windows on event time, like Flink's
// EventTimeSessionWindows with merging, plus a running count per user.
//
// State, per user:
//   - count (value): events seen;
//   - late (reducing, sum): events that arrived after their session had
//     closed, dropped from the windows;
//
// both with a time-to-live in processing time (-state-ttl): a user idle
// that long is forgotten, and counts from zero again;
//   - session-windows (window.Sessions): the user's open session windows,
//     each with the window that holds its state;
//   - session (aggregating, namespace = a state window): count and sum of
//     the events of each open session;
//
// and one event-time timer per open window, at its last millisecond, in
// the "sessions" timer service (namespace = the window). A window is
// [t, t+gap) for an event at t; windows that intersect merge
// (window.Sessions: their accumulators with MergeNamespaces into the
// state window of the earliest, their timers replaced by one).
type sessionJob struct {
	b       *cowstate.Backend
	gap     int64
	count   *statetable.ValueState[string, statetable.VoidNamespace, int64]
	late    *statetable.ReducingState[string, statetable.VoidNamespace, int64]
	windows *window.Sessions[string]
	session *statetable.AggregatingState[string, window.TimeWindow, int64, sessionAcc, sessionAcc]
	timers  *cowstate.NamespacedTimerService[string, window.TimeWindow]

	emit func(SessionResult) // where closed sessions go
}

// newSessionJob registers the job's states and timer service on b (a
// fresh backend, or one about to be restored).
// The per-user states expire after ttl of processing time without a
// write (0: never).
func newSessionJob(b *cowstate.Backend, gap int64, ttl time.Duration, emit func(SessionResult)) (*sessionJob, error) {
	j := &sessionJob{b: b, gap: gap, emit: emit}
	var err error
	add := func(a, b int64) int64 { return a + b }
	if ttl > 0 {
		cfg := cowstate.TTL{Duration: ttl}
		j.count, err = cowstate.NamespacedValueWithTTL(b, "count", statetable.String, statetable.Void, statetable.Int64, 0, cfg)
		if err == nil {
			j.late, err = cowstate.NamespacedReducingWithTTL(b, "late", statetable.String, statetable.Void, statetable.Int64, add, cfg)
		}
	} else {
		j.count, err = cowstate.NamespacedValue(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
		if err == nil {
			j.late, err = cowstate.NamespacedReducing(b, "late", statetable.String, statetable.Void, statetable.Int64, add)
		}
	}
	if err != nil {
		return nil, err
	}
	if j.session, err = cowstate.NamespacedAggregating(b, "session", statetable.String, window.Codec, sessionAccCodec, sessionAgg{}); err != nil {
		return nil, err
	}
	if j.timers, err = cowstate.NamespacedTimers(b, "sessions", statetable.String, window.Codec); err != nil {
		return nil, err
	}
	if j.windows, err = window.NewSessions(b, "session-windows", statetable.String, gap, j.timers, j.session); err != nil {
		return nil, err
	}
	return j, nil
}

// Process handles one event of a user the backend owns.
func (j *sessionJob) Process(e Event) error {
	n, err := j.count.Get(e.User, void)
	if err != nil {
		return err
	}
	if err := j.count.Put(e.User, void, n+1); err != nil {
		return err
	}
	a, err := j.windows.Add(e.User, e.Time)
	if err != nil {
		return err
	}
	if a.Late {
		return j.late.Add(e.User, void, 1) // its session has been emitted
	}
	return j.session.Add(e.User, a.State, e.Amount)
}

// AdvanceWatermark fires the timers of the windows that end at or before
// wm: each emits its session and clears its state.
func (j *sessionJob) AdvanceWatermark(wm int64) error {
	_, err := j.timers.AdvanceWatermark(wm, j.fire)
	return err
}

// fire closes user's session w.
func (j *sessionJob) fire(user string, w window.TimeWindow, _ int64) error {
	state, ok, err := j.windows.Remove(user, w)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("session %v of %q fired but is not open", w, user)
	}
	acc, _, err := j.session.Get(user, state)
	if err != nil {
		return err
	}
	j.emit(SessionResult{User: user, Start: w.Start, End: w.End, Count: acc.Count, Sum: acc.Sum})
	return j.session.Clear(user, state)
}
