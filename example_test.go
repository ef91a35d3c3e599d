package cowstate_test

import (
	"context"
	"errors"
	"fmt"
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
	count, _ := cowstate.Value[string, int64](b, "count")
	timers, _ := cowstate.NamespacedTimers(b, "flush", statetable.String, statetable.Void)

	for _, user := range []string{"ann", "bob", "ann"} {
		count.Update(user, func(n int64) int64 { return n + 1 })
		timers.RegisterEventTime(user, void, 100) // once per user: deduplicated
	}

	snap := b.Snapshot() // O(1) whatever the state size; readable on any goroutine
	defer snap.Release()

	timers.AdvanceWatermark(100, func(user string, _ statetable.VoidNamespace, ts int64) error {
		return count.Clear(user) // timers fire in order and may write state
	})

	then, _ := count.GetAt(snap, "ann")
	now, _ := count.Get("ann")
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
// windows of page views, counted by a window operator that emits each
// window at its end. A checkpoint loop keeps the input offset and the
// watermark; a process dies after a checkpoint, and the next resumes from it.
func Example_windowedCount() {
	clicks := []struct {
		user string
		time int64 // event time, ms
	}{{"ann", 5_000}, {"bob", 20_000}, {"ann", 40_000}, {"ann", 50_000}, {"ann", 70_000}, {"bob", 130_000}}
	ctx, store := context.Background(), checkpoint.Memory()
	emit := func(user string, w window.TimeWindow, n int64) error { fmt.Println(user, w, n); return nil }

	run := func(stop int) error { // one process: resume, then handle the clicks up to stop
		b, _ := cowstate.New(cowstate.Config{})
		views, err := window.Count[string](b, "views", window.Tumbling{Size: 60_000})
		if err != nil {
			return err
		}
		loop, start, err := checkpoint.Resume[int](ctx, b, store, checkpoint.LoopOptions{Interval: 10 * time.Second})
		if err != nil {
			return err
		}
		fmt.Println("restored:", start.Restored, "next click:", start.Meta)
		for i := start.Meta; i < stop; i++ {
			_, err1 := views.Add(clicks[i].user, clicks[i].time, 1)        // a late click is dropped
			_, err2 := views.AdvanceWatermark(clicks[i].time-10_000, emit) // 10 s behind
			if err := errors.Join(err1, err2, loop.Processed(ctx, 1, i+1)); err != nil {
				return err
			}
		}
		if stop == len(clicks) { // the end of the input
			if _, err := views.Flush(emit); err != nil {
				return err
			}
		}
		_, err = loop.Sync(ctx, stop) // a checkpoint now; then the first process dies
		return errors.Join(err, loop.Close())
	}
	if err := errors.Join(run(4), run(len(clicks))); err != nil {
		fmt.Println(err)
	}
	// Output:
	// restored: false next click: 0
	// restored: true next click: 4
	// ann [0, 60000) 3
	// bob [0, 60000) 1
	// ann [60000, 120000) 1
	// bob [120000, 180000) 1
}
