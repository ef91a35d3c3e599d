package rapidtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Config configures a backend under test: cowstate's Config. The suite
// always sets MaxParallelism, and Clock to a clock it advances itself;
// KeyGroups is nil (all key groups) or the share of one operator.
type Config = cowstate.Config

// Backend is what the suite tests: contract.Backend.
type Backend = contract.Backend

// Group is a set of operation groups, for Options.Groups.
type Group uint

const (
	// GroupState: Put, Get, Add, the list and map operations and
	// ClearState, on states of every kind.
	GroupState Group = 1 << iota
	// GroupMerge: MergeNamespaces.
	GroupMerge
	// GroupTimers: timer services, RegisterTimer and DeleteTimer, and
	// firing with callbacks that write state, register, delete and
	// capture, and sometimes fail.
	GroupTimers
	// GroupSnapshots: Capture and Release; every live view is compared
	// after every step with the model frozen at capture.
	GroupSnapshots
	// GroupWrites: WriteSnapshot of a live view on its own goroutine while
	// the machine goes on; the bytes are restored into a fresh backend.
	GroupWrites
	// GroupRescale: a snapshot restored into fresh backends owning shares
	// of the key groups, each compared with the model's share, and probed
	// with writes of every key.
	GroupRescale

	// AllGroups is every group.
	AllGroups = GroupState | GroupMerge | GroupTimers | GroupSnapshots | GroupWrites | GroupRescale
)

// Machine names one of the suite's state machines.
type Machine string

const (
	// MachineState drives keyed state: every kind, namespaces and merges,
	// with snapshots, writes and rescaling.
	MachineState Machine = "state"
	// MachineTimers drives timers and firing (callbacks write state), with
	// snapshots, writes and rescaling.
	MachineTimers Machine = "timers"
	// MachineAll drives every operation group at once.
	MachineAll Machine = "all"
)

// Machines lists the machines Run runs, in order.
var Machines = []Machine{MachineState, MachineTimers, MachineAll}

// core returns the groups a machine is about: it runs only if one of them
// is selected.
func (m Machine) core() Group {
	switch m {
	case MachineState:
		return GroupState | GroupMerge
	case MachineTimers:
		return GroupTimers
	}
	return AllGroups
}

func (m Machine) groups() Group {
	switch m {
	case MachineState:
		return GroupState | GroupMerge | GroupSnapshots | GroupWrites | GroupRescale
	case MachineTimers:
		return GroupTimers | GroupSnapshots | GroupWrites | GroupRescale
	}
	return AllGroups
}

// Options tunes a run. The zero value runs every group with the defaults.
type Options struct {
	// Groups selects the operation groups (0: AllGroups). A machine none
	// of whose core groups is selected is skipped: "state" needs GroupState
	// or GroupMerge, "timers" GroupTimers.
	Groups Group
	// Keys is the number of distinct keys (default 4): every third one is
	// longer than 40 bytes, since backends may store short and long keys
	// apart. Namespaces is the number of distinct namespaces, ""
	// included (default 3).
	Keys, Namespaces int
	// Steps is the most operations in one test case (default 100, or 50
	// under testing.Short); rapid draws the number, biased towards fewer
	// (about a third of Steps on average), and shrinks it.
	Steps int
	// MaxParallelism lists the numbers of key groups to draw from
	// (default 1, 2, 4, 8, 32).
	MaxParallelism []int
	// Duration keeps running rounds of rapid checks until it has passed
	// (0: one round). A round is -rapid.checks test cases (default 100,
	// a fifth of that under testing.Short).
	Duration time.Duration

	// hooks, for this package's tests: count steps and see the first
	// failure.
	hooks *hooks
}

type hooks struct {
	step, testCase func()
	fail           func(msg string)
}

