package cowstate

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// CheckpointPolicy is how a checkpoint store chooses between a full
// snapshot and a delta. The zero value of a field means its default.
//
// A checkpoint is incremental (a delta from the last confirmed checkpoint)
// when there is a confirmed base, it changes at most MaxChangeShare of the
// entries and timers, the delta is at most MaxDeltaShare of
// the base chain's full snapshot, and the chain's deltas together stay
// within MaxChainShare of it; otherwise it is full. So a restore reads the
// full snapshot and at most MaxChainShare of its size again in deltas.
//
// An incremental checkpoint whose chain has MaxChainLength deltas already
// merges the newest deltas of the chain with its own (delta.Merge), and
// older ones while they are smaller than what is being merged: restores
// read at most MaxChainLength deltas, and a merge mostly rewrites small,
// recent deltas.
type CheckpointPolicy struct {
	AlwaysFull     bool    // never incremental
	MaxChainLength int     // default 8
	MaxDeltaShare  float64 // default 0.25
	MaxChainShare  float64 // default 0.5
	// MaxChangeShare: a checkpoint whose changes (entries and timers) are
	// more than this share of the state's entries and timers is full,
	// decided during the diff, which stops there (default 0.1: a changed
	// entry costs an incremental checkpoint 10 to 20 times what an entry
	// costs a full one, merges included, so from about 10% on a full one
	// is as fast; see BenchmarkCheckpoint).
	// 1 or more: no limit.
	MaxChangeShare float64
}

