package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
)

// Policy is how a store chooses between a full snapshot and a delta. The
// zero value of a field means its default.
//
// A checkpoint is incremental (a delta from the last confirmed checkpoint)
// when there is a confirmed base, it changes at most MaxChangeShare of the
// entries and timers, the delta is at most MaxDeltaShare of the base
// chain's full snapshot, and the chain's deltas together stay within
// MaxChainShare of it; otherwise it is full. So a restore reads the full
// snapshot and at most MaxChainShare of its size again in deltas. When the
// entries written since the previous checkpoint come to more than
// MaxChangeShare, the checkpoint is full and not kept as a base, so that
// the writer runs with no snapshot live until the next one (see
// changesHigh).
//
// An incremental checkpoint whose chain has MaxChainLength deltas already
// merges the newest deltas of the chain with its own (delta.Merge), and
// older ones while they are smaller than what is being merged: restores
// read at most MaxChainLength deltas, and a merge mostly rewrites small,
// recent deltas.
type Policy struct {
	AlwaysFull     bool    // never incremental
	MaxChainLength int     // default 8
	MaxDeltaShare  float64 // default 0.25
	MaxChainShare  float64 // default 0.5
	// MaxChangeShare: a checkpoint whose changes (entries and timers) are
	// more than this share of the state's entries and timers is full,
	// decided during the diff, which stops there, or stops after a
	// sixteenth of a state's key groups if their changes, extrapolated,
	// come to more than twice the limit (default 0.1: a changed
	// entry costs an incremental checkpoint 10 to 20 times what an entry
	// costs a full one, merges included, so from about 10% on a full one
	// is as fast; see BenchmarkCheckpoint). 1 or more: no limit.
	MaxChangeShare float64
}

func (p Policy) withDefaults() Policy {
	if p.MaxChainLength <= 0 {
		p.MaxChainLength = 8
	}
	if p.MaxDeltaShare <= 0 {
		p.MaxDeltaShare = 0.25
	}
	if p.MaxChainShare <= 0 {
		p.MaxChainShare = 0.5
	}
	if p.MaxChangeShare <= 0 {
		p.MaxChangeShare = 0.1
	}
	return p
}

// Retention says which checkpoints a store keeps: the KeepLast newest
// committed checkpoints (default 1), those listed in Pinned, the last
// confirmed one (the base of the next delta) and those committed but not
// yet confirmed or aborted. Savepoints are kept until DeleteSavepoint.
type Retention struct {
	KeepLast int
	Pinned   []uint64
}

// Options configures a Store.
type Options struct {
	Policy    Policy
	Retention Retention
	// AutoConfirm confirms each checkpoint as soon as it is durable, in id
	// order. The confirmation is picked up by the writer's next call to
	// the store (Checkpoint, Savepoint, Poll...): no goroutine of the
	// store ever touches the backend. Leave it off when a coordinator
	// confirms (Flink's notifyCheckpointComplete) and call Confirm.
	AutoConfirm bool
	// MaxPending bounds the checkpoints taken and not yet confirmed or
	// aborted (each pins a snapshot of the backend): Checkpoint refuses
	// one more with ErrTooManyPending. Default 8.
	MaxPending int
	// SkipDamaged lets Open take over a store whose newest manifest is
	// damaged, from the newest intact one (Skipped names what was
	// skipped); without it Open fails with ErrCorrupt naming the manifest.
	SkipDamaged bool
	// OnCheckpoint, if set, is called with each checkpoint's and
	// savepoint's CheckpointEvent once it has committed or failed, before
	// its handle is Done, on the goroutine that wrote it (never the
	// backend's writer): it must not touch the backend, and it delays
	// only that checkpoint's Done. Calls for checkpoints in flight at once
	// may run concurrently.
	OnCheckpoint func(CheckpointEvent)
	// Logger, if set, logs each CheckpointEvent: at Info when committed,
	// at Warn when failed.
	Logger *slog.Logger
	// CheckpointTimeout bounds each checkpoint and savepoint, from
	// Checkpoint (or Savepoint) to its commit: one that has not committed
	// by then fails with context.DeadlineExceeded, and the storage calls
	// it has in flight are cancelled. It applies within the context given
	// to Checkpoint, which may end it sooner. Default
	// DefaultCheckpointTimeout; negative: no bound but that context's (a
	// storage that stops answering then holds the checkpoint until the
	// context ends).
	CheckpointTimeout time.Duration
	// CloseTimeout bounds how long Close waits for the checkpoints it
	// cancels to return (default DefaultCloseTimeout). A storage call
	// honours its context's cancellation; one that does not (a local file
	// system hung in the kernel) is left running, and Close says so.
	CloseTimeout time.Duration
}

// The default timeouts of a Store (Options). A Flink checkpoint times out
// after 10 minutes by default too (execution.checkpointing.timeout).
const (
	DefaultCheckpointTimeout = 10 * time.Minute
	DefaultCloseTimeout      = 10 * time.Second
)

// Store takes a backend's checkpoints and savepoints into a Storage and
// restores them. It owns the storage: Open takes ownership, and from then
// on a Store opened later on the same storage (another process, a restarted
// job) fences this one, whose commits then fail with ErrFenced.
//
// Checkpoint, Savepoint, Confirm, Abort, Poll, Restore, SetRetention,
// Cleanup and DeleteSavepoint run on the backend's writer goroutine; the
// writing happens on goroutines of the store's own, which read only the
// snapshots they were given, and the Checkpoint handles may be waited on
// from any goroutine.
type Store struct {
	b      *cowstate.Backend
	st     Storage
	policy Policy
	opts   Options
	writer string // random id of this Store, in the manifests it commits

	commitMu sync.Mutex // serializes commits: one manifest at a time

	mu        sync.Mutex
	current   *storeManifest // the newest manifest, committed by this Store
	fenced    error          // set once another writer took the store
	unsure    bool           // a commit failed without saying whether it wrote its manifest
	skipped   []string       // damaged manifests Open skipped
	retention Retention
	base      *checkpointBase        // last confirmed checkpoint, nil before the first
	pending   map[uint64]*Checkpoint // taken, not yet confirmed or aborted
	inUse     map[string]int         // objects cleanup must not touch (being written or read)
	lastID    uint64                 // highest checkpoint id taken
	lastSP    uint64                 // highest savepoint id taken

	// netShare is the share of the distinct writes of an interval that
	// its diff found changed (entries written and deleted, or written back,
	// within the interval are writes but no change): learned from each
	// diff, it scales Backend.DistinctWrites to a number of changes
	// (changesHigh).
	netShare float64
	undiffed int // checkpoints taken since the last diff
}

