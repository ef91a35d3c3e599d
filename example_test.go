package cowstate_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
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

// Checkpoint to a directory, then restore into a fresh backend, as after a
// crash: the newest checkpoint, full or incremental, comes back exactly.
func Example_checkpoint() {
	dir, _ := os.MkdirTemp("", "cowstate-example")
	defer os.RemoveAll(dir)
	store, _ := cowstate.DirStorage(dir)
	void := statetable.VoidNamespace{}

	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 128})
	count, _ := cowstate.Value(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	timers, _ := cowstate.Timers(b, "flush", statetable.String, statetable.Void)
	for i := range 1000 {
		count.Put(fmt.Sprint("user-", i), void, 1)
	}
	cps := cowstate.NewCheckpoints(b, store, cowstate.CheckpointOptions{})
	for id, user := range []string{"ann", "bob", "ann"} {
		n, _ := count.Get(user, void)
		count.Put(user, void, n+1)
		timers.RegisterEventTime(user, void, 100)
		cp, _ := cps.Checkpoint(context.Background(), uint64(id+1)) // returns at once
		if err := cp.Wait(); err == nil {                           // written, synced, committed
			cps.Confirm(cp.ID()) // the base of the next, incremental, checkpoint
		}
		fmt.Println("checkpoint", cp.ID(), cp.Manifest().Kind)
	}

	// After a crash: register the same states and timers, then restore.
	b2, _ := cowstate.New(cowstate.Config{MaxParallelism: 128})
	count2, _ := cowstate.Value(b2, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	timers2, _ := cowstate.Timers(b2, "flush", statetable.String, statetable.Void)
	m, _ := cowstate.NewCheckpoints(b2, store, cowstate.CheckpointOptions{}).Restore(context.Background(), 0)
	ann, _ := count2.Get("ann", void)
	fired, _ := timers2.AdvanceWatermark(100, func(string, statetable.VoidNamespace, int64) error { return nil })
	fmt.Println("restored checkpoint", m.ID, "ann:", ann, "timers fired:", fired)
	// Output:
	// checkpoint 1 full
	// checkpoint 2 incremental
	// checkpoint 3 incremental
	// restored checkpoint 3 ann: 2 timers fired: 2
}
