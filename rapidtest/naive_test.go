package rapidtest_test

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/rapidtest"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// naive is a second, independent backend, written for this test from the
// contract's documentation rather than from the model: one flat map of
// cells addressed by "state|key|ns", timers in sorted slices kept in order
// by insertion, snapshots as a deep copy and gob. The suite must pass
// against it.
type naive struct {
	maxPar int
	owned  statetable.KeyGroupRange
	clock  func() int64
	kinds  map[string]statetable.Kind
	cells  map[string]naiveCell
	timers map[string][]contract.Timer // "service|domain" -> sorted
}

type naiveCell struct {
	State, Key, NS string
	Value          string
	List           []string
	Map            map[string]string
}

var (
	_ rapidtest.Backend = (*naive)(nil)
	_ contract.View     = (*naiveImage)(nil)
)

var errNaive = errors.New("naive backend")

func newNaive(cfg rapidtest.Config) rapidtest.Backend {
	n := &naive{maxPar: cfg.MaxParallelism, clock: cfg.Clock, kinds: map[string]statetable.Kind{},
		cells: map[string]naiveCell{}, timers: map[string][]contract.Timer{}}
	n.owned = statetable.AllKeyGroups(n.maxPar)
	if cfg.KeyGroups != nil {
		n.owned = *cfg.KeyGroups
	}
	return n
}

func cellID(state, key, ns string) string {
	return state + "|" + strconv.Quote(key) + "|" + strconv.Quote(ns)
}

func timersID(service string, d timerqueue.Domain) string { return service + "|" + fmt.Sprint(d) }

func (n *naive) MaxParallelism() int                 { return n.maxPar }
func (n *naive) KeyGroups() statetable.KeyGroupRange { return n.owned }

func (n *naive) check(state, key string, kinds ...statetable.Kind) error {
	k, ok := n.kinds[state]
	if !ok || len(kinds) > 0 && !slices.Contains(kinds, k) {
		return fmt.Errorf("%w: state %q (%v) for this operation", errNaive, state, k)
	}
	if !n.owned.Contains(statetable.KeyGroupOf(statetable.HashKey([]byte(key)), n.maxPar)) {
		return fmt.Errorf("%w: key %q not owned", errNaive, key)
	}
	return nil
}

func (n *naive) RegisterState(name string, kind statetable.Kind) error {
	if k, ok := n.kinds[name]; ok && k != kind {
		return errNaive
	}
	n.kinds[name] = kind
	return nil
}

func (n *naive) RegisterTimerService(name string) error {
	for _, d := range []timerqueue.Domain{timerqueue.EventTime, timerqueue.ProcessingTime} {
		if _, ok := n.timers[timersID(name, d)]; !ok {
			n.timers[timersID(name, d)] = nil
		}
	}
	return nil
}

func (n *naive) Put(state, key, ns, value string) error {
	if err := n.check(state, key, statetable.KindValue); err != nil {
		return err
	}
	if value == "" {
		delete(n.cells, cellID(state, key, ns))
		return nil
	}
	n.cells[cellID(state, key, ns)] = naiveCell{State: state, Key: key, NS: ns, Value: value}
	return nil
}

func (n *naive) Get(state, key, ns string) (string, bool, error) {
	if err := n.check(state, key, statetable.KindValue, statetable.KindReducing, statetable.KindAggregating); err != nil {
		return "", false, err
	}
	c, ok := n.cells[cellID(state, key, ns)]
	if !ok {
		return "", false, nil
	}
	return naiveResult(n.kinds[state], c.Value), true, nil
}

// naiveResult is what a reader sees of a cell's Value: the aggregate's
// Result of the accumulator for an aggregating state.
func naiveResult(kind statetable.Kind, v string) string {
	if kind == statetable.KindAggregating {
		return contract.Aggregate{}.Result(v)
	}
	return v
}

func (n *naive) Add(state, key, ns, v string) error {
	if err := n.check(state, key, statetable.KindList, statetable.KindReducing, statetable.KindAggregating); err != nil {
		return err
	}
	id := cellID(state, key, ns)
	c, ok := n.cells[id]
	c.State, c.Key, c.NS = state, key, ns
	switch n.kinds[state] {
	case statetable.KindList:
		c.List = append(slices.Clip(c.List), v)
	case statetable.KindReducing:
		if ok {
			v = contract.Reduce(c.Value, v)
		}
		c.Value = v
	default:
		if !ok {
			c.Value = contract.Aggregate{}.CreateAccumulator()
		}
		c.Value = contract.Aggregate{}.Add(v, c.Value)
	}
	n.cells[id] = c
	return nil
}