func (p CheckpointPolicy) withDefaults() CheckpointPolicy {
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
// confirmed one (the base of the next delta) and those not yet confirmed
// or aborted. Savepoints are kept until DeleteSavepoint.
type Retention struct {
	KeepLast int
	Pinned   []uint64
}

// CheckpointOptions configures a checkpoint store.
type CheckpointOptions struct {
	Policy    CheckpointPolicy
	Retention Retention
}

// Checkpoints takes a backend's checkpoints and savepoints into a Storage
// and restores them. One store (one storage namespace) belongs to one
// backend. Checkpoint, Savepoint, Confirm, Abort, Restore and SetRetention
// run on the backend's writer goroutine; the writing happens on goroutines
// of their own, and the Checkpoint handles may be waited on from any
// goroutine.
type Checkpoints struct {
	b      *Backend
	st     Storage
	policy CheckpointPolicy

	mu        sync.Mutex
	retention Retention
	base      *checkpointBase        // last confirmed checkpoint, nil before the first
	pending   map[uint64]*Checkpoint // taken, not yet confirmed or aborted
	inUse     map[string]int         // names cleanup must not touch (being written or read)
	lastID    uint64
}

// checkpointBase is the last confirmed checkpoint: its manifest and its
// snapshot, kept live so the next checkpoint can diff against it.
type checkpointBase struct {
	manifest *Manifest
	snap     *Snapshot
	refs     int  // checkpoints diffing against it
	retired  bool // no longer the base: release when refs reach 0
}

// NewCheckpoints returns the checkpoint store of b in st. A store that
// already holds checkpoints (after a restart) is fine: Restore one, or
// take a full checkpoint with a higher id.
func NewCheckpoints(b *Backend, st Storage, opts CheckpointOptions) *Checkpoints {
	return &Checkpoints{
		b: b, st: st, policy: opts.Policy.withDefaults(), retention: opts.Retention,
		pending: map[uint64]*Checkpoint{}, inUse: map[string]int{},
	}
}

// Checkpoint is one checkpoint or savepoint being written or written.
type Checkpoint struct {
	id       uint64
	done     chan struct{}
	cancel   context.CancelFunc
	snap     *Snapshot // live until confirmed and replaced, or aborted
	names    []string  // storage names cleanup leaves alone while it runs
	userMeta []byte
	progress snapshot.Progress
	capture  time.Duration

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

// CaptureTime is the time the writer goroutine spent capturing; WriteTime
// the time from capture to commit (diff, encode, write, sync), 0 before
// Done.
func (cp *Checkpoint) CaptureTime() time.Duration { return cp.capture }
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
// decides; it returns at once. ids must increase. The checkpoint is
// restorable once its handle is Done without error; it becomes the base of
// later deltas only once confirmed. Writer goroutine only.
func (c *Checkpoints) Checkpoint(ctx context.Context, id uint64) (*Checkpoint, error) {
	return c.take(ctx, id, false, nil)
}

// CheckpointWith is Checkpoint with user metadata stored in the manifest
// (Manifest.UserMeta), for what is not keyed state: source offsets,
// watermarks, sink transaction ids. Restore returns it with the manifest.
func (c *Checkpoints) CheckpointWith(ctx context.Context, id uint64, userMeta []byte) (*Checkpoint, error) {
	return c.take(ctx, id, false, bytes.Clone(userMeta))
}

// Savepoint writes a savepoint: a canonical full snapshot in files of its
// own, which no checkpoint depends on and retention never deletes. Its id
// space is separate from the checkpoints'. Writer goroutine only.
func (c *Checkpoints) Savepoint(ctx context.Context, id uint64) (*Checkpoint, error) {
	return c.take(ctx, id, true, nil)
}

func (c *Checkpoints) take(ctx context.Context, id uint64, savepoint bool, userMeta []byte) (*Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !savepoint {
		if id <= c.lastID {
			return nil, fmt.Errorf("%w: checkpoint id %d is not above %d", ErrCheckpoint, id, c.lastID)
		}
		c.lastID = id
	}
	start := time.Now()
	snap := c.b.Snapshot()
	ctx, cancel := context.WithCancel(ctx)
	cp := &Checkpoint{id: id, done: make(chan struct{}), cancel: cancel, snap: snap, capture: time.Since(start), userMeta: userMeta}
	if savepoint {
		cp.names = []string{manifestName(id, true), fullName(id, true)}
		c.use(cp.names...)
		go c.finish(cp, nil, true, func() (*Manifest, error) { return c.writeSavepoint(ctx, cp) })
		return cp, nil
	}
	base := c.base
	cp.names = []string{manifestName(id, false), fullName(id, false)}
	if base != nil && base.manifest.KeyGroups == c.b.KeyGroups() && !c.policy.AlwaysFull {
		base.refs++
		// The chain it reads, and the names its delta may take.
		cp.names = append(cp.names, segmentNames(base.manifest)...)
		for _, seg := range base.manifest.Segments { // a merged delta starts at one of them
			cp.names = append(cp.names, deltaName(seg.Target, id))
		}
	} else {
		base = nil
	}
	c.pending[id] = cp
	c.use(cp.names...)
	go c.finish(cp, base, false, func() (*Manifest, error) { return c.writeCheckpoint(ctx, cp, base) })
	return cp, nil
}

// finish runs a write on its own goroutine and records its outcome.
func (c *Checkpoints) finish(cp *Checkpoint, base *checkpointBase, savepoint bool, write func() (*Manifest, error)) {
	start := time.Now()
	m, err := write()
	c.mu.Lock()
	if base != nil {
		base.refs--
		c.releaseBase(base)
	}
	c.unuse(cp.names...)
	if savepoint || err != nil {
		cp.snap.Release()
		delete(c.pending, cp.id)
	}
	c.mu.Unlock()
	cp.err, cp.manifest, cp.write = err, m, time.Since(start)
	if err != nil {
		cp.manifest = nil
	}
	cp.cancel()
	close(cp.done)
}

// use and unuse count the names cleanup must leave alone; c.mu held.
func (c *Checkpoints) use(names ...string) {
	for _, n := range names {
		c.inUse[n]++
	}
}

func (c *Checkpoints) unuse(names ...string) {
	for _, n := range names {
		if c.inUse[n]--; c.inUse[n] <= 0 {
			delete(c.inUse, n)
		}
	}
}

func segmentNames(m *Manifest) []string {
	names := make([]string, len(m.Segments))
	for i, s := range m.Segments {
		names[i] = s.Name
	}
	return names
}

// releaseBase releases a retired base's snapshot once nothing diffs
// against it; c.mu held.
func (c *Checkpoints) releaseBase(b *checkpointBase) {
	if b.retired && b.refs == 0 {
		b.snap.Release()
	}
}

// manifestOf starts the manifest of a checkpoint of snap.
func manifestOf(cp *Checkpoint, kind CheckpointKind) *Manifest {
	id, snap := cp.id, cp.snap
	m := &Manifest{UserMeta: cp.userMeta,
		ID: id, Kind: kind, Version: snap.Version(),
		MaxParallelism: snap.state.MaxParallelism(), KeyGroups: snap.state.KeyGroups(),
		States: map[string]int{},
	}
	for _, info := range snap.state.States() {
		m.States[info.Name] = snap.state.Entries(info.Name)
	}
	for _, tv := range snap.timers {
		m.Timers += tv.event.Len() + tv.processing.Len()
	}
	return m
}

func (c *Checkpoints) writeSavepoint(ctx context.Context, cp *Checkpoint) (*Manifest, error) {
	m := manifestOf(cp, SavepointKind)
	seg, err := c.writeFull(ctx, cp, fullName(cp.id, true), true)
	if err != nil {
		return nil, err
	}
	m.Segments = []Segment{seg}
	return m, c.commit(m)
}

func (c *Checkpoints) writeFull(ctx context.Context, cp *Checkpoint, name string, savepoint bool) (Segment, error) {
	size, sum, err := writeAtomically(c.st, name, func(w io.Writer) error {
		write := WriteSnapshot
		if savepoint {
			write = WriteSavepoint
		}
		return write(ctx, w, cp.snap, &cp.progress)
	})
	return Segment{Name: name, Target: cp.id, Size: size, Sum: sumHex(sum)}, err
}

// writeCheckpoint decides full or incremental, writes the segment and
// commits the manifest. It runs on the checkpoint's goroutine.
func (c *Checkpoints) writeCheckpoint(ctx context.Context, cp *Checkpoint, base *checkpointBase) (*Manifest, error) {
	if base != nil {
		m, err := c.writeIncremental(ctx, cp, base)
		if m != nil || err != nil {
			return m, err
		}
	}
	m := manifestOf(cp, Full)
	seg, err := c.writeFull(ctx, cp, fullName(cp.id, false), false)
	if err != nil {
		return nil, err
	}
	m.Segments = []Segment{seg}
	return m, c.commit(m)
}

// writeIncremental writes checkpoint cp as a delta from base, or returns
// (nil, nil) when the policy wants a full snapshot.
func (c *Checkpoints) writeIncremental(ctx context.Context, cp *Checkpoint, base *checkpointBase) (*Manifest, error) {
	limit := -1
	if c.policy.MaxChangeShare < 1 {
		total := cp.snap.size()
		limit = int(c.policy.MaxChangeShare * float64(total))
	}
	if base.snap.capture.Owner() != cp.snap.capture.Owner() {
		return nil, fmt.Errorf("%w: diff from checkpoint %d: snapshots of two backends", ErrCheckpoint, base.manifest.ID)
	}
	var buf bytes.Buffer
	changed, ok, err := delta.WriteDiff(ctx, &buf, base.snap.deltaVersion(), cp.snap.deltaVersion(), base.manifest.ID, cp.id, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: diff from checkpoint %d: %w", ErrCheckpoint, base.manifest.ID, err)
	}
	if !ok {
		return nil, nil // too many changes: a full snapshot is cheaper
	}
	chain := base.manifest.Segments
	full := chain[0].Size
	var chainBytes int64
	for _, s := range chain[1:] {
		chainBytes += s.Size
	}
	size := int64(buf.Len())
	if float64(size) > c.policy.MaxDeltaShare*float64(full) || float64(chainBytes+size) > c.policy.MaxChainShare*float64(full) {
		return nil, nil
	}
	m := manifestOf(cp, Incremental)
	m.Changed = changed
	file := buf.Bytes()
	segBase := base.manifest.ID
	if k := mergeCount(chain[1:], size, c.policy.MaxChainLength); k > 0 {
		// Fold the chain's last k deltas and this one into one.
		keep := len(chain) - k
		ds := make([]*delta.Delta, 0, k+1)
		for _, s := range chain[keep:] {
			prev, err := c.readDelta(ctx, s)
			if err != nil {
				return nil, err
			}
			ds = append(ds, prev)
		}
		r, err := delta.Open(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint %d: reading back its delta: %w", ErrCheckpoint, cp.id, err)
		}
		d, err := r.Read(ctx, r.Meta().KeyGroups)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint %d: reading back its delta: %w", ErrCheckpoint, cp.id, err)
		}
		merged, err := delta.Merge(append(ds, d)...)
		if err != nil {
			return nil, fmt.Errorf("%w: merge of the chain of checkpoint %d: %w", ErrCheckpoint, base.manifest.ID, err)
		}
		buf.Reset()
		if err := delta.Write(ctx, &buf, merged, nil); err != nil {
			return nil, err
		}
		file, segBase = buf.Bytes(), merged.Base
		chain = chain[:keep]
	}
	name := deltaName(segBase, cp.id) // in cp.names since take
	n, sum, err := writeAtomically(c.st, name, func(w io.Writer) error {
		_, err := w.Write(file)
		cp.progress.Bytes.Add(int64(len(file)))
		cp.progress.Entries.Add(int64(m.Changed))
		return err
	})
	if err != nil {
		return nil, err
	}
	m.Segments = append(slices.Clone(chain), Segment{Name: name, Delta: true, Base: segBase, Target: cp.id, Size: n, Sum: sumHex(sum)})
	return m, c.commit(m)
}

// mergeCount returns how many of a chain's last deltas to merge with a new
// delta of size bytes: none while the chain has room (MaxChainLength);
// when it has not, the newest deltas are folded together, and each older
// one too while it is smaller than the run being folded. The chain's
// deltas so stay ordered by size, big and old first, a merge rewrites
// mostly small recent deltas, and a big delta is rewritten only once the
// small ones after it have grown as big.
func mergeCount(deltas []Segment, size int64, maxLen int) int {
	if len(deltas) < maxLen {
		return 0
	}
	k, tail := 0, size
	for k < len(deltas) {
		prev := deltas[len(deltas)-1-k].Size
		if k > 0 && prev >= tail && len(deltas)-k+1 <= maxLen {
			break
		}
		tail += prev
		k++
	}
	return k
}

// readDelta reads a whole delta segment.
func (c *Checkpoints) readDelta(ctx context.Context, s Segment) (*delta.Delta, error) {
	return c.readDeltaOf(ctx, s, nil)
}

// readDeltaRange reads the key groups of a delta segment the backend owns.
func (c *Checkpoints) readDeltaRange(ctx context.Context, s Segment) (*delta.Delta, error) {
	kgs := c.b.KeyGroups()
	return c.readDeltaOf(ctx, s, &kgs)
}

func (c *Checkpoints) readDeltaOf(ctx context.Context, s Segment, kgs *statetable.KeyGroupRange) (*delta.Delta, error) {
	f, err := c.st.Open(s.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCheckpoint, s.Name, err)
	}
	defer f.Close()
	if f.Size() != s.Size {
		return nil, fmt.Errorf("%w: segment %s has %d bytes, the manifest says %d", ErrCheckpoint, s.Name, f.Size(), s.Size)
	}
	r, err := delta.Open(f, f.Size())
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCheckpoint, s.Name, err)
	}
	if r.Base() != s.Base || r.Target() != s.Target {
		return nil, fmt.Errorf("%w: segment %s holds delta %d->%d, the manifest says %d->%d", ErrCheckpoint, s.Name, r.Base(), r.Target(), s.Base, s.Target)
	}
	if kgs == nil {
		all := r.Meta().KeyGroups
		kgs = &all
	}
	d, err := r.Read(ctx, *kgs)
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCheckpoint, s.Name, err)
	}
	return d, nil
}