// checkpointBase is the last confirmed checkpoint: its manifest and its
// snapshot, kept live so the next checkpoint can diff against it, or nil
// when the next checkpoint is to be full (changesHigh).
type checkpointBase struct {
	manifest *Manifest
	snap     *cowstate.Snapshot
	refs     int  // checkpoints diffing against it
	retired  bool // no longer the base: release when refs reach 0
	probe    bool // kept to measure netShare: the next checkpoint diffs
}

// changesHigh reports, as checkpoint cp is taken, whether the entries
// written since the previous checkpoint (the backend's estimate,
// Backend.DistinctWrites, scaled by netShare) are more than
// Policy.MaxChangeShare of its snapshot's entries and timers, and records
// the count in cp.writes; s.mu held, writer goroutine.
//
// A live snapshot is not free: while one is live, the writer copies each
// leaf of the state on its first write since the capture, and checks
// ownership on every write after it (decision 0043). A base kept from one
// checkpoint to the next keeps a capture live all the time, and pays off
// only if the next checkpoint's delta is written. The interval just gone
// is what the next one is likely to be: when its changes were more than
// a delta may hold, the checkpoint is full with no diff (its base, if
// any, released at once), and not kept, so that its write releases it as
// it goes and the writer runs with no snapshot live until the next one
// (WriteSnapshotAndRelease). Otherwise it is a delta if it has a base,
// and is kept as the next one's base; a diff that finds too many changes
// after all (a change of pace) also leaves no base (decision 0047, which
// replaced the probes of decision 0044).
//
// The count is of distinct entries written, which is more than the
// changes a diff finds when entries are written and deleted, or written
// back, within the interval: the demo's session windows write about 1.4
// entries for each change. So the count is scaled by the share a diff last
// found changed (netShare, learnNetShare), a half until the first diff.
func (s *Store) changesHigh(cp *Checkpoint) bool {
	writes, ok := s.b.DistinctWrites()
	cp.writes = -1
	if ok {
		cp.writes = writes
	}
	return ok && s.policy.MaxChangeShare < 1 && float64(writes)*s.netShare > s.policy.MaxChangeShare*float64(cp.snap.Size())
}

// initialNetShare is netShare until a diff measures it: a job whose
// every write is a change (counts per key) and whose writes come to more
// than twice MaxChangeShare keeps no base from its first checkpoint on.
const initialNetShare = 0.5

// learnNetShare sets netShare from checkpoint cp's diff, once it has run:
// its changes over the distinct writes counted before cp. A diff stopped
// short says only that the changes passed its limit: netShare becomes at
// least what would have called that interval's writes too many. s.mu
// held.
func (s *Store) learnNetShare(cp *Checkpoint) {
	if !cp.diffed {
		return
	}
	s.undiffed = 0
	if cp.writes <= 0 {
		return
	}
	changed := float64(cp.changed)
	if cp.tooManyChanges {
		changed = max(changed, float64(cp.changeLimit)+1)
	}
	s.netShare = max(min(changed/float64(cp.writes), 1), minNetShare)
}

// minNetShare bounds netShare from below, so that a job whose writes
// later turn into changes is not judged calm on any count of writes.
const minNetShare = 1.0 / 64

// probeEvery: after this many checkpoints without a diff, one is kept as
// a base whatever the count of writes says, so that netShare is measured
// again (a job whose writes had turned into fewer changes finds out
// within this many checkpoints).
const probeEvery = 16

// keepAsBase reports whether checkpoint cp's snapshot is kept as the next
// base, as cp is confirmed: unless it was to be released as written, or
// its diff found too many changes.
func keepAsBase(cp *Checkpoint) bool { return !cp.releaseWhenRead && !cp.tooManyChanges }

// Open takes ownership of the store in st for backend b: it reads the
// newest manifest and commits the next one with the owner epoch raised, a
// create-only write that fails if another writer committed first (then
// Open tries again from that one). An empty storage becomes an empty store.
// Cost: a listing, one or two manifest reads and one manifest write.
// Writer goroutine of b.
func Open(ctx context.Context, b *cowstate.Backend, st Storage, opts Options) (*Store, error) {
	var nonce [8]byte
	rand.Read(nonce[:])
	s := &Store{
		b: b, st: st, policy: opts.Policy.withDefaults(), opts: opts, retention: opts.Retention,
		writer:  hex.EncodeToString(nonce[:]),
		pending: map[uint64]*Checkpoint{}, inUse: map[string]int{},
		netShare: initialNetShare,
	}
	if s.opts.MaxPending <= 0 {
		s.opts.MaxPending = 8
	}
	if s.opts.CheckpointTimeout == 0 {
		s.opts.CheckpointTimeout = DefaultCheckpointTimeout
	}
	if s.opts.CloseTimeout <= 0 {
		s.opts.CloseTimeout = DefaultCloseTimeout
	}
	for attempt := 0; ; attempt++ {
		head, err := readHead(ctx, st, opts.SkipDamaged)
		if err != nil {
			return nil, err
		}
		next := &storeManifest{Format: manifestFormat}
		if head.manifest != nil {
			next = head.manifest.clone()
		}
		next.Seq = head.maxSeq + 1
		next.Epoch = head.maxEpoch + 1
		next.Writer = s.writer
		next.Committed = time.Now().UTC()
		next.Event = "open"
		err = s.create(ctx, next)
		if err == nil {
			s.current, s.skipped = next, head.skipped
			s.lastID, s.lastSP = next.LastCheckpoint, next.LastSavepoint
			b.DistinctWrites() // the first checkpoint's changes are counted from here (changesHigh)
			return s, nil
		}
		if !(errors.Is(err, fs.ErrExist) || errors.Is(err, errSuperseded)) || attempt >= 10 {
			return nil, storageErr("take ownership of "+st.String(), err)
		}
		// Another writer committed manifest next.Seq first: start over.
	}
}

