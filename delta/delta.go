package delta

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Source is one captured version of a backend, as Diff reads it: the
// metadata a snapshot file would carry, the keyed states, and the timer
// queues of every service. The caller keeps the capture live while Diff
// runs.
type Source struct {
	Meta   snapshot.Meta
	State  *statetable.Snapshot
	Timers map[string]Queues // by service name
}

// Queues is the event-time and processing-time timers of one service.
type Queues struct {
	Event, Processing *timerqueue.Snapshot
}

// Delta is the net difference between two versions of a backend's state,
// per key group: entries put, deleted and patched, timers added and
// removed. Base and Target name the versions (checkpoint ids: Apply
// requires the target backend to hold Base). A Delta is a value: Merge and
// Apply never modify their inputs. Not safe for concurrent writes; any
// number of goroutines may read one.
type Delta struct {
	Base, Target uint64
	// Meta describes the newer version (its states, timer services, max
	// parallelism and key groups); Meta.Version is unused.
	Meta   snapshot.Meta
	groups map[int]*group
}

// group is the changes of one key group.
type group struct {
	states map[string]map[string]*entryOp // state -> composite key -> op
	timers map[timerKey]bool              // timer -> registered after the delta
}

// entryOp is the net change of one entry: deleted, or a put of cell
// followed by parts, or (put false) parts on the base's cell.
type entryOp struct {
	deleted bool
	put     bool
	cell    []byte
	parts   map[string]statetable.Part // by part key
}

// timerKey identifies a timer of one service and time domain.
type timerKey struct {
	service string
	domain  timerqueue.Domain
	ts      int64
	key, ns string
}

func (d *Delta) group(g int) *group {
	if d.groups == nil {
		d.groups = map[int]*group{}
	}
	gr := d.groups[g]
	if gr == nil {
		gr = &group{states: map[string]map[string]*entryOp{}, timers: map[timerKey]bool{}}
		d.groups[g] = gr
	}
	return gr
}

// Groups returns the key groups the delta changes, ascending.
func (d *Delta) Groups() []int {
	return slices.Sorted(maps.Keys(d.groups))
}

// Changes returns the number of entries and timers the delta changes.
func (d *Delta) Changes() (entries, timers int) {
	for _, gr := range d.groups {
		for _, ops := range gr.states {
			entries += len(ops)
		}
		timers += len(gr.timers)
	}
	return entries, timers
}

// Diff computes the delta that turns prev into next, two versions of the
// same backend (prev older), by diffing their structures: the cost follows
// what changed, not the size of the state (see statetable.DiffState and
// timerqueue.Diff). States or timer services new in next diff against
// empty ones. Base and Target of the result are left zero for the caller.
// Any goroutine, while both captures are live.
func Diff(prev, next Source) (*Delta, error) {
	pm, nm := prev.Meta, next.Meta
	if pm.MaxParallelism != nm.MaxParallelism || pm.KeyGroups != nm.KeyGroups {
		return nil, fmt.Errorf("%w: max parallelism %d, key groups %v, then %d, %v", ErrMismatch, pm.MaxParallelism, pm.KeyGroups, nm.MaxParallelism, nm.KeyGroups)
	}
	d := &Delta{Meta: nm}
	d.Meta.Version = 0
	for _, info := range nm.States {
		err := statetable.DiffState(prev.State, next.State, info.Name, func(c statetable.EntryChange) bool {
			op := &entryOp{deleted: c.Op == statetable.OpDelete, put: c.Op == statetable.OpPut, cell: c.Cell}
			if c.Op == statetable.OpPatch {
				op.parts = make(map[string]statetable.Part, len(c.Parts))
				for _, p := range c.Parts {
					op.parts[string(p.Key)] = p
				}
			}
			d.group(c.Group).ops(info.Name)[string(c.Key)] = op
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMismatch, err)
		}
	}
	for _, svc := range nm.Timers {
		nq, ok := next.Timers[svc.Name]
		if !ok {
			return nil, fmt.Errorf("%w: timer service %q has no queues", ErrMismatch, svc.Name)
		}
		pq, had := prev.Timers[svc.Name]
		for _, dq := range []struct {
			dom        timerqueue.Domain
			prev, next *timerqueue.Snapshot
		}{{timerqueue.EventTime, pq.Event, nq.Event}, {timerqueue.ProcessingTime, pq.Processing, nq.Processing}} {
			record := func(t timerqueue.Timer, g int, present bool) {
				d.group(g).timers[timerKey{svc.Name, dq.dom, t.Timestamp, t.Key, t.Namespace}] = present
			}
			if !had {
				for t, g := range dq.next.All() {
					record(t, g, true)
				}
				continue
			}
			for c := range timerqueue.Diff(dq.prev, dq.next) {
				switch c.Kind {
				case cow.Added:
					record(c.Key, c.New, true)
				case cow.Removed:
					record(c.Key, c.Old, false)
				}
			}
		}
	}
	return d, nil
}

func (gr *group) ops(state string) map[string]*entryOp {
	m := gr.states[state]
	if m == nil {
		m = map[string]*entryOp{}
		gr.states[state] = m
	}
	return m
}

// sortedKeys returns a map's string keys in byte order (the order the file
// format writes them in, so equal deltas encode alike).
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