// commit writes a manifest atomically: the checkpoint exists from here on.
func (c *Checkpoints) commit(m *Manifest) error {
	_, _, err := writeAtomically(c.st, manifestName(m.ID, m.Kind == SavepointKind), func(w io.Writer) error {
		_, err := w.Write(encodeManifest(m))
		return err
	})
	return err
}

// Confirm makes checkpoint id, which must be Done without error, the base
// of the next incremental checkpoints, drops the checkpoints taken before
// it that were never confirmed (they stay restorable until retention
// removes them), and applies the retention. Writer goroutine only.
func (c *Checkpoints) Confirm(id uint64) error {
	c.mu.Lock()
	cp, ok := c.pending[id]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: confirm of checkpoint %d, which is not pending", ErrCheckpoint, id)
	}
	select {
	case <-cp.done:
	default:
		return fmt.Errorf("%w: confirm of checkpoint %d, still being written", ErrCheckpoint, id)
	}
	if cp.err != nil {
		return fmt.Errorf("%w: confirm of checkpoint %d, which failed: %w", ErrCheckpoint, id, cp.err)
	}
	c.mu.Lock()
	if c.base != nil {
		c.base.retired = true
		c.releaseBase(c.base)
	}
	c.base = &checkpointBase{manifest: cp.manifest, snap: cp.snap}
	delete(c.pending, id)
	for other, p := range c.pending {
		if other < id {
			c.dropLocked(p)
		}
	}
	c.mu.Unlock()
	return c.Cleanup()
}

