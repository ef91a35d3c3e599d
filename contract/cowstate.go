package contract

import (
	"context"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// This file adapts cowstate's typed engine to Backend, through its public
// API only: every contract state is a typed state with statetable.String
// codecs for key, namespace and values, registered on the backend like any
// other, so a contract state and one registered with cowstate.NamespacedValue(b,
// name, statetable.String, ...) are the same state.

// Of returns b as a contract Backend. The adapter keeps the typed handles
// of the states and timer services registered through it (a map lookup per
// operation); it holds nothing else, and every write goes to b. Writer
// goroutine of b only.
func Of(b *cowstate.Backend) Backend {
	return &cowBackend{b: b, states: map[string]handle{}, services: map[string]*cowstate.NamespacedTimerService[string, string]{}}
}

// New returns a new cowstate Backend for cfg as a contract Backend: Of of
// cowstate.New(cfg).
func New(cfg cowstate.Config) (Backend, error) {
	b, err := cowstate.New(cfg)
	if err != nil {
		return nil, err
	}
	return Of(b), nil
}

var (
	_ TTLBackend    = (*cowBackend)(nil)
	_ SchemaBackend = (*cowBackend)(nil)
)

type cowBackend struct {
	b        *cowstate.Backend
	states   map[string]handle
	services map[string]*cowstate.NamespacedTimerService[string, string]
}

// handle is the typed state behind a contract state name: one of the five
// fields is set, by kind.
type handle struct {
	kind   statetable.Kind
	ttl    *statetable.TTL // nil: no TTL
	schema *Schema         // nil: statetable.String for keys, namespaces and values
	v      *statetable.ValueState[string, string, string]
	l      *statetable.ListState[string, string, string]
	m      *statetable.MapState[string, string, string, string]
	r      *statetable.ReducingState[string, string, string]
	a      *statetable.AggregatingState[string, string, string, string, string]
}

var str = statetable.String

func (c *cowBackend) MaxParallelism() int                 { return c.b.MaxParallelism() }
func (c *cowBackend) KeyGroups() statetable.KeyGroupRange { return c.b.KeyGroups() }

func (c *cowBackend) RegisterState(name string, kind statetable.Kind) (err error) {
	return c.register(name, kind, nil, nil)
}

// RegisterStateSchema registers a state whose keys, namespaces and values
// are encoded with the codecs of s: a typed state of strings like any
// other, with other codecs.
func (c *cowBackend) RegisterStateSchema(name string, kind statetable.Kind, s Schema) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if h, ok := c.states[name]; ok && h.kind == kind && (h.schema == nil || *h.schema != s) {
		return fmt.Errorf("%w: %q is registered with schema %s, not %v", statetable.ErrStateMismatch, name, schemaName(h.schema), s)
	}
	return c.register(name, kind, nil, &s)
}

func schemaName(s *Schema) string {
	if s == nil {
		return "none"
	}
	return s.String()
}

// RegisterStateTTL registers a state with a TTL (cowstate.ValueWithTTL and
// the other kinds' ...WithTTL constructors).
func (c *cowBackend) RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error {
	return c.register(name, kind, &ttl, nil)
}

// CleanupExpired is cowstate.Backend.CleanupExpired.
func (c *cowBackend) CleanupExpired(budget int) (visited, removed int) {
	return c.b.CleanupExpired(budget)
}

