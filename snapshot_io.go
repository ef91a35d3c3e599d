package cowstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// source adapts a captured Snapshot to snapshot.Source. It reads only what
// the capture froze, so it runs on any goroutine.
type source struct {
	s         *Snapshot
	savepoint bool
	// releaseAsRead: after each state's section of a key group, tell the
	// backend's writer it is passed (statetable.Snapshot.Passed).
	releaseAsRead bool
}

func (src source) Meta() snapshot.Meta {
	m := snapshot.Meta{
		Savepoint:      src.savepoint,
		MaxParallelism: src.s.state.MaxParallelism(),
		KeyGroups:      src.s.state.KeyGroups(),
		States:         append([]statetable.StateInfo(nil), src.s.state.States()...),
		Timers:         append([]snapshot.TimerServiceInfo(nil), src.s.services...),
	}
	if !src.savepoint {
		m.Version = src.s.Version()
	}
	return m
}

func (src source) AppendStateEntries(dst []byte, state string, g int) ([]byte, int, error) {
	if src.s.Released() {
		return dst, 0, releasedDuring(src.s)
	}
	dst, n, err := src.s.state.AppendKeyGroupEntries(dst, state, g)
	if err == nil && src.releaseAsRead {
		err = src.s.state.Passed(state, g)
	}
	return dst, n, err
}

func (src source) TimerEntries(service string, d timerqueue.Domain, yield func(g int, ts int64, key, ns string) bool) error {
	if src.s.Released() {
		return releasedDuring(src.s)
	}
	v, ok := src.s.timers[service]
	if !ok {
		return fmt.Errorf("timer service %q not in the snapshot", service)
	}
	q := v.event
	if d == timerqueue.ProcessingTime {
		q = v.processing
	}
	for t, g := range q.All() {
		if !yield(g, t.Timestamp, t.Key, t.Namespace) {
			break
		}
	}
	return nil
}

// WriteSnapshot writes snap (every state and timer of the owned key groups)
// to w in the snapshot format, on the calling goroutine; it does not release
// snap. prog may be nil. Any goroutine while snap is live: the backend's
// writer goes on meanwhile. A snap released before the call, or during it
// (a misuse: release after the write returns), gives an error matching
// ErrReleased, not a panic.
func WriteSnapshot(ctx context.Context, w io.Writer, snap *Snapshot, prog *snapshot.Progress) error {
	return write(ctx, w, source{s: snap}, prog)
}

// WriteSnapshotAndRelease is WriteSnapshot then snap.Release, with the
// release made as the write goes: once the write has read a key group of a
// state, which it does in key-group order and once, the backend's writer
// updates the values there in place instead of copying what snap shares
// with the live state, as long as snap is the only snapshot live. A
// checkpoint that will not be the base of a delta is written so: at 10M
// keys checkpointed every second, where most leaves are copied once a
// checkpoint, the copies of what is already written are saved
// (BenchmarkJob, every=1s; decision 0046). From the call on, snap must
// have no other reader: a read of what the write has passed panics
// (cow.ErrPassed). snap is released when the call returns, whatever the
// outcome. Any goroutine while snap is live.
func WriteSnapshotAndRelease(ctx context.Context, w io.Writer, snap *Snapshot, prog *snapshot.Progress) error {
	defer snap.Release()
	return write(ctx, w, source{s: snap, releaseAsRead: true}, prog)
}

// SavepointMeta returns the metadata a savepoint of snap records (what
// WriteSavepoint writes in its header): max parallelism, key groups, and
// the states and timer services with their kinds and codec IDs, sorted
// by name. A tool checks a savepoint against it before a deploy (package
// savepoint: HeaderOf, Check). Any goroutine while snap is live; O(states).
func SavepointMeta(snap *Snapshot) snapshot.Meta {
	m := source{s: snap, savepoint: true}.Meta()
	slices.SortFunc(m.States, func(a, b statetable.StateInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(m.Timers, func(a, b snapshot.TimerServiceInfo) int { return strings.Compare(a.Name, b.Name) })
	return m
}

// WriteSavepoint writes snap as a savepoint: full and canonical (the same
// logical state gives byte-identical output whatever history built it and
// whatever the version), self-contained (no reference to any other file).
// A released snap gives ErrReleased, as for WriteSnapshot.
func WriteSavepoint(ctx context.Context, w io.Writer, snap *Snapshot, prog *snapshot.Progress) error {
	return write(ctx, w, source{s: snap, savepoint: true}, prog)
}

// write writes snap, or refuses it with ErrReleased if it was released
// before the write started (then nothing is written) or is released during
// it. A release during the write is seen by the source between sections,
// by the reads themselves (which panic, cow.ErrReleased: recovered here),
// or, after the last read, by the check at the end: either way the bytes
// written may hold entries of later versions (the writer reuses what only
// released snapshots reach), so they are no snapshot. Any other panic
// propagates.
func write(ctx context.Context, w io.Writer, src source, prog *snapshot.Progress) (err error) {
	snap := src.s
	if snap.Released() {
		return fmt.Errorf("%w: cannot write the snapshot of version %d: it was released before the write started "+
			"(release a snapshot once its write has returned; StartWrite releases it itself)", ErrReleased, snap.Version())
	}
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); !ok || !errors.Is(e, cow.ErrReleased) {
				panic(r)
			}
			err = releasedDuring(snap)
		}
	}()
	if err := snapshot.Write(ctx, w, src, prog); err != nil {
		return err
	}
	if snap.Released() {
		return releasedDuring(snap)
	}
	return nil
}

