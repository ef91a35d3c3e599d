// Package snapshot is the file format of cowstate's snapshots and
// savepoints, its writer and its reader. It knows the backend only through
// the Source (what Write reads: one captured version) and Sink (what Restore
// fills) interfaces, which package cowstate implements.
//
// # Format, version 2
//
// All integers are big-endian unless marked uvarint/varint (encoding/binary's
// variable-length encodings). A blob is a uvarint length followed by that
// many bytes.
//
//	file     = header section* index footer
//	header   = magic "CWSNAP\x00\x01" (8 bytes)
//	           format version u16 (2; version 1 is still read)
//	           metadata length u32
//	           metadata
//	           metadata checksum u64 (xxhash64 of the metadata bytes)
//	metadata = flags u8 (bit 0: savepoint)
//	           version u64 (the capture's version; 0 in savepoints)
//	           max parallelism uvarint
//	           first key group uvarint, last key group + 1 uvarint
//	           state count uvarint, then per state (sorted by name):
//	               name blob, kind u8 (statetable.Kind), codec count uvarint,
//	               codec ID blobs (key, namespace, then the kind's values),
//	               flags u8 (bit 0: the state has a TTL; not in version 1)
//	           timer service count uvarint, then per service (by name):
//	               name blob, key codec ID blob, namespace codec ID blob
//	section  = one per key group that has state or timers, ascending:
//	           records, then tag 0 (end). A record is
//	             tag 1 (state): state index uvarint (into the metadata),
//	               entry count uvarint, then per entry a key blob (uvarint
//	               key length, key bytes, namespace bytes) and a cell blob
//	             tag 2 (timers): service index uvarint, domain u8 (0 event
//	               time, 1 processing time), timer count uvarint, then per
//	               timer: timestamp varint, key blob, namespace blob
//	index    = section count uvarint, then per section: key group uvarint,
//	           file offset uvarint, length uvarint, checksum u64 (xxhash64
//	           of the section bytes)
//	footer   = index offset u64, index length u64, index checksum u64,
//	           magic "CWSNAPND"
//
// Cells: value, reducing and aggregating state store the value's codec
// encoding; list state stores uvarint count then one blob per element; map
// state stores uvarint count then (user key blob, value blob) pairs. In a
// state with a TTL, each value, element and map value is prefixed with its
// expiration timestamp (milliseconds of the writer's processing-time clock,
// 8 bytes big-endian), and what had expired at the capture is left out:
// elements and map entries one by one, entries with nothing left whole.
//
// Version 1 is version 2 without the per-state flags byte: every state
// reads as without TTL. Restored into a state with a TTL, its values are
// stamped as written at the restore.
//
// Entries within a section come in canonical order (entry hash, then key
// bytes), map cells in the hash order of their encoded user keys (ties by
// bytes), timers in firing order, states and services sorted by name: the
// same logical state always gives the same bytes. A savepoint is such a
// file with version 0 and the savepoint flag: full, canonical and
// self-contained (it refers to no other file).
//
// A reader checks the footer, then the metadata and index checksums and
// bounds, and a section's checksum before decoding it; restoring a key-group
// range reads only those sections (io.ReaderAt). Every length is checked
// against the bytes actually present before anything is allocated; every
// problem is an error matching ErrCorrupt that says what and at which
// offset.
//
// # Caveats
//
//   - Write buffers the timers of every key group while it writes (timers are
//     ordered by time, sections by key group): memory in the order of the
//     encoded timers.
//   - Write runs on the goroutine that calls it; a Source must read only what
//     its capture froze.
package snapshot