func (c *cowBackend) register(name string, kind statetable.Kind, ttl *statetable.TTL, schema *Schema) (err error) {
	if h, ok := c.states[name]; ok {
		if h.kind != kind {
			return fmt.Errorf("%w: %q is a %v state, not %v", statetable.ErrStateMismatch, name, h.kind, kind)
		}
		if (h.ttl == nil) != (ttl == nil) || ttl != nil && *h.ttl != *ttl {
			return fmt.Errorf("%w: %q is registered with another TTL", statetable.ErrStateMismatch, name)
		}
		return nil
	}
	h := handle{kind: kind, ttl: ttl, schema: schema}
	kc, nc, vc := str, str, str
	if schema != nil {
		kc, nc, vc = schema.KeyCodec(), schema.NamespaceCodec(), schema.ValueCodec()
	}
	switch {
	case kind == statetable.KindValue && ttl == nil:
		h.v, err = cowstate.NamespacedValue(c.b, name, kc, nc, vc, "")
	case kind == statetable.KindValue:
		h.v, err = cowstate.NamespacedValueWithTTL(c.b, name, kc, nc, vc, "", *ttl)
	case kind == statetable.KindList && ttl == nil:
		h.l, err = cowstate.NamespacedList(c.b, name, kc, nc, vc)
	case kind == statetable.KindList:
		h.l, err = cowstate.NamespacedListWithTTL(c.b, name, kc, nc, vc, *ttl)
	case kind == statetable.KindMap && ttl == nil:
		h.m, err = cowstate.NamespacedMap(c.b, name, kc, nc, str, vc)
	case kind == statetable.KindMap:
		h.m, err = cowstate.NamespacedMapWithTTL(c.b, name, kc, nc, str, vc, *ttl)
	case kind == statetable.KindReducing && ttl == nil:
		h.r, err = cowstate.NamespacedReducing(c.b, name, kc, nc, vc, Reduce)
	case kind == statetable.KindReducing:
		h.r, err = cowstate.NamespacedReducingWithTTL(c.b, name, kc, nc, vc, Reduce, *ttl)
	case kind == statetable.KindAggregating && ttl == nil:
		h.a, err = cowstate.NamespacedAggregating(c.b, name, kc, nc, vc, Aggregate{})
	case kind == statetable.KindAggregating:
		h.a, err = cowstate.NamespacedAggregatingWithTTL(c.b, name, kc, nc, vc, Aggregate{}, *ttl)
	default:
		err = fmt.Errorf("%w: state %q of unknown kind %v", ErrKind, name, kind)
	}
	if err == nil {
		c.states[name] = h
	}
	return err
}

func (c *cowBackend) RegisterTimerService(name string) error {
	if _, ok := c.services[name]; ok {
		return nil
	}
	s, err := cowstate.NamespacedTimers(c.b, name, str, str)
	if err == nil {
		c.services[name] = s
	}
	return err
}

// state returns the handle of a registered state, checking that its kind
// is one of kinds (any kind if none is given).
func (c *cowBackend) state(name string, kinds ...statetable.Kind) (handle, error) {
	return lookup(c.states, name, "", kinds...)
}

func lookup(states map[string]handle, name, where string, kinds ...statetable.Kind) (handle, error) {
	h, ok := states[name]
	if !ok {
		return handle{}, fmt.Errorf("%w %q%s", statetable.ErrUnknownState, name, where)
	}
	if len(kinds) > 0 && !slices.Contains(kinds, h.kind) {
		return handle{}, fmt.Errorf("%w: %q is a %v state", ErrKind, name, h.kind)
	}
	return h, nil
}

func (c *cowBackend) timers(name string) (*cowstate.NamespacedTimerService[string, string], error) {
	s, ok := c.services[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTimerService, name)
	}
	return s, nil
}

func (c *cowBackend) Put(state, key, ns, value string) error {
	h, err := c.state(state, statetable.KindValue)
	if err != nil {
		return err
	}
	if value == "" {
		return h.v.Clear(key, ns)
	}
	return h.v.Put(key, ns, value)
}

func (c *cowBackend) Get(state, key, ns string) (string, bool, error) {
	h, err := c.state(state, statetable.KindValue, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return "", false, err
	}
	switch h.kind {
	case statetable.KindValue:
		v, err := h.v.Get(key, ns)
		return v, v != "", err
	case statetable.KindReducing:
		return h.r.Get(key, ns)
	default:
		return h.a.Get(key, ns)
	}
}