// releasedDuring is the error of a write of snap during which snap was
// released.
func releasedDuring(snap *Snapshot) error {
	return fmt.Errorf("%w: the snapshot of version %d was released while being written, from another goroutine: "+
		"what was written is no snapshot (release a snapshot once its write has returned)", ErrReleased, snap.Version())
}

// Write is a snapshot being written on its own goroutine.
type Write struct {
	done     chan struct{}
	err      error
	progress snapshot.Progress
}

// StartWrite writes snap to w on a new goroutine and releases snap when the
// write ends, whether it succeeds, fails or ctx is cancelled (the goroutine
// then exits promptly). Several writes may be in flight at once. The caller
// keeps using the backend meanwhile, and must not release snap itself: a
// snap released before the call, or by another goroutine during the write,
// makes Wait return an error matching ErrReleased (never a panic on the
// write's goroutine).
func StartWrite(ctx context.Context, w io.Writer, snap *Snapshot, savepoint bool) *Write {
	wr := &Write{done: make(chan struct{})}
	go func() {
		defer close(wr.done)
		defer snap.Release()
		wr.err = write(ctx, w, source{s: snap, savepoint: savepoint}, &wr.progress)
	}()
	return wr
}

// Done is closed when the write has ended.
func (w *Write) Done() <-chan struct{} { return w.done }

// Wait waits for the write to end and returns its error.
func (w *Write) Wait() error {
	<-w.done
	return w.err
}

// Progress returns the bytes and the entries (state entries and timers)
// written so far. Any goroutine.
func (w *Write) Progress() (bytes, entries int64) {
	return w.progress.Bytes.Load(), w.progress.Entries.Load()
}

// RestoreSnapshot reads into b the key groups b owns from a snapshot file: all of
// them, or a subset when b owns fewer (rescaling). Every state and timer
// service in the file must be registered on b with the same kind and codecs,
// and the max parallelism must match (else an error matching
// snapshot.ErrMismatch); bad bytes give snapshot.ErrCorrupt or
// statetable.ErrDecode. States with a TTL drop what has expired by b's
// clock; a file written without TTL (format version 1, or a state
// registered without one) restores into a state with a TTL as if written
// at the restore. b must hold nothing yet (else ErrNotEmpty), and a
// restore that fails part way leaves it empty: it is RestoreChains of one
// chain with no delta. Writer goroutine only.
func (b *Backend) RestoreSnapshot(ctx context.Context, r *snapshot.Reader) error {
	return b.RestoreChains(ctx, Chain{Full: r})
}

