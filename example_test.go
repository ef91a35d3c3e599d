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
	inSnap, _ := timers.EventTimersAt(snap) // an error only for another backend's snapshot
	for t := range inSnap {
		fmt.Println("snapshot timer:", t.Key, t.Timestamp)
	}
	// Output:
	// ann in the snapshot: 2 now: 0
	// snapshot timer: ann 100
	// snapshot timer: bob 100
}

// A keyed counter with checkpoints: a count per user, a checkpoint loop
// that takes a checkpoint a second with the offset of the next event, and
// on a restart resumes from it.
func Example_counter() {
	ctx, store := context.Background(), checkpoint.Memory()
	events := []string{"ann", "bob", "ann"}
	b, _ := cowstate.New(cowstate.Config{})
	counts, _ := cowstate.Value[string, int64](b, "counts")
	loop, start, err := checkpoint.Resume[int](ctx, b, store, checkpoint.LoopOptions{Interval: time.Second})
	if err != nil {
		panic(err)
	}
	for i := start.Meta; i < len(events); i++ { // start.Meta: the next event, 0 when fresh
		inc := counts.Update(events[i], func(n int64) int64 { return n + 1 })
		if err := errors.Join(inc, loop.Processed(ctx, 1, i+1)); err != nil {
			panic(err)
		}
	}
	n, _ := counts.Get("ann")
	_, err = loop.Sync(ctx, len(events)) // at the end of the input
	fmt.Println("ann:", n, errors.Join(err, loop.Close()))
	// Output: ann: 2 <nil>
}

// A windowed count as a Flink job: per user, one-minute tumbling event-time
// windows of page views, counted by a window operator that emits each
// window at its end. A checkpoint loop keeps the input offset and the
// watermark; a process dies after a checkpoint, and the next resumes from it.
func Example_windowedCount() {
	users, times := []string{"ann", "bob", "ann", "ann", "ann", "bob"}, []int64{5, 20, 40, 50, 70, 130}
	ctx, store := context.Background(), checkpoint.Memory()
	emit := func(user string, w window.TimeWindow, n int64) error { fmt.Println(user, w, n); return nil }
	run := func(stop int) error { // one process: resume, then handle the clicks up to stop
		b, _ := cowstate.New(cowstate.Config{})
		views, _ := window.Count[string](b, "views", window.Tumbling{Size: 60}) // event time in seconds
		loop, start, err := checkpoint.Resume[int](ctx, b, store, checkpoint.LoopOptions{Interval: 10 * time.Second})
		if err != nil {
			return err
		}
		fmt.Println("resumed:", start.Restored, "at click", start.Meta)
		for i := start.Meta; i < stop && err == nil; i++ {
			_, err1 := views.Add(users[i], times[i], 1)          // a late click is dropped
			_, err2 := views.AdvanceWatermark(times[i]-10, emit) // 10 s behind
			err = errors.Join(err1, err2, loop.Processed(ctx, 1, i+1))
		}
		if stop == len(users) && err == nil { // the end of the input
			_, err = views.Flush(emit)
		}
		_, err2 := loop.Sync(ctx, stop) // a checkpoint now; then the first process dies
		return errors.Join(err, err2, loop.Close())
	}
	if err := errors.Join(run(4), run(len(users))); err != nil {
		fmt.Println(err)
	}
	// Output:
	// resumed: false at click 0
	// resumed: true at click 4
	// ann [0, 60) 3
	// bob [0, 60) 1
	// ann [60, 120) 1
	// bob [120, 180) 1
}
