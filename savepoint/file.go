package savepoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// File is a savepoint (or full snapshot) file opened for reading. Its
// methods read the file's sections through the io.ReaderAt it was opened
// on, one section at a time; a File may be used from one goroutine at a
// time (it holds no state between calls, but the io.ReaderAt's own rules
// apply).
type File struct {
	r    *snapshot.Reader
	meta snapshot.Meta
}

// Open reads the footer, metadata and index of the file r holds (size
// bytes) and checks them (snapshot.Open): a damaged file is an error
// matching snapshot.ErrCorrupt, naming what and at which offset. A full
// snapshot that is not a savepoint (a checkpoint's first segment) opens
// too; Meta().Savepoint tells them apart.
func Open(r io.ReaderAt, size int64) (*File, error) {
	sr, err := snapshot.Open(r, size)
	if err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	return &File{r: sr, meta: sr.Meta()}, nil
}

// Meta returns the file's metadata: max parallelism, key groups, states
// and timer services, sorted by name. The caller must not modify it.
func (f *File) Meta() snapshot.Meta { return f.meta }

// state returns the file's description of a state, or an error matching
// statetable.ErrUnknownState.
func (f *File) state(name string) (statetable.StateInfo, error) {
	for _, s := range f.meta.States {
		if s.Name == name {
			return s, nil
		}
	}
	return statetable.StateInfo{}, fmt.Errorf("%w %q: the savepoint holds %s", statetable.ErrUnknownState, name, f.names())
}

func (f *File) timerService(name string) bool {
	for _, t := range f.meta.Timers {
		if t.Name == name {
			return true
		}
	}
	return false
}

// names lists the file's states and timer services, for errors.
func (f *File) names() string {
	var s []string
	for _, st := range f.meta.States {
		s = append(s, fmt.Sprintf("state %q", st.Name))
	}
	for _, t := range f.meta.Timers {
		s = append(s, fmt.Sprintf("timer service %q", t.Name))
	}
	if len(s) == 0 {
		return "no state or timer service"
	}
	return fmt.Sprint(s)
}

// StateSummary is what List says of one state.
type StateSummary struct {
	Name    string
	Kind    statetable.Kind
	Codecs  []string // codec IDs: key, namespace, then the kind's value codecs
	TTL     bool
	Entries int64 // (key, namespace) entries in the file
}

// TimerSummary is what List says of one timer service.
type TimerSummary struct {
	Name           string
	Codecs         [2]string // key and namespace codec IDs
	EventTime      int64     // event-time timers in the file
	ProcessingTime int64     // processing-time timers in the file
}

// Listing is the content of a savepoint by state and timer service.
type Listing struct {
	Savepoint      bool // a savepoint, not a checkpoint's full snapshot
	MaxParallelism int
	KeyGroups      statetable.KeyGroupRange
	Sections       int // key groups with a section
	States         []StateSummary
	Timers         []TimerSummary
}

