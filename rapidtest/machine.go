package rapidtest

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// This file is the state machine: one test case builds a backend and a
// Model with the same Config, applies a drawn sequence of operations to
// both, and after every step compares the live backend, every live view
// and every view being written with the model (views with the model
// frozen at capture).

// The states every test case registers, one per kind, and its timer
// services; unregistered names for the operations that must fail.
var (
	stateNames          = []string{"value", "list", "map", "reducing", "aggregating"}
	ttlPrefix           = "ttl-" // GroupTTL's states: ttl-value and so on, with a TTL
	stateKinds          = []statetable.Kind{statetable.KindValue, statetable.KindList, statetable.KindMap, statetable.KindReducing, statetable.KindAggregating}
	services            = []string{"t1", "t2"}
	domains             = []timerqueue.Domain{timerqueue.EventTime, timerqueue.ProcessingTime}
	unregisteredState   = "unregistered"
	unregisteredService = "t-unregistered"
)

// pair is a backend view and the model's view captured at the same step.
type pair struct {
	b, m contract.View
	step int
}

func (p pair) release() {
	p.b.Release()
	p.m.Release()
}

// write is a view being written on its own goroutine.
type write struct {
	pair
	buf, modelBuf bytes.Buffer
	schemas       map[string]contract.Schema // the states' schemas at capture
	done          chan struct{}
	err, readErr  error
}

type machine struct {
	opts       Options
	groups     Group
	newBackend func(Config) Backend
	cfg        Config
	now        int64 // the processing-time clock
	b          Backend
	m          *Model
	keys, nss  []string       // the test case's pools
	names      []string       // the states registered: stateNames, and with GroupTTL theirs
	ttl        statetable.TTL // GroupTTL: the TTL states' TTL
	// schemas, with GroupSchema, is the schema each of stateNames is
	// registered with (nil: RegisterState).
	schemas map[string]contract.Schema
	live    []pair
	writes  []*write
	step    int
	failed  bool
}

const maxLive, maxWrites = 4, 3

func prop(mach Machine, newBackend func(Config) Backend, opts Options) func(*rapid.T) {
	return func(t *rapid.T) {
		if opts.hooks != nil {
			opts.hooks.testCase()
		}
		m := &machine{opts: opts, groups: mach.groups() & opts.Groups, newBackend: newBackend}
		m.drawSpace(t)
		m.names = stateNames
		if m.groups&GroupTTL != 0 {
			m.names = nil
			for _, n := range stateNames {
				m.names = append(m.names, n, ttlPrefix+n)
			}
			m.ttl = statetable.TTL{
				Duration: time.Duration(rapid.Int64Range(1, 20).Draw(t, "ttlMillis")) * time.Millisecond,
				Update:   rapid.SampledFrom([]statetable.TTLUpdate{statetable.UpdateOnCreateAndWrite, statetable.UpdateOnReadAndWrite}).Draw(t, "ttlUpdate"),
			}
			t.Logf("TTL %+v", m.ttl)
		}
		if m.groups&GroupSchema != 0 {
			m.schemas = map[string]contract.Schema{}
			for _, name := range stateNames {
				m.schemas[name] = contract.Schema{Value: rapid.SampledFrom(contract.ValueSchemas).Draw(t, "schema of "+name)}
			}
			t.Logf("schemas %v", m.schemas)
		}
		t.Logf("config: max parallelism %d, key groups %v; keys %q, namespaces %q", m.cfg.MaxParallelism, m.cfg.KeyGroups, m.keys, m.nss)
		t.Cleanup(m.cleanup)
		m.b, m.m = m.fresh(t, m.cfg, false)

		actions := m.actions()
		var names []string // each action as many times as its weight
		for _, name := range slices.Sorted(maps.Keys(actions)) {
			for range cmp.Or(weights[name], 1) {
				names = append(names, name)
			}
		}
		m.compareAll(t)
		n := rapid.IntRange(0, opts.Steps).Draw(t, "steps")
		for m.step = 1; m.step <= n; m.step++ {
			name := rapid.SampledFrom(names).Draw(t, "action")
			if opts.hooks != nil {
				opts.hooks.step()
			}
			actions[name](t)
			m.compareAll(t)
		}
		for len(m.writes) > 0 {
			m.finishWrite(t, 0)
		}
	}
}

