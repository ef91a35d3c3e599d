package cowstate_test

import (
	"errors"
	"maps"
	"math"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

func TestBackend_RestoreWatermarks(t *testing.T) {
	void := statetable.VoidNamespace{}
	noFire := func(k string, _ statetable.VoidNamespace, ts int64) error {
		t.Errorf("timer %s %d fired", k, ts)
		return nil
	}
	b, _ := cowstate.New(cowstate.Config{})
	a, _ := cowstate.NamespacedTimers(b, "a", statetable.String, statetable.Void)
	cowstate.NamespacedTimers(b, "b", statetable.String, statetable.Void)
	a.AdvanceWatermark(100, noFire)
	wms := b.Watermarks()
	if want := map[string]int64{"a": 100, "b": math.MinInt64}; !maps.Equal(wms, want) {
		t.Fatalf("Watermarks() = %v, want %v", wms, want)
	}

	b2, _ := cowstate.New(cowstate.Config{})
	a2, _ := cowstate.NamespacedTimers(b2, "a", statetable.String, statetable.Void)
	cowstate.NamespacedTimers(b2, "b", statetable.String, statetable.Void)
	a2.RegisterEventTime("k", void, 50) // due at the restored watermark: fires only at the next advance
	if err := b2.RestoreWatermarks(map[string]int64{"a": 100, "c": 7}); !errors.Is(err, cowstate.ErrUnknownTimerService) {
		t.Fatalf("unknown service: %v", err)
	}
	if a2.CurrentWatermark() != math.MinInt64 {
		t.Fatal("a failed RestoreWatermarks set a watermark")
	}
	if err := b2.RestoreWatermarks(wms); err != nil {
		t.Fatal(err)
	}
	if err := b2.RestoreWatermark("a", 10); err != nil || a2.CurrentWatermark() != 100 {
		t.Fatalf("a lower watermark: %v, watermark %d; want it kept at 100", err, a2.CurrentWatermark())
	}
	if !maps.Equal(b2.Watermarks(), wms) {
		t.Fatalf("restored %v, want %v", b2.Watermarks(), wms)
	}
	fired, err := a2.AdvanceWatermark(100, func(string, statetable.VoidNamespace, int64) error { return nil })
	if err != nil || fired != 1 {
		t.Fatalf("the timer at 50 fired %d times at the next advance (%v)", fired, err)
	}
}
