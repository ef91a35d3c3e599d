package cowstate

import "github.com/cowstate/cowstate/statetable"

// Stats is what a backend can report of itself cheaply, for metrics (see
// Backend.Stats).
type Stats struct {
	// States: each registered state's entries and estimated encoded
	// bytes, in registration order (see statetable.Table.Stats).
	States []statetable.StateStats
	// Timers: each timer service's event-time and processing-time timers,
	// in registration order.
	Timers []TimerStats
	// LiveSnapshots: snapshots taken and not yet released, a checkpoint's
	// included; each makes the writer copy what it pins.
	LiveSnapshots int
}

// TimerStats is what Backend.Stats reports of one timer service.
type TimerStats struct {
	Name                  string
	EventTime, Processing int
	Watermark             int64
}

// Stats reports the backend's states, timers and live snapshots. Cost:
// O(number of states and services), plus for each state the encoding of
// at most statetable.StatsSample entries, whatever the state's size;
// nothing is captured or copied, so calling it every few seconds costs
// the writer nothing measurable. A new value each call. Writer goroutine
// only.
func (b *Backend) Stats() Stats {
	s := Stats{States: b.table.Stats(), LiveSnapshots: b.owner.LiveCaptures()}
	for _, n := range b.names {
		svc := b.services[n]
		ev, pr := svc.queues()
		s.Timers = append(s.Timers, TimerStats{Name: n, EventTime: ev.Len(), Processing: pr.Len(), Watermark: svc.CurrentWatermark()})
	}
	return s
}