// fresh returns a new backend and model for cfg, with the machine's states
// and timer services registered (with the machine's schemas); restore says
// it is a restore target.
func (m *machine) fresh(t *rapid.T, cfg Config, restore bool) (Backend, *Model) {
	return m.freshWith(t, cfg, restore, m.schemas)
}

// freshWith is fresh with the states registered with schemas (nil:
// without schemas).
func (m *machine) freshWith(t *rapid.T, cfg Config, restore bool, schemas map[string]contract.Schema) (Backend, *Model) {
	newBackend := m.newBackend
	if restore && m.opts.NewRestoreTarget != nil {
		newBackend = m.opts.NewRestoreTarget
	}
	b := newBackend(cfg)
	mod, err := NewModel(cfg)
	if err != nil {
		m.fatalf(t, "BUG: NewModel(%+v): %v", cfg, err)
	}
	for i, name := range stateNames {
		if schemas != nil {
			sb, ok := b.(contract.SchemaBackend)
			if !ok {
				m.fatalf(t, "GroupSchema selected, but the backend (%T) does not implement contract.SchemaBackend", b)
			}
			if err := sb.RegisterStateSchema(name, stateKinds[i], schemas[name]); err != nil {
				m.fatalf(t, "RegisterStateSchema(%q, %v, %v): %v", name, stateKinds[i], schemas[name], err)
			}
		} else if err := b.RegisterState(name, stateKinds[i]); err != nil {
			m.fatalf(t, "RegisterState(%q, %v): %v", name, stateKinds[i], err)
		}
		mod.RegisterState(name, stateKinds[i])
	}
	if m.groups&GroupTTL != 0 {
		tb, ok := b.(contract.TTLBackend)
		if !ok {
			m.fatalf(t, "GroupTTL selected, but the backend (%T) does not implement contract.TTLBackend", b)
		}
		for i, name := range stateNames {
			if err := tb.RegisterStateTTL(ttlPrefix+name, stateKinds[i], m.ttl); err != nil {
				m.fatalf(t, "RegisterStateTTL(%q, %v, %+v): %v", ttlPrefix+name, stateKinds[i], m.ttl, err)
			}
			if err := mod.RegisterStateTTL(ttlPrefix+name, stateKinds[i], m.ttl); err != nil {
				m.fatalf(t, "BUG: model: RegisterStateTTL: %v", err)
			}
		}
	}
	if b.MaxParallelism() != mod.MaxParallelism() || b.KeyGroups() != mod.KeyGroups() {
		m.fatalf(t, "backend for %+v has max parallelism %d and key groups %v; want %d and %v",
			cfg, b.MaxParallelism(), b.KeyGroups(), mod.MaxParallelism(), mod.KeyGroups())
	}
	if err := b.RegisterState(stateNames[0], stateKinds[0]); err != nil {
		m.fatalf(t, "RegisterState(%q, %v) again: %v", stateNames[0], stateKinds[0], err)
	}
	if b.RegisterState(stateNames[0], stateKinds[1]) == nil {
		m.fatalf(t, "RegisterState(%q, %v) of a %v state: no error", stateNames[0], stateKinds[1], stateKinds[0])
	}
	if _, _, err := b.Get(unregisteredState, "", ""); err == nil {
		m.fatalf(t, "Get of an unregistered state: no error")
	}
	if m.groups&GroupTimers != 0 {
		for _, s := range services {
			if err := b.RegisterTimerService(s); err != nil {
				m.fatalf(t, "RegisterTimerService(%q): %v", s, err)
			}
			mod.RegisterTimerService(s)
		}
	}
	return b, mod
}

func (m *machine) cleanup() {
	for _, w := range m.writes {
		<-w.done
		w.release()
	}
	for _, p := range m.live {
		p.release()
	}
	m.writes, m.live = nil, nil
}

func (m *machine) fatalf(t *rapid.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf("step %d: ", m.step) + fmt.Sprintf(format, args...)
	if m.opts.hooks != nil && !m.failed {
		m.opts.hooks.fail(msg)
	}
	m.failed = true
	t.Fatal(msg)
}

// note records one operation of the test case (shown with a failure, and
// in Outcome.Shrunk).
func (m *machine) note(t *rapid.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("step %d: ", m.step) + cut(fmt.Sprintf(format, args...))
	t.Log(line)
	if m.opts.hooks != nil {
		m.opts.hooks.op(line)
	}
}

