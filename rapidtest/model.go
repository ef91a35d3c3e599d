package rapidtest

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Model is the reference implementation of contract.Backend: the
// executable specification that Run compares every backend with. It is a
// map of entries per state and a set of timers per service and domain,
// deep-copied at every Capture, with no cleverness anywhere: where the
// contract leaves a choice, the code below is the answer.
//
//   - Key groups: statetable.KeyGroupOfKey([]byte(key),
//     MaxParallelism()); a key outside KeyGroups() is an error
//     (statetable.ErrKeyGroupNotOwned) for every operation that names it.
//   - Timer order: by timestamp, then key bytes, then namespace bytes
//     (compareTimers). Firing removes the smallest due timer, then calls
//     the callback, and looks again: timers the callback registers or
//     deletes are seen at once.
//   - Lists keep insertion order; MergeNamespaces appends the sources'
//     lists after the target's, in the order of the sources given.
//   - A reducing state folds with contract.Reduce, an aggregating state
//     with contract.Aggregate (the model stores the accumulator and hands
//     out its Result); merges fold the sources in order into the target's
//     value or accumulator.
//   - Empty is absent: no value state holds "", no list or map is empty.
//
// Like a Backend, a Model has one writer goroutine; its Views are
// immutable deep copies, readable from any goroutine.
type Model struct {
	maxPar   int
	owned    statetable.KeyGroupRange
	clock    func() int64
	kinds    map[string]statetable.Kind
	services map[string]bool
	entries  map[string]map[addr]contract.Entry // state -> (key, ns) -> entry
	timers   map[queueID]map[timer]bool
	ttls     map[string]statetable.TTL  // states with a TTL (model_ttl.go)
	stamps   map[string]map[addr]stamp  // their entries' expiration timestamps
	schemas  map[string]contract.Schema // states registered with a schema (model_schema.go)
}

var _ contract.Backend = (*Model)(nil)

type (
	addr    struct{ key, ns string }
	queueID struct {
		service string
		d       timerqueue.Domain
	}
	timer = contract.Timer
)

// errModel wraps the errors of the model that have no sentinel elsewhere.
var errModel = errors.New("rapidtest: model")

// NewModel returns an empty model configured as cowstate.New would be.
func NewModel(cfg Config) (*Model, error) {
	maxPar := cfg.MaxParallelism
	if maxPar == 0 {
		maxPar = statetable.DefaultMaxParallelism
	}
	if maxPar < 1 || maxPar > statetable.MaxParallelismLimit {
		return nil, fmt.Errorf("%w: max parallelism %d", cowstate.ErrConfig, maxPar)
	}
	owned := statetable.AllKeyGroups(maxPar)
	if cfg.KeyGroups != nil {
		owned = *cfg.KeyGroups
		if !owned.Empty() && (owned.First < 0 || owned.Last >= maxPar) {
			return nil, fmt.Errorf("%w: key groups %v", cowstate.ErrConfig, owned)
		}
	}
	clock := cfg.Clock
	if clock == nil {
		clock = func() int64 { return time.Now().UnixMilli() }
	}
	return &Model{maxPar: maxPar, owned: owned, clock: clock, kinds: map[string]statetable.Kind{},
		services: map[string]bool{}, entries: map[string]map[addr]contract.Entry{}, timers: map[queueID]map[timer]bool{},
		ttls: map[string]statetable.TTL{}, stamps: map[string]map[addr]stamp{}, schemas: map[string]contract.Schema{}}, nil
}

func (m *Model) MaxParallelism() int                 { return m.maxPar }
func (m *Model) KeyGroups() statetable.KeyGroupRange { return m.owned }

func (m *Model) own(key string) error {
	if g := statetable.KeyGroupOfKey([]byte(key), m.maxPar); !m.owned.Contains(g) {
		return fmt.Errorf("%w: key %q in key group %d, model owns %v", statetable.ErrKeyGroupNotOwned, key, g, m.owned)
	}
	return nil
}

