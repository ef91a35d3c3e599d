package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cowstate/cowstate"
)

// LoopOptions configures a Loop. A checkpoint is due when Interval has
// passed or Records records were processed since the last one was taken,
// whichever comes first; with neither set, only Sync takes checkpoints.
type LoopOptions struct {
	// Store configures the store the loop opens. Its AutoConfirm is
	// ignored: the loop confirms each checkpoint itself once it is
	// durable.
	Store    Options
	Interval time.Duration
	Records  int
	// TolerableFailures is how many checkpoints in a row may fail with
	// Processed still returning nil (Failures counts them), as Flink's
	// tolerable checkpoint failure number; 0: Processed returns the first
	// failure. A fenced store (ErrFenced) is never tolerated.
	TolerableFailures int
	// Now is the clock of Interval; nil means time.Now.
	Now func() time.Time
	// Sink, if set, is the job's output, committed exactly once by two
	// phases on the loop's checkpoints (see Sink): Resume recovers it,
	// each checkpoint prepares it, each durable checkpoint commits it.
	Sink Sink
}

// Loop is the checkpointing of a job on its writer goroutine: it takes a
// checkpoint of the backend when one is due, at most one in flight, confirms
// it once it is durable (it becomes the base of the next incremental one),
// and stores with each the job's metadata M (source offsets, transaction
// ids: what the job resumes from), encoded as JSON, and every timer
// service's watermark. Resume restores the newest intact checkpoint with
// them, or starts fresh, in one call.
//
// A Loop has no goroutine of its own: Processed, Sync and Close run on the
// backend's writer goroutine, and between them only the store's writers
// run, reading the snapshots they were given.
type Loop[M any] struct {
	b        *cowstate.Backend
	store    *Store
	opts     LoopOptions
	now      func() time.Time
	inFlight *Checkpoint
	nextID   uint64
	records  int       // processed since the last checkpoint was taken
	taken    time.Time // when the last checkpoint was taken (or the loop started)
	failures int       // checkpoints failed in a row
	stats    LoopStats // counts since the loop started
	last     *Manifest // newest durable checkpoint: taken by the loop, or restored
	fatal    error     // the store is fenced: every call returns it
}

// loopMeta is what a Loop stores in a checkpoint's Manifest.UserMeta.
type loopMeta struct {
	Loop       int              `json:"loop"` // loopFormat
	Meta       json.RawMessage  `json:"meta"`
	Watermarks map[string]int64 `json:"watermarks"`
}

const loopFormat = 1

// Start is what Resume found: the checkpoint it restored with the job's
// metadata and the watermarks, or a fresh start.
type Start[M any] struct {
	// Restored: a checkpoint was restored. False: the store held none,
	// and the backend is as it was given.
	Restored bool
	Manifest *Manifest // the checkpoint restored (nil when fresh)
	Meta     M         // its metadata (the zero M when fresh)
	// Watermarks are the timer services' watermarks at the checkpoint,
	// set on the backend already.
	Watermarks map[string]int64
	// Skipped are newer checkpoints passed over because they are damaged
	// (see RestoreNewestIntact), newest first.
	Skipped []Skip
}

// Resume opens the store in st for b (taking ownership: an earlier owner is
// fenced) and restores its newest intact checkpoint into b, with its
// metadata and watermarks, or starts fresh if the store holds no
// checkpoint; Start says which. b must have its states and timer services
// registered, and hold nothing.
//
// Errors (the store is then closed and b holds nothing): ErrInvalid for
// negative options; ErrMismatch if
// the checkpoint does not fit b or was not taken by a Loop, or its
// metadata does not decode as M; ErrCorrupt if the store holds checkpoints
// and none restores (never a fresh start over them); ErrStorage, ErrInvalid
// as Open and Restore. Writer goroutine of b.
func Resume[M any](ctx context.Context, b *cowstate.Backend, st Storage, opts LoopOptions) (*Loop[M], Start[M], error) {
	var start Start[M]
	if opts.Interval < 0 || opts.Records < 0 || opts.TolerableFailures < 0 {
		return nil, start, fmt.Errorf("%w: loop options with a negative interval (%v), record count (%d) or tolerable failures (%d)",
			ErrInvalid, opts.Interval, opts.Records, opts.TolerableFailures)
	}
	sopts := opts.Store
	sopts.AutoConfirm = false
	s, err := Open(ctx, b, st, sopts)
	if err != nil {
		return nil, start, err
	}
	l := &Loop[M]{b: b, store: s, opts: opts, now: opts.Now}
	if l.now == nil {
		l.now = time.Now
	}
	if err := l.restore(ctx, &start); err != nil {
		s.Close()
		return nil, start, err
	}
	s.mu.Lock()
	l.nextID = s.lastID + 1
	epoch := s.current.Epoch
	s.mu.Unlock()
	if opts.Sink != nil {
		var at Recovery
		if start.Restored {
			at.Checkpoint = start.Manifest.ID
		}
		at.Epoch = epoch
		if err := opts.Sink.Recover(ctx, at); err != nil {
			s.Close()
			return nil, Start[M]{}, sinkError("recovering the sink at checkpoint %d: %w", at.Checkpoint, err)
		}
	}
	l.taken = l.now()
	return l, start, nil
}