// errSuperseded: a manifest was created under a number that a newer owner
// had already used and its cleanup had since removed.
var errSuperseded = errors.New("a newer manifest exists")

// create writes a manifest with a create-only write. A create under a
// number that was used and then removed by a newer owner's cleanup would
// succeed, so it then checks that the manifest before it is still there:
// cleanup removes manifests oldest first and keeps the newest few, so if
// the previous one is gone, a newer owner went past this number; the
// manifest is removed again and the error matches errSuperseded. Costs one
// extra open per commit.
func (s *Store) create(ctx context.Context, sm *storeManifest) error {
	name := manifestName(sm.Seq)
	for attempt := 0; ; attempt++ {
		w, err := s.st.Create(ctx, name)
		if err != nil {
			return err
		}
		if _, err := w.Write(sm.encode()); err != nil {
			w.Abort()
			return err
		}
		err = w.Commit()
		if errors.Is(err, ErrWriteConflict) && attempt < 5 {
			// Two creates of this number met: write again to learn
			// whether one of them won (then: exists).
			time.Sleep(time.Duration(10<<attempt) * time.Millisecond)
			continue
		}
		if errors.Is(err, fs.ErrExist) && attempt > 0 {
			// After a conflict, "exists" may be our own first write: its
			// writer id says.
			if other, rerr := readManifest(ctx, s.st, name); rerr == nil && other.Writer == s.writer && other.Seq == sm.Seq {
				err = nil
			}
		}
		if errors.Is(err, fs.ErrNotExist) && s.manifestAbove(ctx, sm.Seq) {
			// The temporary file vanished before the commit: a newer
			// owner's cleanup removes a manifest's temporaries once newer
			// manifests are committed (see Crash leftovers).
			return fmt.Errorf("%w: %s could not be committed: %v", errSuperseded, name, err)
		}
		if err != nil {
			return err
		}
		break
	}
	if sm.Seq <= 1 {
		return nil
	}
	prev, err := s.st.Open(ctx, manifestName(sm.Seq-1))
	if err == nil {
		prev.Close()
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		s.st.Remove(ctx, name) // best effort: readers take the newest anyway
		return fmt.Errorf("%w: %s was created after %s was removed", errSuperseded, name, manifestName(sm.Seq-1))
	}
	return err
}

// manifestAbove reports whether the storage lists a manifest numbered
// above seq (false if it cannot be listed).
func (s *Store) manifestAbove(ctx context.Context, seq uint64) bool {
	names, err := s.st.List(ctx)
	if err != nil {
		return false
	}
	for _, n := range names {
		if q, ok := manifestSeq(n); ok && q > seq {
			return true
		}
	}
	return false
}

// head is what the newest manifests of a storage say.
type head struct {
	manifest *storeManifest // newest intact (nil: none)
	name     string
	maxSeq   uint64   // highest manifest number present, intact or not
	maxEpoch uint64   // highest epoch in any manifest or segment name
	skipped  []string // newer manifests that are damaged
	damage   []error
}

// readHead lists st and reads its newest manifest; a damaged newest
// manifest is an ErrCorrupt naming it unless skipDamaged, which goes on to
// the newest intact one.
func readHead(ctx context.Context, st Storage, skipDamaged bool) (*head, error) {
	names, err := st.List(ctx)
	if err != nil {
		return nil, storageErr(listWhat(st, err), err)
	}
	h := &head{}
	var seqs []uint64
	for _, n := range names {
		if seq, ok := manifestSeq(n); ok {
			seqs = append(seqs, seq)
			h.maxSeq = max(h.maxSeq, seq)
		} else if e, ok := segmentEpoch(n); ok {
			h.maxEpoch = max(h.maxEpoch, e)
		}
	}
	slices.Sort(seqs)
	if err := checkNewestPresent(seqs); err != nil {
		h.damage = append(h.damage, err)
		if !skipDamaged {
			return nil, err
		}
		h.skipped = append(h.skipped, manifestName(h.maxSeq+1))
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		name := manifestName(seqs[i])
		sm, err := readManifest(ctx, st, name)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			h.damage = append(h.damage, err)
			if !skipDamaged {
				return nil, fmt.Errorf("%w (the newest manifest; an older one may be intact)", err)
			}
			h.skipped = append(h.skipped, name)
			continue
		}
		h.manifest, h.name = sm, name
		h.maxEpoch = max(h.maxEpoch, sm.Epoch)
		break
	}
	return h, nil
}

// checkNewestPresent tells, from the manifest numbers present (sorted),
// whether newer manifests were committed and have since gone (deleted by
// hand, lost by the storage): the store would otherwise silently be an
// older commit. Only cleanup removes manifests, oldest first, and it
// removes number g only once g+keptManifests+1 is committed; so if g is
// missing below the newest present, the store reached at least that
// number. It cannot tell while no manifest was ever removed: a store of
// fewer than keptManifests+2 commits, or one whose removed manifests came
// back.
func checkNewestPresent(seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	var gap uint64 // the highest number missing below the newest present
	for i := len(seqs) - 1; i >= 0; i-- {
		below := uint64(0)
		if i > 0 {
			below = seqs[i-1]
		}
		if seqs[i] > below+1 {
			gap = seqs[i] - 1
			break
		}
	}
	newest := seqs[len(seqs)-1]
	if gap == 0 || newest >= gap+keptManifests+1 {
		return nil
	}
	return fmt.Errorf("%w: manifests %s to %s are missing: %s was removed, which cleanup does only once %s is committed (the newest present, %s, is an older commit)",
		ErrCorrupt, manifestName(newest+1), manifestName(gap+keptManifests+1), manifestName(gap), manifestName(gap+keptManifests+1), manifestName(newest))
}

