// Package cowstate is an in-memory keyed-state and timer engine for stream
// processors, in the spirit of Apache Flink's heap state backend, built on
// persistent copy-on-write structures (package cow).
//
// A Backend holds the keyed states of one operator subtask (value, list,
// map, reducing and aggregating state, per key and namespace, partitioned
// into key groups) and its timers (event time and processing time,
// deduplicated by timestamp, key and namespace). Backend.Snapshot captures
// all of it at one version in O(number of states), whatever the number of
// keys and timers: timers fired and state written after the capture never
// show in it, and nothing from before is missing.
//
//	b, _ := cowstate.New(cowstate.Config{})
//	count, _ := cowstate.Value[string, int64](b, "count") // codecs inferred
//	count.Update("user-1", func(n int64) int64 { return n + 1 })
//	snap := b.Snapshot() // O(1) in the state size; read it on any goroutine
//	defer snap.Release()
//	n, _ := count.GetAt(snap, "user-1")
//
// A job imports this package, package checkpoint for its checkpoint loop
// and package window for windows (window.Count, Reduce, Aggregate). The
// Namespaced... constructors register states per key and namespace with
// explicit codecs; Timers registers a timer service per key, and
// NamespacedTimers one per key and namespace.
//
// # Iteration
//
// Every sequence is a plain iter.Seq (iter.Seq2 for pairs, such as a map
// state's user keys and values). A read that can fail returns its error
// before the sequence: a read at a snapshot of another backend, say
// (KeysAt, EventTimersAt, ListState.Get for a key of a key group the
// backend does not own). The sequence itself never fails: what it decodes
// was encoded by the state's own codecs, or checked to decode by the
// restore that read it. A loop over the live state (Keys, EventTimers, a
// list or map of one key) sees what was there when the loop began and may
// write any state, through a capture held while the loop runs and
// released when it ends, however it ends.
//
// # Caveats
//
//   - Single writer: a Backend, its states and its timer services belong to
//     one goroutine; timer callbacks run on it. Snapshots may be read and
//     released from any goroutine. Like the builtin map, two goroutines
//     writing one backend at once usually make one of them panic with
//     "cowstate: concurrent writes"; the check is best effort (run tests
//     with -race) and costs writes a flag, reads nothing.
//   - Snapshot lifetime: reading a released snapshot panics; writing one
//     (WriteSnapshot, WriteSavepoint, StartWrite), or releasing it while it
//     is being written, is an error matching ErrReleased instead. A live
//     snapshot makes the writer copy what it pins (once per node), so
//     release snapshots when done.
//   - Aliasing: values handed in are kept as given and never mutated by the
//     engine; do not mutate them afterwards. Values handed out (Get, list
//     elements, map values, accumulators given to reduce and aggregate
//     functions) are the stored ones: treat them as read-only, and make
//     reduce and aggregate functions return new values rather than mutate
//     their arguments.
//   - Key groups: a key's key group is a function of xxhash64 over its
//     encoding and the max parallelism, stable across processes. Writing a
//     key of a key group the backend does not own is an error matching
//     ErrKeyGroupNotOwned.
package cowstate