func (c *cowBackend) Add(state, key, ns, v string) error {
	h, err := c.state(state, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	switch h.kind {
	case statetable.KindList:
		return h.l.Add(key, ns, v)
	case statetable.KindReducing:
		return h.r.Add(key, ns, v)
	default:
		return h.a.Add(key, ns, v)
	}
}

func (c *cowBackend) GetList(state, key, ns string) ([]string, error) {
	h, err := c.state(state, statetable.KindList)
	if err != nil {
		return nil, err
	}
	seq, err := h.l.Get(key, ns)
	if err != nil {
		return nil, err
	}
	return slices.Collect(seq), nil
}

func (c *cowBackend) UpdateList(state, key, ns string, elems []string) error {
	h, err := c.state(state, statetable.KindList)
	if err != nil {
		return err
	}
	return h.l.Update(key, ns, slices.Values(elems))
}

func (c *cowBackend) PutMapEntry(state, key, ns, userKey, userValue string) error {
	h, err := c.state(state, statetable.KindMap)
	if err != nil {
		return err
	}
	return h.m.Put(key, ns, userKey, userValue)
}

func (c *cowBackend) GetMapEntry(state, key, ns, userKey string) (string, bool, error) {
	h, err := c.state(state, statetable.KindMap)
	if err != nil {
		return "", false, err
	}
	return h.m.Get(key, ns, userKey)
}

func (c *cowBackend) RemoveMapEntry(state, key, ns, userKey string) error {
	h, err := c.state(state, statetable.KindMap)
	if err != nil {
		return err
	}
	return h.m.Remove(key, ns, userKey)
}

func (c *cowBackend) ClearState(state, key, ns string) error {
	h, err := c.state(state)
	if err != nil {
		return err
	}
	switch h.kind {
	case statetable.KindValue:
		return h.v.Clear(key, ns)
	case statetable.KindList:
		return h.l.Clear(key, ns)
	case statetable.KindMap:
		return h.m.Clear(key, ns)
	case statetable.KindReducing:
		return h.r.Clear(key, ns)
	default:
		return h.a.Clear(key, ns)
	}
}

func (c *cowBackend) MergeNamespaces(state, key, target string, sources []string) error {
	h, err := c.state(state, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	switch h.kind {
	case statetable.KindList:
		return h.l.MergeNamespaces(key, target, sources...)
	case statetable.KindReducing:
		return h.r.MergeNamespaces(key, target, sources...)
	default:
		return h.a.MergeNamespaces(key, target, sources...)
	}
}

func (c *cowBackend) RegisterTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := c.timers(service)
	if err != nil {
		return false, err
	}
	if d == timerqueue.ProcessingTime {
		return s.RegisterProcessingTime(key, ns, ts)
	}
	return s.RegisterEventTime(key, ns, ts)
}

func (c *cowBackend) DeleteTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := c.timers(service)
	if err != nil {
		return false, err
	}
	if d == timerqueue.ProcessingTime {
		return s.DeleteProcessingTime(key, ns, ts)
	}
	return s.DeleteEventTime(key, ns, ts)
}

func (c *cowBackend) AdvanceWatermark(service string, wm int64, fire FireFunc) (int, error) {
	s, err := c.timers(service)
	if err != nil {
		return 0, err
	}
	return s.AdvanceWatermark(wm, fire)
}

func (c *cowBackend) AdvanceProcessingTime(service string, fire FireFunc) (int, error) {
	s, err := c.timers(service)
	if err != nil {
		return 0, err
	}
	return s.AdvanceProcessingTime(fire)
}

