package cowstate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/window"
)

// A per-user counter and an event-time timer per user; a snapshot taken in
// the middle keeps what it saw while the job goes on.
func Example() {
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 128})
	void := statetable.VoidNamespace{}
	count, _ := cowstate.Value(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	timers, _ := cowstate.Timers(b, "flush", statetable.String, statetable.Void)

	for _, user := range []string{"ann", "bob", "ann"} {
		n, _ := count.Get(user, void)
		count.Put(user, void, n+1)
		timers.RegisterEventTime(user, void, 100) // once per user: deduplicated
	}

	snap := b.Snapshot() // O(1) whatever the state size; readable on any goroutine
	defer snap.Release()

	timers.AdvanceWatermark(100, func(user string, _ statetable.VoidNamespace, ts int64) error {
		return count.Clear(user, void) // timers fire in order and may write state
	})

	then, _ := count.GetAt(snap.State(), "ann", void)
	now, _ := count.Get("ann", void)
	fmt.Println("ann in the snapshot:", then, "now:", now)
	for t := range timers.EventTimersAt(snap) {
		fmt.Println("snapshot timer:", t.Key, t.Timestamp)
	}
	// Output:
	// ann in the snapshot: 2 now: 0
	// snapshot timer: ann 100
	// snapshot timer: bob 100
}

// A windowed count as a Flink job: per user, one-minute tumbling event-time
// windows of page views in a map state, emitted by the end-of-window timer.
// A checkpoint loop keeps the input offset and the watermark; a process
// dies after a checkpoint, and the next resumes from it.
func Example_windowedCount() {
	type click struct {
		user, page string
		time       int64 // event time, ms
	}
	clicks := []click{{"ann", "/home", 5_000}, {"bob", "/home", 20_000}, {"ann", "/cart", 40_000},
		{"ann", "/home", 50_000}, {"ann", "/home", 70_000}, {"bob", "/cart", 130_000}}
	ctx, store, minute := context.Background(), checkpoint.Memory(), window.Tumbling{Size: 60_000}

	run := func(stop int) error { // one process: resume, then handle the clicks up to stop
		b, err := cowstate.New(cowstate.Config{})
		if err != nil {
			return err
		}
		pages, err1 := cowstate.Map(b, "pages", statetable.String, window.Codec, statetable.String, statetable.Int64)
		timers, err2 := cowstate.Timers(b, "windows", statetable.String, window.Codec)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		loop, start, err := checkpoint.Resume[int](ctx, b, store, checkpoint.LoopOptions{Interval: 10 * time.Second})
		if err != nil {
			return err
		}
		defer loop.Close()
		fmt.Println("restored:", start.Restored, "next click:", start.Meta)
		emit := func(user string, w window.TimeWindow, _ int64) error { // at the window's end
			counts, err := pages.Iterate(user, w)
			if err != nil {
				return err
			}
			fmt.Println(user, w, maps.Collect(counts))
			return pages.Clear(user, w)
		}
		for i := start.Meta; i < stop; i++ { // start.Meta: the next click to read
			c := clicks[i]
			w, err := minute.Assign(c.time)
			if err != nil {
				return err
			}
			if late, err := window.RegisterEnd(timers, c.user, w); err != nil {
				return err
			} else if !late { // a late click's window has fired: dropped
				n, _, err := pages.Get(c.user, w, c.page)
				if err != nil {
					return err
				}
				if err := pages.Put(c.user, w, c.page, n+1); err != nil {
					return err
				}
			}
			if _, err := timers.AdvanceWatermark(c.time-10_000, emit); err != nil { // 10 s behind
				return err
			}
			if err := loop.Processed(ctx, 1, i+1); err != nil { // a checkpoint when one is due
				return err
			}
		}
		_, err = loop.Sync(ctx, stop) // a checkpoint now; then the first process dies
		return err
	}
	if err := errors.Join(run(4), run(len(clicks))); err != nil {
		fmt.Println(err)
	}
	// Output:
	// restored: false next click: 0
	// restored: true next click: 4
	// ann [0, 60000) map[/cart:1 /home:2]
	// bob [0, 60000) map[/home:1]
	// ann [60000, 120000) map[/home:1]
}
