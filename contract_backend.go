package cowstate

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// This file implements Contract on *Backend: every state of the contract is
// a typed state with statetable.String codecs for its key, namespace and
// values, registered on the backend's Table like any other, so a contract
// state and one registered with Value(b, name, statetable.String, ...) are
// the same state. The typed handles are not kept on the side: registering
// a name again with the same kind and codecs returns the registered handle,
// so each call looks it up that way (a map lookup).

var _ Contract = (*Backend)(nil)

// contractHandle is the typed state behind a contract state name.
type contractHandle struct {
	kind statetable.Kind
	v    *statetable.ValueState[string, string, string]
	l    *statetable.ListState[string, string, string]
	m    *statetable.MapState[string, string, string, string]
	r    *statetable.ReducingState[string, string, string]
	a    *statetable.AggregatingState[string, string, string, string, string]
}

var str = statetable.String

// registerContractState registers (or looks up) the typed state of name.
func (b *Backend) registerContractState(name string, kind statetable.Kind) (h contractHandle, err error) {
	h.kind = kind
	switch kind {
	case statetable.KindValue:
		h.v, err = Value(b, name, str, str, str, "")
	case statetable.KindList:
		h.l, err = List(b, name, str, str, str)
	case statetable.KindMap:
		h.m, err = Map(b, name, str, str, str, str)
	case statetable.KindReducing:
		h.r, err = Reducing(b, name, str, str, str, ContractReduce)
	case statetable.KindAggregating:
		h.a, err = Aggregating[string, string, string, string, string](b, name, str, str, str, ContractAggregate{})
	default:
		err = fmt.Errorf("%w: unknown kind %v of state %q", ErrKind, kind, name)
	}
	return h, err
}

// contractState returns the handle of a registered state, checking that its
// kind is one of kinds (any kind if none is given).
func (b *Backend) contractState(name string, kinds ...statetable.Kind) (contractHandle, error) {
	info, err := b.table.State(name)
	if err != nil {
		return contractHandle{}, err
	}
	if len(kinds) > 0 && !slices.Contains(kinds, info.Kind) {
		return contractHandle{}, fmt.Errorf("%w: %v", ErrKind, info)
	}
	return b.registerContractState(name, info.Kind)
}

// RegisterState registers a contract state (see Contract). Writer goroutine.
func (b *Backend) RegisterState(name string, kind statetable.Kind) error {
	_, err := b.registerContractState(name, kind)
	return err
}

// RegisterTimerService registers a timer service with string keys and
// namespaces.
func (b *Backend) RegisterTimerService(name string) error {
	_, err := Timers(b, name, str, str)
	return err
}

func (b *Backend) contractTimers(name string) (*TimerService[string, string], error) {
	if _, ok := b.services[name]; !ok {
		return nil, fmt.Errorf("%w: no timer service %q", ErrTimerService, name)
	}
	return Timers(b, name, str, str)
}

// Put implements Contract.Put.
func (b *Backend) Put(state, key, ns, value string) error {
	h, err := b.contractState(state, statetable.KindValue)
	if err != nil {
		return err
	}
	if value == "" {
		return h.v.Clear(key, ns)
	}
	return h.v.Put(key, ns, value)
}

