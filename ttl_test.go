package cowstate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// TestTTL_Backend registers TTL states through the backend, on its clock:
// pinned time, cleanup on processing-time advances, bad configurations.
func TestTTL_Backend(t *testing.T) {
	now := int64(0)
	clockReads := 0
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 8, TTLCleanupPerAdvance: 50, Clock: func() int64 { clockReads++; return now }})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cowstate.NamespacedValueWithTTL(b, "v", statetable.Int64, statetable.Void, statetable.Int64, 0,
		cowstate.TTL{Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	timers, err := cowstate.NamespacedTimers(b, "t", statetable.Int64, statetable.Void)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.PinProcessingTime(); got != 0 {
		t.Fatalf("pinned %d, want the clock's 0", got)
	}
	reads := clockReads
	for k := range int64(200) {
		if err := v.Put(k, statetable.VoidNamespace{}, k); err != nil {
			t.Fatal(err)
		}
	}
	if clockReads != reads {
		t.Fatalf("200 puts under a pinned time read the clock %d times", clockReads-reads)
	}
	now = 5000 // the pin holds until unpinned
	if got, _ := v.Get(7, statetable.VoidNamespace{}); got != 7 || b.ProcessingTime() != 0 {
		t.Fatalf("pinned read: %d at %d", got, b.ProcessingTime())
	}
	b.UnpinProcessingTime()
	if b.ProcessingTime() != 5000 {
		t.Fatalf("unpinned processing time %d", b.ProcessingTime())
	}
	for i := 0; v.Count() > 0 && i < 10; i++ {
		if _, err := timers.AdvanceProcessingTime(func(int64, statetable.VoidNamespace, int64) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if v.Count() != 0 {
		t.Fatalf("%d entries left after processing-time advances with a cleanup of 50 each", v.Count())
	}
	if _, err := cowstate.New(cowstate.Config{TTLCleanupPerAdvance: -1}); !errors.Is(err, cowstate.ErrConfig) || !strings.Contains(err.Error(), "TTLCleanupPerAdvance") {
		t.Fatalf("negative cleanup budget: %v", err)
	}
	_, err = cowstate.NamespacedListWithTTL(b, "l", statetable.Int64, statetable.Void, statetable.Int64, cowstate.TTL{Duration: -time.Second})
	if !errors.Is(err, statetable.ErrConfig) || !strings.Contains(err.Error(), `"l"`) {
		t.Fatalf("negative TTL: %v", err)
	}
}