func (m *Model) RegisterState(name string, kind statetable.Kind) error {
	if kind < statetable.KindValue || kind > statetable.KindAggregating || name == "" {
		return fmt.Errorf("%w: state %q of kind %v", errModel, name, kind)
	}
	if old, ok := m.kinds[name]; ok && old != kind {
		return fmt.Errorf("%w: %q is a %v state", statetable.ErrStateMismatch, name, old)
	}
	if _, ok := m.kinds[name]; !ok {
		m.kinds[name] = kind
		m.entries[name] = map[addr]contract.Entry{}
	}
	return nil
}

func (m *Model) RegisterTimerService(name string) error {
	if !m.services[name] {
		m.services[name] = true
		m.timers[queueID{name, timerqueue.EventTime}] = map[timer]bool{}
		m.timers[queueID{name, timerqueue.ProcessingTime}] = map[timer]bool{}
	}
	return nil
}

// state returns the entries of a state of one of kinds, after checking that
// the key is owned.
func (m *Model) state(name, key string, kinds ...statetable.Kind) (map[addr]contract.Entry, statetable.Kind, error) {
	kind, ok := m.kinds[name]
	if !ok {
		return nil, 0, fmt.Errorf("%w %q", statetable.ErrUnknownState, name)
	}
	if len(kinds) > 0 && !slices.Contains(kinds, kind) {
		return nil, 0, fmt.Errorf("%w: %q is a %v state", contract.ErrKind, name, kind)
	}
	if err := m.own(key); err != nil {
		return nil, 0, err
	}
	return m.entries[name], kind, nil
}

// ttlState is state for an operation on entry (key, ns) of a state that may
// have a TTL: what of the entry has expired is removed first.
func (m *Model) ttlState(name, key, ns string, kinds ...statetable.Kind) (map[addr]contract.Entry, statetable.Kind, error) {
	es, kind, err := m.state(name, key, kinds...)
	if err == nil {
		m.purge(name, addr{key, ns})
	}
	return es, kind, err
}

func (m *Model) Put(state, key, ns, value string) error {
	es, _, err := m.ttlState(state, key, ns, statetable.KindValue)
	if err != nil {
		return err
	}
	if value == "" {
		delete(es, addr{key, ns})
	} else {
		es[addr{key, ns}] = contract.Entry{Key: key, Namespace: ns, Value: value}
	}
	if exp, ok := m.expiry(state); ok {
		m.setStamp(state, addr{key, ns}, stamp{At: exp})
	}
	return nil
}

func (m *Model) Get(state, key, ns string) (string, bool, error) {
	es, _, err := m.ttlState(state, key, ns, statetable.KindValue, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return "", false, err
	}
	e, ok := es[addr{key, ns}]
	if !ok {
		return "", false, nil
	}
	if exp, _ := m.expiry(state); m.onRead(state) {
		m.setStamp(state, addr{key, ns}, stamp{At: exp})
	}
	return result(m.kinds[state], e).Value, true, nil
}

// result is what a reader sees of an entry: for an aggregating state, the
// Result of the accumulator the model stores in Value.
func result(kind statetable.Kind, e contract.Entry) contract.Entry {
	if kind == statetable.KindAggregating {
		e.Value = contract.Aggregate{}.Result(e.Value)
	}
	return e
}

