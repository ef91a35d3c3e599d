package cowstate

import (
	"fmt"
	"maps"
	"slices"
)

// Watermarks returns each timer service's current watermark by service
// name (the smallest int64 for a service whose watermark never advanced).
// Watermarks are not in snapshots: a job that checkpoints keeps them beside
// (checkpoint.Loop does) and gives them back with RestoreWatermark. A new
// map each call, O(services). Writer goroutine only.
func (b *Backend) Watermarks() map[string]int64 {
	wms := make(map[string]int64, len(b.services))
	for name, s := range b.services {
		wms[name] = s.CurrentWatermark()
	}
	return wms
}

// RestoreWatermark sets the watermark of timer service name as a restore
// brings it back: nothing fires (timers at or below wm fire at the next
// AdvanceWatermark), and a watermark never goes down (a wm below the
// current one changes nothing). An unregistered name is an error matching
// ErrUnknownTimerService. Writer goroutine only.
func (b *Backend) RestoreWatermark(name string, wm int64) error {
	s, ok := b.services[name]
	if !ok {
		return fmt.Errorf("%w: %q (registered: %v)", ErrUnknownTimerService, name, b.names)
	}
	s.restoreWatermark(wm)
	return nil
}

// RestoreWatermarks is RestoreWatermark for each entry of wms, a map by
// the names a checkpoint gave the services, which the restore plan
// translates (RestoreAs, DropOnRestore); it checks every name before it
// sets any.
func (b *Backend) RestoreWatermarks(wms map[string]int64) error {
	for _, file := range slices.Sorted(maps.Keys(wms)) {
		name, ok := b.restoredName(file)
		if !ok {
			continue // DropOnRestore
		}
		if _, ok := b.services[name]; !ok {
			return fmt.Errorf("%w: %q (registered: %v)", ErrUnknownTimerService, name, b.names)
		}
	}
	for file, wm := range wms {
		if name, ok := b.restoredName(file); ok {
			b.services[name].restoreWatermark(wm)
		}
	}
	return nil
}

func (s *NamespacedTimerService[K, N]) restoreWatermark(wm int64) { s.watermark = max(s.watermark, wm) }
