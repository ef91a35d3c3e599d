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

// Header describes the savepoint Bootstrap writes: its number of key
// groups and which it covers (nil: all), its states (name, kind, codec IDs: key,
// namespace, then the kind's value codecs, and whether it has a TTL) and
// its timer services. The codec IDs must be those of the codecs the job
// registers, for the savepoint to restore into it.
type Header struct {
	MaxParallelism int
	KeyGroups      *statetable.KeyGroupRange
	States         []statetable.StateInfo
	Timers         []snapshot.TimerServiceInfo
}

// Header returns the header of the file's content (what Bootstrap needs
// to write it again).
func (f *File) Header() Header {
	h := Header{MaxParallelism: f.meta.MaxParallelism, States: slices.Clone(f.meta.States), Timers: slices.Clone(f.meta.Timers)}
	if f.meta.KeyGroups != statetable.AllKeyGroups(f.meta.MaxParallelism) {
		kgs := f.meta.KeyGroups
		h.KeyGroups = &kgs
	}
	return h
}

// newBootstrap checks h and returns the output it describes.
func newBootstrap(h Header) (*out, error) {
	if h.MaxParallelism < 1 || h.MaxParallelism > statetable.MaxParallelismLimit {
		return nil, fmt.Errorf("%w: max parallelism %d: need 1 to %d", statetable.ErrConfig, h.MaxParallelism, statetable.MaxParallelismLimit)
	}
	meta := snapshot.Meta{Savepoint: true, MaxParallelism: h.MaxParallelism, KeyGroups: statetable.AllKeyGroups(h.MaxParallelism)}
	if kgs := h.KeyGroups; kgs != nil {
		if kgs.First < 0 || kgs.Last >= h.MaxParallelism || kgs.Empty() {
			return nil, fmt.Errorf("%w: key groups %v of max parallelism %d", statetable.ErrConfig, *kgs, h.MaxParallelism)
		}
		meta.KeyGroups = *kgs
	}
	seen := map[string]bool{}
	for _, s := range h.States {
		switch {
		case s.Name == "" || seen[s.Name]:
			return nil, fmt.Errorf("%w: state name %q empty or given twice", statetable.ErrConfig, s.Name)
		case s.Kind < statetable.KindValue || s.Kind > statetable.KindAggregating:
			return nil, fmt.Errorf("%w: state %q: unknown kind %v", statetable.ErrConfig, s.Name, s.Kind)
		case len(s.Codec) != codecCount(s.Kind):
			return nil, fmt.Errorf("%w: state %q: a %s state has %d codec IDs (key, namespace, values), not %d", statetable.ErrConfig, s.Name, s.Kind, codecCount(s.Kind), len(s.Codec))
		case slices.Contains(s.Codec, ""):
			return nil, fmt.Errorf("%w: state %q: an empty codec ID", statetable.ErrConfig, s.Name)
		}
		seen[s.Name] = true
		meta.States = append(meta.States, statetable.StateInfo{Name: s.Name, Kind: s.Kind, Codec: slices.Clone(s.Codec), TTL: s.TTL})
	}
	seen = map[string]bool{}
	for _, t := range h.Timers {
		if t.Name == "" || seen[t.Name] || t.Codecs[0] == "" || t.Codecs[1] == "" {
			return nil, fmt.Errorf("%w: timer service %q: empty or given twice, or an empty codec ID", statetable.ErrConfig, t.Name)
		}
		seen[t.Name] = true
		meta.Timers = append(meta.Timers, t)
	}
	return newOut(meta), nil
}

