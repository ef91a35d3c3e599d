package bench

import (
	"fmt"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/window"
)

// A window job's input: windowKeys keys drawn uniform, windowEvents
// events a one-second tumbling window of event time (about 86% of the keys,
// two events each).
const (
	windowKeys   = 1_000_000
	windowEvents = 2_000_000
	windowSize   = 1000 // ms
)

// BenchmarkWindowJob is a windowed count as a job author writes it: every
// event adds one to its key's count in a one-second tumbling window of
// event time (keys random int64, drawn uniform; timestamps ascending, so
// no event is late), and after each batch of jobBatch events the
// watermark moves to the batch's last timestamp less one, which emits
// every window that has ended. An op is one window: its windowEvents
// events, during which the window before it is emitted; the first window
// is filled untimed, so every op fills one window and emits one.
// ns/event is the time an event; fires/event how many (key, window)
// counts were emitted an event. No checkpoints.
//
//   - impl=cowstate: window.Count with the window.Tumbling assigner: a
//     reducing state namespaced by window and one end-of-window timer per
//     key and window (Flink's window operator), emitted by
//     AdvanceWatermark in timestamp and key order.
//   - impl=cowstate-addeach: the same, each batch added by AddEach before
//     the watermark moves.
//   - impl=map: what a Go user writes by hand: a map from window start to
//     a map[int64]int64 of counts, a window's map emitted in map order and
//     dropped once the watermark passes its end.
//
// After the timed part each implementation emits what is left; the counts
// emitted must add up to the events processed.
func BenchmarkWindowJob(b *testing.B) {
	keys := randomKeys(windowKeys)
	for _, impl := range []string{"cowstate", "cowstate-addeach"} {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", windowKeys, impl), func(b *testing.B) {
			be, err := cowstate.New(cowstate.Config{})
			if err != nil {
				b.Fatal(err)
			}
			op, err := window.Count[int64](be, "count", window.Tumbling{Size: windowSize})
			if err != nil {
				b.Fatal(err)
			}
			var fired, emitted int64
			emit := func(_ int64, _ window.TimeWindow, n int64) error {
				fired++
				emitted += n
				return nil
			}
			var batch, times []int64 // impl=cowstate-addeach: the events since the last advance
			addBatch := func() {
				if _, err := op.AddEach(batch, func(i int) (int64, int64) { return times[i], 1 }); err != nil {
					b.Fatal(err)
				}
				batch, times = batch[:0], times[:0]
			}
			events := windowJob(b, keys, &fired, func(k, ts int64) {
				if impl == "cowstate-addeach" {
					batch, times = append(batch, k), append(times, ts)
				} else if _, err := op.Add(k, ts, 1); err != nil {
					b.Fatal(err)
				}
			}, func(watermark int64) {
				addBatch()
				if _, err := op.AdvanceWatermark(watermark, emit); err != nil {
					b.Fatal(err)
				}
			})
			addBatch()
			if _, err := op.Flush(emit); err != nil {
				b.Fatal(err)
			}
			checkWindowCounts(b, emitted, events)
		})
	}
	b.Run(fmt.Sprintf("keys=%d/impl=map", windowKeys), func(b *testing.B) {
		windows := map[int64]map[int64]int64{} // window start -> key -> count
		var fired, emitted int64
		emitUpTo := func(watermark int64) {
			for start, counts := range windows {
				if start+windowSize-1 <= watermark {
					for _, n := range counts {
						fired++
						emitted += n
					}
					delete(windows, start)
				}
			}
		}
		events := windowJob(b, keys, &fired, func(k, ts int64) {
			start := ts - ts%windowSize
			counts := windows[start]
			if counts == nil {
				counts = make(map[int64]int64)
				windows[start] = counts
			}
			counts[k]++
		}, emitUpTo)
		emitUpTo(1<<63 - 1)
		checkWindowCounts(b, emitted, events)
	})
}

// windowJob feeds add the job's events, calling advance after each batch
// of jobBatch events: one window untimed, then one window an op. It
// reports ns/event and fires/event (from *fired, counted by the
// implementation) for the timed part and returns how many events it fed.
func windowJob(b *testing.B, keys []int64, fired *int64, add func(k, ts int64), advance func(watermark int64)) int {
	p := newPicker(windowKeys)
	events := 0
	window := func() {
		for range windowEvents {
			ts := int64(events) * windowSize / windowEvents
			add(keys[p.next()], ts)
			events++
			if events%jobBatch == 0 {
				advance(ts - 1)
			}
		}
	}
	window()
	timedFrom, firedBefore := events, *fired
	for b.Loop() {
		window()
	}
	timed := float64(events - timedFrom)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/timed, "ns/event")
	b.ReportMetric(float64(*fired-firedBefore)/timed, "fires/event")
	return events
}

func checkWindowCounts(b *testing.B, emitted int64, events int) {
	if emitted != int64(events) {
		b.Fatalf("the windows emitted counts adding up to %d for %d events", emitted, events)
	}
}