// StateEntries reads the live state: O(entries).
func (c *cowBackend) StateEntries(state string) ([]Entry, error) {
	h, err := c.state(state)
	if err != nil {
		return nil, err
	}
	if h.ttl != nil {
		// Read through a snapshot: a read of the live state cleans up and
		// (UpdateOnReadAndWrite) refreshes, and a snapshot leaves out what
		// has expired at its capture, now.
		v := c.Capture()
		defer v.Release()
		return v.StateEntries(state)
	}
	// Collect the pairs first: reading a pair's content while the state's
	// iterator runs is allowed, but the content readers reuse the writer's
	// scratch buffer, which the iterator does not.
	pairs := slices.Collect(pairsOf(h, nil))
	out := make([]Entry, 0, len(pairs))
	for _, p := range pairs {
		e, err := h.entry(p[0], p[1], nil)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// pairsOf yields the (key, namespace) pairs of the live state (snap nil) or
// of a snapshot, and the error of a snapshot that does not hold the state.
func pairsOf(h handle, snap *statetable.Snapshot) iter.Seq[[2]string] {
	return func(yield func([2]string) bool) {
		var seq iter.Seq2[string, string]
		var err error
		switch h.kind {
		case statetable.KindValue:
			seq, err = pairs(h.v.Pairs, h.v.PairsAt, snap)
		case statetable.KindList:
			seq, err = pairs(h.l.Pairs, h.l.PairsAt, snap)
		case statetable.KindMap:
			seq, err = pairs(h.m.Pairs, h.m.PairsAt, snap)
		case statetable.KindReducing:
			seq, err = pairs(h.r.Pairs, h.r.PairsAt, snap)
		default:
			seq, err = pairs(h.a.Pairs, h.a.PairsAt, snap)
		}
		if err != nil {
			return // the state is not in the snapshot: no entries
		}
		for k, ns := range seq {
			if !yield([2]string{k, ns}) {
				return
			}
		}
	}
}

func pairs(live func() iter.Seq2[string, string], at func(*statetable.Snapshot) (iter.Seq2[string, string], error), snap *statetable.Snapshot) (iter.Seq2[string, string], error) {
	if snap == nil {
		return live(), nil
	}
	return at(snap)
}

// entry reads (key, ns) of the live state (snap nil) or of a snapshot.
func (h handle) entry(key, ns string, snap *statetable.Snapshot) (e Entry, err error) {
	e.Key, e.Namespace = key, ns
	switch h.kind {
	case statetable.KindValue:
		if snap == nil {
			e.Value, err = h.v.Get(key, ns)
		} else {
			e.Value, err = h.v.GetAt(snap, key, ns)
		}
	case statetable.KindList:
		var seq iter.Seq[string]
		if snap == nil {
			seq, err = h.l.Get(key, ns)
		} else {
			seq, err = h.l.GetAt(snap, key, ns)
		}
		if err == nil {
			e.List = slices.Collect(seq)
		}
	case statetable.KindMap:
		var seq iter.Seq2[string, string]
		if snap == nil {
			seq, err = h.m.Iterate(key, ns)
		} else {
			seq, err = h.m.IterateAt(snap, key, ns)
		}
		if err == nil {
			e.Map = maps.Collect(seq)
		}
	case statetable.KindReducing:
		if snap == nil {
			e.Value, _, err = h.r.Get(key, ns)
		} else {
			e.Value, _, err = h.r.GetAt(snap, key, ns)
		}
	default:
		if snap == nil {
			e.Value, _, err = h.a.Get(key, ns)
		} else {
			e.Value, _, err = h.a.GetAt(snap, key, ns)
		}
	}
	return e, err
}

// presentAt reports whether e, read from snap, is an entry of the state:
// of a TTL state, PairsAt yields the pairs held, expired ones included.
func (h handle) presentAt(snap *statetable.Snapshot, e Entry) bool {
	switch h.kind {
	case statetable.KindValue:
		_, ok, _ := h.v.LookupAt(snap, e.Key, e.Namespace)
		return ok
	case statetable.KindReducing:
		_, ok, _ := h.r.GetAt(snap, e.Key, e.Namespace)
		return ok
	case statetable.KindAggregating:
		_, ok, _ := h.a.GetAt(snap, e.Key, e.Namespace)
		return ok
	}
	return len(e.List) > 0 || len(e.Map) > 0
}

// TimerEntries reads the live timers, in firing order: O(timers).
func (c *cowBackend) TimerEntries(service string, d timerqueue.Domain) ([]Timer, error) {
	s, err := c.timers(service)
	if err != nil {
		return nil, err
	}
	seq := s.EventTimers()
	if d == timerqueue.ProcessingTime {
		seq = s.ProcessingTimers()
	}
	return slices.Collect(seq), nil
}

// Capture takes a cowstate Snapshot: O(number of states and timer
// services), whatever their size.
func (c *cowBackend) Capture() View {
	return &cowView{snap: c.b.Snapshot(), states: maps.Clone(c.states), services: maps.Clone(c.services)}
}

// RestoreSnapshot reads a snapshot file (snapshot.Open) into the backend
// (cowstate.Backend.RestoreSnapshot).
func (c *cowBackend) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	rd, err := snapshot.Open(r, size)
	if err != nil {
		return err
	}
	return c.b.RestoreSnapshot(ctx, rd)
}

// cowView is a Snapshot with the typed handles of the states and services
// registered at capture: looked up on the writer goroutine, read-only
// afterwards, so any goroutine may read the view.
type cowView struct {
	snap     *cowstate.Snapshot
	states   map[string]handle
	services map[string]*cowstate.NamespacedTimerService[string, string]
}

// StateEntries reads the snapshot: O(entries).
func (v *cowView) StateEntries(state string) ([]Entry, error) {
	h, err := lookup(v.states, state, " in the view")
	if err != nil {
		return nil, err
	}
	var out []Entry
	for p := range pairsOf(h, v.snap.State()) {
		e, err := h.entry(p[0], p[1], v.snap.State())
		if err != nil {
			return nil, err
		}
		if h.ttl != nil && !h.presentAt(v.snap.State(), e) {
			continue // expired at the capture
		}
		out = append(out, e)
	}
	return out, nil
}

func (v *cowView) TimerEntries(service string, d timerqueue.Domain) ([]Timer, error) {
	s, ok := v.services[service]
	if !ok {
		return nil, fmt.Errorf("%w: %q in the view", ErrUnknownTimerService, service)
	}
	seq, err := s.EventTimersAt(v.snap)
	if d == timerqueue.ProcessingTime {
		seq, err = s.ProcessingTimersAt(v.snap)
	}
	if err != nil {
		return nil, err
	}
	return slices.Collect(seq), nil
}

// WriteSnapshot writes cowstate's snapshot format (cowstate.WriteSnapshot).
func (v *cowView) WriteSnapshot(ctx context.Context, w io.Writer) error {
	return cowstate.WriteSnapshot(ctx, w, v.snap, nil)
}

func (v *cowView) Release() { v.snap.Release() }