// dropLocked forgets a pending checkpoint: cancels it if it is being
// written and releases its snapshot once it is done; c.mu held.
func (c *Checkpoints) dropLocked(cp *Checkpoint) {
	delete(c.pending, cp.id)
	cp.cancel()
	go func() {
		<-cp.done
		cp.snap.Release()
	}()
}

// Abort gives up checkpoint id: it is cancelled if still being written,
// never serves as a base, and its manifest is removed, so it is no longer
// restorable; its files go at the next cleanup. Writer goroutine only.
func (c *Checkpoints) Abort(id uint64) error {
	c.mu.Lock()
	cp, ok := c.pending[id]
	if ok {
		c.dropLocked(cp)
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: abort of checkpoint %d, which is not pending", ErrCheckpoint, id)
	}
	<-cp.done
	if cp.err == nil {
		if err := c.st.Remove(manifestName(id, false)); err != nil {
			return fmt.Errorf("%w: abort of checkpoint %d: %w", ErrCheckpoint, id, err)
		}
		if err := c.st.SyncDir(); err != nil {
			return fmt.Errorf("%w: abort of checkpoint %d: %w", ErrCheckpoint, id, err)
		}
	}
	return c.Cleanup()
}

// SetRetention replaces the retention and applies it. Writer goroutine
// only.
func (c *Checkpoints) SetRetention(r Retention) error {
	c.mu.Lock()
	c.retention = r
	c.mu.Unlock()
	return c.Cleanup()
}