// restore restores the newest checkpoint that is intact, decoding its
// metadata before it touches the backend.
func (l *Loop[M]) restore(ctx context.Context, start *Start[M]) error {
	cps := l.store.Checkpoints()
	if len(cps) == 0 {
		return nil
	}
	for i := len(cps) - 1; i >= 0; i-- {
		m := cps[i]
		meta, wms, err := decodeLoopMeta[M](m)
		if err != nil {
			return err
		}
		err = restoreLoopCheckpoint(l.b, m, meta, wms, start, func() error { return l.store.restore(ctx, m) })
		if errors.Is(err, ErrCorrupt) {
			start.Skipped = append(start.Skipped, Skip{m.ID, err})
			continue
		}
		if err != nil {
			return err
		}
		l.last = m
		return nil
	}
	return fmt.Errorf("%w: no checkpoint of %s restores (%d damaged)", ErrCorrupt, l.store.st, len(start.Skipped))
}

func decodeLoopMeta[M any](m *Manifest) (M, map[string]int64, error) {
	var meta M
	var lm loopMeta
	if err := json.Unmarshal(m.UserMeta, &lm); err != nil || lm.Loop != loopFormat {
		return meta, nil, fmt.Errorf("%w: checkpoint %d was not taken by a Loop (its user metadata is %d bytes, not a loop's)",
			ErrMismatch, m.ID, len(m.UserMeta))
	}
	if err := json.Unmarshal(lm.Meta, &meta); err != nil {
		return meta, nil, fmt.Errorf("%w: checkpoint %d: the job metadata does not decode as %T: %w", ErrMismatch, m.ID, meta, err)
	}
	if lm.Watermarks == nil {
		lm.Watermarks = map[string]int64{}
	}
	return meta, lm.Watermarks, nil
}

// Processed tells the loop that the job processed records more records and
// that meta is its metadata now (what a restore of a checkpoint taken now
// resumes from). It takes a checkpoint if one is due and none is in
// flight, and confirms the one in flight if it is durable. Cost when
// nothing is due: a channel poll and, with an Interval, a read of the
// clock; taking one costs a capture (O(states)) and the JSON encoding of
// meta. The checkpoint is written with ctx: cancelling it cancels the
// write.
//
// It returns the failure of a checkpoint beyond TolerableFailures in a
// row (matching ErrStorage, ErrCorrupt... as Store.Checkpoint's): the state
// is intact, the last durable checkpoint still restores, and the next one
// is taken when due. A fenced store (ErrFenced) is returned by this and
// every later call: another owner runs the job. Writer goroutine only.
func (l *Loop[M]) Processed(ctx context.Context, records int, meta M) error {
	if l.fatal != nil {
		return l.fatal
	}
	l.records += records
	if l.inFlight != nil {
		select {
		case <-l.inFlight.Done():
			if err := l.settle(ctx); err != nil && (l.fatal != nil || l.failures > l.opts.TolerableFailures || errors.Is(err, ErrSink)) {
				return err
			}
		default:
			return nil
		}
	}
	if !l.due() {
		return nil
	}
	_, err := l.take(ctx, meta)
	return err
}

