package cowstate_test

import (
	"fmt"

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
