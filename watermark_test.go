package cowstate_test

import (
	"errors"
	"maps"
	"math"
	"slices"
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

// recordPrefetches is an EncodedPrefetcher that records what it is asked
// for.
type recordPrefetches []string

func (r *recordPrefetches) PrefetchEncoded(key, ns string) { *r = append(*r, key+"/"+ns) }

// AdvanceWatermarkReading fires what AdvanceWatermark fires, in the same
// order, with the same error handling, and asks the state for the entries
// of timers before they fire: each encoded as the service's codecs encode
// the timer's key and namespace.
func TestTimers_AdvanceWatermarkReadingFiresAsAdvanceWatermark(t *testing.T) {
	type firing struct {
		key string
		ns  int64
		ts  int64
	}
	run := func(reading bool, failAt int) ([]firing, recordPrefetches, error) {
		b, _ := cowstate.New(cowstate.Config{})
		s, _ := cowstate.NamespacedTimers(b, "t", statetable.String, statetable.Int64)
		for i := range 300 {
			s.RegisterEventTime(string(rune('a'+i%26))+string(rune('a'+i/26)), int64(i%5), int64(i%3))
		}
		var got []firing
		var asked recordPrefetches
		fire := func(k string, ns int64, ts int64) error {
			if len(got) == failAt {
				return errors.New("emit failed")
			}
			got = append(got, firing{k, ns, ts})
			return nil
		}
		var err error
		if reading {
			_, err = s.AdvanceWatermarkReading(1, &asked, fire)
		} else {
			_, err = s.AdvanceWatermark(1, fire)
		}
		if err == nil { // what stayed registered fires at the next advance
			_, err = s.AdvanceWatermark(2, fire)
		}
		return got, asked, err
	}
	for _, failAt := range []int{-1, 0, 57} {
		want, _, wantErr := run(false, failAt)
		got, asked, err := run(true, failAt)
		if !slices.Equal(got, want) || (err == nil) != (wantErr == nil) {
			t.Fatalf("failing at %d: AdvanceWatermarkReading fired %d (%v), AdvanceWatermark %d (%v)", failAt, len(got), err, len(want), wantErr)
		}
		if failAt < 0 && len(asked) == 0 {
			t.Fatal("no entry asked for")
		}
		fired := map[string]bool{}
		for _, f := range got {
			fired[string(statetable.String.Append(nil, f.key))+"/"+string(statetable.Int64.Append(nil, f.ns))] = true
		}
		for _, a := range asked {
			if !fired[a] && failAt < 0 {
				t.Fatalf("asked for %q, not the encodings of a timer that fired", a)
			}
		}
	}
}