// checkMeta checks that the states and timer services of a file's metadata
// fit b (CheckRestore); errors match snapshot.ErrMismatch. It records
// whether the restore translates what it reads (Translated).
func (b *Backend) checkMeta(m snapshot.Meta) error {
	checks, err := b.CheckRestore(m)
	if err != nil {
		return err
	}
	// Every state and timer service that does not fit is named, not only
	// the first: a job that forgot several registrations learns of all.
	var errs []error
	for _, c := range checks {
		switch {
		case c.Verdict == Refused:
			errs = append(errs, c.Err)
		case c.Verdict != Restores || c.As != c.Name:
			b.translated = true
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%d of the file's states and timer services do not fit the backend:\n%w", len(errs), errors.Join(errs...))
}

// Verdict is what a restore does with one state or timer service of a
// file (RestoreCheck).
type Verdict int

const (
	Restores Verdict = iota // restores as written (under As)
	Migrates                // its values read through the registered Evolving codec
	Dropped                 // skipped (DropOnRestore)
	Refused                 // the restore fails: RestoreCheck.Err says why
)

func (v Verdict) String() string {
	return [...]string{"restores", "migrates", "dropped", "refused"}[v]
}

// RestoreCheck is what a restore into a backend would do with one state
// or timer service of a file (Backend.CheckRestore).
type RestoreCheck struct {
	Name    string // the file's name for it
	Timers  bool   // a timer service, not a state
	As      string // the registered name it restores into ("" if dropped or refused)
	Verdict Verdict
	Err     error // why it is refused, matching snapshot.ErrMismatch
}

// CheckRestore reports what a restore of a file with metadata m into b
// would do with each of its states and timer services: restore it as
// written, migrate its values (statetable.Evolving), restore it under
// another name (RestoreAs), drop it (DropOnRestore), or refuse it and why.
// It reads and changes nothing: a deploy calls it, with the new job's
// states registered, to learn what the job's restore will say
// (checkpoint.CheckRestore reads m from a store). A file that cannot be
// restored at all (another max parallelism, two states restoring into
// one) is an error matching snapshot.ErrMismatch. Writer goroutine only.
func (b *Backend) CheckRestore(m snapshot.Meta) ([]RestoreCheck, error) {
	if m.MaxParallelism != b.MaxParallelism() {
		return nil, fmt.Errorf("%w: file has max parallelism %d, backend %d", snapshot.ErrMismatch, m.MaxParallelism, b.MaxParallelism())
	}
	if err := b.checkRestoreNames(m); err != nil {
		return nil, err
	}
	checks := make([]RestoreCheck, 0, len(m.States)+len(m.Timers))
	for _, s := range m.States {
		c := RestoreCheck{Name: s.Name}
		name, ok := b.restoredName(s.Name)
		as := ""
		if name != s.Name {
			as = fmt.Sprintf(" (restored as %q)", name)
		}
		switch have, err := b.table.State(name); {
		case !ok:
			c.Verdict = Dropped
		case err != nil:
			c.Verdict, c.Err = Refused, fmt.Errorf("%w: %v%s: register it before restoring, or say what becomes of it (RestoreAs, DropOnRestore) (%w)", snapshot.ErrMismatch, s, as, err)
		default:
			// Entries without TTL restore into a state with one, not the
			// reverse; values migrate when the registered codec reads
			// the file's (statetable.Evolving).
			if err := b.table.CheckRestorable(name, s); err != nil {
				c.Verdict, c.Err = Refused, fmt.Errorf("%w%s: %w", snapshot.ErrMismatch, as, err)
			} else if c.As = name; !slices.Equal(have.Codec, s.Codec) {
				c.Verdict = Migrates
			}
		}
		checks = append(checks, c)
	}
	for _, t := range m.Timers {
		c := RestoreCheck{Name: t.Name, Timers: true}
		name, ok := b.restoredName(t.Name)
		svc, registered := b.services[name]
		switch {
		case !ok:
			c.Verdict = Dropped
		case !registered || svc.codecs() != t.Codecs:
			c.Verdict, c.Err = Refused, fmt.Errorf("%w: timer service %q with codecs %v is not registered with those codecs (as %q): register it, or say what becomes of it (RestoreAs, DropOnRestore)", snapshot.ErrMismatch, t.Name, t.Codecs, name)
		default:
			c.As = name
		}
		checks = append(checks, c)
	}
	return checks, nil
}

// sink adapts a Backend to snapshot.Sink, for a file whose states are
// files (by the file's names).
type sink struct {
	b     *Backend
	files map[string]statetable.StateInfo
}

func newSink(b *Backend, m snapshot.Meta) sink {
	s := sink{b: b, files: map[string]statetable.StateInfo{}}
	for _, st := range m.States {
		s.files[st.Name] = st
	}
	return s
}

// RestoreEntries restores a run of the file's state into the state it
// restores as, or skips it (DropOnRestore). The file's description of the
// state says whether its entries carry TTL timestamps and which codec
// wrote its values (a migration, if not the registered one).
func (s sink) RestoreEntries(state string, n int, b []byte) (int, error) {
	name, ok := s.b.restoredName(state)
	if !ok {
		return statetable.SkipRun(state, n, b)
	}
	return s.b.table.RestoreRunOf(name, s.files[state], n, b)
}

func (s sink) RestoreTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error {
	if kg := statetable.KeyGroupOfKey([]byte(key), s.b.MaxParallelism()); kg != g {
		return fmt.Errorf("%w: timer of key group %d in the section of key group %d", snapshot.ErrCorrupt, kg, g)
	}
	name, ok := s.b.restoredName(service)
	if !ok {
		return nil
	}
	svc := s.b.services[name]
	if err := svc.checkTimer(key, ns); err != nil {
		return fmt.Errorf("%w: %v", snapshot.ErrCorrupt, err)
	}
	queueOf(svc, d).Register(timerqueue.Timer{Timestamp: ts, Key: key, Namespace: ns}, g)
	return nil
}