// same fails unless the backend and the model agree on an operation's
// results and on whether it failed.
func (m *machine) same(t *rapid.T, op string, got, want []any, gotErr, wantErr error) {
	t.Helper()
	if gotErr != nil {
		m.note(t, "%s -> %s, error %v", op, show(got), gotErr)
	} else {
		m.note(t, "%s -> %s", op, show(got))
	}
	if (gotErr == nil) != (wantErr == nil) {
		m.fatalf(t, "%s: backend error %v, model error %v", op, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		m.fatalf(t, "%s = %s, model says %s", op, show(got), show(want))
	}
}

// show formats results, strings quoted and cut to a readable length.
func show(vs []any) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, cut(fmt.Sprintf("%#v", v)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// compareAll compares the live backend, every live view and every view
// being written with the model.
func (m *machine) compareAll(t *rapid.T) {
	t.Helper()
	if err := m.diff(m.b, m.m); err != nil {
		m.fatalf(t, "live backend: %v", err)
	}
	for i, p := range m.live {
		if err := m.diff(p.b, p.m); err != nil {
			m.fatalf(t, "view %d (captured at step %d): %v", i, p.step, err)
		}
	}
	for i, w := range m.writes {
		if err := m.diff(w.b, w.m); err != nil {
			m.fatalf(t, "view of write %d (captured at step %d): %v", i, w.step, err)
		}
	}
}

// diff compares two readers: every state's entries, sorted by key and
// namespace, and every timer service's timers in the order given. A panic
// of the backend's reader (a released view read) is an error too.
func (m *machine) diff(got, want contract.EntryReader) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic reading the backend: %v", r)
		}
	}()
	for _, s := range m.names {
		g, err := got.StateEntries(s)
		if err != nil {
			return fmt.Errorf("state %q: %w", s, err)
		}
		w, err := want.StateEntries(s)
		if err != nil {
			return fmt.Errorf("BUG: model: state %q: %w", s, err)
		}
		g, w = canonical(g), canonical(w)
		for i := range max(len(g), len(w)) {
			switch {
			case i >= len(g):
				return fmt.Errorf("state %q: entry %s missing (%d entries, want %d)", s, showEntry(w[i]), len(g), len(w))
			case i >= len(w):
				return fmt.Errorf("state %q: unexpected entry %s (%d entries, want %d)", s, showEntry(g[i]), len(g), len(w))
			case !reflect.DeepEqual(g[i], w[i]):
				return fmt.Errorf("state %q: entry %s, want %s", s, showEntry(g[i]), showEntry(w[i]))
			}
		}
	}
	if m.groups&GroupTimers == 0 {
		return nil
	}
	for _, s := range services {
		for _, d := range domains {
			g, err := got.TimerEntries(s, d)
			if err != nil {
				return fmt.Errorf("timers %q domain %d: %w", s, d, err)
			}
			w, err := want.TimerEntries(s, d)
			if err != nil {
				return fmt.Errorf("BUG: model: timers %q: %w", s, err)
			}
			if len(g) == 0 && len(w) == 0 {
				continue
			}
			if !slices.Equal(g, w) {
				return fmt.Errorf("timers %q domain %d (in firing order): %s, want %s", s, d, showTimers(g), showTimers(w))
			}
		}
	}
	return nil
}

func showTimers(ts []timer) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("{%d %q %q}", t.Timestamp, t.Key, t.Namespace))
	}
	return cut("[" + strings.Join(parts, " ") + "]")
}

func showEntry(e contract.Entry) string { return cut(fmt.Sprintf("%+q", e)) }

// cut shortens what a failure shows of long keys and values: the first and
// last bytes and the length.
func cut(s string) string {
	const max = 600
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s ...(%d bytes)... %s", s[:max/2], len(s)-max, s[len(s)-max/2:])
}

// canonical sorts entries by key and namespace and makes empty lists and
// maps nil.
func canonical(es []contract.Entry) []contract.Entry {
	es = slices.Clone(es)
	for i := range es {
		if len(es[i].List) == 0 {
			es[i].List = nil
		}
		if len(es[i].Map) == 0 {
			es[i].Map = nil
		}
	}
	slices.SortFunc(es, func(a, b contract.Entry) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Namespace, b.Namespace))
	})
	return es
}
