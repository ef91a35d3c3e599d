// Package checkpoint is cowstate's checkpoint store: it takes a backend's
// checkpoints (full or incremental, as a Policy decides) and savepoints
// into a Storage, keeps what a Retention says, and restores them, into one
// backend or, rescaled, into several.
//
// # Use
//
//	st, _ := checkpoint.Dir("/var/lib/job/checkpoints")
//	store, err := checkpoint.Open(ctx, backend, st, checkpoint.Options{AutoConfirm: true})
//	if _, err := store.Restore(ctx, 0); err != nil && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
//		return err // damaged, or does not fit: never start fresh over it
//	}
//	...
//	cp, err := store.Checkpoint(ctx, id) // O(1) capture; written in the background
//
// A job can leave that to a Loop, on its writer goroutine: Resume restores
// the newest intact checkpoint with the job's metadata and watermarks, or
// starts fresh, and Processed takes a checkpoint every interval or N
// records, one in flight, confirmed when durable:
//
//	loop, start, err := checkpoint.Resume[Offsets](ctx, backend, st, checkpoint.LoopOptions{Interval: 10 * time.Second})
//	for rec := range source.From(start.Meta) { // start.Meta: the zero Offsets when fresh
//		... process rec ...
//		if err := loop.Processed(ctx, 1, source.Offsets()); err != nil {
//			return err
//		}
//	}
//
// # Objects and the commit protocol
//
// A store is a flat namespace of objects, each written once and never
// modified (see Storage):
//
//	manifest-<seq>                          the whole store at one commit
//	e<epoch>-full-<id>.cws                  a full snapshot (snapshot format)
//	e<epoch>-delta-<base>-<target>.cwd      a delta (delta format)
//	e<epoch>-savepoint-<id>.cws             a savepoint (snapshot format)
//
// A manifest is JSON followed by a line with its xxhash64. It lists every
// retained checkpoint and savepoint with its segments (name, size, xxhash64,
// and for deltas the checkpoints they lead from and to), the highest
// checkpoint and savepoint ids ever committed, and the epoch of the owner
// that committed it. The manifest with the highest sequence number is the
// store; older ones are history, and cleanup keeps only the newest few.
//
// A commit creates manifest seq+1 with a create-only write, which fails if
// the name exists: so of two writers that read the same manifest, exactly
// one commits. Open takes ownership by committing the next manifest with
// the epoch raised; from then on the previous owner's next commit finds its
// number taken, reads who took it, and the store is fenced (ErrFenced): it
// never commits again, and every later call says so. Segments carry their
// writer's epoch in their names, so two owners never write one object, and
// a writer only ever removes objects of its own epoch or older that its own
// newest manifest no longer references. This is the protocol of the table
// and LSM formats built on object storage (SlateDB's manifest, Delta Lake's
// log, Iceberg's metadata): it needs no lock service and no rename, only a
// create-only write, which a local directory offers (DirStorage links a
// synced temporary file into place) and S3, GCS and Azure offer as
// conditional writes.
//
// # Guarantees
//
//   - A checkpoint is committed when its handle is Done without error: its
//     segments and its manifest are durable, and it restores, exactly, until
//     the retention drops it (never while it is the confirmed base, pinned,
//     or among the KeepLast newest). A crash at any point loses no committed
//     checkpoint; what a crash leaves half-written is never listed and is
//     removed by the next owner's cleanup.
//   - Checkpoint and savepoint ids only go up, across owners and restarts: an
//     id at or below the newest ever committed is refused (ErrInvalid), and
//     no committed object is ever overwritten.
//   - One owner commits at a time. A writer fenced by a newer owner cannot
//     commit a manifest; the newer owner starts from what was committed.
//   - Every segment is checked against the size and xxhash64 its manifest
//     records as it is read, before its content is used, by restores and by
//     the merges of delta chains: a segment with other content (damage,
//     another writer's file, a manifest edited by hand) is an ErrCorrupt
//     naming it, never a silently wrong state.
//   - A restore is all or nothing: every segment of the chain is read and
//     checked, and every file's states and timer services against the
//     backend's registrations, before the first entry goes in; if anything
//     fails after that, the backend is given back empty. A restore into a
//     backend that holds state is refused.
//   - Restore(0) restores the newest checkpoint or fails naming what is
//     damaged; only RestoreNewestIntact falls back to an older one, and it
//     reports what it skipped.
//
// And what it does not promise:
//
//   - Durability is the storage's: DirStorage syncs files and the directory;
//     a disk that loses synced data, or an operator who deletes objects,
//     loses checkpoints (Verify finds out which).
//   - Fencing stops a stale writer at its next commit, not before: until
//     then it may still write segments (under its own epoch, which the new
//     owner never references) and remove its own garbage.
//   - A restore holds the chain's segments in memory while it restores them.
//
// # Errors
//
// Every error matches one of the sentinels in errors.go (or is a context's
// error) and wraps its cause: see ErrNoCheckpoint.
//
// # Concurrency
//
// A Store belongs to its backend's writer goroutine: Checkpoint, Savepoint,
// Confirm, Abort, Poll, Restore, Cleanup, SetRetention, SetPolicy and
// DeleteSavepoint run there. Each checkpoint is written, and committed, on
// a goroutine of its own that reads only the snapshot it was given; with
// Options.AutoConfirm the confirmation happens on the writer's next call to
// the store, so no goroutine of the store ever touches the backend.
// Checkpoint handles, Checkpoints, Savepoints, Inspect and Verify may be
// used from any goroutine.
package checkpoint