func (m *Model) Add(state, key, ns, v string) error {
	es, kind, err := m.ttlState(state, key, ns, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	if exp, ok := m.expiry(state); ok {
		defer func() {
			s := m.stamps[state][addr{key, ns}]
			if kind == statetable.KindList {
				s.List = append(slices.Clone(s.List), exp)
			} else {
				s.At = exp
			}
			m.setStamp(state, addr{key, ns}, s)
		}()
	}
	e, ok := es[addr{key, ns}]
	e.Key, e.Namespace = key, ns
	switch {
	case kind == statetable.KindList:
		e.List = append(slices.Clone(e.List), v)
	case kind == statetable.KindReducing && ok:
		e.Value = contract.Reduce(e.Value, v)
	case kind == statetable.KindReducing:
		e.Value = v
	case ok: // aggregating: Value is the accumulator
		e.Value = contract.Aggregate{}.Add(v, e.Value)
	default:
		e.Value = contract.Aggregate{}.Add(v, contract.Aggregate{}.CreateAccumulator())
	}
	es[addr{key, ns}] = e
	return nil
}

func (m *Model) GetList(state, key, ns string) ([]string, error) {
	es, _, err := m.ttlState(state, key, ns, statetable.KindList)
	if err != nil {
		return nil, err
	}
	l := slices.Clone(es[addr{key, ns}].List)
	if exp, _ := m.expiry(state); m.onRead(state) && len(l) > 0 {
		m.setStamp(state, addr{key, ns}, stamp{List: repeat(exp, len(l))})
	}
	return l, nil
}

func (m *Model) UpdateList(state, key, ns string, elems []string) error {
	es, _, err := m.ttlState(state, key, ns, statetable.KindList)
	if err != nil {
		return err
	}
	if len(elems) == 0 {
		delete(es, addr{key, ns})
	} else {
		es[addr{key, ns}] = contract.Entry{Key: key, Namespace: ns, List: slices.Clone(elems)}
	}
	if exp, ok := m.expiry(state); ok {
		m.setStamp(state, addr{key, ns}, stamp{List: repeat(exp, len(elems))})
	}
	return nil
}

func (m *Model) PutMapEntry(state, key, ns, userKey, userValue string) error {
	es, _, err := m.ttlState(state, key, ns, statetable.KindMap)
	if err != nil {
		return err
	}
	if exp, ok := m.expiry(state); ok {
		defer func() {
			s := m.stamps[state][addr{key, ns}].clone()
			if s.Map == nil {
				s.Map = map[string]int64{}
			}
			s.Map[userKey] = exp
			m.setStamp(state, addr{key, ns}, s)
		}()
	}
	e := es[addr{key, ns}]
	e.Key, e.Namespace, e.Map = key, ns, maps.Clone(e.Map)
	if e.Map == nil {
		e.Map = map[string]string{}
	}
	e.Map[userKey] = userValue
	es[addr{key, ns}] = e
	return nil
}

func (m *Model) GetMapEntry(state, key, ns, userKey string) (string, bool, error) {
	es, _, err := m.ttlState(state, key, ns, statetable.KindMap)
	if err != nil {
		return "", false, err
	}
	v, ok := es[addr{key, ns}].Map[userKey]
	if exp, _ := m.expiry(state); ok && m.onRead(state) {
		s := m.stamps[state][addr{key, ns}].clone()
		s.Map[userKey] = exp
		m.setStamp(state, addr{key, ns}, s)
	}
	return v, ok, nil
}

func (m *Model) RemoveMapEntry(state, key, ns, userKey string) error {
	es, _, err := m.ttlState(state, key, ns, statetable.KindMap)
	if err != nil {
		return err
	}
	e, ok := es[addr{key, ns}]
	if !ok {
		return nil
	}
	if _, ttl := m.ttls[state]; ttl {
		defer func() {
			s := m.stamps[state][addr{key, ns}].clone()
			delete(s.Map, userKey)
			m.setStamp(state, addr{key, ns}, s)
		}()
	}
	e.Map = maps.Clone(e.Map)
	delete(e.Map, userKey)
	if len(e.Map) == 0 {
		delete(es, addr{key, ns})
	} else {
		es[addr{key, ns}] = e
	}
	return nil
}

func (m *Model) ClearState(state, key, ns string) error {
	es, _, err := m.state(state, key)
	if err != nil {
		return err
	}
	delete(es, addr{key, ns})
	delete(m.stamps[state], addr{key, ns})
	return nil
}

func (m *Model) MergeNamespaces(state, key, target string, sources []string) error {
	es, kind, err := m.ttlState(state, key, target, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	for _, src := range sources {
		m.purge(state, addr{key, src})
	}
	exp, ttl := m.expiry(state)
	accStamp := m.stamps[state][addr{key, target}]
	acc, have := es[addr{key, target}]
	for _, src := range sources {
		e, ok := es[addr{key, src}]
		if src == target || !ok {
			continue
		}
		delete(es, addr{key, src})
		if ttl { // list elements keep their stamps; a merged value is stamped afresh
			s := m.stamps[state][addr{key, src}]
			delete(m.stamps[state], addr{key, src})
			switch {
			case kind == statetable.KindList && have:
				accStamp.List = append(slices.Clone(accStamp.List), s.List...)
			case kind == statetable.KindList:
				accStamp = s
			default:
				accStamp.At = exp
			}
		}
		switch {
		case !have:
			acc, have = e, true
		case kind == statetable.KindList:
			acc.List = append(slices.Clone(acc.List), e.List...)
		case kind == statetable.KindReducing:
			acc.Value = contract.Reduce(acc.Value, e.Value)
		default:
			acc.Value = contract.Aggregate{}.Merge(acc.Value, e.Value)
		}
	}
	if have {
		acc.Key, acc.Namespace = key, target
		es[addr{key, target}] = acc
		if ttl {
			m.setStamp(state, addr{key, target}, accStamp)
		}
	}
	return nil
}

func (m *Model) queue(service string, d timerqueue.Domain) (map[timer]bool, error) {
	q, ok := m.timers[queueID{service, d}]
	if !ok {
		return nil, fmt.Errorf("%w: no timer service %q (domain %d)", contract.ErrUnknownTimerService, service, d)
	}
	return q, nil
}

func (m *Model) RegisterTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	q, err := m.queue(service, d)
	if err != nil {
		return false, err
	}
	if err := m.own(key); err != nil {
		return false, err
	}
	t := timer{Timestamp: ts, Key: key, Namespace: ns}
	added := !q[t]
	q[t] = true
	return added, nil
}

func (m *Model) DeleteTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	q, err := m.queue(service, d)
	if err != nil {
		return false, err
	}
	if err := m.own(key); err != nil {
		return false, err
	}
	t := timer{Timestamp: ts, Key: key, Namespace: ns}
	deleted := q[t]
	delete(q, t)
	return deleted, nil
}