func (l *Loop[M]) due() bool {
	return l.opts.Records > 0 && l.records >= l.opts.Records ||
		l.opts.Interval > 0 && l.now().Sub(l.taken) >= l.opts.Interval
}

// settle confirms the finished checkpoint in flight and commits the sink
// up to it, or counts its failure and returns it. A commit that fails
// returns an ErrSink; the checkpoint stays durable and confirmed.
func (l *Loop[M]) settle(ctx context.Context) error {
	cp := l.inFlight
	l.inFlight = nil
	err := cp.Wait()
	if err == nil {
		if err = l.store.Confirm(cp.ID()); err == nil {
			l.failures, l.last = 0, cp.Manifest()
			l.stats.Completed++
			if segs := l.last.Segments; len(segs) > 0 {
				l.stats.Bytes += segs[len(segs)-1].Size // its own: a full snapshot or its delta
			}
			if l.opts.Sink == nil {
				return nil
			}
			crashPoint("loop.durable")
			if err := l.opts.Sink.Commit(ctx, cp.ID()); err != nil {
				return sinkError("checkpoint %d is durable, its output not committed (the next checkpoint commits it): %w", cp.ID(), err)
			}
			return nil
		}
	}
	l.failures++
	l.stats.Failed++
	err = fmt.Errorf("checkpoint %d failed (%d in a row): %w", cp.ID(), l.failures, err)
	if errors.Is(err, ErrFenced) {
		l.fatal = err
	}
	return err
}

// take takes checkpoint nextID with meta and the watermarks.
func (l *Loop[M]) take(ctx context.Context, meta M) (*Checkpoint, error) {
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("%w: job metadata %T does not encode as JSON: %w", ErrInvalid, meta, err)
	}
	um, err := json.Marshal(loopMeta{Loop: loopFormat, Meta: raw, Watermarks: l.b.Watermarks()})
	if err != nil {
		return nil, fmt.Errorf("%w: loop metadata: %w", ErrInvalid, err)
	}
	if l.opts.Sink != nil {
		if err := l.opts.Sink.Prepare(ctx, l.nextID); err != nil {
			l.failures++
			l.stats.Failed++
			l.nextID++ // what the failed prepare left under the id is the sink's to drop
			return nil, sinkError("checkpoint %d not taken: preparing its output: %w", l.nextID-1, err)
		}
		crashPoint("loop.prepared")
	}
	cp, err := l.store.CheckpointWith(ctx, l.nextID, um)
	if err != nil {
		if errors.Is(err, ErrFenced) {
			l.fatal = err
		}
		if l.opts.Sink != nil {
			l.nextID++ // the id names a prepared transaction: the next checkpoint's commit commits it
		}
		return nil, err
	}
	l.nextID++
	l.stats.Taken++
	l.inFlight, l.records, l.taken = cp, 0, l.now()
	return cp, nil
}

// Sync waits for the checkpoint in flight, takes one now with meta, waits
// until it is durable and confirms it: at a shutdown, or where the job
// must know its state is committed (before an external commit). It
// returns the checkpoint's manifest, or its failure (whatever
// TolerableFailures says; the failure of the older one in flight is only
// counted) or ctx's error, after which the checkpoint goes on in the
// background and Processed settles it. Writer goroutine only.
func (l *Loop[M]) Sync(ctx context.Context, meta M) (*Manifest, error) {
	if l.fatal != nil {
		return nil, l.fatal
	}
	// The one in flight is older than meta: its failure is counted, not
	// returned, unless the store is fenced or ctx is done.
	if err := l.wait(ctx); err != nil && (l.fatal != nil || ctx.Err() != nil) {
		return nil, err
	}
	cp, err := l.take(ctx, meta)
	if err != nil {
		return nil, err
	}
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return cp.Manifest(), nil
}

