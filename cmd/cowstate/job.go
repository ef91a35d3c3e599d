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
//   - session (a window.Aggregate operator over window.Session): the
//     count and sum of the events of each open session window, which
//     merges windows that intersect and emits each at its end.
type sessionJob struct {
	b        *cowstate.Backend
	gap      int64
	count    *cowstate.ValueState[string, int64]
	late     *cowstate.ReducingState[string, int64]
	sessions *window.Operator[string, int64, sessionAcc]

	emit func(SessionResult) // where closed sessions go
}

// newSessionJob registers the job's states and window operator on b (a
// fresh backend, or one about to be restored).
// The per-user states expire after ttl of processing time without a
// write (0: never).
func newSessionJob(b *cowstate.Backend, gap int64, ttl time.Duration, emit func(SessionResult)) (*sessionJob, error) {
	j := &sessionJob{b: b, gap: gap, emit: emit}
	var err error
	add := func(a, b int64) int64 { return a + b }
	if ttl > 0 {
		cfg := cowstate.TTL{Duration: ttl}
		j.count, err = cowstate.ValueWithTTL[string, int64](b, "count", cfg)
		if err == nil {
			j.late, err = cowstate.ReducingWithTTL[string](b, "late", add, cfg)
		}
	} else {
		j.count, err = cowstate.Value[string, int64](b, "count")
		if err == nil {
			j.late, err = cowstate.Reducing[string](b, "late", add)
		}
	}
	if err != nil {
		return nil, err
	}
	j.sessions, err = window.Aggregate[string](b, "session", window.Session{Gap: gap}, sessionAgg{},
		cowstate.WithValueCodec(sessionAccCodec))
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Process handles one event of a user the backend owns.
func (j *sessionJob) Process(e Event) error {
	if err := j.count.Update(e.User, func(n int64) int64 { return n + 1 }); err != nil {
		return err
	}
	late, err := j.sessions.Add(e.User, e.Time, e.Amount)
	if err != nil || !late {
		return err
	}
	return j.late.Add(e.User, 1) // its session has been emitted
}

// AdvanceWatermark emits the sessions that end at or before wm.
func (j *sessionJob) AdvanceWatermark(wm int64) error {
	_, err := j.sessions.AdvanceWatermark(wm, func(user string, w window.TimeWindow, acc sessionAcc) error {
		j.emit(SessionResult{User: user, Start: w.Start, End: w.End, Count: acc.Count, Sum: acc.Sum})
		return nil
	})
	return err
}
