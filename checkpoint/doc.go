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
// State restored so is exactly once; output is exactly once when it goes
// through a Sink given as LoopOptions.Sink: the records written before a
// checkpoint are prepared under it and committed once it is durable, and
// Resume commits or drops what a crashed owner left. FileSink is one for
// files (Example_fileSink); CallbackSink stages each checkpoint's records
// in a Storage and hands them to a function once the checkpoint is
// durable, for a system downstream whose writes are idempotent by
// checkpoint id; a Sink for another system needs transactions that can be
// prepared durably and committed idempotently (see Sink).
//
// # Which restore to call
//
//	Resume[M]                  a job's loop: take the store over, restore the newest
//	                           intact checkpoint with the job's metadata, recover its Sink
//	Peek[M]                    the same checkpoint and metadata, read-only (tools, tests)
//	Store.Restore              the store's owner: checkpoint id (0: newest), never an older one
//	Store.RestoreNewestIntact  the owner: the newest that restores, reporting the skipped
//	Store.RestoreSavepoint     the owner: a savepoint
//	RestoreFrom                read-only, from one or several stores (rescaling in or out)
//	RestoreInstances           read-only, a job of several instances (OpenInstance),
//	                           rescaled to the key groups of b
//
// The backend's own RestoreSnapshot (one snapshot file) and RestoreChains
// (a full snapshot and its deltas) read files that are not in a store.
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
//     checkpoint, and what it leaves behind is never taken for part of the
//     store (see Crash leftovers below).
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
//   - Deleted newest manifests are found out from the manifests cleanup
//     removed: cleanup removes manifest n only once n+4 is committed, so a
//     missing number below the newest present proves that newer ones
//     existed, and Open, Restore and Verify report the newest manifests as
//     missing (ErrCorrupt; Options.SkipDamaged takes over from the newest
//     present). A store whose cleanup never removed a manifest (fewer than
//     five commits), or whose removed manifests came back, cannot tell:
//     deleting its newest manifest rolls it back one commit unnoticed.
//   - Fencing stops a stale writer at its next commit, not before: until
//     then it may still write segments (under its own epoch, which the new
//     owner never references) and remove its own garbage.
//   - A restore holds the chain's segments in memory while it restores them.
//     A segment of more than 64 MiB is first checked against the skeleton
//     xxhash64 its manifest records (a few small reads), so a manifest
//     that claims a size the object does not hold fails with ErrCorrupt
//     naming it instead of allocating that size, and one larger than the
//     memory the process may use (physical memory, GOMEMLIMIT) fails with
//     ErrMismatch. Verify reads such objects in bounded memory.
//
// # Timeouts
//
// Every storage call the store makes runs under a context: the caller's
// for Open, Restore, Cleanup, SetRetention, Abort, DeleteSavepoint,
// Inspect and Verify; for a checkpoint or savepoint, the context given to
// Checkpoint, bounded by Options.CheckpointTimeout (DefaultCheckpointTimeout,
// 10 minutes, as Flink's; negative: none), so that a storage that stops
// answering fails it with context.DeadlineExceeded. After a failed write
// the store lists the storage to tell whether a newer owner fenced it,
// under the same context: a write whose context ended is not looked into.
// Close cancels the checkpoints in flight and waits at most
// Options.CloseTimeout (DefaultCloseTimeout, 10 seconds) for them.
//
// A context bounds only what honours it. The bucket storage of package
// storeurl (S3, GCS, Azure) also bounds each request by its request
// timeout (storeurl.DefaultRequestTimeout, 1 minute; SetRequestTimeout, or
// request_timeout= in the URL), since an endpoint that accepts connections
// and never answers would otherwise hold a call without a deadline for
// ever. DirStorage's calls are system calls, which no context interrupts:
// a file system hung in the kernel holds them, and Close returns after
// its timeout with an ErrStorage naming the checkpoints still running.
//
// # Crash leftovers
//
// A process killed at any point leaves, besides what it committed:
//
//   - in a directory, temporary files named <object>.tmp-<12 hex digits>,
//     of the segments and of the manifest it was writing (an object store
//     discards an upload that was not completed; an incomplete multipart
//     upload is the bucket's lifecycle rules' to expire);
//   - segments of the checkpoints it had not committed, under its epoch.
//
// None is ever listed as part of the store. The next owner's cleanup,
// which follows each of its commits, removes the segments and segment
// temporaries of older epochs at once, and a manifest's temporary files
// with the manifests of their number (once four newer manifests are
// committed: a stale writer may still be committing one of the newest
// numbers, and must then find it taken, not vanished). A writer slower
// than that, whose temporary file is gone when it commits, finds a newer
// manifest listed: taking the store, it starts over from the newest; a
// store that owned it is fenced.
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