// List reads every section of the file (checksums checked, cells not
// decoded) and counts each state's entries and each timer service's
// timers. Cost: one read of the file, one section in memory at a time.
func (f *File) List(ctx context.Context) (*Listing, error) {
	l := &Listing{Savepoint: f.meta.Savepoint, MaxParallelism: f.meta.MaxParallelism, KeyGroups: f.meta.KeyGroups, Sections: len(f.r.Groups())}
	at := map[string]int{}
	for i, s := range f.meta.States {
		at[s.Name] = i
		l.States = append(l.States, StateSummary{Name: s.Name, Kind: s.Kind, Codecs: slices.Clone(s.Codec), TTL: s.TTL})
	}
	tat := map[string]int{}
	all := map[string]bool{}
	for i, t := range f.meta.Timers {
		tat[t.Name] = i
		all[t.Name] = true
		l.Timers = append(l.Timers, TimerSummary{Name: t.Name, Codecs: t.Codecs})
	}
	w := &walker{f: f, kgs: f.meta.KeyGroups, timers: all,
		skip: func(state string, n int) { l.States[at[state]].Entries += int64(n) },
		onTimer: func(t *Timer) error {
			ts := &l.Timers[tat[t.Service]]
			if t.Domain == timerqueue.EventTime {
				ts.EventTime++
			} else {
				ts.ProcessingTime++
			}
			return nil
		},
	}
	if err := w.run(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Select chooses what Entries, Timers and Dump read. The zero Select is
// everything.
type Select struct {
	// States and Timers name the states and timer services to read; if
	// both are empty, every one is read, else only those named. A name
	// the file does not hold is an error matching
	// statetable.ErrUnknownState.
	States, Timers []string
	// KeyGroups, if not nil, limits the read to those key groups: only
	// their sections are read.
	KeyGroups *statetable.KeyGroupRange
	// KeyFrom and KeyTo, if not nil, limit entries and timers to keys
	// whose encoding k has KeyFrom <= k < KeyTo, compared as bytes (for
	// the integer codecs, numeric order; for strings, byte order). All
	// selected sections are still read.
	KeyFrom, KeyTo []byte
}

// resolve returns the walker for sel, or the error of a name sel gives
// that the file does not hold.
func (f *File) resolve(sel Select) (*walker, error) {
	w := &walker{f: f, kgs: f.meta.KeyGroups, keyFrom: sel.KeyFrom, keyTo: sel.KeyTo}
	if sel.KeyGroups != nil {
		w.kgs = *sel.KeyGroups
		if w.kgs.First < 0 || w.kgs.Last >= f.meta.MaxParallelism || w.kgs.Empty() {
			return nil, fmt.Errorf("%w: key groups %v: the savepoint has key groups 0 to %d", statetable.ErrConfig, w.kgs, f.meta.MaxParallelism-1)
		}
	}
	all := len(sel.States) == 0 && len(sel.Timers) == 0
	w.states, w.timers = map[string]bool{}, map[string]bool{}
	for _, s := range f.meta.States {
		w.states[s.Name] = all
	}
	for _, t := range f.meta.Timers {
		w.timers[t.Name] = all
	}
	for _, s := range sel.States {
		if _, err := f.state(s); err != nil {
			return nil, err
		}
		w.states[s] = true
	}
	for _, t := range sel.Timers {
		if !f.timerService(t) {
			return nil, fmt.Errorf("%w: timer service %q: the savepoint holds %s", statetable.ErrUnknownState, t, f.names())
		}
		w.timers[t] = true
	}
	return w, nil
}

// errStop stops a walk early (an iterator's loop broke off).
var errStop = errors.New("savepoint: stop")

// Entries returns the entries of the states sel selects, in file order
// (key group, then state by name, then canonical order: entry hash, then
// key bytes). The sequence reads the file as it goes, one section in
// memory at a time; a section that is damaged, or a read that fails,
// ends it with an error (matching snapshot.ErrCorrupt for bad bytes). An
// entry's byte slices alias the section's buffer, which is never reused:
// they may be kept, and must not be modified. A name sel gives that the
// file does not hold is yielded as the only error.
func (f *File) Entries(ctx context.Context, sel Select) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		w, err := f.resolve(sel)
		if err != nil {
			yield(Entry{}, err)
			return
		}
		w.timers = nil
		w.onEntry = func(e *Entry) error {
			if !yield(*e, nil) {
				return errStop
			}
			return nil
		}
		if err := w.run(ctx); err != nil && !errors.Is(err, errStop) {
			yield(Entry{}, err)
		}
	}
}

// Timers returns the timers of the timer services sel selects, in file
// order (key group, then service by name, event time before processing
// time, then firing order), as Entries does for entries.
func (f *File) Timers(ctx context.Context, sel Select) iter.Seq2[Timer, error] {
	return func(yield func(Timer, error) bool) {
		w, err := f.resolve(sel)
		if err != nil {
			yield(Timer{}, err)
			return
		}
		w.states = nil
		w.onTimer = func(t *Timer) error {
			if !yield(*t, nil) {
				return errStop
			}
			return nil
		}
		if err := w.run(ctx); err != nil && !errors.Is(err, errStop) {
			yield(Timer{}, err)
		}
	}
}

// walker reads the sections of key groups kgs and hands what they hold
// to its functions: a snapshot.Sink. States and services not selected
// (states[name] false, or the map nil) are skipped, counted by skip.
type walker struct {
	f        *File
	kgs      statetable.KeyGroupRange
	states   map[string]bool
	timers   map[string]bool
	keyFrom  []byte
	keyTo    []byte
	onEntry  func(*Entry) error
	onTimer  func(*Timer) error
	skip     func(state string, n int)
	infos    map[string]statetable.StateInfo
	lastKG   int
	checkKGs statetable.KeyGroupRange
}

func (w *walker) run(ctx context.Context) error {
	w.infos = map[string]statetable.StateInfo{}
	for _, s := range w.f.meta.States {
		w.infos[s.Name] = s
	}
	return w.runRange(ctx, w.kgs)
}

