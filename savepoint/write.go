package savepoint

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// out is a savepoint being written: a snapshot.Source over entries and
// timers held in memory by key group, so that snapshot.Write lays them out
// exactly as a backend's savepoint of the same content. fill, if set,
// loads the entries of key group g when the write first asks for them,
// and the entries of key groups before g are released then. Used by one
// goroutine.
type out struct {
	meta   snapshot.Meta
	infos  map[string]statetable.StateInfo
	fill   func(g int) error
	filled int // the key group fill loaded last; -1 none
	groups map[int]map[string][]outEntry
	timers map[timerKey][]outTimer
}

type outEntry struct {
	h    uint64 // entry hash
	ck   []byte // composite key
	cell []byte
}

type timerKey struct {
	service string
	domain  timerqueue.Domain
}

type outTimer struct {
	g int
	t timerqueue.Timer
}

func newOut(meta snapshot.Meta) *out {
	o := &out{meta: meta, infos: map[string]statetable.StateInfo{}, filled: -1, groups: map[int]map[string][]outEntry{}, timers: map[timerKey][]outTimer{}}
	for _, s := range meta.States {
		o.infos[s.Name] = s
	}
	return o
}

// add adds an entry of state (its cell encoded as the state's metadata
// says), in the key group of its key for the output's max parallelism.
func (o *out) add(state string, e *Entry) error {
	info := o.infos[state]
	cell, ok, err := e.appendCell(nil, info)
	if err != nil || !ok {
		return err
	}
	kh := statetable.HashKey(e.Key)
	g := statetable.KeyGroupOf(kh, o.meta.MaxParallelism)
	if !o.meta.KeyGroups.Contains(g) {
		return fmt.Errorf("%w: state %q: key %x is of key group %d, outside the savepoint's %v", statetable.ErrKeyGroupNotOwned, state, e.Key, g, o.meta.KeyGroups)
	}
	byState := o.groups[g]
	if byState == nil {
		byState = map[string][]outEntry{}
		o.groups[g] = byState
	}
	byState[state] = append(byState[state], outEntry{h: statetable.EntryHash(kh, e.Namespace), ck: appendComposite(nil, e.Key, e.Namespace), cell: cell})
	return nil
}

// addTimer adds a timer of service, in the key group of its key.
func (o *out) addTimer(service string, t *Timer) {
	g := statetable.KeyGroupOfKey(t.Key, o.meta.MaxParallelism)
	k := timerKey{service, t.Domain}
	o.timers[k] = append(o.timers[k], outTimer{g, timerqueue.Timer{Timestamp: t.Timestamp, Key: string(t.Key), Namespace: string(t.Namespace)}})
}

// write writes the savepoint: snapshot.Write over o.
func (o *out) write(ctx context.Context, w io.Writer) error {
	// Timers in firing order, each once.
	for k, ts := range o.timers {
		slices.SortFunc(ts, func(a, b outTimer) int { return timerqueue.Compare(a.t, b.t) })
		for i := 1; i < len(ts); i++ {
			if timerqueue.Compare(ts[i-1].t, ts[i].t) == 0 {
				return fmt.Errorf("%w: timer service %q: %s timer at %d of key %x, namespace %x twice", ErrDuplicate, k.service, domainName(k.domain), ts[i].t.Timestamp, ts[i].t.Key, ts[i].t.Namespace)
			}
		}
	}
	if err := snapshot.Write(ctx, w, o, nil); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	return nil
}

// Meta implements snapshot.Source.
func (o *out) Meta() snapshot.Meta { return o.meta }

// AppendStateEntries implements snapshot.Source: the entries of state in
// key group g, sorted into canonical order (entry hash, then composite
// key bytes).
func (o *out) AppendStateEntries(dst []byte, state string, g int) ([]byte, int, error) {
	if o.fill != nil && g != o.filled {
		for kg := range o.groups {
			if kg < g {
				delete(o.groups, kg)
			}
		}
		o.filled = g
		if err := o.fill(g); err != nil {
			return dst, 0, err
		}
	}
	es := o.groups[g][state]
	slices.SortFunc(es, func(a, b outEntry) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return bytes.Compare(a.ck, b.ck)
	})
	for i, e := range es {
		if i > 0 && bytes.Equal(es[i-1].ck, e.ck) {
			key, ns, _ := splitComposite(e.ck)
			return dst, 0, fmt.Errorf("%w: state %q: key %x, namespace %x twice", ErrDuplicate, state, key, ns)
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.ck)))
		dst = append(dst, e.ck...)
		dst = binary.AppendUvarint(dst, uint64(len(e.cell)))
		dst = append(dst, e.cell...)
	}
	return dst, len(es), nil
}

// TimerEntries implements snapshot.Source.
func (o *out) TimerEntries(service string, d timerqueue.Domain, yield func(g int, ts int64, key, ns string) bool) error {
	for _, t := range o.timers[timerKey{service, d}] {
		if !yield(t.g, t.t.Timestamp, t.t.Key, t.t.Namespace) {
			break
		}
	}
	return nil
}

func domainName(d timerqueue.Domain) string {
	if d == timerqueue.ProcessingTime {
		return "processing"
	}
	return "event"
}