// wait waits for the checkpoint in flight and settles it, returning its
// failure whatever TolerableFailures says.
func (l *Loop[M]) wait(ctx context.Context) error {
	if l.inFlight == nil {
		return nil
	}
	select {
	case <-l.inFlight.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.settle(ctx)
}

// LoopStats counts what a Loop did since it started.
type LoopStats struct {
	Taken     int   // checkpoints started
	Completed int   // checkpoints durable and confirmed
	Failed    int   // checkpoints that failed
	InFlight  bool  // a checkpoint is being written
	Bytes     int64 // bytes of the completed checkpoints' own segments
	// FailuresInARow is Failures(): checkpoints failed since the last
	// that completed.
	FailuresInARow int
}

// Stats returns what the loop did: a value read on the writer goroutine,
// with no lock and no callback. A checkpoint that finished is counted when
// the loop settles it (at the next Processed, Sync or Wait). O(1).
func (l *Loop[M]) Stats() LoopStats {
	s := l.stats
	s.InFlight, s.FailuresInARow = l.inFlight != nil, l.failures
	return s
}

// Wait waits for the checkpoint in flight, if any, and settles it: it
// returns its failure (whatever TolerableFailures says), or ctx's error,
// and takes no new checkpoint. For a graceful stop that keeps what is in
// flight, Wait then Close. Writer goroutine only.
func (l *Loop[M]) Wait(ctx context.Context) error {
	if l.fatal != nil {
		return l.fatal
	}
	return l.wait(ctx)
}

// Last returns the newest durable checkpoint of the loop: the last one it
// took and confirmed, or the one Resume restored; nil if none.
func (l *Loop[M]) Last() *Manifest { return l.last }

// Failures returns how many checkpoints failed in a row.
func (l *Loop[M]) Failures() int { return l.failures }

// Store returns the loop's store (for Checkpoints, Savepoint, retention).
// Do not Confirm or Abort the loop's checkpoints through it.
func (l *Loop[M]) Store() *Store { return l.store }

// Close closes the store: a checkpoint in flight is cancelled (the last
// durable one stays the newest restorable). Writer goroutine only.
func (l *Loop[M]) Close() error {
	l.inFlight = nil
	return l.store.Close()
}

// ReadMeta decodes the job metadata and watermarks a Loop stored in
// checkpoint m (a manifest from Inspect, Store.Checkpoints or Loop.Last):
// what the job would resume from, read without a backend and without
// taking the store over. ErrMismatch if m was not taken by a Loop or its
// metadata does not decode as M. Any goroutine.
func ReadMeta[M any](m *Manifest) (M, map[string]int64, error) {
	if m == nil {
		var zero M
		return zero, nil, fmt.Errorf("%w: ReadMeta of a nil manifest", ErrInvalid)
	}
	return decodeLoopMeta[M](m)
}

// Peek restores checkpoint id (0: the newest) of a Loop's store into b with
// its metadata and watermarks, as Resume would, but without taking the
// store over: its owner goes on (pin the checkpoint first, with
// Retention.Pinned, if the owner may drop it meanwhile). For tools and
// tests that read what a job would resume from. b must have the job's
// states and timer services registered and hold nothing. Errors as
// RestoreFrom's and ReadMeta's; after one, b holds nothing. Writer
// goroutine of b.
func Peek[M any](ctx context.Context, b *cowstate.Backend, st Storage, id uint64) (Start[M], error) {
	var start Start[M]
	l, err := Inspect(ctx, st)
	if err != nil {
		return start, err
	}
	var m *Manifest
	for _, c := range l.Checkpoints {
		if id == 0 || c.ID == id {
			m = c // the newest last
		}
	}
	if m == nil {
		return start, fmt.Errorf("%w: %s holds no checkpoint %d", ErrNoCheckpoint, st, id)
	}
	meta, wms, err := decodeLoopMeta[M](m) // before b is touched
	if err != nil {
		return start, err
	}
	err = restoreLoopCheckpoint(b, m, meta, wms, &start, func() error {
		_, err := RestoreFrom(ctx, b, Source{Storage: st, ID: m.ID})
		return err
	})
	return start, err
}

// restoreLoopCheckpoint restores checkpoint m into b by restore, then the
// watermarks of its loop metadata, and records both in start.
func restoreLoopCheckpoint[M any](b *cowstate.Backend, m *Manifest, meta M, wms map[string]int64, start *Start[M], restore func() error) error {
	if err := restore(); err != nil {
		return err
	}
	if err := b.RestoreWatermarks(wms); err != nil {
		// The restore checked every timer service of the file, and a
		// loop's watermarks are those of the services at the capture.
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	start.Restored, start.Manifest, start.Meta, start.Watermarks = true, m, meta, wms
	return nil
}
