package savepoint

import (
	"context"
	"fmt"
	"io"
	"iter"
	"slices"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Write writes to w the canonical savepoint of h's states and timer
// services holding the entries group yields and the timers timers yields
// (either may be nil), byte for byte what a cowstate backend holding that
// content writes: it is how another backend writes a savepoint cowstate
// restores.
//
// group(g) yields the entries of key group g, in any order; it is called
// once for each key group of h, in ascending order, when the write comes
// to that key group (not at all if h has no state). An entry's key must be
// of key group g (its KeyGroup field is ignored); an entry with an empty
// list or map is no entry. Entries and timers are not decoded by their
// codec IDs: a backend's bytes are written as they are, as cowstate writes
// its own. An error a sequence yields ends the write and is returned,
// wrapped.
//
// Errors: h out of range or inconsistent, statetable.ErrConfig; an entry
// of a state h lacks or a timer of a service h lacks,
// statetable.ErrUnknownState; an entry without the cell of its state's
// kind, statetable.ErrDecode; an entry or timer whose key is of another
// key group (or outside h's), statetable.ErrKeyGroupNotOwned; the same
// key and namespace, map user key or timer twice, ErrDuplicate.
//
// Cost: every timer, and the entries of one key group, are held in memory
// (encoded) at a time; each entry is encoded once and each key group's
// entries sorted into canonical order. Sequences are called on the
// calling goroutine, which writes.
func Write(ctx context.Context, w io.Writer, h Header, group func(g int) iter.Seq2[Entry, error], timers iter.Seq2[Timer, error]) error {
	o, err := newBootstrap(h)
	if err != nil {
		return err
	}
	if timers != nil {
		n := 0
		for t, err := range timers {
			if err != nil {
				return fmt.Errorf("savepoint: timers: %w", err)
			}
			if err := o.addTimerOfBackend(&t); err != nil {
				return fmt.Errorf("savepoint: timer %d: %w", n, err)
			}
			n++
		}
	}
	if group != nil {
		o.fill = func(g int) error {
			n := 0
			for e, err := range group(g) {
				if err != nil {
					return fmt.Errorf("entries of key group %d: %w", g, err)
				}
				if err := o.addOfBackend(g, &e); err != nil {
					return fmt.Errorf("entry %d of key group %d: %w", n, g, err)
				}
				n++
			}
			return nil
		}
	}
	return o.write(ctx, w)
}

// addOfBackend adds an entry a backend holds in key group g, checking its
// state, its cell's kind and its key group, not its bytes.
func (o *out) addOfBackend(g int, e *Entry) error {
	info, ok := o.infos[e.State]
	if !ok {
		return fmt.Errorf("%w %q: not in the header", statetable.ErrUnknownState, e.State)
	}
	switch {
	case info.Kind == statetable.KindList && e.Map != nil, info.Kind == statetable.KindMap && e.List != nil,
		info.Kind != statetable.KindList && info.Kind != statetable.KindMap && (e.List != nil || e.Map != nil):
		return fmt.Errorf("%w: state %q is a %s state: its entries have %s", statetable.ErrDecode, e.State, info.Kind, cellName(info.Kind))
	}
	if kg := statetable.KeyGroupOfKey(e.Key, o.meta.MaxParallelism); kg != g {
		return fmt.Errorf("%w: state %q: key %x is of key group %d, given for key group %d", statetable.ErrKeyGroupNotOwned, e.State, e.Key, kg, g)
	}
	return o.add(e.State, e)
}

// addTimerOfBackend adds a timer a backend holds, checking its service,
// its domain and its key group, not its bytes.
func (o *out) addTimerOfBackend(t *Timer) error {
	if !slices.ContainsFunc(o.meta.Timers, func(s snapshot.TimerServiceInfo) bool { return s.Name == t.Service }) {
		return fmt.Errorf("%w: timer service %q: not in the header", statetable.ErrUnknownState, t.Service)
	}
	if t.Domain != timerqueue.EventTime && t.Domain != timerqueue.ProcessingTime {
		return fmt.Errorf("%w: timer service %q: domain %d", statetable.ErrDecode, t.Service, t.Domain)
	}
	if g := statetable.KeyGroupOfKey(t.Key, o.meta.MaxParallelism); !o.meta.KeyGroups.Contains(g) {
		return fmt.Errorf("%w: timer service %q: key %x is of key group %d, outside the savepoint's %v", statetable.ErrKeyGroupNotOwned, t.Service, t.Key, g, o.meta.KeyGroups)
	}
	o.addTimer(t.Service, t)
	return nil
}
