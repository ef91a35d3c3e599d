package main

import (
	"encoding/binary"
	"fmt"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
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
//   - count (value): events seen, ever;
//   - late (reducing, sum): events that arrived after their session had
//     closed, dropped from the windows;
//   - windows (map, start -> end): the user's open session windows;
//   - session (aggregating, namespace = window start): count and sum of the
//     events of each open window;
//
// and one event-time timer per open window, at its last millisecond, in
// the "sessions" timer service (namespace = window start). A window is
// [t, t+gap) for an event at t; overlapping windows merge (their
// accumulators with MergeNamespaces, their timers replaced by one).
type sessionJob struct {
	b       *cowstate.Backend
	gap     int64
	count   *statetable.ValueState[string, statetable.VoidNamespace, int64]
	late    *statetable.ReducingState[string, statetable.VoidNamespace, int64]
	windows *statetable.MapState[string, statetable.VoidNamespace, int64, int64]
	session *statetable.AggregatingState[string, int64, int64, sessionAcc, sessionAcc]
	timers  *cowstate.TimerService[string, int64]

	watermark int64               // the last watermark advanced to
	emit      func(SessionResult) // where closed sessions go
	merged    [][2]int64          // scratch
}

// newSessionJob registers the job's states and timer service on b (a
// fresh backend, or one about to be restored).
func newSessionJob(b *cowstate.Backend, gap int64, emit func(SessionResult)) (*sessionJob, error) {
	j := &sessionJob{b: b, gap: gap, emit: emit, watermark: minWatermark}
	var err error
	add := func(a, b int64) int64 { return a + b }
	if j.count, err = cowstate.Value(b, "count", statetable.String, statetable.Void, statetable.Int64, 0); err != nil {
		return nil, err
	}
	if j.late, err = cowstate.Reducing(b, "late", statetable.String, statetable.Void, statetable.Int64, add); err != nil {
		return nil, err
	}
	if j.windows, err = cowstate.Map(b, "windows", statetable.String, statetable.Void, statetable.Int64, statetable.Int64); err != nil {
		return nil, err
	}
	if j.session, err = cowstate.Aggregating[string, int64, int64](b, "session", statetable.String, statetable.Int64, sessionAccCodec, sessionAgg{}); err != nil {
		return nil, err
	}
	if j.timers, err = cowstate.Timers(b, "sessions", statetable.String, statetable.Int64); err != nil {
		return nil, err
	}
	return j, nil
}

const minWatermark = -1 << 63

// Process handles one event of a user the backend owns.
func (j *sessionJob) Process(e Event) error {
	n, err := j.count.Get(e.User, void)
	if err != nil {
		return err
	}
	if err := j.count.Put(e.User, void, n+1); err != nil {
		return err
	}
	start, end := e.Time, e.Time+j.gap
	if end-1 <= j.watermark {
		return j.late.Add(e.User, void, 1) // its session has been emitted
	}

	// Merge with the open windows it overlaps.
	windows, err := j.windows.Iterate(e.User, void)
	if err != nil {
		return err
	}
	j.merged = j.merged[:0]
	for s, en := range windows {
		if s < end && start < en {
			j.merged = append(j.merged, [2]int64{s, en})
			start, end = min(start, s), max(end, en)
		}
	}
	if len(j.merged) != 1 || j.merged[0] != [2]int64{start, end} { // else it fell inside one window
		for _, w := range j.merged {
			if w[0] != start {
				if err := j.windows.Remove(e.User, void, w[0]); err != nil {
					return err
				}
				if err := j.session.MergeNamespaces(e.User, start, w[0]); err != nil {
					return err
				}
			}
			if w != [2]int64{start, end} { // its timer is not the merged window's
				if _, err := j.timers.DeleteEventTime(e.User, w[0], w[1]-1); err != nil {
					return err
				}
			}
		}
		if err := j.windows.Put(e.User, void, start, end); err != nil {
			return err
		}
		if _, err := j.timers.RegisterEventTime(e.User, start, end-1); err != nil {
			return err
		}
	}
	return j.session.Add(e.User, start, e.Amount)
}

// AdvanceWatermark fires the timers of the windows that end at or before
// wm: each emits its session and clears its state.
func (j *sessionJob) AdvanceWatermark(wm int64) error {
	j.watermark = max(j.watermark, wm)
	_, err := j.timers.AdvanceWatermark(wm, j.fire)
	return err
}

// fire closes the window of user that starts at start.
func (j *sessionJob) fire(user string, start, ts int64) error {
	acc, _, err := j.session.Get(user, start)
	if err != nil {
		return err
	}
	j.emit(SessionResult{User: user, Start: start, End: ts + 1, Count: acc.Count, Sum: acc.Sum})
	if err := j.session.Clear(user, start); err != nil {
		return err
	}
	return j.windows.Remove(user, void, start)
}
