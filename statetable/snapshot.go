package statetable

import (
	"fmt"

	"github.com/cowstate/cowstate/cow"
)

// Snapshot is every state of a Table frozen at one version: the views taken
// under one cow.Capture. Read it through the typed states' At methods, from
// any goroutine, until the capture is released.
type Snapshot struct {
	table   *Table // whose states may read it
	capture *cow.Capture
	views   map[string]any // state name -> cellView[C]
	regs    map[string]registered
	infos   []StateInfo
	maxPar  int
	owned   KeyGroupRange
	// now is the table's time at the capture, for TTL states: what has
	// expired by then reads as absent and is left out of snapshot files.
	now int64
}

// View returns the table's states as frozen by c, which the table's owner
// must have taken with no write since (see cow.Map.View). O(number of
// states), independent of their size. Writer goroutine only.
func (t *Table) View(c *cow.Capture) *Snapshot {
	s := &Snapshot{table: t, capture: c, views: make(map[string]any, len(t.states)), regs: make(map[string]registered, len(t.states)), maxPar: t.maxPar, owned: t.owned}
	for _, n := range t.names {
		r := t.states[n]
		s.views[n] = r.view(c)
		s.regs[n] = r
		s.infos = append(s.infos, r.info())
	}
	if len(t.ttl) > 0 {
		s.now = t.now()
	}
	return s
}

// Time returns the table's processing time at the capture (0 if no state
// has a TTL): what the TTL states had expired by then reads as expired in
// the snapshot and is left out of the files written from it.
func (s *Snapshot) Time() int64 { return s.now }

// Capture returns the capture the snapshot was taken under.
func (s *Snapshot) Capture() *cow.Capture { return s.capture }

// MaxParallelism returns the number of key groups of the table.
func (s *Snapshot) MaxParallelism() int { return s.maxPar }

// KeyGroups returns the key groups the table owned.
func (s *Snapshot) KeyGroups() KeyGroupRange { return s.owned }

// States returns the states the snapshot holds, in registration order.
func (s *Snapshot) States() []StateInfo { return s.infos }

// viewOf returns the typed view of a state of table t in s: an error
// matching ErrForeignSnapshot if s is nil or a view of another table, so
// that a state never reads another backend's entries, even of a state of
// the same name and types.
func viewOf[C any](s *Snapshot, t *Table, info StateInfo) (cellView[C], error) {
	if s == nil {
		return cellView[C]{}, fmt.Errorf("%w: state %q read at a nil snapshot", ErrForeignSnapshot, info.Name)
	}
	if s.table != t {
		return cellView[C]{}, fmt.Errorf("%w: state %q read at a snapshot (version %d) of another table", ErrForeignSnapshot, info.Name, s.capture.Epoch())
	}
	v, ok := s.views[info.Name]
	if !ok {
		return cellView[C]{}, fmt.Errorf("%w %q in snapshot (registered after it was taken)", ErrUnknownState, info.Name)
	}
	return v.(cellView[C]), nil
}

// getAt reads the cell of (key, ns) from a snapshot. It encodes into a
// fresh buffer, so readers on other goroutines do not share the writer's.
func (c *cells[K, N, C]) getAt(s *Snapshot, key K, ns N) (C, bool, error) {
	var zero C
	view, err := viewOf[C](s, c.t, c.info)
	if err != nil {
		return zero, false, err
	}
	r := &cells[K, N, C]{t: c.t, info: c.info, kc: c.kc, nc: c.nc, nillable: c.nillable}
	h, ck, err := r.locate(key, ns)
	if err != nil {
		return zero, false, err
	}
	v, ok := view.get(h, ck)
	return v, ok, nil
}

// Entries returns the number of (key, namespace) entries of the named state
// in the snapshot, 0 for a state it does not hold. O(1); any goroutine.
func (s *Snapshot) Entries(name string) int {
	r, ok := s.regs[name]
	if !ok {
		return 0
	}
	return r.viewLen(s.views[name])
}
