package cowstate

import (
	"fmt"
	"testing"

	"github.com/cowstate/cowstate/statetable"
)

func TestBackend_Stats(t *testing.T) {
	b := newBackend(t)
	count, err := NamespacedValue(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NamespacedList(b, "events", statetable.String, statetable.Void, statetable.String); err != nil {
		t.Fatal(err)
	}
	timers, err := NamespacedTimers(b, "windows", statetable.String, statetable.Void)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		k := fmt.Sprintf("user-%03d", i)
		if err := count.Put(k, ns0, int64(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := timers.RegisterEventTime(k, ns0, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := timers.RegisterProcessingTime("user-000", ns0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := timers.AdvanceWatermark(9, func(string, void, int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	snap := b.Snapshot()

	st := b.Stats()
	// "user-NNN" is 8 bytes, a 1-byte length prefix, no namespace bytes,
	// an 8-byte value: 17 bytes an entry, the same for every entry.
	wantStates := []statetable.StateStats{
		{Name: "count", Kind: statetable.KindValue, Entries: 100, Bytes: 100 * 17},
		{Name: "events", Kind: statetable.KindList},
	}
	if fmt.Sprint(st.States) != fmt.Sprint(wantStates) {
		t.Errorf("States = %+v, want %+v", st.States, wantStates)
	}
	wantTimers := []TimerStats{{Name: "windows", EventTime: 90, Processing: 1, Watermark: 9}}
	if fmt.Sprint(st.Timers) != fmt.Sprint(wantTimers) {
		t.Errorf("Timers = %+v, want %+v", st.Timers, wantTimers)
	}
	if st.LiveSnapshots != 1 {
		t.Errorf("LiveSnapshots %d, want 1", st.LiveSnapshots)
	}
	snap.Release()
	if st := b.Stats(); st.LiveSnapshots != 0 {
		t.Errorf("LiveSnapshots after the release: %d", st.LiveSnapshots)
	}
}