func readManifest(ctx context.Context, st Storage, name string) (*storeManifest, error) {
	f, err := st.Open(ctx, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular) {
			return nil, fmt.Errorf("%w: manifest %s: %w", ErrCorrupt, name, err)
		}
		return nil, storageErr("open manifest "+name, err)
	}
	defer f.Close()
	if f.Size() > maxManifestSize {
		return nil, fmt.Errorf("%w: manifest %s: %d bytes, more than a manifest can be", ErrCorrupt, name, f.Size())
	}
	b := make([]byte, f.Size())
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, storageErr("read manifest "+name, err)
	}
	return decodeManifest(name, b)
}

// Skipped returns the damaged manifests Open skipped (Options.SkipDamaged).
func (s *Store) Skipped() []string { return slices.Clone(s.skipped) }

// Storage returns the store's storage.
func (s *Store) Storage() Storage { return s.st }

// Checkpoints returns the manifests of the retained checkpoints, by
// ascending id. Any goroutine.
func (s *Store) Checkpoints() []*Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.current.Checkpoints)
}

// Savepoints returns the manifests of the savepoints, by ascending id.
func (s *Store) Savepoints() []*Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.current.Savepoints)
}

// Checkpoint is one checkpoint or savepoint being written or written.
type Checkpoint struct {
	id        uint64
	savepoint bool
	done      chan struct{}
	cancel    context.CancelFunc
	snap      *cowstate.Snapshot // live until confirmed and replaced, dropped, or read (releaseWhenRead)
	names     []string           // objects cleanup leaves alone while it runs
	userMeta  []byte
	progress  snapshot.Progress
	capture   time.Duration
	// releaseWhenRead, set when it is taken: the snapshot is not to be the
	// next base (changesHigh), so the full write releases it as it reads
	// it, before the storage's commit (a directory's fsync, an object
	// store's upload).
	releaseWhenRead bool

	// Set by the write's goroutine, read once done is closed.
	kind           Kind          // the kind being written
	tooManyChanges bool          // a diff stopped at Policy.MaxChangeShare: written full
	diffed         bool          // a diff ran: changed is what it found
	changed        int           // the changes the diff found (if it stopped: a lower bound)
	changeLimit    int           // the changes the diff stopped at
	writes         int           // Backend.DistinctWrites as it was taken; -1 if unknown
	probe          bool          // kept as a base though its interval's writes were many (probeEvery)
	written        int64         // bytes of the segments written
	sync           time.Duration // in the storage's commits of the segments
	commitT        time.Duration // committing the manifest

	// Set before done is closed.
	err      error
	manifest *Manifest
	write    time.Duration
}

// ID returns the checkpoint's id.
func (cp *Checkpoint) ID() uint64 { return cp.id }

// Done is closed when the checkpoint is committed or has failed.
func (cp *Checkpoint) Done() <-chan struct{} { return cp.done }

// Wait waits for the checkpoint and returns its error. Any goroutine.
func (cp *Checkpoint) Wait() error {
	<-cp.done
	return cp.err
}

// Manifest returns the committed manifest (nil before Done or on failure).
func (cp *Checkpoint) Manifest() *Manifest {
	select {
	case <-cp.done:
		return cp.manifest
	default:
		return nil
	}
}

// Progress returns the bytes and entries written so far. Any goroutine.
func (cp *Checkpoint) Progress() (bytes, entries int64) {
	return cp.progress.Bytes.Load(), cp.progress.Entries.Load()
}

// CaptureTime is the time the writer goroutine spent capturing.
func (cp *Checkpoint) CaptureTime() time.Duration { return cp.capture }

// WriteTime is the time from capture to commit (diff, encode, write, sync),
// 0 before Done.
func (cp *Checkpoint) WriteTime() time.Duration {
	select {
	case <-cp.done:
		return cp.write
	default:
		return 0
	}
}

// Checkpoint captures the backend (O(number of states)) and writes
// checkpoint id in the background, full or incremental as the policy
// decides; it returns at once. id must be above every checkpoint id this
// store or an earlier owner ever committed (else ErrInvalid). The
// checkpoint is restorable once its handle is Done without error; it
// becomes the base of later deltas once confirmed (Confirm, or
// Options.AutoConfirm). Writer goroutine only.
func (s *Store) Checkpoint(ctx context.Context, id uint64) (*Checkpoint, error) {
	return s.take(ctx, id, false, nil)
}

// CheckpointWith is Checkpoint with user metadata stored in the manifest
// (Manifest.UserMeta), for what is not keyed state: source offsets,
// watermarks, sink transaction ids. Restore returns it with the manifest.
func (s *Store) CheckpointWith(ctx context.Context, id uint64, userMeta []byte) (*Checkpoint, error) {
	return s.take(ctx, id, false, bytes.Clone(userMeta))
}

// Savepoint writes a savepoint: a canonical full snapshot in an object of
// its own, which no checkpoint depends on and retention never deletes. Its
// id space is separate from the checkpoints'; ids must increase as theirs
// do, so a committed savepoint is never replaced. Writer goroutine only.
func (s *Store) Savepoint(ctx context.Context, id uint64) (*Checkpoint, error) {
	return s.take(ctx, id, true, nil)
}