// Get implements Contract.Get.
func (b *Backend) Get(state, key, ns string) (string, bool, error) {
	h, err := b.contractState(state, statetable.KindValue, statetable.KindReducing, statetable.KindAggregating)
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

// Add implements Contract.Add.
func (b *Backend) Add(state, key, ns, v string) error {
	h, err := b.contractState(state, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
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

// GetList implements Contract.GetList.
func (b *Backend) GetList(state, key, ns string) ([]string, error) {
	h, err := b.contractState(state, statetable.KindList)
	if err != nil {
		return nil, err
	}
	seq, err := h.l.Get(key, ns)
	if err != nil {
		return nil, err
	}
	return slices.Collect(seq), nil
}

// UpdateList implements Contract.UpdateList.
func (b *Backend) UpdateList(state, key, ns string, elems []string) error {
	h, err := b.contractState(state, statetable.KindList)
	if err != nil {
		return err
	}
	return h.l.Update(key, ns, slices.Values(elems))
}

// PutMapEntry implements Contract.PutMapEntry.
func (b *Backend) PutMapEntry(state, key, ns, userKey, userValue string) error {
	h, err := b.contractState(state, statetable.KindMap)
	if err != nil {
		return err
	}
	return h.m.Put(key, ns, userKey, userValue)
}

// GetMapEntry implements Contract.GetMapEntry.
func (b *Backend) GetMapEntry(state, key, ns, userKey string) (string, bool, error) {
	h, err := b.contractState(state, statetable.KindMap)
	if err != nil {
		return "", false, err
	}
	return h.m.Get(key, ns, userKey)
}

// RemoveMapEntry implements Contract.RemoveMapEntry.
func (b *Backend) RemoveMapEntry(state, key, ns, userKey string) error {
	h, err := b.contractState(state, statetable.KindMap)
	if err != nil {
		return err
	}
	return h.m.Remove(key, ns, userKey)
}

// ClearState implements Contract.ClearState.
func (b *Backend) ClearState(state, key, ns string) error {
	h, err := b.contractState(state)
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

// MergeNamespaces implements Contract.MergeNamespaces.
func (b *Backend) MergeNamespaces(state, key, target string, sources []string) error {
	h, err := b.contractState(state, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
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

// RegisterTimer implements Contract.RegisterTimer.
func (b *Backend) RegisterTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := b.contractTimers(service)
	if err != nil {
		return false, err
	}
	if d == timerqueue.ProcessingTime {
		return s.RegisterProcessingTime(key, ns, ts)
	}
	return s.RegisterEventTime(key, ns, ts)
}

// DeleteTimer implements Contract.DeleteTimer.
func (b *Backend) DeleteTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error) {
	s, err := b.contractTimers(service)
	if err != nil {
		return false, err
	}
	if d == timerqueue.ProcessingTime {
		return s.DeleteProcessingTime(key, ns, ts)
	}
	return s.DeleteEventTime(key, ns, ts)
}

// AdvanceWatermark implements Contract.AdvanceWatermark.
func (b *Backend) AdvanceWatermark(service string, wm int64, fire FireFunc) (int, error) {
	s, err := b.contractTimers(service)
	if err != nil {
		return 0, err
	}
	return s.AdvanceWatermark(wm, fire)
}

// AdvanceProcessingTime implements Contract.AdvanceProcessingTime.
func (b *Backend) AdvanceProcessingTime(service string, fire FireFunc) (int, error) {
	s, err := b.contractTimers(service)
	if err != nil {
		return 0, err
	}
	return s.AdvanceProcessingTime(fire)
}

// StateEntries implements EntryReader on the live state. O(entries).
func (b *Backend) StateEntries(state string) ([]Entry, error) {
	h, err := b.contractState(state)
	if err != nil {
		return nil, err
	}
	var pairs [][2]string
	collect := func(seq func(func(string, string) bool)) {
		for k, ns := range seq {
			pairs = append(pairs, [2]string{k, ns})
		}
	}
	switch h.kind {
	case statetable.KindValue:
		collect(h.v.Pairs())
	case statetable.KindList:
		collect(h.l.Pairs())
	case statetable.KindMap:
		collect(h.m.Pairs())
	case statetable.KindReducing:
		collect(h.r.Pairs())
	default:
		collect(h.a.Pairs())
	}
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

// entry reads (key, ns) of the live state (snap nil) or of a snapshot.
func (h contractHandle) entry(key, ns string, snap *Snapshot) (e Entry, err error) {
	e.Key, e.Namespace = key, ns
	switch h.kind {
	case statetable.KindValue:
		if snap == nil {
			e.Value, err = h.v.Get(key, ns)
		} else {
			e.Value, err = h.v.GetAt(snap.State(), key, ns)
		}
	case statetable.KindList:
		var seq func(func(string) bool)
		if snap == nil {
			seq, err = h.l.Get(key, ns)
		} else {
			seq, err = h.l.GetAt(snap.State(), key, ns)
		}
		if err == nil {
			e.List = slices.Collect(seq)
		}
	case statetable.KindMap:
		var seq func(func(string, string) bool)
		if snap == nil {
			seq, err = h.m.Iterate(key, ns)
		} else {
			seq, err = h.m.IterateAt(snap.State(), key, ns)
		}
		if err == nil {
			e.Map = maps.Collect(seq)
		}
	case statetable.KindReducing:
		if snap == nil {
			e.Value, _, err = h.r.Get(key, ns)
		} else {
			e.Value, _, err = h.r.GetAt(snap.State(), key, ns)
		}
	default:
		if snap == nil {
			e.Value, _, err = h.a.Get(key, ns)
		} else {
			e.Value, _, err = h.a.GetAt(snap.State(), key, ns)
		}
	}
	return e, err
}

// TimerEntries implements EntryReader on the live timers, in firing order.
func (b *Backend) TimerEntries(service string, d timerqueue.Domain) ([]Timer[string, string], error) {
	s, err := b.contractTimers(service)
	if err != nil {
		return nil, err
	}
	seq := s.EventTimers()
	if d == timerqueue.ProcessingTime {
		seq = s.ProcessingTimers()
	}
	return collectTimers(seq)
}

func collectTimers(seq func(func(Timer[string, string], error) bool)) ([]Timer[string, string], error) {
	var out []Timer[string, string]
	for t, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Capture implements Contract.Capture with Snapshot: O(number of states and
// timer services).
func (b *Backend) Capture() View {
	v := &contractView{snap: b.Snapshot(), states: map[string]contractHandle{}, services: map[string]*TimerService[string, string]{}}
	for info := range b.table.States() {
		if h, err := b.registerContractState(info.Name, info.Kind); err == nil {
			v.states[info.Name] = h
		}
	}
	for _, n := range b.names {
		if s, err := Timers(b, n, str, str); err == nil {
			v.services[n] = s
		}
	}
	return v
}

// RestoreSnapshot implements Contract.RestoreSnapshot with snapshot.Open and
// Restore.
func (b *Backend) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	rd, err := snapshot.Open(r, size)
	if err != nil {
		return err
	}
	return b.Restore(ctx, rd)
}

// contractView is a Snapshot with the typed handles of its states and
// services, looked up on the writer goroutine at capture so that any
// goroutine may read it.
type contractView struct {
	snap     *Snapshot
	states   map[string]contractHandle
	services map[string]*TimerService[string, string]
}

func (v *contractView) StateEntries(state string) ([]Entry, error) {
	h, ok := v.states[state]
	if !ok {
		return nil, fmt.Errorf("%w %q in the view", statetable.ErrUnknownState, state)
	}
	var out []Entry
	var firstErr error
	kgs := v.snap.State().KeyGroups()
	for g := kgs.First; g <= kgs.Last && firstErr == nil; g++ {
		err := v.snap.State().KeyGroupEntries(state, g, func(ck, _ []byte) bool {
			klen, n := binary.Uvarint(ck)
			if n <= 0 || klen > uint64(len(ck)-n) {
				firstErr = fmt.Errorf("cowstate: bad composite key in state %q", state)
				return false
			}
			key, ns := string(ck[n:n+int(klen)]), string(ck[n+int(klen):])
			e, err := h.entry(key, ns, v.snap)
			if err != nil {
				firstErr = err
				return false
			}
			out = append(out, e)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return out, firstErr
}

func (v *contractView) TimerEntries(service string, d timerqueue.Domain) ([]Timer[string, string], error) {
	s, ok := v.services[service]
	if !ok {
		return nil, fmt.Errorf("%w: no timer service %q in the view", ErrTimerService, service)
	}
	seq := s.EventTimersAt(v.snap)
	if d == timerqueue.ProcessingTime {
		seq = s.ProcessingTimersAt(v.snap)
	}
	return collectTimers(seq)
}

func (v *contractView) WriteSnapshot(ctx context.Context, w io.Writer) error {
	return WriteSnapshot(ctx, w, v.snap, nil)
}

func (v *contractView) Release() { v.snap.Release() }
