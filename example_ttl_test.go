package cowstate_test

import (
	"fmt"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// A per-user value that expires after 30 minutes of processing time
// without a write. The clock is the test's; a job leaves Config.Clock nil
// (the wall clock) and pins the time per batch of records.
func ExampleValueWithTTL() {
	now := int64(0) // processing time, ms
	b, _ := cowstate.New(cowstate.Config{Clock: func() int64 { return now }})
	void := statetable.VoidNamespace{}
	lastSeen, _ := cowstate.NamespacedValueWithTTL(b, "last-seen", statetable.String, statetable.Void, statetable.Int64, -1,
		cowstate.TTL{Duration: 30 * time.Minute})

	b.PinProcessingTime() // one clock read for the batch
	lastSeen.Put("ann", void, 1)
	lastSeen.Put("bob", void, 2)
	b.UnpinProcessingTime()

	now = (20 * time.Minute).Milliseconds()
	lastSeen.Put("bob", void, 3) // a write refreshes bob's timestamp

	now = (35 * time.Minute).Milliseconds()
	ann, _ := lastSeen.Get("ann", void)
	bob, _ := lastSeen.Get("bob", void)
	fmt.Println("ann:", ann, "bob:", bob)

	visited, removed := b.CleanupExpired(1000) // also run by AdvanceProcessingTime
	fmt.Println("cleanup visited", visited, "removed", removed, "left", lastSeen.Count())
	// Output:
	// ann: -1 bob: 3
	// cleanup visited 1 removed 0 left 1
}
