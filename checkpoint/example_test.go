package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// Checkpoint to a directory, then restore into a fresh backend, as after a
// crash: the newest checkpoint, full or incremental, comes back exactly.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "cowstate-example")
	defer os.RemoveAll(dir)
	store, _ := checkpoint.Dir(dir)
	void := statetable.VoidNamespace{}

	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 128})
	count, _ := cowstate.NamespacedValue(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	timers, _ := cowstate.NamespacedTimers(b, "flush", statetable.String, statetable.Void)
	for i := range 1000 {
		count.Put(fmt.Sprint("user-", i), void, 1)
	}
	// Open takes ownership of the store; AutoConfirm makes each durable
	// checkpoint the base of the next, incremental, one.
	cps, err := checkpoint.Open(ctx, b, store, checkpoint.Options{AutoConfirm: true})
	if err != nil {
		panic(err)
	}
	for id, user := range []string{"ann", "bob", "ann"} {
		n, _ := count.Get(user, void)
		count.Put(user, void, n+1)
		timers.RegisterEventTime(user, void, 100)
		cp, _ := cps.Checkpoint(ctx, uint64(id+1)) // captures in O(1), writes in the background
		cp.Wait()                                  // here only to print its kind
		fmt.Println("checkpoint", cp.ID(), cp.Manifest().Kind)
	}

	// After a crash: register the same states and timers, open the store
	// (the crashed owner is fenced) and restore the newest checkpoint, or
	// start fresh if there is none.
	b2, _ := cowstate.New(cowstate.Config{MaxParallelism: 128})
	count2, _ := cowstate.NamespacedValue(b2, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	timers2, _ := cowstate.NamespacedTimers(b2, "flush", statetable.String, statetable.Void)
	cps2, _ := checkpoint.Open(ctx, b2, store, checkpoint.Options{AutoConfirm: true})
	m, err := cps2.Restore(ctx, 0)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		fmt.Println("starting fresh")
	}
	ann, _ := count2.Get("ann", void)
	fired, _ := timers2.AdvanceWatermark(100, func(string, statetable.VoidNamespace, int64) error { return nil })
	fmt.Println("restored checkpoint", m.ID, "ann:", ann, "timers fired:", fired)
	// The first owner, if it still runs, can no longer commit.
	cp, _ := cps.Checkpoint(ctx, 4)
	fmt.Println("old owner fenced:", errors.Is(cp.Wait(), checkpoint.ErrFenced))
	// Output:
	// checkpoint 1 full
	// checkpoint 2 incremental
	// checkpoint 3 incremental
	// restored checkpoint 3 ann: 2 timers fired: 2
	// old owner fenced: true
}