// compareTimers is the firing order: timestamp, key bytes, namespace bytes.
func compareTimers(a, b timer) int {
	return cmp.Or(cmp.Compare(a.Timestamp, b.Timestamp), strings.Compare(a.Key, b.Key), strings.Compare(a.Namespace, b.Namespace))
}

func (m *Model) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return m.advance(service, timerqueue.EventTime, wm, fire)
}

func (m *Model) AdvanceProcessingTime(service string, fire contract.FireFunc) (int, error) {
	return m.advance(service, timerqueue.ProcessingTime, m.clock(), fire)
}

func (m *Model) advance(service string, d timerqueue.Domain, upTo int64, fire contract.FireFunc) (int, error) {
	q, err := m.queue(service, d)
	if err != nil {
		return 0, err
	}
	for fired := 0; ; fired++ {
		sorted := slices.SortedFunc(maps.Keys(q), compareTimers)
		if len(sorted) == 0 || sorted[0].Timestamp > upTo {
			return fired, nil
		}
		t := sorted[0]
		delete(q, t)
		if err := fire(t.Key, t.Namespace, t.Timestamp); err != nil {
			q[t] = true
			return fired, fmt.Errorf("%w: timer service %q: %w", errModel, service, err)
		}
	}
}

func (m *Model) StateEntries(state string) ([]contract.Entry, error) {
	_, ok := m.entries[state]
	if !ok {
		return nil, fmt.Errorf("%w %q", statetable.ErrUnknownState, state)
	}
	out, _ := m.liveEntries(state, m.clock())
	for i, e := range out {
		out[i] = result(m.kinds[state], e)
	}
	return out, nil
}

func (m *Model) TimerEntries(service string, d timerqueue.Domain) ([]timer, error) {
	q, err := m.queue(service, d)
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Keys(q), compareTimers), nil
}

// Capture returns a deep copy of the model. O(size).
func (m *Model) Capture() contract.View {
	v := &modelView{maxPar: m.maxPar, kinds: maps.Clone(m.kinds), schemas: maps.Clone(m.schemas), entries: map[string][]contract.Entry{}, stamps: map[string][]stamp{}, timers: map[queueID][]timer{}}
	now := m.clock()
	for name := range m.entries {
		v.entries[name], v.stamps[name] = m.liveEntries(name, now)
	}
	for id := range m.timers {
		v.timers[id], _ = m.TimerEntries(id.service, id.d)
	}
	return v
}

func cloneEntry(e contract.Entry) contract.Entry {
	e.List, e.Map = slices.Clone(e.List), maps.Clone(e.Map)
	return e
}