func (n *naive) GetList(state, key, ns string) ([]string, error) {
	if err := n.check(state, key, statetable.KindList); err != nil {
		return nil, err
	}
	return slices.Clone(n.cells[cellID(state, key, ns)].List), nil
}

func (n *naive) UpdateList(state, key, ns string, elems []string) error {
	if err := n.check(state, key, statetable.KindList); err != nil {
		return err
	}
	delete(n.cells, cellID(state, key, ns))
	if len(elems) > 0 {
		n.cells[cellID(state, key, ns)] = naiveCell{State: state, Key: key, NS: ns, List: slices.Clone(elems)}
	}
	return nil
}

func (n *naive) PutMapEntry(state, key, ns, uk, uv string) error {
	if err := n.check(state, key, statetable.KindMap); err != nil {
		return err
	}
	c := n.cells[cellID(state, key, ns)]
	c.State, c.Key, c.NS = state, key, ns
	if c.Map == nil {
		c.Map = map[string]string{}
	}
	c.Map[uk] = uv // the cell's map is this backend's own: captures copy it
	n.cells[cellID(state, key, ns)] = c
	return nil
}

func (n *naive) GetMapEntry(state, key, ns, uk string) (string, bool, error) {
	if err := n.check(state, key, statetable.KindMap); err != nil {
		return "", false, err
	}
	v, ok := n.cells[cellID(state, key, ns)].Map[uk]
	return v, ok, nil
}

func (n *naive) RemoveMapEntry(state, key, ns, uk string) error {
	if err := n.check(state, key, statetable.KindMap); err != nil {
		return err
	}
	c, ok := n.cells[cellID(state, key, ns)]
	if ok {
		delete(c.Map, uk)
		if len(c.Map) == 0 {
			delete(n.cells, cellID(state, key, ns))
		}
	}
	return nil
}

func (n *naive) ClearState(state, key, ns string) error {
	if err := n.check(state, key); err != nil {
		return err
	}
	delete(n.cells, cellID(state, key, ns))
	return nil
}

func (n *naive) MergeNamespaces(state, key, target string, sources []string) error {
	if err := n.check(state, key, statetable.KindList, statetable.KindReducing, statetable.KindAggregating); err != nil {
		return err
	}
	for _, src := range sources {
		s, ok := n.cells[cellID(state, key, src)]
		if !ok || src == target {
			continue
		}
		delete(n.cells, cellID(state, key, src))
		t, ok := n.cells[cellID(state, key, target)]
		if !ok {
			s.NS = target
			n.cells[cellID(state, key, target)] = s
			continue
		}
		switch n.kinds[state] {
		case statetable.KindList:
			t.List = append(slices.Clip(t.List), s.List...)
		case statetable.KindReducing:
			t.Value = contract.Reduce(t.Value, s.Value)
		default:
			t.Value = contract.Aggregate{}.Merge(t.Value, s.Value)
		}
		n.cells[cellID(state, key, target)] = t
	}
	return nil
}

func compareTimer(a, b contract.Timer) int {
	if a.Timestamp != b.Timestamp {
		if a.Timestamp < b.Timestamp {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.Namespace, b.Namespace)
}

func (n *naive) queue(service string, d timerqueue.Domain, key string) ([]contract.Timer, error) {
	q, ok := n.timers[timersID(service, d)]
	if !ok {
		return nil, fmt.Errorf("%w: no timer service %q", errNaive, service)
	}
	if !n.owned.Contains(statetable.KeyGroupOf(statetable.HashKey([]byte(key)), n.maxPar)) {
		return nil, fmt.Errorf("%w: key %q not owned", errNaive, key)
	}
	return q, nil
}

func (n *naive) RegisterTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	q, err := n.queue(service, d, key)
	if err != nil {
		return false, err
	}
	t := contract.Timer{Timestamp: ts, Key: key, Namespace: ns}
	i, found := slices.BinarySearchFunc(q, t, compareTimer)
	if !found {
		n.timers[timersID(service, d)] = slices.Insert(slices.Clip(q), i, t)
	}
	return !found, nil
}

func (n *naive) DeleteTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	q, err := n.queue(service, d, key)
	if err != nil {
		return false, err
	}
	i, found := slices.BinarySearchFunc(q, contract.Timer{Timestamp: ts, Key: key, Namespace: ns}, compareTimer)
	if found {
		n.timers[timersID(service, d)] = slices.Delete(slices.Clone(q), i, i+1)
	}
	return found, nil
}

