// Package timerqueue holds the timers of a stream-processing state backend:
// one Queue per time domain (event time, processing time), like the timer
// service of Apache Flink's heap backend, built on cow.Tree so that timers
// are captured in O(1) at the same logical point as the keyed state.
//
// A Timer is (Timestamp, Key, Namespace), with Key and Namespace the encoded
// bytes of the user's key and namespace. A queue holds each timer once
// (registering it again is a no-op), remembers the key group of its key,
// and fires timers in Compare order with Advance: a watermark for event
// time, the clock for processing time (Next says when to wake up).
//
// # Capture with the state
//
// The "Slow flink checkpoint" problem is that timers were copied
// synchronously at every checkpoint, stalling processing, and that an
// asynchronous copy must still see timers and state at one point. Here a
// queue's tree shares its cow.Owner with the state tables, so
//
//	c := owner.Capture()         // O(1): freezes state and timers together
//	state := table.View(c)       // the state at this point
//	timers := events.View(c)     // the timers at this point
//
// and the writer goes on firing and registering while another goroutine
// writes both out (per key group with InKeyGroups) and releases c. A
// checkpoint's timer delta is Diff of two snapshots, which costs what
// changed.
//
// # Order
//
// Compare orders timers by timestamp, then by key bytes, then by namespace
// bytes. It is total (equal timers are the same timer, which is how a queue
// deduplicates) and depends on the timers alone: not on registration order,
// insertion history or any per-process hash. So the timers due at one
// watermark fire in the same order in every run, before and after a
// restore, and a snapshot's timers are written in a canonical order.
//
// # Caveats
//
//   - Single writer: every method of Queue belongs to the owner's writer
//     goroutine. Snapshots may be read by any number of goroutines
//     concurrently with the writer; Snapshot.Release may be called from any
//     goroutine.
//   - Snapshot lifetime: a Snapshot pins its capture until released; while
//     it is live the writer copies each tree node the first time it writes
//     it. Reading a snapshot after its capture is released panics. Views
//     taken under one capture share it: releasing one releases all.
//   - Callbacks run on the writer goroutine, inside Advance, one at a time.
//     They may Register and Delete timers of the same queue and write any
//     structure of the owner (a due timer they register fires in the same
//     Advance; a pending one they delete never fires), and take captures,
//     but must not call Advance on the same queue. A long callback delays
//     every later timer: Advance holds no lock, it is just a loop.
//   - Key groups are stored, not computed: the caller passes the key group
//     of each timer's key and must pass the same one every time.
package timerqueue
