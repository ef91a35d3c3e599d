// Package pebblestate is a contract.Backend on Pebble
// (github.com/cockroachdb/pebble/v2): keyed state and timers kept in an
// LSM tree on disk rather than in memory, as Flink's RocksDB backend keeps
// them beside its heap backend. It is a module of its own, so that cowstate
// does not depend on Pebble, and it passes the whole conformance suite of
// package rapidtest (every machine and every operation group, TTL
// included), run by its tests on an in-memory filesystem, and it reads and
// writes cowstate's savepoints.
//
//	b, err := pebblestate.Open(pebblestate.Options{
//		Config: cowstate.Config{MaxParallelism: 128},
//		Dir:    "/var/lib/job/state", // vfs.NewMem() as FS for tests
//	})
//	defer b.Close()
//
// # Layout
//
// Every entry, map user key and timer is one key of one keyspace, and each
// starts with its key group (two bytes, big-endian), so the data of a
// key-group range is one key range: a snapshot has one section per key
// group, and a share of a rescaled job restores only its sections. Map
// states keep a key per user key (a ClearState is one range deletion);
// lists are one value, rewritten by Add. Timers sort, within a key group,
// in firing order (timestamp with its sign bit flipped, then the escaped
// key and namespace bytes); the backend keeps the head of every key
// group's queue in memory to find the next due timer. keys.go gives the
// encoding.
//
// # Views and snapshots
//
// Capture is a Pebble snapshot: O(1) in the data, and it pins the versions
// it reads until Release (an unreleased view keeps old versions from being
// compacted away). WriteSnapshot writes the view's key groups in this
// package's format (view.go): a header, one section of records per key
// group, an index of the sections with a CRC-32C each, the registered
// states and timer services, and a footer locating the index.
// RestoreSnapshot reads the index and the owned sections only, checks every
// record and every CRC, and on any error (ErrCorrupt, ErrMismatch, a
// cancelled context) leaves the backend empty.
//
// # Savepoints and TTL
//
// RestoreSavepoint reads a cowstate savepoint (package snapshot's format,
// through package savepoint) for the owned key groups, registering the
// states and timer services it holds; WriteSavepoint writes a View as a
// canonical savepoint through savepoint.Write, one key group in memory at
// a time, so a savepoint round-trips cowstate -> pebblestate -> cowstate
// byte for byte. Each state's codec IDs and TTL flag are kept in the
// database (a state registered through the contract API alone has
// statetable.String's), so the savepoint names the codecs the file did;
// savepoint.go gives the details.
//
// The backend is a contract.TTLBackend: in a state registered with
// RegisterStateTTL every value, list element and map value is stored
// with its expiration stamp in front (8 bytes, big-endian, as in a
// savepoint's cells). Expired is stamp <= clock: it reads as absent, and
// views, snapshots and savepoints leave it out; CleanupExpired removes it
// (ttl.go). A savepoint's TTL state must be registered with its TTL before
// the restore: the duration is not in the file.
//
// # Caveats
//
//   - Single writer: every Backend method but Close belongs to one
//     goroutine, and timer callbacks run on it; Views may be read, written
//     and released from any goroutine. Release every View before Close.
//   - The states and timer services are registered again after every Open
//     (their kinds are kept in the database and checked).
//   - Writes are not synced unless Options.Sync: a crash may lose the last
//     writes, which a job restores from its last checkpoint.
//   - A snapshot (WriteSnapshot) restores only into a pebblestate
//     backend, and does not carry codec IDs; savepoints are what moves a
//     job between backends.
package pebblestate
