// Package statetable holds the keyed state of a stream-processing backend:
// Flink's five state kinds, typed by generics, in persistent maps that one
// capture freezes in O(1).
//
// A Table is the registry of one backend's states. Each state is created
// once by name with its codecs (NewValue, NewList, NewMapState,
// NewReducing, NewAggregating) and addressed by (key, namespace): the key
// is the record's key, the namespace what Flink calls it (a window, or
// VoidNamespace). An entry's place is decided by the encoded key: HashKey
// gives the key hash, KeyGroupOf its key group (one of MaxParallelism),
// EntryHash orders the entries of a state by key group, then key hash,
// then namespace hash. A table owns a KeyGroupRange; writing a key of
// another key group is an error (ErrKeyGroupNotOwned), which is what lets a
// checkpoint be split and restored into another number of instances.
//
// Every state's entries live in cow.Map maps owned by the table's
// cow.Owner, which the backend shares with its timers. After
//
//	c := owner.Capture()  // O(1)
//	snap := table.View(c) // O(number of states)
//
// snap reads every state as it was at the capture (the states' At
// methods), from any goroutine, while the writer goes on; the first write
// to a node after the capture copies that node only. DiffState walks what
// changed between two snapshots in time proportional to the changes (the
// structural diff behind incremental checkpoints); Export and the
// snapshot package write and read a snapshot's entries in key group order.
//
// Costs: a Get or Put is one hash of the composite key and one lookup of
// a hash trie of depth about log32(entries); a list or map state's
// elements are a persistent structure of their own, so appending to a list
// or putting one map entry copies a path, not the whole value.
//
// # Time-to-live
//
// A state registered with a TTL (NewValueWithTTL and the other kinds'
// ...WithTTL constructors) expires each value, list element and map
// user key a TTL after it was last written (or read, with
// UpdateOnReadAndWrite), on the table's clock (Config.Clock, or a time
// pinned with PinTime). It stores its values stamped with an int64
// expiration timestamp; a state without TTL stores them bare, so TTL
// costs nothing where it is off. What has expired is removed by the read
// that meets it and by CleanupExpired, a cursor over each TTL state that
// visits a bounded number of entries per call; snapshots read at their
// capture's time, and snapshot files leave out what had expired by then.
//
// # Caveats
//
//   - A Table and its states belong to one writer goroutine: every write,
//     every NewX and View. A Snapshot may be read from any goroutine,
//     concurrently with the writer, until its capture is released; a read
//     after that panics with an error matching cow.ErrReleased.
//   - Values are stored as given: a state of a pointer or slice type
//     aliases the caller's memory, and a capture cannot freeze what the
//     caller mutates in place. Store values, or copies.
//   - Codecs define identity: two keys are equal when their encodings are.
//     A codec's id is recorded in checkpoints; restoring with another codec
//     is ErrStateMismatch, not a silent reinterpretation.
//   - Keys of at most 31 encoded bytes (key plus namespace) are stored
//     inline, without a pointer; longer ones as strings, which costs an
//     allocation per new entry.
package statetable
