// Package window holds event-time windows on a cowstate backend: a window
// operator (Count, Reduce, Aggregate), and Flink's building blocks beneath
// it: TimeWindow and its Codec (for window namespaces), tumbling, sliding
// and session assigners, the merging of session windows (Sessions, through
// the states' MergeNamespaces) and the end-of-window timer (RegisterEnd,
// DeleteEnd).
//
// The operator is the whole of a windowed aggregation:
//
//	views, err := window.Count[string](b, "views", window.Tumbling{Size: 60_000})
//	late, err := views.Add(e.User, e.Time, 1) // per element; a late one is dropped
//	dropped, err := views.AddEach(users, func(i int) (int64, int64) { return times[i], 1 }) // or per batch
//	_, err = views.AdvanceWatermark(wm, func(user string, w window.TimeWindow, n int64) error {
//		... emit n for (user, w)
//	})
//
// A job that needs more (a map per window, its own triggers) keys its state
// by (key, window) and fires each window by an event-time timer at its
// last timestamp:
//
//	pages, _ := cowstate.NamespacedMap(b, "pages", statetable.String, window.Codec, statetable.String, statetable.Int64)
//	timers, _ := cowstate.NamespacedTimers(b, "windows", statetable.String, window.Codec)
//	minute := window.Tumbling{Size: 60_000}
//
//	w, err := minute.Assign(e.Time)       // per element
//	late, err := window.RegisterEnd(timers, e.User, w)
//	if !late { n, _, _ := pages.Get(e.User, w, e.Page); pages.Put(e.User, w, e.Page, n+1) }
//
//	timers.AdvanceWatermark(wm, func(user string, w window.TimeWindow, _ int64) error {
//		... emit pages of (user, w), then pages.Clear(user, w)
//	})
//
// Time is int64 in the unit of the job's timestamps (milliseconds, as in
// Flink); sizes, slides, gaps and offsets are in that unit. Windows are
// aligned to the epoch plus the offset, negative timestamps included.
//
// # Caveats
//
//   - Lateness is Flink's with no allowed lateness: a window whose last
//     timestamp is at or below the timer service's watermark is late, and
//     its elements are to be dropped (RegisterEnd and Sessions.Add say so
//     and change nothing). Restore the watermark with the state (the
//     checkpoint package's Loop does) or late windows open again.
//   - A timestamp whose windows would start below the smallest int64 or end
//     above the largest is an error matching ErrRange, never a wrapped
//     window; an assigner that cannot assign is an ErrInvalid.
//   - Sessions and the timer helpers belong to the backend's writer
//     goroutine; assigners, TimeWindow and Codec to any.
package window
