package checkpoint

import (
	"context"
	"log/slog"
	"time"
)

// CheckpointEvent is what a store reports of one checkpoint or savepoint
// once it has committed or failed (Options.OnCheckpoint, Options.Logger):
// the figures a job exports as metrics.
type CheckpointEvent struct {
	ID uint64
	// Kind is what was written: KindFull, KindIncremental or
	// KindSavepoint (for a failure, what was being written).
	Kind Kind
	// Bytes is the size of the segment objects the checkpoint wrote
	// (the manifest excluded), as the storage holds them: for an
	// incremental checkpoint, its delta; 0 if it failed before one was
	// committed.
	Bytes int64
	// Entries is the state entries and timers written: all of them for a
	// full checkpoint or savepoint, the changes for an incremental one.
	Entries int64
	// Capture is the time the backend's writer spent capturing it.
	Capture time.Duration
	// Write is the time from capture to commit or failure on the
	// checkpoint's own goroutine (diff, encode, write, sync, commit);
	// Sync and Commit are parts of it.
	Write time.Duration
	// Sync is the time the storage took to make its segments durable
	// (ObjectWriter.Commit: an fsync and a link for DirStorage, the
	// upload's completion for object storage).
	Sync time.Duration
	// Commit is the time taken to commit the manifest that lists it.
	Commit time.Duration
	// Err is why it failed (matching ErrStorage, ErrFenced...), nil if
	// it committed.
	Err error
}

// timeCommit records the time since start as the manifest commit's.
func (cp *Checkpoint) timeCommit(start time.Time) { cp.commitT = time.Since(start) }

// report hands cp's event to the options' callback and logger; it runs on
// cp's goroutine, after the write and before Done.
func (s *Store) report(cp *Checkpoint) {
	if s.opts.OnCheckpoint == nil && s.opts.Logger == nil {
		return
	}
	_, entries := cp.Progress()
	e := CheckpointEvent{ID: cp.id, Kind: cp.kind, Bytes: cp.written, Entries: entries,
		Capture: cp.capture, Write: cp.write, Sync: cp.sync, Commit: cp.commitT, Err: cp.err}
	if s.opts.OnCheckpoint != nil {
		s.opts.OnCheckpoint(e)
	}
	if l := s.opts.Logger; l != nil {
		attrs := []slog.Attr{slog.Uint64("id", e.ID), slog.String("kind", string(e.Kind)),
			slog.Int64("bytes", e.Bytes), slog.Int64("entries", e.Entries),
			slog.Duration("capture", e.Capture), slog.Duration("write", e.Write),
			slog.Duration("sync", e.Sync), slog.Duration("commit", e.Commit), slog.String("storage", s.st.String())}
		if e.Err != nil {
			l.LogAttrs(context.Background(), slog.LevelWarn, "checkpoint failed", append(attrs, slog.Any("err", e.Err))...)
			return
		}
		l.LogAttrs(context.Background(), slog.LevelInfo, "checkpoint committed", attrs...)
	}
}

// Pending returns the number of checkpoints taken and neither confirmed
// nor aborted (each pins a snapshot of the backend; Options.MaxPending
// bounds them). Any goroutine.
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
