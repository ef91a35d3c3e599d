// Package delta computes, encodes, merges and applies incremental
// checkpoints: the net difference between two captured versions of a
// backend, found by diffing their persistent structures, so its cost
// follows what changed and not the size of the state.
//
// Diff takes two Versions (captures of one backend) and returns a Delta:
// per key group, the keyed-state entries put, deleted or patched (a list or
// map cell that changed in a few elements is a patch of those elements, not
// a rewritten cell) and the timers registered or removed. Merge composes a
// chain of consecutive deltas into one, and MergeFiles does it file to
// file, writing what Write(Merge(...)) writes from the encoded sections;
// Apply replays a delta on a backend holding its base; Write and
// Open/Read are the file format, and OpenBytes opens a file held in
// memory without copying its sections.
//
// # Delta file format, version 2
//
// All integers are big-endian unless they are varints (encoding/binary's
// uvarint and zig-zag varint). A string or blob is uvarint(length) + bytes.
//
//	header:
//	  magic     8 bytes  "CWDELTA\x01"
//	  version   u16      2 (1 is still read: its metadata is that of
//	                     snapshot format 1, without TTL)
//	  base      u64      checkpoint id the delta applies to
//	  target    u64      checkpoint id the delta produces
//	  metaLen   u32
//	  meta      metaLen bytes: the newer version's metadata, encoded as in
//	            the snapshot format of the same version number
//	            (snapshot.AppendMeta; Version is 0)
//	  headerSum u64      xxhash64 of every header byte before it
//	sections, one per key group with changes, ascending, back to back:
//	  records, each starting with a tag byte:
//	    1 state:  uvarint state (position in meta's states), uvarint count,
//	              then count entries in composite-key byte order:
//	                op byte: 1 put, 2 delete, 3 patch, 4 put then patch
//	                key blob (composite key, as in snapshots)
//	                cell blob                       (ops 1 and 4)
//	                uvarint parts, then per part,   (ops 3 and 4)
//	                in part-key byte order:
//	                  flag byte: 0 set, 1 delete
//	                  part key blob (map: encoded user key; list: uvarint
//	                  position)
//	                  value blob                    (flag 0)
//	    2 timers: uvarint service (position in meta's timer services),
//	              domain byte (0 event time, 1 processing time), uvarint
//	              count, then count timers in firing order:
//	                present byte (1 registered, 0 removed), varint
//	                timestamp, key string, namespace string
//	    0 end of section
//	index:
//	  uvarint n, then n entries: uvarint key group, uvarint offset,
//	  uvarint length, u64 xxhash64 of the section
//	footer (32 bytes):
//	  indexOff u64, indexLen u64, indexSum u64 (xxhash64 of the index),
//	  magic 8 bytes "CWDELTND"
//
// The encoding is canonical: equal deltas give equal bytes. A reader checks
// the header and index checksums and the footer on Open (a truncated file
// lacks the footer), and each section's checksum before decoding it; every
// length is bounded by the bytes present.
//
// Apply semantics: a put stores the cell whole, a delete removes the entry
// (absent is fine), a patch sets or deletes the listed parts of the base's
// cell, a timer is registered or removed (idempotently). Parts of a list are
// positions: a patched list must end with consecutive positions from 0.
//
// States with a TTL (the metadata's state flag): cells are encoded as in
// snapshots of format 2, and a part's value (a list element, a map value)
// is prefixed with its expiration timestamp, 8 bytes big-endian. Entries
// the TTL cleanup removed are deletes, elements it removed from a list or
// map patches (or puts) of the cell.
package delta
