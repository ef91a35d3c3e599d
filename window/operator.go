package window

import (
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// Operator is a keyed event-time window operator, Flink's
// keyBy(key).window(assigner).reduce(...) or .aggregate(...): Add puts an
// element into the windows its assigner gives, AdvanceWatermark emits
// every window whose end the watermark has passed (one result per key and
// window, in timestamp order) and clears its state, and Flush emits the
// rest at the end of the input.
//
// Its state (the windows' contents, their end-of-window timers, and for
// Session windows the open sessions) lives in the backend under the
// operator's name, so it is in every snapshot and checkpoint; create the
// operator before a restore, as any state. Lateness is Flink's with no
// allowed lateness: an element whose windows have all ended at the
// watermark is dropped and Add reports it late.
//
// One operator a name and backend (a second is an error matching
// ErrExists), and its state is its own: write it through the operator.
//
// Writer goroutine of the backend only. Cost per Add: the assigner's
// windows, each one state update (O(log n)), and for an element that
// creates a window's state one timer registration (O(log n)); per window
// emitted, one read and one clear. The first Add after a restore reads the
// operator's state once (O(its entries)).
type Operator[K, IN, OUT any] struct {
	b        *cowstate.Backend
	assign   Assigner
	state    windowState[K, IN, OUT]
	timers   *cowstate.NamespacedTimerService[K, TimeWindow]
	sessions *Sessions[K] // for a Session assigner, else nil
	windows  []TimeWindow // scratch for the assigner
	run      batchRun[K, IN]
	ends     endTimers
}

// endTimers is what lets an element of a window that already holds state
// for its key skip the registration of the window's end-of-window timer:
// a search of a tree of every timer, half of a windowed count's time
// (BenchmarkWindowJob; decision 0051).
//
// The operator keeps this invariant: every (key, window) it holds state
// for has its end-of-window timer registered. Adding creates the state
// and registers the timer together; firing removes the timer and clears
// the state together (an emit that fails puts the timer back). Two things
// can break it, and the operator watches both: a deleted timer (DeleteEnd,
// Operator.Timers, a restore replaying a delta: the service's
// EventTimersDeleted count) and state written by its bytes (a restore:
// the table's EntryWrites count), which can bring state whose timer was
// deleted before the snapshot. After either, the windows that may hold
// state, those ending at or before maxEnd, are registered at every element
// again, as Flink's trigger does: only windows ending later, whose state
// this process created since, skip.
type endTimers struct {
	// registerThrough: an element of a window ending at or before it
	// registers the end timer whether or not its state existed.
	registerThrough int64
	// maxEnd is the latest end of a window that may hold state: of those
	// the operator added to, and of the state a restore brought.
	maxEnd int64
	// deletes and writes are the counts last seen.
	deletes, writes uint64
}

// batchRun is AddEach's scratch: consecutive elements of a batch that go
// into the same windows, not yet added.
type batchRun[K, IN any] struct {
	at      []int        // the elements' indexes in the batch
	keys    []K          // their keys
	ins     []IN         // their elements
	windows []TimeWindow // their windows that are not late
	next    []TimeWindow // the next run's windows while this one is added
	created []bool       // a window's adds: whether each created the state
}

// windowState is the state of an operator's windows: a reducing or an
// aggregating state namespaced by window.
type windowState[K, IN, OUT any] interface {
	Add(key K, w TimeWindow, in IN) error
	AddCreating(key K, w TimeWindow, in IN) (created bool, err error)
	AddEachCreating(keys []K, w TimeWindow, in func(i int) IN, added func(i int, created bool)) error
	Pairs() iter.Seq2[K, TimeWindow]
	PrefetchEncoded(key, w string)
	Get(key K, w TimeWindow) (OUT, bool, error)
	Clear(key K, w TimeWindow) error
	Count() int
	Mergeable[K]
}

// Reduce registers a window operator that folds each window's elements
// with reduce (options: cowstate.WithKeyCodec, cowstate.WithValueCodec, as
// for cowstate.Reducing). reduce must return a new value rather than mutate
// its arguments.
func Reduce[K, V any](b *cowstate.Backend, name string, assign Assigner, reduce func(acc, v V) V, opts ...cowstate.StateOption) (*Operator[K, V, V], error) {
	if err := precheck(b, name, assign); err != nil {
		return nil, err
	}
	kc, vc, err := cowstate.ResolveCodecs[K, V]("reducing", name, opts...)
	if err != nil {
		return nil, err
	}
	s, err := cowstate.NamespacedReducing(b, name, kc, Codec, vc, reduce)
	if err != nil {
		return nil, err
	}
	return newOperator(b, name, assign, kc, windowState[K, V, V](s))
}

// Aggregate registers a window operator that adds each window's elements
// to an accumulator of fn and emits its result (options:
// cowstate.WithKeyCodec, cowstate.WithValueCodec for the accumulators).
// Go infers IN, ACC and OUT from fn: window.Aggregate[string](b, "avg",
// minute, average{}).
func Aggregate[K, IN, ACC, OUT any](b *cowstate.Backend, name string, assign Assigner, fn cowstate.AggregateFunction[IN, ACC, OUT], opts ...cowstate.StateOption) (*Operator[K, IN, OUT], error) {
	if err := precheck(b, name, assign); err != nil {
		return nil, err
	}
	kc, ac, err := cowstate.ResolveCodecs[K, ACC]("aggregating", name, opts...)
	if err != nil {
		return nil, err
	}
	s, err := cowstate.NamespacedAggregating(b, name, kc, Codec, ac, fn)
	if err != nil {
		return nil, err
	}
	return newOperator(b, name, assign, kc, windowState[K, IN, OUT](s))
}

// Count registers a window operator that counts each window's elements:
// Add(key, ts, 1) per element (or n for n of them at once).
func Count[K any](b *cowstate.Backend, name string, assign Assigner, opts ...cowstate.StateOption) (*Operator[K, int64, int64], error) {
	return Reduce[K](b, name, assign, func(acc, n int64) int64 { return acc + n }, opts...)
}

// precheck is what an operator's constructor checks before it registers
// anything: an assigner (ErrInvalid), and a name b has no state of
// (ErrExists: one operator a name, see endTimers).
func precheck(b *cowstate.Backend, name string, assign Assigner) error {
	if assign == nil {
		return fmt.Errorf("%w: operator %q: nil assigner", ErrInvalid, name)
	}
	if _, err := b.Table().State(name); err == nil {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	return nil
}

// newOperator registers the operator's timer service, name+"/windows", and
// for session windows its session set, name+"/sessions".
func newOperator[K, IN, OUT any](b *cowstate.Backend, name string, assign Assigner, kc statetable.Codec[K], s windowState[K, IN, OUT]) (*Operator[K, IN, OUT], error) {
	if assign == nil {
		return nil, fmt.Errorf("%w: operator %q: nil assigner", ErrInvalid, name)
	}
	timers, err := cowstate.NamespacedTimers(b, name+"/windows", kc, Codec)
	if err != nil {
		return nil, err
	}
	o := &Operator[K, IN, OUT]{b: b, assign: assign, state: s, timers: timers,
		ends: endTimers{registerThrough: math.MinInt64, maxEnd: math.MinInt64}}
	if session, ok := assign.(Session); ok {
		if o.sessions, err = NewSessions(b, name+"/sessions", kc, session.Gap, timers, s); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Add puts an element of key at event time ts into its windows. late is
// true when every one of them had ended at the watermark: the element is
// dropped. An error is the assigner's (ErrRange, ErrInvalid) or the
// state's; then nothing of the element is kept in a window it names.
func (o *Operator[K, IN, OUT]) Add(key K, ts int64, in IN) (late bool, err error) {
	if o.sessions != nil {
		a, err := o.sessions.Add(key, ts)
		if err != nil || a.Late {
			return a.Late, err
		}
		return false, o.state.Add(key, a.State, in)
	}
	o.windows, err = o.assign.AppendWindows(o.windows[:0], ts)
	if err != nil {
		return false, err
	}
	o.checkEnds()
	wm := o.timers.CurrentWatermark()
	late = true
	for _, w := range o.windows {
		if Late(w, wm) {
			continue
		}
		late = false
		created, err := o.state.AddCreating(key, w, in)
		if err != nil {
			return false, err
		}
		if err := o.addedTo(key, w, created); err != nil {
			return false, err
		}
	}
	return late, nil
}

// checkEnds updates o.ends for what happened since it last looked: a
// deleted timer or state written by its bytes means that windows that may
// hold state may miss their end timer (see endTimers). After a restore it
// reads the state for the latest end of a window holding some: O(state
// entries), once a restore.
func (o *Operator[K, IN, OUT]) checkEnds() {
	e := &o.ends
	if w := o.b.Table().EntryWrites(); w != e.writes {
		e.writes = w
		for _, win := range o.state.Pairs() {
			e.maxEnd = max(e.maxEnd, win.MaxTimestamp())
		}
		e.registerThrough = max(e.registerThrough, e.maxEnd)
	}
	if d := o.timers.EventTimersDeleted(); d != e.deletes {
		e.deletes = d
		e.registerThrough = max(e.registerThrough, e.maxEnd)
	}
}

// addedTo registers the end timer of window w for key, just added to,
// unless the add found state (created false) that the invariant of
// endTimers says has its timer.
func (o *Operator[K, IN, OUT]) addedTo(key K, w TimeWindow, created bool) error {
	end := w.MaxTimestamp()
	o.ends.maxEnd = max(o.ends.maxEnd, end)
	if !created && end > o.ends.registerThrough {
		return nil
	}
	if _, err := o.timers.RegisterEventTime(key, w, end); err != nil {
		// The state holds an element its timer does not cover: trust no
		// window that may hold state any more.
		o.ends.registerThrough = max(o.ends.registerThrough, o.ends.maxEnd)
		return err
	}
	return nil
}

// AddEach is Add of keys[i], with the event time and element at(i), for
// each index in turn: the same windows, timers and state as the calls of
// Add one by one, for a batch of events read at once. What it adds is
// speed at scale: consecutive elements that go into the same windows are
// added to each window's state together, each group of eight keys
// prefetched first (statetable's AddEach), so their cache misses overlap
// (BenchmarkWindowJob). dropped counts the late elements. at must not add
// to the operator. An error stops it: the elements before the failing one
// are added and the rest are not, and the error names its index. Writer
// goroutine only.
func (o *Operator[K, IN, OUT]) AddEach(keys []K, at func(i int) (ts int64, in IN)) (dropped int, err error) {
	if o.sessions != nil { // merging sessions: one element at a time
		for i, key := range keys {
			ts, in := at(i)
			late, err := o.Add(key, ts, in)
			if err != nil {
				return dropped, fmt.Errorf("keys[%d]: %w", i, err)
			}
			if late {
				dropped++
			}
		}
		return dropped, nil
	}
	r := &o.run
	defer r.reset()
	o.checkEnds()
	wm := o.timers.CurrentWatermark()
	for i, key := range keys {
		ts, in := at(i)
		if o.windows, err = o.assign.AppendWindows(o.windows[:0], ts); err != nil {
			if ferr := o.flush(); ferr != nil {
				return dropped, ferr
			}
			return dropped, fmt.Errorf("keys[%d]: %w", i, err)
		}
		live := slices.DeleteFunc(o.windows, func(w TimeWindow) bool { return Late(w, wm) })
		if len(live) == 0 {
			dropped++
			continue
		}
		if !slices.Equal(live, r.windows) {
			r.next = append(r.next[:0], live...) // o.windows is Add's scratch too
			if err := o.flush(); err != nil {
				return dropped, err
			}
			r.windows, r.next = r.next, r.windows
		}
		r.at, r.keys, r.ins = append(r.at, i), append(r.keys, key), append(r.ins, in)
	}
	return dropped, o.flush()
}

// flush adds the run's elements to the state of each of its windows, and
// registers the end timers Add would (addedTo). An element the state
// refuses (a key in a key group the backend does not own) stops it, with
// the elements before it added to every window.
func (o *Operator[K, IN, OUT]) flush() error {
	r := &o.run
	defer r.reset()
	n := len(r.keys)
	var stop error
	for _, w := range r.windows {
		r.created = r.created[:0]
		added := 0
		err := o.state.AddEachCreating(r.keys[:n], w, func(j int) IN { return r.ins[j] }, func(j int, created bool) {
			added = j + 1
			r.created = append(r.created, created)
		})
		for j, created := range r.created {
			if err := o.addedTo(r.keys[j], w, created); err != nil {
				return fmt.Errorf("keys[%d]: %w", r.at[j], err)
			}
		}
		if err != nil {
			stop = fmt.Errorf("keys[%d]: %w", r.at[added], err)
			n = added
		}
	}
	return stop
}

// reset empties the run, keeping its memory but none of its keys and
// elements.
func (r *batchRun[K, IN]) reset() {
	clear(r.keys)
	clear(r.ins)
	r.at, r.keys, r.ins, r.windows, r.created = r.at[:0], r.keys[:0], r.ins[:0], r.windows[:0], r.created[:0]
}

// AdvanceWatermark sets the event-time watermark to wm and emits, in
// timestamp order, every window of every key whose last timestamp is at or
// below it, clearing its state after emit returns. The watermark never goes
// back: one below the current one leaves it as it is. emit may write
// state; its first error stops the emission and is returned (the window
// it failed on keeps its state and fires again on the next advance).
// fired is the number of windows emitted.
func (o *Operator[K, IN, OUT]) AdvanceWatermark(wm int64, emit func(key K, w TimeWindow, out OUT) error) (fired int, err error) {
	fire := func(key K, w TimeWindow, _ int64) error {
		stateW := w
		if o.sessions != nil {
			sw, ok, err := o.sessions.StateWindow(key, w)
			if err != nil {
				return err
			}
			if !ok { // merging deletes the timers of the windows it replaces
				return fmt.Errorf("window operator: the timer of session %v of key %v fired, and the session is not open", w, key)
			}
			stateW = sw
		}
		out, ok, err := o.state.Get(key, stateW)
		if err != nil || !ok {
			return err
		}
		if err := emit(key, w, out); err != nil {
			return err
		}
		if o.sessions != nil {
			if _, _, err := o.sessions.Remove(key, w); err != nil {
				return err
			}
		}
		fired++
		return o.state.Clear(key, stateW)
	}
	if o.sessions != nil { // a session's state is under a window of its own
		_, err = o.timers.AdvanceWatermark(wm, fire)
	} else {
		_, err = o.timers.AdvanceWatermarkReading(wm, o.state, fire)
	}
	return fired, err
}

// Flush emits every window still open, as at the end of a bounded input
// (Flink's final watermark): after it, every element is late.
func (o *Operator[K, IN, OUT]) Flush(emit func(key K, w TimeWindow, out OUT) error) (fired int, err error) {
	return o.AdvanceWatermark(math.MaxInt64, emit)
}

// Watermark returns the operator's event-time watermark (math.MinInt64
// before the first advance).
func (o *Operator[K, IN, OUT]) Watermark() int64 { return o.timers.CurrentWatermark() }

// Open returns the number of windows, of all keys, that hold elements and
// have not been emitted yet. O(1).
func (o *Operator[K, IN, OUT]) Open() int { return o.state.Count() }

// Timers returns the operator's timer service, for a job that also
// registers timers of its own in window namespaces.
func (o *Operator[K, IN, OUT]) Timers() *cowstate.NamespacedTimerService[K, TimeWindow] {
	return o.timers
}
