package window

import (
	"cmp"
	"fmt"
	"iter"
	"slices"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// Mergeable is a state whose namespaces merge: the list, reducing and
// aggregating states of package statetable with TimeWindow namespaces.
type Mergeable[K any] interface {
	MergeNamespaces(key K, target TimeWindow, sources ...TimeWindow) error
}

// Sessions keeps each key's open session windows and merges them, as
// Flink's MergingWindowSet does for EventTimeSessionWindows: an element at
// ts gets the window [ts, ts+gap), which merges with every open window of
// its key it intersects (touching counts) into their cover.
//
// A merged session keeps its state where one of its windows had it (the
// state window): merging moves the other windows' state into it with
// MergeNamespaces, once, instead of moving the whole session's state to a
// new namespace on every element that extends it. The set maps each open
// window to its state window, in a map state of the backend (so it is in
// every snapshot and checkpoint, and restored with them): register it,
// with NewSessions, before a restore as any state.
//
// Timers: each open window has its end-of-window timer (RegisterEnd) in
// the timer service given; a merge deletes the timers of the windows it
// replaces and registers the merged window's. When one fires, its
// namespace is the window: Remove it from the set, which returns the state
// window to read and clear.
//
// Writer goroutine only, like the backend.
type Sessions[K any] struct {
	assigner Session
	set      *statetable.MapState[K, statetable.VoidNamespace, TimeWindow, TimeWindow]
	timers   *cowstate.NamespacedTimerService[K, TimeWindow]
	states   []Mergeable[K]
	open     []mapping // scratch
	sources  []TimeWindow
}

// mapping is an open window and its state window.
type mapping struct {
	window, state TimeWindow
	fresh         bool // the element's new window, not in the set
}

// NewSessions registers the session set of gap as map state name on b
// (key codec kc), with the timer service that holds the sessions'
// end-of-window timers and the states whose namespaces merge with the
// sessions. Writer goroutine of b.
func NewSessions[K any](b *cowstate.Backend, name string, kc statetable.Codec[K], gap int64,
	timers *cowstate.NamespacedTimerService[K, TimeWindow], states ...Mergeable[K]) (*Sessions[K], error) {
	a := Session{Gap: gap}
	if _, err := a.Assign(0); err != nil {
		return nil, err
	}
	set, err := cowstate.NamespacedMap(b, name, kc, statetable.Void, Codec, Codec)
	if err != nil {
		return nil, err
	}
	return &Sessions[K]{assigner: a, set: set, timers: timers, states: slices.Clone(states)}, nil
}

// Assigned is where Sessions.Add put an element.
type Assigned struct {
	// Window is the element's session after merging: the namespace of
	// its end-of-window timer.
	Window TimeWindow
	// State is the namespace that holds the session's state: add the
	// element's state there.
	State TimeWindow
	// Late: the session had ended at the timer service's watermark (it
	// merged with no open window, or only with ended ones). Nothing was
	// changed; drop the element, as Flink does.
	Late bool
}

// Add assigns the element of key at ts its session window, merges it with
// the key's open windows it intersects, and returns the session and its
// state window. A merge merges the states' namespaces into the state
// window of the earliest merged window, and replaces the merged windows'
// end-of-window timers by the session's. Cost: a read of the key's open
// windows (usually one or two), and for a new or merged window a few map
// writes, timer updates and one MergeNamespaces per state.
func (s *Sessions[K]) Add(key K, ts int64) (Assigned, error) {
	w, err := s.assigner.Assign(ts)
	if err != nil {
		return Assigned{}, err
	}
	open, err := s.set.Iterate(key, statetable.VoidNamespace{})
	if err != nil {
		return Assigned{}, err
	}
	s.open = append(s.open[:0], mapping{window: w, fresh: true})
	for win, st := range open {
		s.open = append(s.open, mapping{window: win, state: st})
	}
	// Flink's mergeWindows: sweep the windows by start, growing a cover
	// while the next one intersects it; the group that holds w merges.
	slices.SortFunc(s.open, func(a, b mapping) int {
		if c := cmp.Compare(a.window.Start, b.window.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.window.End, b.window.End)
	})
	cover, merged := group(s.open)
	if Late(cover, s.timers.CurrentWatermark()) {
		return Assigned{Window: cover, Late: true}, nil
	}
	switch {
	case len(merged) == 0:
		if err := s.set.Put(key, statetable.VoidNamespace{}, w, w); err != nil {
			return Assigned{}, err
		}
		if _, err := RegisterEnd(s.timers, key, w); err != nil {
			return Assigned{}, err
		}
		return Assigned{Window: w, State: w}, nil
	case len(merged) == 1 && merged[0].window == cover:
		return Assigned{Window: cover, State: merged[0].state}, nil // inside an open window
	}
	state := merged[0].state
	s.sources = s.sources[:0]
	for _, m := range merged {
		if m.state != state {
			s.sources = append(s.sources, m.state)
		}
		if m.window == cover {
			continue
		}
		if err := s.set.Remove(key, statetable.VoidNamespace{}, m.window); err != nil {
			return Assigned{}, err
		}
		if err := DeleteEnd(s.timers, key, m.window); err != nil {
			return Assigned{}, err
		}
	}
	if err := s.set.Put(key, statetable.VoidNamespace{}, cover, state); err != nil {
		return Assigned{}, err
	}
	if _, err := RegisterEnd(s.timers, key, cover); err != nil {
		return Assigned{}, err
	}
	if len(s.sources) > 0 {
		for _, st := range s.states {
			if err := st.MergeNamespaces(key, state, s.sources...); err != nil {
				return Assigned{}, fmt.Errorf("window: merging sessions of %v into %v: %w", s.sources, state, err)
			}
		}
	}
	return Assigned{Window: cover, State: state}, nil
}

// group returns the cover of the group of sorted windows (Flink's
// mergeWindows: windows by start, a group grows while the next window
// intersects its cover) that holds the fresh window, and the group's other
// windows.
func group(sorted []mapping) (TimeWindow, []mapping) {
	for lo := 0; lo < len(sorted); {
		cover, fresh, hi := sorted[lo].window, sorted[lo].fresh, lo+1
		for ; hi < len(sorted) && sorted[hi].window.Intersects(cover); hi++ {
			cover, fresh = cover.Cover(sorted[hi].window), fresh || sorted[hi].fresh
		}
		if fresh {
			return cover, slices.DeleteFunc(sorted[lo:hi], func(m mapping) bool { return m.fresh })
		}
		lo = hi
	}
	panic("window: BUG: the new window is in no group")
}

// StateWindow returns the state window of key's open window w, and false
// if w is not open. O(1) map lookup.
func (s *Sessions[K]) StateWindow(key K, w TimeWindow) (TimeWindow, bool, error) {
	return s.set.Get(key, statetable.VoidNamespace{}, w)
}

// Remove closes key's window w, as its end-of-window timer fires (or to
// purge it): it leaves the set, its timer is deleted (a no-op once fired),
// and its state window is returned, for the caller to read and clear.
// false if w was not open.
func (s *Sessions[K]) Remove(key K, w TimeWindow) (state TimeWindow, ok bool, err error) {
	state, ok, err = s.set.Get(key, statetable.VoidNamespace{}, w)
	if err != nil || !ok {
		return state, ok, err
	}
	if err := s.set.Remove(key, statetable.VoidNamespace{}, w); err != nil {
		return state, false, err
	}
	return state, true, DeleteEnd(s.timers, key, w)
}

// Windows yields key's open windows and their state windows. Do not Add
// or Remove during the iteration.
func (s *Sessions[K]) Windows(key K) (iter.Seq2[TimeWindow, TimeWindow], error) {
	return s.set.Iterate(key, statetable.VoidNamespace{})
}

// Count returns the number of keys with open windows. O(1).
func (s *Sessions[K]) Count() int { return s.set.Count() }
