package window_test

import (
	"fmt"
	"math"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/window"
)

// Session windows with a gap of 10: a user's clicks less than a gap apart
// are one session, whose sum is emitted when the watermark passes its end.
// The click at 12 bridges the sessions of 5 and 18, which merge.
func ExampleSessions() {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		panic(err)
	}
	sum, err := cowstate.NamespacedReducing(b, "sum", statetable.String, window.Codec, statetable.Int64, func(a, b int64) int64 { return a + b })
	if err != nil {
		panic(err)
	}
	timers, err := cowstate.NamespacedTimers(b, "sessions", statetable.String, window.Codec)
	if err != nil {
		panic(err)
	}
	sessions, err := window.NewSessions(b, "session-set", statetable.String, 10, timers, sum)
	if err != nil {
		panic(err)
	}
	for _, ts := range []int64{5, 18, 12, 40} {
		a, err := sessions.Add("ann", ts)
		if err != nil {
			panic(err)
		}
		if err := sum.Add("ann", a.State, 1); err != nil {
			panic(err)
		}
		fmt.Println("click at", ts, "in session", a.Window)
	}
	_, err = timers.AdvanceWatermark(math.MaxInt64, func(user string, w window.TimeWindow, _ int64) error {
		state, _, err := sessions.Remove(user, w)
		if err != nil {
			return err
		}
		n, _, err := sum.Get(user, state)
		if err != nil {
			return err
		}
		fmt.Println(user, "session", w, "clicks:", n)
		return sum.Clear(user, state)
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// click at 5 in session [5, 15)
	// click at 18 in session [18, 28)
	// click at 12 in session [5, 28)
	// click at 40 in session [40, 50)
	// ann session [5, 28) clicks: 3
	// ann session [40, 50) clicks: 1
}
