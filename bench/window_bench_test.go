package bench

import (
	"fmt"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/window"
)

// windowEventsPerSecond is how many events a window job's input holds per
// second of event time: with windowKeys keys drawn uniform, a one-second
// tumbling window holds about 86% of the keys, two events each.
const (
	windowKeys            = 1_000_000
	windowEventsPerSecond = 2_000_000
	windowSize            = 1000 // ms
)

// BenchmarkWindowJob is a windowed count as a job author writes it: every
// event adds one to its key's count in a one-second tumbling window of
// event time (keys random int64, drawn uniform; timestamps ascending, so
// no event is late), and after each batch of jobBatch events the
// watermark moves to the batch's last timestamp less one, which emits
// every window that has ended. An op is one event, the emission
// included; fires/event is how many (key, window) counts were emitted an
// event. No checkpoints.
//
//   - impl=cowstate: window.Count with the window.Tumbling assigner: a
//     reducing state namespaced by window and one end-of-window timer per
//     key and window (Flink's window operator), emitted by
//     AdvanceWatermark in timestamp and key order.
//   - impl=map: what a Go user writes by hand: a map from window start to
//     a map[int64]int64 of counts, a window's map emitted in map order and
//     dropped once the watermark passes its end.
//
// After the timed part each implementation emits what is left; the counts
// emitted must add up to the events processed.
func BenchmarkWindowJob(b *testing.B) {
	keys := randomKeys(windowKeys)
	b.Run(fmt.Sprintf("keys=%d/impl=cowstate", windowKeys), func(b *testing.B) {
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
		p := newPicker(windowKeys)
		events := 0
		for b.Loop() {
			ts := windowTime(events)
			if _, err := op.Add(keys[p.next()], ts, 1); err != nil {
				b.Fatal(err)
			}
			events++
			if events%jobBatch == 0 {
				if _, err := op.AdvanceWatermark(ts-1, emit); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(fired)/float64(events), "fires/event")
		if _, err := op.Flush(emit); err != nil {
			b.Fatal(err)
		}
		checkWindowCounts(b, emitted, events)
	})
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
		p := newPicker(windowKeys)
		events := 0
		for b.Loop() {
			ts := windowTime(events)
			start := ts - ts%windowSize
			counts := windows[start]
			if counts == nil {
				counts = make(map[int64]int64)
				windows[start] = counts
			}
			counts[keys[p.next()]]++
			events++
			if events%jobBatch == 0 {
				emitUpTo(ts - 1)
			}
		}
		b.ReportMetric(float64(fired)/float64(events), "fires/event")
		emitUpTo(1<<63 - 1)
		checkWindowCounts(b, emitted, events)
	})
}

// windowTime is the event time of the i-th event of a window job, in ms.
func windowTime(i int) int64 { return int64(i) * 1000 / windowEventsPerSecond }

func checkWindowCounts(b *testing.B, emitted int64, events int) {
	if emitted != int64(events) {
		b.Fatalf("the windows emitted counts adding up to %d for %d events", emitted, events)
	}
}