func (s *Store) take(ctx context.Context, id uint64, savepoint bool, userMeta []byte) (*Checkpoint, error) {
	s.settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced != nil {
		return nil, s.fenced
	}
	epoch := s.current.Epoch
	if savepoint {
		if id <= s.lastSP {
			return nil, fmt.Errorf("%w: savepoint id %d is not above %d, the newest taken", ErrInvalid, id, s.lastSP)
		}
		s.lastSP = id
	} else {
		if id <= s.lastID {
			return nil, fmt.Errorf("%w: checkpoint id %d is not above %d, the newest taken", ErrInvalid, id, s.lastID)
		}
		if len(s.pending) >= s.opts.MaxPending {
			return nil, fmt.Errorf("%w: %d checkpoints taken and neither confirmed nor aborted (oldest %d)", ErrTooManyPending, len(s.pending), s.oldestPending())
		}
		s.lastID = id
	}
	start := time.Now()
	snap := s.b.Snapshot()
	var cancel context.CancelFunc
	if s.opts.CheckpointTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.opts.CheckpointTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	cp := &Checkpoint{id: id, savepoint: savepoint, done: make(chan struct{}), cancel: cancel, snap: snap, capture: time.Since(start), userMeta: userMeta}
	if savepoint {
		cp.kind = KindSavepoint
		cp.names = []string{savepointName(epoch, id)}
		s.use(cp.names...)
		go s.finish(ctx, cp, nil, func() (*Manifest, error) { return s.writeSavepoint(ctx, cp, epoch) })
		return cp, nil
	}
	base := s.base
	cp.names = []string{fullName(epoch, id)}
	changesHigh := s.changesHigh(cp)
	switch {
	case changesHigh && base != nil && base.probe:
		changesHigh = false // diffed all the same: see below
	case changesHigh && s.undiffed+1 >= probeEvery:
		// Kept all the same, and the next checkpoint diffed against it:
		// a netShare learned long ago, or never, is measured again.
		changesHigh, cp.probe = false, true
	}
	if changesHigh && base != nil && base.refs == 0 && base.snap != nil {
		// No delta from it: the writer stops copying for it now.
		base.snap.Release()
		base.snap = nil
	}
	if base != nil && base.snap != nil && base.manifest.KeyGroups == s.b.KeyGroups() && !s.policy.AlwaysFull && !changesHigh {
		base.refs++
		// The chain it reads, and the names its delta may take.
		for _, seg := range base.manifest.Segments {
			cp.names = append(cp.names, seg.Name, deltaName(epoch, seg.Target, id))
		}
	} else {
		base = nil
		cp.releaseWhenRead = changesHigh
		s.undiffed++
	}
	s.pending[id] = cp
	s.use(cp.names...)
	go s.finish(ctx, cp, base, func() (*Manifest, error) { return s.writeCheckpoint(ctx, cp, base, epoch) })
	return cp, nil
}

func (s *Store) oldestPending() uint64 {
	var oldest uint64
	for id := range s.pending {
		if oldest == 0 || id < oldest {
			oldest = id
		}
	}
	return oldest
}

// finish runs a write on its own goroutine and records its outcome.
func (s *Store) finish(ctx context.Context, cp *Checkpoint, base *checkpointBase, write func() (*Manifest, error)) {
	start := time.Now()
	m, err := write()
	if err != nil && !errors.Is(err, ErrFenced) {
		err = s.fencedCause(ctx, err)
	}
	s.mu.Lock()
	if base != nil {
		base.refs--
		s.releaseBase(base)
	}
	if err == nil {
		s.learnNetShare(cp)
	}
	s.unuse(cp.names...)
	if cp.savepoint || err != nil {
		cp.snap.Release()
		if s.pending[cp.id] == cp {
			delete(s.pending, cp.id)
		}
	}
	s.mu.Unlock()
	cp.err, cp.manifest, cp.write = err, m, time.Since(start)
	if err != nil {
		cp.manifest = nil
	}
	cp.cancel()
	s.report(cp)
	close(cp.done)
}

// fencedCause tells a write that failed because another owner took the
// store (whose cleanup removes what a fenced writer was writing) from any
// other failure: if a newer owner committed, the store is fenced and the
// error says so. Costs a listing and a manifest read, on failures only,
// under the write's context: a write that failed because its context
// ended (cancelled, or past its deadline) is not looked into, since the
// storage may be what stopped answering; its next commit finds out.
func (s *Store) fencedCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	h, herr := readHead(ctx, s.st, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced == nil && herr == nil && h.manifest != nil && h.manifest.Seq > s.current.Seq && h.manifest.Writer != s.writer {
		s.fenced = fmt.Errorf("%w: manifest %s of %s was committed by owner epoch %d (this store is epoch %d)",
			ErrFenced, h.name, s.st, h.manifest.Epoch, s.current.Epoch)
	}
	if s.fenced != nil {
		return fmt.Errorf("%w (the write failed: %v)", s.fenced, err)
	}
	return err
}

// use and unuse count the names cleanup must leave alone; s.mu held.
func (s *Store) use(names ...string) {
	for _, n := range names {
		s.inUse[n]++
	}
}

func (s *Store) unuse(names ...string) {
	for _, n := range names {
		if s.inUse[n]--; s.inUse[n] <= 0 {
			delete(s.inUse, n)
		}
	}
}

// releaseBase releases a retired base's snapshot once nothing diffs
// against it; s.mu held.
func (s *Store) releaseBase(b *checkpointBase) {
	if b.retired && b.refs == 0 && b.snap != nil {
		b.snap.Release()
	}
}

// manifestOf starts the manifest of a checkpoint of cp's snapshot.
func manifestOf(cp *Checkpoint, kind Kind, epoch uint64) *Manifest {
	snap := cp.snap
	st := snap.State()
	m := &Manifest{UserMeta: cp.userMeta,
		ID: cp.id, Kind: kind, Version: snap.Version(), Epoch: epoch,
		MaxParallelism: st.MaxParallelism(), KeyGroups: st.KeyGroups(),
		States: map[string]int{}, Timers: snap.TimerCount(),
	}
	for _, info := range st.States() {
		m.States[info.Name] = st.Entries(info.Name)
	}
	return m
}