// DeleteSavepoint removes savepoint id and its file.
func (c *Checkpoints) DeleteSavepoint(id uint64) error {
	if err := c.st.Remove(manifestName(id, true)); err != nil {
		return fmt.Errorf("%w: delete of savepoint %d: %w", ErrCheckpoint, id, err)
	}
	if err := c.st.SyncDir(); err != nil {
		return fmt.Errorf("%w: delete of savepoint %d: %w", ErrCheckpoint, id, err)
	}
	return c.Cleanup()
}

// ListCheckpoints returns the manifests of the committed checkpoints and savepoints,
// checkpoints first, each by ascending id. A manifest that does not decode
// is reported in the error (the others are still returned).
func ListCheckpoints(st Storage) ([]*Manifest, error) {
	names, err := st.List()
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrCheckpoint, err)
	}
	var ms []*Manifest
	var errs []error
	for _, n := range names {
		if !isManifest(n) {
			continue
		}
		m, err := readManifest(st, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *Manifest) int {
		return cmp.Or(cmp.Compare(boolInt(a.Kind == SavepointKind), boolInt(b.Kind == SavepointKind)), cmp.Compare(a.ID, b.ID))
	})
	return ms, errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isManifest(name string) bool {
	var id uint64
	for _, f := range []string{"checkpoint-%020d.manifest", "savepoint-%020d.manifest"} {
		if n, err := fmt.Sscanf(name, f, &id); err == nil && n == 1 && name == fmt.Sprintf(f, id) {
			return true
		}
	}
	return false
}

func readManifest(st Storage, name string) (*Manifest, error) {
	f, err := st.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %w", ErrCheckpoint, name, err)
	}
	defer f.Close()
	if f.Size() > 1<<24 {
		return nil, fmt.Errorf("%w: manifest %s: %d bytes", ErrCheckpoint, name, f.Size())
	}
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: manifest %s: %w", ErrCheckpoint, name, err)
	}
	return decodeManifest(name, b)
}

// size returns the number of entries and timers in s. O(number of states).
func (s *Snapshot) size() int {
	n := 0
	for _, info := range s.state.States() {
		n += s.state.Entries(info.Name)
	}
	for _, tv := range s.timers {
		n += tv.event.Len() + tv.processing.Len()
	}
	return n
}