// modelView is a frozen deep copy; nothing writes it after Capture.
type modelView struct {
	maxPar   int
	kinds    map[string]statetable.Kind
	schemas  map[string]contract.Schema
	entries  map[string][]contract.Entry
	stamps   map[string][]stamp // of TTL states: entries[name][i]'s is stamps[name][i]
	timers   map[queueID][]timer
	released atomic.Bool
}

func (v *modelView) live() {
	if v.released.Load() {
		panic("rapidtest: read of a released model view")
	}
}

func (v *modelView) StateEntries(state string) ([]contract.Entry, error) {
	v.live()
	es, ok := v.entries[state]
	if !ok {
		return nil, fmt.Errorf("%w %q in the view", statetable.ErrUnknownState, state)
	}
	out := make([]contract.Entry, len(es))
	for i, e := range es {
		out[i] = result(v.kinds[state], cloneEntry(e))
	}
	return out, nil
}

func (v *modelView) TimerEntries(service string, d timerqueue.Domain) ([]timer, error) {
	v.live()
	ts, ok := v.timers[queueID{service, d}]
	if !ok {
		return nil, fmt.Errorf("%w: no timer service %q in the view", contract.ErrUnknownTimerService, service)
	}
	return slices.Clone(ts), nil
}

func (v *modelView) Release() { v.released.Store(true) }

// modelFile is the model's snapshot format: gob of this (gob keeps any bytes of a string, JSON does not).
type modelFile struct {
	MaxParallelism int
	States         map[string][]contract.Entry
	Stamps         map[string][]stamp    // of TTL states, entry by entry
	Schemas        map[string]fileSchema // of states registered with a schema
	Timers         []fileTimers
}

type fileTimers struct {
	Service string
	Domain  timerqueue.Domain
	Timers  []timer
}

func (v *modelView) WriteSnapshot(ctx context.Context, w io.Writer) error {
	v.live()
	f := modelFile{MaxParallelism: v.maxPar, States: v.entries, Stamps: v.stamps, Schemas: fileSchemas(v.schemas)}
	for id, ts := range v.timers {
		f.Timers = append(f.Timers, fileTimers{id.service, id.d, ts})
	}
	return gob.NewEncoder(w).Encode(f)
}

// RestoreSnapshot reads what a modelView wrote and keeps the entries and
// timers of the owned key groups. Every state and service in the file must
// be registered.
func (m *Model) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	var f modelFile
	if err := gob.NewDecoder(io.NewSectionReader(r, 0, size)).Decode(&f); err != nil {
		return fmt.Errorf("%w: snapshot: %w", snapshot.ErrCorrupt, err)
	}
	if f.MaxParallelism != m.maxPar {
		return fmt.Errorf("%w: max parallelism %d, model %d", snapshot.ErrMismatch, f.MaxParallelism, m.maxPar)
	}
	if err := m.checkSchemas(f); err != nil {
		return err
	}
	for name, es := range f.States {
		if _, ok := m.kinds[name]; !ok {
			return fmt.Errorf("%w: state %q not registered", snapshot.ErrMismatch, name)
		}
		_, ttl := m.ttls[name]
		if len(f.Stamps[name]) > 0 && !ttl {
			return fmt.Errorf("%w: state %q has a TTL in the file, not in the model", snapshot.ErrMismatch, name)
		}
		for i, e := range es {
			if m.own(e.Key) != nil {
				continue
			}
			a := addr{e.Key, e.Namespace}
			m.entries[name][a] = e
			switch {
			case i < len(f.Stamps[name]):
				m.stamps[name][a] = f.Stamps[name][i]
			case ttl: // written without TTL: as if written now
				exp, _ := m.expiry(name)
				m.stamps[name][a] = stamp{At: exp, List: repeat(exp, len(e.List)), Map: mapOf(e.Map, exp)}
			}
		}
	}
	for _, ft := range f.Timers {
		q, err := m.queue(ft.Service, ft.Domain)
		if err != nil {
			return fmt.Errorf("%w: %w", snapshot.ErrMismatch, err)
		}
		for _, t := range ft.Timers {
			if m.own(t.Key) == nil {
				q[t] = true
			}
		}
	}
	return nil
}

// repeat returns n copies of x.
func repeat(x int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// mapOf returns the keys of m, each mapped to x (nil for an empty m).
func mapOf(m map[string]string, x int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k := range m {
		out[k] = x
	}
	return out
}