func (s *Store) writeSavepoint(ctx context.Context, cp *Checkpoint, epoch uint64) (*Manifest, error) {
	m := manifestOf(cp, KindSavepoint, epoch)
	seg, err := s.writeFull(ctx, cp, savepointName(epoch, cp.id), true)
	if err != nil {
		return nil, err
	}
	m.Segments = []Segment{seg}
	defer cp.timeCommit(time.Now())
	return m, s.commit(ctx, fmt.Sprintf("savepoint %d", cp.id), func(next *storeManifest) error {
		m.Committed = next.Committed
		next.Savepoints = append(next.Savepoints, m)
		slices.SortFunc(next.Savepoints, byID)
		next.LastSavepoint = max(next.LastSavepoint, m.ID)
		return nil
	})
}

func byID(a, b *Manifest) int { return cmp.Compare(a.ID, b.ID) }

func (s *Store) writeFull(ctx context.Context, cp *Checkpoint, name string, savepoint bool) (Segment, error) {
	size, sum, err := writeObject(ctx, s.st, name, &cp.sync, func(w io.Writer) error {
		switch {
		case savepoint:
			return cowstate.WriteSavepoint(ctx, w, cp.snap, &cp.progress)
		case cp.releaseWhenRead: // never a savepoint's: see take
			// No reader but this write: released as it goes, so the
			// writer stops copying what is written, and all of it at the
			// end.
			return cowstate.WriteSnapshotAndRelease(ctx, w, cp.snap, &cp.progress)
		}
		return cowstate.WriteSnapshot(ctx, w, cp.snap, &cp.progress)
	})
	cp.written += size
	seg := Segment{Name: name, Target: cp.id, Size: size, Sum: sumHex(sum)}
	if err == nil {
		seg.Skeleton, err = skeletonSum(ctx, s.st, seg, nil)
	}
	return seg, err
}

// writeCheckpoint decides full or incremental, writes the segment and
// commits the manifest. It runs on the checkpoint's goroutine.
func (s *Store) writeCheckpoint(ctx context.Context, cp *Checkpoint, base *checkpointBase, epoch uint64) (*Manifest, error) {
	var m *Manifest
	if base != nil {
		cp.kind = KindIncremental
		var err error
		if m, err = s.writeIncremental(ctx, cp, base, epoch); err != nil {
			return nil, err
		}
	}
	if m == nil {
		cp.kind = KindFull
		m = manifestOf(cp, KindFull, epoch)
		seg, err := s.writeFull(ctx, cp, fullName(epoch, cp.id), false)
		if err != nil {
			return nil, err
		}
		m.Segments = []Segment{seg}
	}
	defer cp.timeCommit(time.Now())
	return m, s.commit(ctx, fmt.Sprintf("%s checkpoint %d", m.Kind, cp.id), func(next *storeManifest) error {
		m.Committed = next.Committed
		next.Checkpoints = append(next.Checkpoints, m)
		slices.SortFunc(next.Checkpoints, byID)
		next.LastCheckpoint = max(next.LastCheckpoint, m.ID)
		return nil
	})
}

// commit commits the next manifest: the current one changed by change,
// then pruned by the retention, written with a create-only write under the
// next sequence number. If that number is taken by another writer, the
// store is fenced: this commit and every later one fail with ErrFenced. On
// success the objects no manifest needs any more are removed.
func (s *Store) commit(ctx context.Context, event string, change func(next *storeManifest) error) error {
	s.commitMu.Lock()
	err := s.commitLocked(ctx, event, change)
	s.commitMu.Unlock()
	if err == nil {
		// Not under commitMu: on object storage removes take round trips,
		// and the next commit need not wait for them. Safe beside a
		// commit: what it will reference is in use until it is current.
		s.removeGarbage(ctx)
	}
	return err
}

func (s *Store) commitLocked(ctx context.Context, event string, change func(next *storeManifest) error) error {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		if s.fenced != nil {
			s.mu.Unlock()
			return s.fenced
		}
		next := s.current.clone()
		next.Seq++
		next.Writer, next.Committed, next.Event = s.writer, time.Now().UTC(), event
		if err := change(next); err != nil {
			s.mu.Unlock()
			return err
		}
		s.retain(next)
		s.mu.Unlock()

		err := s.create(ctx, next)
		if err == nil {
			s.mu.Lock()
			s.current = next
			s.mu.Unlock()
			return nil
		}
		if errors.Is(err, errSuperseded) {
			s.mu.Lock()
			s.fenced = fmt.Errorf("%w: %s: %v", ErrFenced, s.st, err)
			s.mu.Unlock()
			return s.fenced
		}
		if !errors.Is(err, fs.ErrExist) {
			// The manifest may have been written all the same: until
			// that is settled, cleanup must not remove what it references.
			s.mu.Lock()
			s.unsure = true
			s.mu.Unlock()
			return storageErr("commit manifest "+manifestName(next.Seq), err)
		}
		// The number is taken. Ours from an attempt whose outcome was
		// lost (a failed sync, a retried request): adopt it and go on.
		// Another writer's: we are fenced.
		other, rerr := readManifest(ctx, s.st, manifestName(next.Seq))
		s.mu.Lock()
		switch {
		case rerr == nil && other.Writer == s.writer && attempt < 3:
			s.current = other
			s.mu.Unlock()
			continue
		case rerr == nil:
			s.fenced = fmt.Errorf("%w: manifest %s of %s was committed by owner epoch %d (this store is epoch %d)",
				ErrFenced, manifestName(next.Seq), s.st, other.Epoch, s.current.Epoch)
		case errors.Is(rerr, ErrCorrupt):
			s.fenced = fmt.Errorf("%w: manifest %s of %s was committed by another writer (%v)",
				ErrFenced, manifestName(next.Seq), s.st, rerr)
		default: // cannot tell whose it is: try again at the next commit
			s.mu.Unlock()
			return storageErr("commit manifest "+manifestName(next.Seq), rerr)
		}
		s.mu.Unlock()
		return s.fenced
	}
}

// retain drops from next the checkpoints the retention no longer keeps;
// s.mu held.
func (s *Store) retain(next *storeManifest) {
	keep := map[uint64]bool{}
	for _, id := range s.retention.Pinned {
		keep[id] = true
	}
	if s.base != nil {
		keep[s.base.manifest.ID] = true
	}
	for id := range s.pending {
		keep[id] = true
	}
	keepLast := max(s.retention.KeepLast, 1)
	cps := next.Checkpoints[:0:0]
	for i, m := range next.Checkpoints {
		if len(next.Checkpoints)-i <= keepLast || keep[m.ID] {
			cps = append(cps, m)
		}
	}
	next.Checkpoints = cps
}

