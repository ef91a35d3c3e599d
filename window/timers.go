package window

import "github.com/cowstate/cowstate"

// Late reports whether window w has ended at watermark wm: its last
// timestamp is at or below wm, so its end-of-window timer has fired (or
// would fire at once). Flink drops the elements of such windows (with no
// allowed lateness); so do RegisterEnd and Sessions.Add.
func Late(w TimeWindow, wm int64) bool { return w.MaxTimestamp() <= wm }

// RegisterEnd registers the event-time timer of window w for key at
// w.MaxTimestamp(), End-1, as Flink's EventTimeTrigger does: it fires when
// the watermark reaches the window's last timestamp, with the window as
// its namespace. Registering it again for every element of the window
// keeps one timer. If w is late at the service's current watermark
// (Late), nothing is registered and late is true: drop the element, as
// Flink does. O(log timers). Writer goroutine, like the service.
func RegisterEnd[K any](timers *cowstate.NamespacedTimerService[K, TimeWindow], key K, w TimeWindow) (late bool, err error) {
	if Late(w, timers.CurrentWatermark()) {
		return true, nil
	}
	_, err = timers.RegisterEventTime(key, w, w.MaxTimestamp())
	return false, err
}

// DeleteEnd deletes the end-of-window timer of w for key (Flink's
// Trigger.clear), for a window purged before its end; deleting a timer
// that fired or was never registered is a no-op. O(log timers).
func DeleteEnd[K any](timers *cowstate.NamespacedTimerService[K, TimeWindow], key K, w TimeWindow) error {
	_, err := timers.DeleteEventTime(key, w, w.MaxTimestamp())
	return err
}
