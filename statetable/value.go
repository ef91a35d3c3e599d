package statetable

import (
	"bytes"
	"fmt"
)

// ValueState holds one value per (key, namespace).
type ValueState[K, N, V any] struct {
	*cells[K, N, V]
	def    V
	defEnc []byte // def in the value codec's encoding
}

// NewValue registers a value state (or returns the one registered under the
// name, if its kind, codecs and default match). def is what Get returns for
// a key without a value. Registering the name again with another default
// (compared in the value codec's encoding) is an error matching
// ErrStateMismatch that names the state and both defaults. Cost: one
// encoding of def. Writer goroutine only.
func NewValue[K, N, V any](t *Table, name string, kc Codec[K], nc Codec[N], vc Codec[V], def V) (*ValueState[K, N, V], error) {
	info := StateInfo{Name: name, Kind: KindValue, Codec: []string{kc.ID(), nc.ID(), vc.ID()}}
	defEnc := vc.Append(nil, def)
	s, err := registerAs[*ValueState[K, N, V]](t, info, func() registered {
		s := &ValueState[K, N, V]{cells: newCells[K, N, V](t, info, kc, nc, equalityFor[V]()), def: def, defEnc: defEnc}
		s.cell = valueCell(vc)
		return s
	})
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(s.defEnc, defEnc) {
		return nil, fmt.Errorf("%w: value state %q is registered with default %v, not %v", ErrStateMismatch, name, s.def, def)
	}
	return s, nil
}

func (s *ValueState[K, N, V]) info() StateInfo { return s.cells.info }
func (s *ValueState[K, N, V]) handle() any     { return s }

// Get returns the value of (key, ns), or the default. O(log n).
func (s *ValueState[K, N, V]) Get(key K, ns N) (V, error) {
	v, ok, err := s.get(key, ns)
	if !ok {
		return s.def, err
	}
	return v, nil
}

// Put sets the value of (key, ns). The state keeps v as given: do not
// mutate what it references afterwards. Putting an equal value (see
// equalityFor) changes nothing.
func (s *ValueState[K, N, V]) Put(key K, ns N, v V) error { return s.put(key, ns, v) }

// Clear removes the value of (key, ns).
func (s *ValueState[K, N, V]) Clear(key K, ns N) error { return s.clear(key, ns) }

// Lookup returns the value of (key, ns) and true, or the zero V and false
// if it has none: unlike Get, it tells a stored value equal to the default
// from an absent one. O(log n). Writer goroutine only.
func (s *ValueState[K, N, V]) Lookup(key K, ns N) (V, bool, error) { return s.get(key, ns) }

// GetAt returns the value of (key, ns) in a snapshot, or the default. snap
// must be a snapshot of this state's table (else an error matching
// ErrForeignSnapshot). Safe from any goroutine while the snapshot is live.
func (s *ValueState[K, N, V]) GetAt(snap *Snapshot, key K, ns N) (V, error) {
	v, ok, err := s.getAt(snap, key, ns)
	if !ok {
		return s.def, err
	}
	return v, nil
}

// LookupAt is Lookup on a snapshot of this state's table; any goroutine
// while the snapshot is live.
func (s *ValueState[K, N, V]) LookupAt(snap *Snapshot, key K, ns N) (V, bool, error) {
	return s.getAt(snap, key, ns)
}

// registerAs registers a state and asserts the handle's Go type (two states
// can share codec IDs and differ in Go types).
func registerAs[S any](t *Table, info StateInfo, make func() registered) (S, error) {
	var zero S
	h, err := t.register(info, make)
	if err != nil {
		return zero, err
	}
	s, ok := h.(S)
	if !ok {
		return zero, fmt.Errorf("%w: %v is registered with other Go types (%T)", ErrStateMismatch, info, h)
	}
	return s, nil
}