// runRange reads the sections of kgs.
func (w *walker) runRange(ctx context.Context, kgs statetable.KeyGroupRange) error {
	w.checkKGs = kgs
	if err := w.f.r.Restore(ctx, w, kgs); err != nil {
		if errors.Is(err, errStop) {
			return err
		}
		return fmt.Errorf("savepoint: %w", err)
	}
	return nil
}

func (w *walker) inKeyRange(key []byte) bool {
	return (w.keyFrom == nil || string(key) >= string(w.keyFrom)) && (w.keyTo == nil || string(key) < string(w.keyTo))
}

// RestoreEntries implements snapshot.Sink: it parses a run of n entries.
func (w *walker) RestoreEntries(state string, n int, b []byte) (int, error) {
	if !w.states[state] || w.onEntry == nil {
		if w.skip != nil {
			w.skip(state, n)
		}
		return statetable.SkipRun(state, n, b)
	}
	info := w.infos[state]
	if n < 0 || n > len(b)/2 {
		return 0, fmt.Errorf("%w: state %q: %d entries cannot fit in %d bytes", statetable.ErrDecode, state, n, len(b))
	}
	off := 0
	for i := range n {
		ck, next, err := blob(b, off)
		if err != nil {
			return 0, fmt.Errorf("%w: state %q: entry %d of %d, at byte %d of the run: key: %v", statetable.ErrDecode, state, i, n, off, err)
		}
		cell, end, err := blob(b, next)
		if err != nil {
			return 0, fmt.Errorf("%w: state %q: entry %d of %d, at byte %d of the run: cell: %v", statetable.ErrDecode, state, i, n, next, err)
		}
		key, ns, err := splitComposite(ck)
		if err != nil {
			return 0, fmt.Errorf("%w: state %q: entry %d of %d, at byte %d of the run: %v", statetable.ErrDecode, state, i, n, off, err)
		}
		off = end
		g := statetable.KeyGroupOfKey(key, w.f.meta.MaxParallelism)
		if !w.checkKGs.Contains(g) {
			return 0, fmt.Errorf("%w: state %q: entry %d of %d: key %x is of key group %d, outside the sections read (%v)", statetable.ErrDecode, state, i, n, key, g, w.checkKGs)
		}
		if !w.inKeyRange(key) {
			continue
		}
		e := Entry{State: state, KeyGroup: g, Key: key, Namespace: ns}
		if err := e.parseCell(info, cell); err != nil {
			return 0, fmt.Errorf("%w: state %q: entry %d of %d (key %x): %v", statetable.ErrDecode, state, i, n, key, err)
		}
		if err := w.onEntry(&e); err != nil {
			return 0, err
		}
	}
	return off, nil
}

// RestoreTimer implements snapshot.Sink.
func (w *walker) RestoreTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error {
	if !w.timers[service] || w.onTimer == nil {
		return nil
	}
	kb := []byte(key)
	if kg := statetable.KeyGroupOfKey(kb, w.f.meta.MaxParallelism); kg != g {
		return fmt.Errorf("%w: timer service %q: timer of key %x (key group %d) in the section of key group %d", snapshot.ErrCorrupt, service, kb, kg, g)
	}
	if d != timerqueue.EventTime && d != timerqueue.ProcessingTime {
		return fmt.Errorf("%w: timer service %q: timer domain %d", snapshot.ErrCorrupt, service, d)
	}
	if !w.inKeyRange(kb) {
		return nil
	}
	return w.onTimer(&Timer{Service: service, Domain: d, KeyGroup: g, Timestamp: ts, Key: kb, Namespace: []byte(ns)})
}

// blob reads the blob at b[off:] and returns it and the offset after it,
// never trusting a length beyond the bytes present.
func blob(b []byte, off int) ([]byte, int, error) {
	n, k := binary.Uvarint(b[off:])
	if k <= 0 || n > uint64(len(b)-off-k) {
		return nil, 0, fmt.Errorf("a blob at byte %d runs past the end (%d bytes)", off, len(b))
	}
	start := off + k
	return b[start : start+int(n) : start+int(n)], start + int(n), nil
}

// splitComposite splits a composite key (uvarint key length, key bytes,
// namespace bytes).
func splitComposite(ck []byte) (key, ns []byte, err error) {
	klen, n := binary.Uvarint(ck)
	if n <= 0 || klen > uint64(len(ck)-n) {
		return nil, nil, fmt.Errorf("bad key length prefix in a composite key of %d bytes", len(ck))
	}
	end := n + int(klen)
	return ck[n:end:end], ck[end:len(ck):len(ck)], nil
}

// appendComposite appends the composite key of (key, ns).
func appendComposite(dst, key, ns []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(append(dst, key...), ns...)
}