// addChecked adds a bootstrap entry after checking it against its state:
// its key, namespace and values decode by their codec IDs (for the codecs
// this package reads), and it has the fields of its state's kind.
func (o *out) addChecked(cs codecs, e *Entry) error {
	info, ok := o.infos[e.State]
	if !ok {
		return fmt.Errorf("%w %q: not in the header", statetable.ErrUnknownState, e.State)
	}
	switch {
	case info.Kind == statetable.KindList && e.Map != nil, info.Kind == statetable.KindMap && e.List != nil,
		info.Kind != statetable.KindList && info.Kind != statetable.KindMap && (e.List != nil || e.Map != nil):
		return fmt.Errorf("%w: state %q is a %s state: its entries have %s", statetable.ErrDecode, e.State, info.Kind, cellName(info.Kind))
	}
	if err := cs.check(info.Codec[0], e.Key); err != nil {
		return fmt.Errorf("state %q: key: %w", e.State, err)
	}
	if err := cs.check(info.Codec[1], e.Namespace); err != nil {
		return fmt.Errorf("state %q, key %x: namespace: %w", e.State, e.Key, err)
	}
	if info.Kind == statetable.KindMap {
		for _, m := range e.Map {
			if err := cs.check(info.Codec[2], m.Key); err != nil {
				return fmt.Errorf("state %q, key %x: map user key: %w", e.State, e.Key, err)
			}
		}
	}
	vc := info.Codec[valueCodec(info.Kind)]
	return e.values(info.Kind, func(v *Value) error {
		if err := cs.check(vc, v.Bytes); err != nil {
			return fmt.Errorf("state %q, key %x: value: %w", e.State, e.Key, err)
		}
		return nil
	})
}

// addTimerChecked adds a bootstrap timer after checking its service and
// that its key and namespace decode.
func (o *out) addTimerChecked(cs codecs, t *Timer) error {
	i := slices.IndexFunc(o.meta.Timers, func(s snapshot.TimerServiceInfo) bool { return s.Name == t.Service })
	switch {
	case i < 0:
		return fmt.Errorf("%w: timer service %q: not in the header", statetable.ErrUnknownState, t.Service)
	case t.Domain != timerqueue.EventTime && t.Domain != timerqueue.ProcessingTime:
		return fmt.Errorf("%w: timer service %q: domain %d", statetable.ErrDecode, t.Service, t.Domain)
	}
	if err := cs.check(o.meta.Timers[i].Codecs[0], t.Key); err != nil {
		return fmt.Errorf("timer service %q: key: %w", t.Service, err)
	}
	if err := cs.check(o.meta.Timers[i].Codecs[1], t.Namespace); err != nil {
		return fmt.Errorf("timer service %q, key %x: namespace: %w", t.Service, t.Key, err)
	}
	o.addTimer(t.Service, t)
	return nil
}

// Bootstrap writes to w a savepoint of h's states and timer services
// holding entries and timers (either may be nil), so that a job starts
// with that state: restored into a backend with the states and timer
// services h describes registered, it gives them exactly this content.
// Each entry's KeyGroup is ignored (computed from its key); an entry
// with an empty list or map is no entry. Errors: h out of range or
// inconsistent, statetable.ErrConfig; an entry of a state h lacks,
// statetable.ErrUnknownState; bytes that do not decode by their codec
// ID (for the codecs Dump shows as JSON), statetable.ErrDecode; the same
// key and namespace, map user key or timer twice, ErrDuplicate.
//
// Cost: every entry and timer is held in memory, encoded, until the file
// is written (entries come in any order; a savepoint's are sorted). On
// the calling goroutine.
func Bootstrap(ctx context.Context, w io.Writer, h Header, entries iter.Seq[Entry], timers iter.Seq[Timer]) error {
	o, err := newBootstrap(h)
	if err != nil {
		return err
	}
	cs := codecs{}
	n := 0
	if entries != nil {
		for e := range entries {
			if err := o.addChecked(cs, &e); err != nil {
				return fmt.Errorf("savepoint: entry %d: %w", n, err)
			}
			if err := o.add(e.State, &e); err != nil {
				return fmt.Errorf("savepoint: entry %d: %w", n, err)
			}
			n++
		}
	}
	n = 0
	if timers != nil {
		for t := range timers {
			if err := o.addTimerChecked(cs, &t); err != nil {
				return fmt.Errorf("savepoint: timer %d: %w", n, err)
			}
			n++
		}
	}
	return o.write(ctx, w)
}

// cellName says what the entries of a state of kind k hold.
func cellName(k statetable.Kind) string {
	switch k {
	case statetable.KindList:
		return "a list"
	case statetable.KindMap:
		return "a map"
	}
	return "a value"
}