// keptManifests is how many older manifests cleanup leaves beside the
// newest, for an operator to fall back on if the newest is damaged.
const keptManifests = 3

// removeGarbage removes the objects of this store's epoch or older that the
// current manifest does not reference and no write or read in progress
// uses: segments of dropped checkpoints, of failed or aborted ones,
// temporary files a crash left behind (of segments of this epoch or older,
// and of manifests older than the newest few), and manifests older than
// the newest few. Objects of a newer epoch belong to a newer owner and are
// never touched. Failures are left for the next cleanup. Runs after a
// commit.
func (s *Store) removeGarbage(ctx context.Context) error {
	if err := s.settleUnsure(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if s.fenced != nil {
		s.mu.Unlock()
		return s.fenced
	}
	cur := s.current
	referenced := map[string]bool{}
	for _, m := range append(slices.Clone(cur.Checkpoints), cur.Savepoints...) {
		for _, seg := range m.Segments {
			referenced[seg.Name] = true
		}
	}
	inUse := make(map[string]bool, len(s.inUse)) // before listing: see take
	for n := range s.inUse {
		inUse[n] = true
	}
	s.mu.Unlock()

	names, err := s.st.List(ctx)
	if err != nil {
		return storageErr(strings.TrimSuffix("cleanup: "+listWhat(s.st, err), ": "), err)
	}
	var errs []error
	// Manifests go oldest first (List sorts them), and a failure stops
	// their removal: the manifests removed are always the oldest ones,
	// which create relies on to detect a reused number.
	manifestsOK := true
	var segments []string
	for _, n := range names {
		base := baseName(n)
		if referenced[n] || inUse[base] {
			continue
		}
		if seq, ok := manifestSeq(base); ok && n != base {
			// A manifest's temporary file: left by a crash, unless a
			// writer is committing that number. This store commits
			// above the current number, and so does a newer owner; a
			// stale writer may be committing at most a few below, and
			// losing its temporary file would fail its commit with a
			// storage error rather than with "exists". So the ones
			// removed are those of the numbers cleanup removes.
			if seq+keptManifests < cur.Seq {
				if err := s.st.Remove(ctx, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, storageErr("cleanup: remove "+n, err))
				}
			}
			continue
		}
		if seq, ok := manifestSeq(n); ok {
			if !manifestsOK || seq+keptManifests >= cur.Seq {
				continue
			}
			if err := s.st.Remove(ctx, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, storageErr("cleanup: remove "+n, err))
				manifestsOK = false
			}
			continue
		}
		if e, ok := segmentEpoch(base); ok && isSegment(base) && e <= cur.Epoch {
			segments = append(segments, n) // not another's, nor a newer owner's
		}
	}
	// Segments go several at a time: on object storage a delete is a
	// round trip.
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan string)
	for range min(len(segments), removeParallelism) {
		wg.Go(func() {
			for n := range next {
				if err := s.st.Remove(ctx, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
					mu.Lock()
					errs = append(errs, storageErr("cleanup: remove "+n, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range segments {
		next <- n
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// removeParallelism is how many removes cleanup has in flight.
const removeParallelism = 8

// settleUnsure finds out whether a commit that failed without a clear
// answer wrote its manifest after all: if the next number holds this
// store's manifest, it is the current one; if it holds nothing, the
// commit did not happen; another writer's means the store is fenced.
func (s *Store) settleUnsure(ctx context.Context) error {
	s.mu.Lock()
	unsure, seq := s.unsure, s.current.Seq+1
	s.mu.Unlock()
	if !unsure {
		return nil
	}
	sm, err := readManifest(ctx, s.st, manifestName(seq))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil && sm.Writer == s.writer:
		s.current, s.unsure = sm, false
	case err == nil:
		s.fenced = fmt.Errorf("%w: manifest %s of %s was committed by owner epoch %d (this store is epoch %d)",
			ErrFenced, manifestName(seq), s.st, sm.Epoch, s.current.Epoch)
		return s.fenced
	case errors.Is(err, fs.ErrNotExist):
		s.unsure = false
	default:
		return fmt.Errorf("cleanup postponed: the outcome of commit %s is not known: %w", manifestName(seq), err)
	}
	return nil
}

// settle confirms, with Options.AutoConfirm, the checkpoints that are
// durable, in id order. Writer goroutine.
func (s *Store) settle() {
	if !s.opts.AutoConfirm {
		return
	}
	s.mu.Lock()
	var ids []uint64
	for id, cp := range s.pending {
		select {
		case <-cp.done:
			if cp.err == nil {
				ids = append(ids, id)
			}
		default:
		}
	}
	s.mu.Unlock()
	slices.Sort(ids)
	if len(ids) > 0 {
		s.confirm(ids[len(ids)-1]) // confirming the newest subsumes the older
	}
}

// Poll picks up what finished in the background: with Options.AutoConfirm
// it confirms the checkpoints that are durable. A job that takes no
// checkpoint for a while calls it to let the store move on. Writer
// goroutine only.
func (s *Store) Poll() { s.settle() }

// Confirm makes checkpoint id, which must be Done without error, the base
// of the next incremental checkpoints, and drops the checkpoints taken
// before it that were never confirmed (they stay restorable until
// retention removes them, at the next commit). It does no I/O. Writer
// goroutine only.
func (s *Store) Confirm(id uint64) error {
	s.settle()
	s.mu.Lock()
	cp, ok := s.pending[id]
	fenced := s.fenced
	s.mu.Unlock()
	switch {
	case fenced != nil:
		return fenced
	case !ok:
		return fmt.Errorf("%w: confirm of checkpoint %d, which is not pending", ErrInvalid, id)
	}
	select {
	case <-cp.done:
	default:
		return fmt.Errorf("%w: confirm of checkpoint %d, still being written (wait for it, or use Options.AutoConfirm)", ErrInvalid, id)
	}
	if cp.err != nil {
		return fmt.Errorf("%w: confirm of checkpoint %d, which failed: %w", ErrInvalid, id, cp.err)
	}
	s.confirm(id)
	return nil
}

func (s *Store) confirm(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := s.pending[id]
	if s.base != nil {
		s.base.retired = true
		s.releaseBase(s.base)
	}
	snap := cp.snap
	if !keepAsBase(cp) {
		// The next checkpoint is full: no capture live until it is taken.
		snap.Release()
		snap = nil
	}
	s.base = &checkpointBase{manifest: cp.manifest, snap: snap, probe: cp.probe}
	delete(s.pending, id)
	for other, p := range s.pending {
		if other < id {
			s.dropLocked(p)
		}
	}
}

// dropLocked forgets a pending checkpoint: cancels it if it is being
// written and releases its snapshot once it is done; s.mu held.
func (s *Store) dropLocked(cp *Checkpoint) {
	delete(s.pending, cp.id)
	cp.cancel()
	select {
	case <-cp.done:
		cp.snap.Release()
	default:
		go func() {
			<-cp.done
			cp.snap.Release()
		}()
	}
}

// Abort gives up checkpoint id: it is cancelled if still being written,
// never serves as a base, and if it was committed a manifest without it is
// committed, so it is no longer restorable. Writer goroutine only.
func (s *Store) Abort(ctx context.Context, id uint64) error {
	s.settle()
	s.mu.Lock()
	cp, ok := s.pending[id]
	if ok {
		s.dropLocked(cp)
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: abort of checkpoint %d, which is not pending", ErrInvalid, id)
	}
	select {
	case <-cp.done:
	case <-ctx.Done(): // cancelled, but its storage call has not returned
		return ctx.Err()
	}
	if cp.err != nil {
		return nil
	}
	return s.commit(ctx, fmt.Sprintf("abort checkpoint %d", id), func(next *storeManifest) error {
		next.Checkpoints = slices.DeleteFunc(next.Checkpoints, func(m *Manifest) bool { return m.ID == id })
		return nil
	})
}

// SetPolicy replaces the policy; it applies from the next checkpoint.
// Writer goroutine only.
func (s *Store) SetPolicy(p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p.withDefaults()
}

// SetRetention replaces the retention and applies it at once (a commit if
// it drops a checkpoint). Writer goroutine only.
//
// A pinned id that is not retained (any more) cannot be brought back: the
// retention is set all the same, and the error, matching ErrNoCheckpoint,
// names it.
func (s *Store) SetRetention(ctx context.Context, r Retention) error {
	if err := s.settleUnsure(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.retention = Retention{KeepLast: r.KeepLast, Pinned: slices.Clone(r.Pinned)}
	var missing []uint64
	for _, id := range r.Pinned {
		if s.current.checkpoint(id) == nil && s.pending[id] == nil {
			missing = append(missing, id)
		}
	}
	s.mu.Unlock()
	err := s.Cleanup(ctx)
	if len(missing) > 0 {
		err = errors.Join(fmt.Errorf("%w: pinned checkpoints %v are not retained", ErrNoCheckpoint, missing), err)
	}
	return err
}

// Cleanup applies the retention now (a commit if it drops a checkpoint)
// and removes the objects no manifest needs. Checkpoints apply it anyway
// at each commit. Writer goroutine only.
func (s *Store) Cleanup(ctx context.Context) error {
	s.settle()
	s.mu.Lock()
	next := s.current.clone()
	s.retain(next)
	drops := len(next.Checkpoints) != len(s.current.Checkpoints)
	s.mu.Unlock()
	if drops {
		return s.commit(ctx, "retention", func(*storeManifest) error { return nil })
	}
	return s.removeGarbage(ctx)
}

// DeleteSavepoint commits a manifest without savepoint id; its object is
// removed. Writer goroutine only.
func (s *Store) DeleteSavepoint(ctx context.Context, id uint64) error {
	s.mu.Lock()
	has := s.current.savepoint(id) != nil
	s.mu.Unlock()
	if !has {
		return fmt.Errorf("%w: savepoint %d", ErrNoCheckpoint, id)
	}
	return s.commit(ctx, fmt.Sprintf("delete savepoint %d", id), func(next *storeManifest) error {
		next.Savepoints = slices.DeleteFunc(next.Savepoints, func(m *Manifest) bool { return m.ID == id })
		return nil
	})
}

// Close gives up the store: pending checkpoints are cancelled and waited
// for, at most Options.CloseTimeout, and every snapshot the store holds is
// released. A checkpoint whose storage call does not return by then is
// left to finish on its own (its snapshot is released when it does), and
// the error, matching ErrStorage, names it. The storage keeps what was
// committed; another Store may open it. Writer goroutine only.
func (s *Store) Close() error {
	s.mu.Lock()
	var wait []*Checkpoint
	for _, cp := range s.pending {
		wait = append(wait, cp)
		s.dropLocked(cp)
	}
	if s.base != nil {
		s.base.retired = true
		s.releaseBase(s.base)
		s.base = nil
	}
	s.mu.Unlock()
	timeout := time.NewTimer(s.opts.CloseTimeout)
	defer timeout.Stop()
	var stuck []uint64
	for _, cp := range wait {
		select {
		case <-cp.done:
			cp.snap.Release() // idempotent: before dropLocked's goroutine
			continue
		case <-timeout.C:
		}
		for _, cp := range wait {
			select {
			case <-cp.done:
				cp.snap.Release()
			default:
				stuck = append(stuck, cp.id)
			}
		}
		break
	}
	if len(stuck) > 0 {
		slices.Sort(stuck)
		return fmt.Errorf("%w: close of %s: checkpoints %v still in the storage %v after their cancellation",
			ErrStorage, s.st, stuck, s.opts.CloseTimeout)
	}
	return nil
}