func (o Options) withDefaults() Options {
	if o.Groups == 0 {
		o.Groups = AllGroups
	}
	if o.Keys <= 0 {
		o.Keys = 4
	}
	if o.Namespaces <= 0 {
		o.Namespaces = 3
	}
	if o.Steps <= 0 {
		o.Steps = 100
		if testing.Short() {
			o.Steps = 50
		}
	}
	if len(o.MaxParallelism) == 0 {
		o.MaxParallelism = []int{1, 2, 4, 8, 32}
	}
	return o
}

// Run runs every machine of the suite against the backends newBackend
// returns, side by side with the Model, each as a subtest of t (named after
// the machine). newBackend must return a new, empty backend for the Config
// it is given, every call (it may panic if it cannot). A failure is
// reported on the subtest with the shrunk sequence of operations and a
// -rapid.seed (or -rapid.failfile) to replay it.
func Run(t *testing.T, newBackend func(Config) Backend, opts Options) {
	t.Helper()
	opts = opts.withDefaults()
	for _, m := range Machines {
		t.Run(string(m), func(t *testing.T) {
			t.Helper()
			if m.core()&opts.Groups == 0 {
				t.Skipf("no operation group of machine %q selected", m)
			}
			start := time.Now()
			for {
				rapid.Check(t, prop(m, newBackend, opts))
				if time.Since(start) >= opts.Duration {
					return
				}
			}
		})
	}
}

// Fuzz returns a fuzz target running one machine, for testing.F.Fuzz:
//
//	func FuzzMyBackend(f *testing.F) {
//		f.Fuzz(rapidtest.Fuzz(rapidtest.MachineAll, newMyBackend, rapidtest.Options{}))
//	}
func Fuzz(m Machine, newBackend func(Config) Backend, opts Options) func(*testing.T, []byte) {
	return rapid.MakeFuzz(prop(m, newBackend, opts.withDefaults()))
}

// check runs one machine with rapid.Check on any rapid.TB (this package's
// tests pass a recorder to see the suite fail).
func check(tb rapid.TB, m Machine, newBackend func(Config) Backend, opts Options) {
	tb.Helper()
	rapid.Check(tb, prop(m, newBackend, opts.withDefaults()))
}

// The states every test case registers, one per kind, and its timer
// services.
var (
	stateNames = []string{"value", "list", "map", "reducing", "aggregating"}
	stateKinds = []statetable.Kind{statetable.KindValue, statetable.KindList, statetable.KindMap, statetable.KindReducing, statetable.KindAggregating}
	services   = []string{"t1", "t2"}
	domains    = []timerqueue.Domain{timerqueue.EventTime, timerqueue.ProcessingTime}
	values     = []string{"", "a", "b", "c", "xy"}
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
	keys, nss  []string
	live       []pair
	writes     []*write
	step       int
	failed     bool
}

const maxLive, maxWrites = 4, 3