func (n *naive) advance(service string, d timerqueue.Domain, upTo int64, fire contract.FireFunc) (int, error) {
	id := timersID(service, d)
	if _, ok := n.timers[id]; !ok {
		return 0, fmt.Errorf("%w: no timer service %q", errNaive, service)
	}
	fired := 0
	for len(n.timers[id]) > 0 && n.timers[id][0].Timestamp <= upTo {
		t := n.timers[id][0]
		n.timers[id] = n.timers[id][1:]
		if err := fire(t.Key, t.Namespace, t.Timestamp); err != nil {
			n.RegisterTimer(service, d, t.Key, t.Namespace, t.Timestamp)
			return fired, err
		}
		fired++
	}
	return fired, nil
}

func (n *naive) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return n.advance(service, timerqueue.EventTime, wm, fire)
}

func (n *naive) AdvanceProcessingTime(service string, fire contract.FireFunc) (int, error) {
	return n.advance(service, timerqueue.ProcessingTime, n.clock(), fire)
}

func (n *naive) StateEntries(state string) ([]contract.Entry, error) {
	if _, ok := n.kinds[state]; !ok {
		return nil, errNaive
	}
	return naiveEntries(n.cells, state, n.kinds[state]), nil
}

func naiveEntries(cells map[string]naiveCell, state string, kind statetable.Kind) []contract.Entry {
	var out []contract.Entry
	for _, c := range cells {
		if c.State == state {
			out = append(out, contract.Entry{Key: c.Key, Namespace: c.NS, Value: naiveResult(kind, c.Value), List: slices.Clone(c.List), Map: maps.Clone(c.Map)})
		}
	}
	return out
}

func (n *naive) TimerEntries(service string, d timerqueue.Domain) ([]contract.Timer, error) {
	q, ok := n.timers[timersID(service, d)]
	if !ok {
		return nil, errNaive
	}
	return slices.Clone(q), nil
}

// naiveImage is a capture: a deep copy, and the gob snapshot format.
type naiveImage struct {
	MaxPar int
	Kinds  map[string]statetable.Kind
	Cells  map[string]naiveCell
	Timers map[string][]contract.Timer
}

func (n *naive) Capture() contract.View {
	img := &naiveImage{MaxPar: n.maxPar, Kinds: maps.Clone(n.kinds), Cells: map[string]naiveCell{}, Timers: map[string][]contract.Timer{}}
	for id, c := range n.cells {
		c.List, c.Map = slices.Clone(c.List), maps.Clone(c.Map)
		img.Cells[id] = c
	}
	for id, q := range n.timers {
		img.Timers[id] = slices.Clone(q)
	}
	return img
}

func (img *naiveImage) StateEntries(state string) ([]contract.Entry, error) {
	if _, ok := img.Kinds[state]; !ok {
		return nil, errNaive
	}
	return naiveEntries(img.Cells, state, img.Kinds[state]), nil
}

func (img *naiveImage) TimerEntries(service string, d timerqueue.Domain) ([]contract.Timer, error) {
	q, ok := img.Timers[timersID(service, d)]
	if !ok {
		return nil, errNaive
	}
	return slices.Clone(q), nil
}

func (img *naiveImage) WriteSnapshot(_ context.Context, w io.Writer) error {
	return gob.NewEncoder(w).Encode(img)
}

func (img *naiveImage) Release() {}

func (n *naive) RestoreSnapshot(_ context.Context, r io.ReaderAt, size int64) error {
	var img naiveImage
	if err := gob.NewDecoder(io.NewSectionReader(r, 0, size)).Decode(&img); err != nil {
		return err
	}
	if img.MaxPar != n.maxPar {
		return fmt.Errorf("%w: max parallelism %d, want %d", errNaive, img.MaxPar, n.maxPar)
	}
	for id, c := range img.Cells {
		if n.check(c.State, c.Key) == nil {
			n.cells[id] = c
		}
	}
	for id, q := range img.Timers {
		if _, ok := n.timers[id]; !ok {
			return fmt.Errorf("%w: timers %q not registered", errNaive, id)
		}
		for _, t := range q {
			if n.owned.Contains(statetable.KeyGroupOf(statetable.HashKey([]byte(t.Key)), n.maxPar)) {
				n.timers[id] = append(n.timers[id], t)
			}
		}
		slices.SortFunc(n.timers[id], compareTimer)
	}
	return nil
}

// TestNaive runs the suite against the naive backend: an independent
// implementation passes. It has no TTL and no schemas: it leaves GroupTTL
// and GroupSchema out.
func TestNaive(t *testing.T) {
	o := opts()
	o.Groups &^= rapidtest.GroupTTL | rapidtest.GroupSchema
	rapidtest.Run(t, newNaive, o)
}
