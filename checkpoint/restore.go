package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Restore restores checkpoint id, or the newest retained checkpoint if id
// is 0, into the store's backend, for the key groups the backend owns (a
// backend owning a part of the key groups restores that part: rescaling).
// The backend must hold nothing yet (else ErrInvalid), and its states and
// timer services must be registered first with the kinds and codecs the
// checkpoint has (else ErrMismatch).
//
// It is all or nothing: every segment is read and checked against its size
// and xxhash64, and every segment's metadata against the backend, before
// the first entry goes in; on any failure the backend is left empty, as it
// was. A damaged or missing segment is an ErrCorrupt naming it, also when
// it is the newest checkpoint's (RestoreNewestIntact falls back instead).
// The store holds no checkpoint: ErrNoCheckpoint. The restored checkpoint
// becomes the base of the next incremental checkpoint when the backend owns
// the same key groups as it. Memory: the chain's segments are held while
// they restore. Writer goroutine only.
func (s *Store) Restore(ctx context.Context, id uint64) (*Manifest, error) {
	return s.restoreID(ctx, id, false)
}

// restoreID restores checkpoint or savepoint id (0: the newest).
func (s *Store) restoreID(ctx context.Context, id uint64, savepoint bool) (*Manifest, error) {
	s.mu.Lock()
	m, err := find(s.current, s.st, id, savepoint)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.restore(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// restore restores m and makes it the base; the store's mutex not held.
func (s *Store) restore(ctx context.Context, m *Manifest) error {
	s.mu.Lock()
	s.use(segmentNames(m)...)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.unuse(segmentNames(m)...)
		s.mu.Unlock()
	}()
	if err := restoreAll(ctx, s.b, []source{{s.st, m}}, nil); err != nil {
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrStorage) {
			// A newer owner's cleanup may have removed what it read.
			return s.fencedCause(ctx, err)
		}
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base != nil {
		s.base.retired = true
		s.releaseBase(s.base)
		s.base = nil
	}
	// A restore that renamed, dropped or migrated states leaves no base:
	// the next checkpoint is full, since a chain is read with one set of
	// names and codecs.
	if m.Kind != KindSavepoint && m.KeyGroups == s.b.KeyGroups() && !s.b.Translated() {
		s.base = &checkpointBase{manifest: m, snap: s.b.Snapshot()}
		s.b.DistinctWrites() // the restore's writes are the base, not changes from it
	}
	return nil
}

// Skip is a checkpoint RestoreNewestIntact passed over, and why.
type Skip struct {
	ID  uint64
	Err error
}

// RestoreNewestIntact restores the newest retained checkpoint that is
// intact, like Restore, passing over the newer ones whose segments are
// damaged or missing (ErrCorrupt); it returns the manifest restored and
// what it passed over, newest first. Any other error (a mismatch, the
// storage failing) stops it. Writer goroutine only.
func (s *Store) RestoreNewestIntact(ctx context.Context) (*Manifest, []Skip, error) {
	cps := s.Checkpoints()
	var skipped []Skip
	for i := len(cps) - 1; i >= 0; i-- {
		err := s.restore(ctx, cps[i])
		if err == nil {
			return cps[i], skipped, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return nil, skipped, err
		}
		skipped = append(skipped, Skip{cps[i].ID, err})
	}
	if len(cps) == 0 {
		return nil, nil, fmt.Errorf("%w: %s holds no checkpoint", ErrNoCheckpoint, s.st)
	}
	return nil, skipped, fmt.Errorf("%w: no checkpoint of %s restores (%d damaged)", ErrCorrupt, s.st, len(skipped))
}

// RestoreSavepoint restores savepoint id (0: the newest) into the store's
// backend, like Restore. The next checkpoint is full.
func (s *Store) RestoreSavepoint(ctx context.Context, id uint64) (*Manifest, error) {
	return s.restoreID(ctx, id, true)
}

func segmentNames(m *Manifest) []string {
	names := make([]string, len(m.Segments))
	for i, seg := range m.Segments {
		names[i] = seg.Name
	}
	return names
}

// find returns the manifest of checkpoint (or savepoint) id, 0 meaning the
// newest.
func find(sm *storeManifest, st Storage, id uint64, savepoint bool) (*Manifest, error) {
	what, list := "checkpoint", sm.Checkpoints
	if savepoint {
		what, list = "savepoint", sm.Savepoints
	}
	if id == 0 {
		if len(list) == 0 {
			return nil, fmt.Errorf("%w: %s holds no %s", ErrNoCheckpoint, st, what)
		}
		return list[len(list)-1], nil
	}
	for _, m := range list {
		if m.ID == id {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: %s holds no %s %d", ErrNoCheckpoint, st, what, id)
}

// Source is a checkpoint to restore without owning its store: a storage
// and a checkpoint id (0: the newest), or a savepoint id.
type Source struct {
	Storage   Storage
	ID        uint64
	Savepoint bool
}

// RestoreFrom restores into b, which must be empty, the key groups it owns
// from the checkpoints of one or more stores, read without taking
// ownership of them (their owners go on). With one source it is a plain
// restore (scale-out: each new subtask restores its share). With several
// it merges the key-group ranges of several stores into one backend
// (scale-in); their key groups within b's must not overlap (ErrMismatch).
// All or nothing, with the checks of Store.Restore. It returns the
// manifests restored, in the order of the sources. A store whose owner is
// running may drop the checkpoint while it is read (its retention): pin it
// there (Retention.Pinned) first. Writer goroutine of b.
func RestoreFrom(ctx context.Context, b *cowstate.Backend, sources ...Source) ([]*Manifest, error) {
	return restoreFrom(ctx, b, sources, nil)
}

// restoreCounting is RestoreFrom that also returns the bytes it read from
// the checkpoints' segments.
func restoreCounting(ctx context.Context, b *cowstate.Backend, sources ...Source) ([]*Manifest, int64, error) {
	var fetched atomic.Int64
	ms, err := restoreFrom(ctx, b, sources, &fetched)
	return ms, fetched.Load(), err
}

// sourceManifest returns the manifest of the checkpoint or savepoint src
// names, read without taking its store over.
func sourceManifest(ctx context.Context, src Source) (*Manifest, error) {
	h, err := readHead(ctx, src.Storage, false)
	if err != nil {
		return nil, err
	}
	if h.manifest == nil {
		return nil, fmt.Errorf("%w: no checkpoint store at %s", ErrNoCheckpoint, src.Storage)
	}
	return find(h.manifest, src.Storage, src.ID, src.Savepoint)
}

func restoreFrom(ctx context.Context, b *cowstate.Backend, sources []Source, fetched *atomic.Int64) ([]*Manifest, error) {
	srcs := make([]source, len(sources))
	ms := make([]*Manifest, len(sources))
	for i, src := range sources {
		m, err := sourceManifest(ctx, src)
		if err != nil {
			return nil, err
		}
		srcs[i], ms[i] = source{src.Storage, m}, m
	}
	if err := restoreAll(ctx, b, srcs, fetched); err != nil {
		return nil, err
	}
	return ms, nil
}

type source struct {
	st Storage
	m  *Manifest
}

// restoreAll reads and checks every segment of every source, then restores
// them into b all or nothing.
//
// A backend that owns only part of a checkpoint's key groups reads only
// their sections, by ranged reads checked against the manifest's skeleton
// sums; one that owns them all reads each segment whole, checked against
// its xxhash64. fetched, if not nil, counts the bytes read.
func restoreAll(ctx context.Context, b *cowstate.Backend, srcs []source, fetched *atomic.Int64) error {
	if !b.Empty() {
		return fmt.Errorf("%w: restore into a backend that already holds state: %w", ErrInvalid, cowstate.ErrNotEmpty)
	}
	chains := make([]cowstate.Chain, len(srcs))
	for i, src := range srcs {
		m := src.m
		if m.MaxParallelism != b.MaxParallelism() {
			return fmt.Errorf("%w: %s %d of %s has max parallelism %d, the backend %d: %w",
				ErrMismatch, m.Kind, m.ID, src.st, m.MaxParallelism, b.MaxParallelism(), snapshot.ErrMismatch)
		}
		kgs := intersect(m.KeyGroups, b.KeyGroups())
		ranged := kgs != m.KeyGroups && hasSkeletons(m)
		var full *snapshot.Reader
		var err error
		if ranged {
			var closer func()
			full, closer, err = openFullRange(ctx, src.st, m, fetched)
			if closer != nil {
				defer closer()
			}
		} else {
			full, err = openFull(ctx, src.st, m, fetched)
		}
		if err != nil {
			return fmt.Errorf("%s %d: %w", m.Kind, m.ID, err)
		}
		chains[i] = cowstate.Chain{Full: full, FullID: m.Segments[0].Target}
		for _, seg := range m.Segments[1:] {
			var d *delta.Delta
			if ranged {
				d, err = readDeltaRange(ctx, src.st, seg, kgs, fetched)
			} else {
				d, err = readDelta(ctx, src.st, seg, &kgs, fetched)
			}
			if err != nil {
				return fmt.Errorf("%s %d: %w", m.Kind, m.ID, err)
			}
			chains[i].Deltas = append(chains[i].Deltas, d)
		}
	}
	if err := b.RestoreChains(ctx, chains...); err != nil {
		return fmt.Errorf("restore of %s: %w", describe(srcs), classifyRestore(err))
	}
	return nil
}

func hasSkeletons(m *Manifest) bool {
	for _, s := range m.Segments {
		if s.Skeleton == "" {
			return false
		}
	}
	return true
}

func describe(srcs []source) string {
	s := ""
	for i, src := range srcs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d of %s", src.m.Kind, src.m.ID, src.st)
	}
	return s
}

func intersect(a, b statetable.KeyGroupRange) statetable.KeyGroupRange {
	return statetable.KeyGroupRange{First: max(a.First, b.First), Last: min(a.Last, b.Last)}
}

// classifyRestore gives an error of the backend's restore its class.
func classifyRestore(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case classified(err):
		return err
	case errors.Is(err, cowstate.ErrNotEmpty):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, snapshot.ErrMismatch), errors.Is(err, statetable.ErrStateMismatch),
		errors.Is(err, delta.ErrMismatch), errors.Is(err, statetable.ErrKeyGroupNotOwned):
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}