func prop(mach Machine, newBackend func(Config) Backend, opts Options) func(*rapid.T) {
	return func(t *rapid.T) {
		if opts.hooks != nil {
			opts.hooks.testCase()
		}
		m := &machine{opts: opts, groups: mach.groups() & opts.Groups, newBackend: newBackend}
		for i := range opts.Keys {
			k := fmt.Sprint("k", i)
			if i%3 == 2 {
				// Long keys too: a backend may store short and long keys
				// apart (cowstate does, at 31 bytes).
				k += "-with-a-tail-that-makes-it-long-0123456789"
			}
			m.keys = append(m.keys, k)
		}
		m.nss = append(m.nss, "")
		for i := 1; i < opts.Namespaces; i++ {
			m.nss = append(m.nss, fmt.Sprint("w", i))
		}
		maxPar := rapid.SampledFrom(opts.MaxParallelism).Draw(t, "maxParallelism")
		m.cfg = Config{MaxParallelism: maxPar, Clock: func() int64 { return m.now }}
		if maxPar > 1 && rapid.IntRange(0, 3).Draw(t, "share") == 0 {
			p := rapid.IntRange(2, min(3, maxPar)).Draw(t, "parallelism")
			r := statetable.RangeForOperator(maxPar, p, rapid.IntRange(0, p-1).Draw(t, "operator"))
			m.cfg.KeyGroups = &r
		}
		t.Logf("config: max parallelism %d, key groups %v", maxPar, m.cfg.KeyGroups)
		t.Cleanup(m.cleanup)
		m.b, m.m = m.fresh(t, m.cfg)

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
// and timer services registered.
func (m *machine) fresh(t *rapid.T, cfg Config) (Backend, *Model) {
	b := m.newBackend(cfg)
	mod, err := NewModel(cfg)
	if err != nil {
		m.fatalf(t, "NewModel(%+v): %v", cfg, err)
	}
	for i, name := range stateNames {
		if err := b.RegisterState(name, stateKinds[i]); err != nil {
			m.fatalf(t, "RegisterState(%q, %v): %v", name, stateKinds[i], err)
		}
		mod.RegisterState(name, stateKinds[i])
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
	if _, _, err := b.Get("unregistered", "", ""); err == nil {
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

// same fails unless the backend and the model agree on an operation's
// results and on whether it failed.
func (m *machine) same(t *rapid.T, op string, got, want []any, gotErr, wantErr error) {
	t.Helper()
	t.Logf("step %d: %s -> %q, error %v", m.step, op, got, gotErr) // shown with a failure
	if (gotErr == nil) != (wantErr == nil) {
		m.fatalf(t, "%s: backend error %v, model error %v", op, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		m.fatalf(t, "%s = %q, model says %q", op, got, want)
	}
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
// namespace, and every timer service's timers in the order given.
func (m *machine) diff(got, want contract.EntryReader) error {
	for _, s := range stateNames {
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
				return fmt.Errorf("state %q: entry %+v missing (%d entries, want %d)", s, w[i], len(g), len(w))
			case i >= len(w):
				return fmt.Errorf("state %q: unexpected entry %+v (%d entries, want %d)", s, g[i], len(g), len(w))
			case !reflect.DeepEqual(g[i], w[i]):
				return fmt.Errorf("state %q: entry %+v, want %+v", s, g[i], w[i])
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
				return fmt.Errorf("timers %q domain %d (in firing order): %+v, want %+v", s, d, g, w)
			}
		}
	}
	return nil
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
		return cmpOr(strings.Compare(a.Key, b.Key), strings.Compare(a.Namespace, b.Namespace))
	})
	return es
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// weights makes the actions that build up what other actions need (ties
// to order, namespaces to merge) more frequent; the others have weight 1.
var weights = map[string]int{
	"MergeNamespaces":      3,
	"AddToWindows":         3,
	"RegisterWindowTimers": 2,
	"AdvanceWatermark":     2,
}

// Draws.

func (m *machine) key(t *rapid.T) string { return rapid.SampledFrom(m.keys).Draw(t, "key") }
func (m *machine) ns(t *rapid.T, label string) string {
	return rapid.SampledFrom(m.nss).Draw(t, label)
}
func value(t *rapid.T, label string) string { return rapid.SampledFrom(values).Draw(t, label) }

// state draws one of the states of the given kinds, or now and then any
// state (so that the kind errors are compared too).
func state(t *rapid.T, proper ...string) string {
	if rapid.IntRange(0, 9).Draw(t, "anyKind") == 0 {
		return rapid.SampledFrom(stateNames).Draw(t, "state")
	}
	return rapid.SampledFrom(proper).Draw(t, "state")
}

func (m *machine) actions() map[string]func(*rapid.T) {
	a := map[string]func(*rapid.T){}
	if m.groups&GroupState != 0 {
		a["Put"] = m.put
		a["Get"] = m.get
		a["Add"] = m.add
		a["GetList"] = m.getList
		a["UpdateList"] = m.updateList
		a["PutMapEntry"] = m.putMapEntry
		a["GetMapEntry"] = m.getMapEntry
		a["RemoveMapEntry"] = m.removeMapEntry
		a["ClearState"] = m.clearState
	}
	if m.groups&GroupMerge != 0 {
		a["MergeNamespaces"] = m.merge
		a["AddToWindows"] = m.addToWindows
	}
	if m.groups&GroupTimers != 0 {
		a["RegisterTimer"] = m.registerTimer
		a["RegisterWindowTimers"] = m.registerWindowTimers
		a["DeleteTimer"] = m.deleteTimer
		a["AdvanceWatermark"] = m.advanceWatermark
		a["AdvanceProcessingTime"] = m.advanceProcessingTime
	}
	if m.groups&GroupSnapshots != 0 {
		a["Capture"] = m.capture
		a["Release"] = m.release
	}
	if m.groups&GroupWrites != 0 {
		a["StartWrite"] = m.startWrite
		a["FinishWrite"] = func(t *rapid.T) {
			if len(m.writes) > 0 {
				m.finishWrite(t, rapid.IntRange(0, len(m.writes)-1).Draw(t, "write"))
			}
		}
	}
	if m.groups&GroupRescale != 0 {
		a["Rescale"] = m.rescale
	}
	return a
}

// State operations.

func (m *machine) put(t *rapid.T) {
	s, k, ns, v := state(t, "value"), m.key(t), m.ns(t, "ns"), value(t, "value")
	m.same(t, fmt.Sprintf("Put(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Put(s, k, ns, v), m.m.Put(s, k, ns, v))
}

func (m *machine) get(t *rapid.T) {
	s, k, ns := state(t, "value", "reducing", "aggregating"), m.key(t), m.ns(t, "ns")
	gv, gok, gerr := m.b.Get(s, k, ns)
	wv, wok, werr := m.m.Get(s, k, ns)
	m.same(t, fmt.Sprintf("Get(%q, %q, %q)", s, k, ns), []any{gv, gok}, []any{wv, wok}, gerr, werr)
}

func (m *machine) add(t *rapid.T) {
	s, k, ns, v := state(t, "list", "reducing", "aggregating"), m.key(t), m.ns(t, "ns"), value(t, "value")
	m.same(t, fmt.Sprintf("Add(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Add(s, k, ns, v), m.m.Add(s, k, ns, v))
}

// addToWindows adds a value to the entries of one key in several
// namespaces, as a window operator does, so that merges have something to
// merge and their order shows.
func (m *machine) addToWindows(t *rapid.T) {
	s, k := state(t, "list", "reducing", "aggregating"), m.key(t)
	for _, ns := range rapid.SliceOfNDistinct(rapid.SampledFrom(m.nss), 1, len(m.nss), rapid.ID).Draw(t, "namespaces") {
		v := value(t, "value")
		m.same(t, fmt.Sprintf("Add(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Add(s, k, ns, v), m.m.Add(s, k, ns, v))
	}
}

func (m *machine) getList(t *rapid.T) {
	s, k, ns := state(t, "list"), m.key(t), m.ns(t, "ns")
	g, gerr := m.b.GetList(s, k, ns)
	w, werr := m.m.GetList(s, k, ns)
	if len(g) == 0 {
		g = nil
	}
	m.same(t, fmt.Sprintf("GetList(%q, %q, %q)", s, k, ns), []any{g}, []any{w}, gerr, werr)
}

func (m *machine) updateList(t *rapid.T) {
	s, k, ns := state(t, "list"), m.key(t), m.ns(t, "ns")
	es := rapid.SliceOfN(rapid.SampledFrom(values), 0, 12).Draw(t, "elems")
	m.same(t, fmt.Sprintf("UpdateList(%q, %q, %q, %q)", s, k, ns, es), nil, nil, m.b.UpdateList(s, k, ns, es), m.m.UpdateList(s, k, ns, es))
}

func (m *machine) putMapEntry(t *rapid.T) {
	s, k, ns, uk, uv := state(t, "map"), m.key(t), m.ns(t, "ns"), value(t, "userKey"), value(t, "userValue")
	m.same(t, fmt.Sprintf("PutMapEntry(%q, %q, %q, %q, %q)", s, k, ns, uk, uv), nil, nil,
		m.b.PutMapEntry(s, k, ns, uk, uv), m.m.PutMapEntry(s, k, ns, uk, uv))
}

func (m *machine) getMapEntry(t *rapid.T) {
	s, k, ns, uk := state(t, "map"), m.key(t), m.ns(t, "ns"), value(t, "userKey")
	gv, gok, gerr := m.b.GetMapEntry(s, k, ns, uk)
	wv, wok, werr := m.m.GetMapEntry(s, k, ns, uk)
	m.same(t, fmt.Sprintf("GetMapEntry(%q, %q, %q, %q)", s, k, ns, uk), []any{gv, gok}, []any{wv, wok}, gerr, werr)
}

func (m *machine) removeMapEntry(t *rapid.T) {
	s, k, ns, uk := state(t, "map"), m.key(t), m.ns(t, "ns"), value(t, "userKey")
	m.same(t, fmt.Sprintf("RemoveMapEntry(%q, %q, %q, %q)", s, k, ns, uk), nil, nil,
		m.b.RemoveMapEntry(s, k, ns, uk), m.m.RemoveMapEntry(s, k, ns, uk))
}

func (m *machine) clearState(t *rapid.T) {
	s, k, ns := rapid.SampledFrom(stateNames).Draw(t, "state"), m.key(t), m.ns(t, "ns")
	m.same(t, fmt.Sprintf("ClearState(%q, %q, %q)", s, k, ns), nil, nil, m.b.ClearState(s, k, ns), m.m.ClearState(s, k, ns))
}

// merge merges namespaces, usually of a key that has entries in the state
// (so that there is something to merge, and its order shows).
func (m *machine) merge(t *rapid.T) {
	s := state(t, "list", "reducing", "aggregating")
	var withState []string
	if es, err := m.m.StateEntries(s); err == nil {
		for _, e := range es {
			withState = append(withState, e.Key)
		}
	}
	slices.Sort(withState)
	k := ""
	if len(withState) > 0 && rapid.IntRange(0, 3).Draw(t, "anyKey") > 0 {
		k = rapid.SampledFrom(slices.Compact(withState)).Draw(t, "key")
	} else {
		k = m.key(t)
	}
	target := m.ns(t, "target")
	srcs := rapid.SliceOfN(rapid.SampledFrom(m.nss), 0, 3).Draw(t, "sources")
	m.same(t, fmt.Sprintf("MergeNamespaces(%q, %q, %q, %q)", s, k, target, srcs), nil, nil,
		m.b.MergeNamespaces(s, k, target, srcs), m.m.MergeNamespaces(s, k, target, srcs))
}

// Timers.

const maxTimestamp = 24

func (m *machine) registerTimer(t *rapid.T) {
	s, d := rapid.SampledFrom(services).Draw(t, "service"), rapid.SampledFrom(domains).Draw(t, "domain")
	k, ns, ts := m.key(t), m.ns(t, "ns"), rapid.Int64Range(0, maxTimestamp).Draw(t, "ts")
	ga, gerr := m.b.RegisterTimer(s, d, k, ns, ts)
	wa, werr := m.m.RegisterTimer(s, d, k, ns, ts)
	m.same(t, fmt.Sprintf("RegisterTimer(%q, %d, %q, %q, %d)", s, d, k, ns, ts), []any{ga}, []any{wa}, gerr, werr)
}

// registerWindowTimers registers timers with one timestamp for several
// keys, as window operators do for a window's end: ties to order.
func (m *machine) registerWindowTimers(t *rapid.T) {
	s, d := rapid.SampledFrom(services).Draw(t, "service"), rapid.SampledFrom(domains).Draw(t, "domain")
	ns, ts := m.ns(t, "ns"), rapid.Int64Range(0, maxTimestamp).Draw(t, "ts")
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(m.keys), 1, len(m.keys), rapid.ID).Draw(t, "keys") {
		ga, gerr := m.b.RegisterTimer(s, d, k, ns, ts)
		wa, werr := m.m.RegisterTimer(s, d, k, ns, ts)
		m.same(t, fmt.Sprintf("RegisterTimer(%q, %d, %q, %q, %d)", s, d, k, ns, ts), []any{ga}, []any{wa}, gerr, werr)
	}
}

func (m *machine) deleteTimer(t *rapid.T) {
	s, d := rapid.SampledFrom(services).Draw(t, "service"), rapid.SampledFrom(domains).Draw(t, "domain")
	k, ns, ts := m.key(t), m.ns(t, "ns"), rapid.Int64Range(0, maxTimestamp).Draw(t, "ts")
	gd, gerr := m.b.DeleteTimer(s, d, k, ns, ts)
	wd, werr := m.m.DeleteTimer(s, d, k, ns, ts)
	m.same(t, fmt.Sprintf("DeleteTimer(%q, %d, %q, %q, %d)", s, d, k, ns, ts), []any{gd}, []any{wd}, gerr, werr)
}

// firePlan is what the timer callbacks of one Advance do, drawn before it
// so that the backend's and the model's callbacks do the same.
type firePlan struct {
	Record     bool  // append "ts" to the list state of the timer's key and namespace
	Reduce     bool  // and fold it into the reducing state
	Again      int64 // > 0: timers with an even timestamp register one Again later
	Chain      int   // this many callbacks register a timer at their own timestamp for the next key
	DeleteNext bool  // callbacks delete the next key's timer one later
	FailAt     int   // the callback with this index fails (-1: none)
	CaptureAt  int   // the callback with this index captures a view (-1: none)
}

var errFire = errors.New("rapidtest: a timer callback failed on purpose")

func (m *machine) drawPlan(t *rapid.T) firePlan {
	return firePlan{
		Record:     rapid.Bool().Draw(t, "record"),
		Reduce:     rapid.Bool().Draw(t, "reduce"),
		Again:      rapid.Int64Range(0, 3).Draw(t, "again"),
		Chain:      rapid.IntRange(0, 3).Draw(t, "chain"),
		DeleteNext: rapid.Bool().Draw(t, "deleteNext"),
		FailAt:     rapid.IntRange(-1, 6).Draw(t, "failAt"),
		CaptureAt:  rapid.IntRange(-1, 4).Draw(t, "captureAt"),
	}
}

// firing is one side's record of an Advance.
type firing struct {
	fired []timer
	log   []string // results of what the callbacks did
	views []contract.View
}

// callback returns the fire function of plan for backend x.
func (m *machine) callback(x Backend, service string, d timerqueue.Domain, plan firePlan, f *firing) contract.FireFunc {
	chain := plan.Chain
	return func(key, ns string, ts int64) error {
		i := len(f.fired)
		f.fired = append(f.fired, timer{Timestamp: ts, Key: key, Namespace: ns})
		if i == plan.FailAt {
			return errFire
		}
		logf := func(format string, args ...any) { f.log = append(f.log, fmt.Sprintf(format, args...)) }
		if plan.Record {
			logf("Add list: %v", x.Add("list", key, ns, fmt.Sprint(ts)) == nil)
		}
		if plan.Reduce {
			logf("Add reducing: %v", x.Add("reducing", key, ns, fmt.Sprint(ts, ",")) == nil)
		}
		next := m.keys[(slices.Index(m.keys, key)+1)%len(m.keys)]
		if plan.Again > 0 && ts%2 == 0 {
			added, err := x.RegisterTimer(service, d, key, ns, ts+plan.Again)
			logf("RegisterTimer again: %v %v", added, err == nil)
		}
		if chain > 0 {
			chain--
			added, err := x.RegisterTimer(service, d, next, ns, ts)
			logf("RegisterTimer chain: %v %v", added, err == nil)
		}
		if plan.DeleteNext {
			deleted, err := x.DeleteTimer(service, d, next, ns, ts+1)
			logf("DeleteTimer next: %v %v", deleted, err == nil)
		}
		if i == plan.CaptureAt {
			f.views = append(f.views, x.Capture())
		}
		return nil
	}
}

func (m *machine) advanceWatermark(t *rapid.T) {
	s := rapid.SampledFrom(services).Draw(t, "service")
	wm := rapid.Int64Range(-1, maxTimestamp+2).Draw(t, "watermark")
	plan := m.drawPlan(t)
	var gf, wf firing
	gn, gerr := m.b.AdvanceWatermark(s, wm, m.callback(m.b, s, timerqueue.EventTime, plan, &gf))
	wn, werr := m.m.AdvanceWatermark(s, wm, m.callback(m.m, s, timerqueue.EventTime, plan, &wf))
	m.afterFiring(t, fmt.Sprintf("AdvanceWatermark(%q, %d) with %+v", s, wm, plan), gn, wn, gerr, werr, &gf, &wf)
}

func (m *machine) advanceProcessingTime(t *rapid.T) {
	s := rapid.SampledFrom(services).Draw(t, "service")
	m.now += rapid.Int64Range(0, 8).Draw(t, "clockAdvance")
	plan := m.drawPlan(t)
	var gf, wf firing
	gn, gerr := m.b.AdvanceProcessingTime(s, m.callback(m.b, s, timerqueue.ProcessingTime, plan, &gf))
	wn, werr := m.m.AdvanceProcessingTime(s, m.callback(m.m, s, timerqueue.ProcessingTime, plan, &wf))
	m.afterFiring(t, fmt.Sprintf("AdvanceProcessingTime(%q) at %d with %+v", s, m.now, plan), gn, wn, gerr, werr, &gf, &wf)
}

func (m *machine) afterFiring(t *rapid.T, op string, gn, wn int, gerr, werr error, gf, wf *firing) {
	t.Helper()
	// Pair the views the callbacks captured first, so that they are
	// released whatever happens next.
	for i := range min(len(gf.views), len(wf.views)) {
		m.live = append(m.live, pair{gf.views[i], wf.views[i], m.step})
	}
	for _, v := range gf.views[min(len(gf.views), len(wf.views)):] {
		v.Release()
	}
	if !slices.Equal(gf.fired, wf.fired) {
		m.fatalf(t, "%s fired %+v, model fired %+v", op, gf.fired, wf.fired)
	}
	if len(gf.views) != len(wf.views) {
		m.fatalf(t, "%s: callbacks captured %d views, model %d", op, len(gf.views), len(wf.views))
	}
	m.same(t, op, []any{gn, gf.log}, []any{wn, wf.log}, gerr, werr)
	if gn != wn {
		m.fatalf(t, "%s: fired %d, model %d (error %v)", op, gn, wn, werr)
	}
}

// Snapshots.

func (m *machine) capture(t *rapid.T) {
	if len(m.live) < maxLive {
		m.live = append(m.live, pair{m.b.Capture(), m.m.Capture(), m.step})
	}
}

func (m *machine) release(t *rapid.T) {
	if len(m.live) == 0 {
		return
	}
	i := rapid.IntRange(0, len(m.live)-1).Draw(t, "view")
	m.live[i].release()
	m.live = slices.Delete(m.live, i, i+1)
}

// startWrite captures a view and writes it on a new goroutine, which then
// reads the view and compares it with the model's: the writer goes on
// stepping meanwhile.
func (m *machine) startWrite(t *rapid.T) {
	if len(m.writes) >= maxWrites {
		return
	}
	w := &write{pair: pair{m.b.Capture(), m.m.Capture(), m.step}, done: make(chan struct{})}
	if err := w.m.WriteSnapshot(context.Background(), &w.modelBuf); err != nil {
		m.fatalf(t, "BUG: model WriteSnapshot: %v", err)
	}
	m.writes = append(m.writes, w)
	go func() {
		defer close(w.done)
		w.err = w.b.WriteSnapshot(context.Background(), &w.buf)
		w.readErr = m.diff(w.b, w.m)
	}()
}

// finishWrite waits for write i, releases its views, and restores its
// bytes into a fresh backend of the machine's config, which must equal the
// model frozen at capture.
func (m *machine) finishWrite(t *rapid.T, i int) {
	w := m.writes[i]
	m.writes = slices.Delete(m.writes, i, i+1)
	<-w.done
	w.release()
	if w.err != nil {
		m.fatalf(t, "WriteSnapshot of the view captured at step %d: %v", w.step, w.err)
	}
	if w.readErr != nil {
		m.fatalf(t, "view captured at step %d, read on the writing goroutine: %v", w.step, w.readErr)
	}
	b, mod := m.restore(t, m.cfg, w.buf.Bytes(), w.modelBuf.Bytes())
	if err := m.diff(b, mod); err != nil {
		m.fatalf(t, "restore of the snapshot captured at step %d and written on a goroutine: %v", w.step, err)
	}
}

func (m *machine) restore(t *rapid.T, cfg Config, data, modelData []byte) (Backend, *Model) {
	b, mod := m.fresh(t, cfg)
	if err := b.RestoreSnapshot(context.Background(), bytes.NewReader(data), int64(len(data))); err != nil {
		m.fatalf(t, "RestoreSnapshot into key groups %v: %v", b.KeyGroups(), err)
	}
	if err := mod.RestoreSnapshot(context.Background(), bytes.NewReader(modelData), int64(len(modelData))); err != nil {
		m.fatalf(t, "BUG: model RestoreSnapshot: %v", err)
	}
	return b, mod
}

// rescale writes a snapshot and restores it into p backends owning the
// shares of p operators, compares each with the model's share, and probes
// each with a write and a timer of every key (owned or not).
func (m *machine) rescale(t *rapid.T) {
	maxPar := m.b.MaxParallelism()
	p := rapid.IntRange(1, min(4, maxPar)).Draw(t, "parallelism")
	pr := pair{m.b.Capture(), m.m.Capture(), m.step}
	var buf, modelBuf bytes.Buffer
	err := pr.b.WriteSnapshot(context.Background(), &buf)
	pr.m.WriteSnapshot(context.Background(), &modelBuf)
	pr.release()
	if err != nil {
		m.fatalf(t, "WriteSnapshot: %v", err)
	}
	for i := range p {
		r := statetable.RangeForOperator(maxPar, p, i)
		cfg := m.cfg
		cfg.KeyGroups = &r
		b, mod := m.restore(t, cfg, buf.Bytes(), modelBuf.Bytes())
		if g := b.KeyGroups(); g != r {
			m.fatalf(t, "rescaled backend owns key groups %v, configured %v", g, r)
		}
		if err := m.diff(b, mod); err != nil {
			m.fatalf(t, "restored into key groups %v of %d (operator %d of %d): %v", r, maxPar, i, p, err)
		}
		for _, k := range m.keys {
			op := fmt.Sprintf("after restoring into key groups %v: Add(\"list\", %q, \"\", \"probe\")", r, k)
			m.same(t, op, nil, nil, b.Add("list", k, "", "probe"), mod.Add("list", k, "", "probe"))
			if m.groups&GroupTimers != 0 {
				ga, gerr := b.RegisterTimer(services[0], timerqueue.EventTime, k, "", 0)
				wa, werr := mod.RegisterTimer(services[0], timerqueue.EventTime, k, "", 0)
				m.same(t, fmt.Sprintf("after restoring into key groups %v: RegisterTimer of %q", r, k), []any{ga}, []any{wa}, gerr, werr)
			}
		}
		if err := m.diff(b, mod); err != nil {
			m.fatalf(t, "restored into key groups %v, after probing every key: %v", r, err)
		}
	}
}
