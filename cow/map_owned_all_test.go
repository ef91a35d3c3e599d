package cow

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestMap_OwningEveryLeafUnderACaptureKeepsDiffsExact is the contract of
// ownedAll: with a capture live, once the writer has copied every leaf,
// writes take the no-capture paths (ownsAll), and a diff of that
// capture against the next one still reports every change, among them
// the writes made after the switch to leaves whose first write since the
// capture left their bounds tight. The next capture ends the switch.
func TestMap_OwningEveryLeafUnderACaptureKeepsDiffsExact(t *testing.T) {
	const n = 20_000
	o := NewOwner()
	m := NewIntKeyedMap[int, int](o, nil)
	model := map[int]int{}
	for i := range n {
		m.Set(i, i)
		model[i] = i
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 3 {
		base := m.Snapshot()
		frozen := maps.Clone(model)
		if m.ownsAll() {
			t.Fatalf("round %d: writes take the no-capture paths right after a capture", round)
		}
		// One key at a time until every leaf has been copied.
		writes := 0
		for !m.ownsAll() {
			if writes++; writes > 50*n {
				t.Fatalf("round %d: %d writes of random keys and the map still shares leaves with the capture", round, writes)
			}
			k := r.IntN(n)
			model[k]++
			m.Set(k, model[k])
		}
		if err := m.Check(); err != nil {
			t.Fatalf("round %d, after the switch: %v", round, err)
		}
		// After the switch: updates through every write path, inserts and
		// deletes.
		for i := range 3000 {
			k := r.IntN(n)
			switch i % 5 {
			case 0:
				m.Set(k, -i)
				model[k] = -i
			case 1:
				m.UpdateHashed(m.hash(k), k, func(v int, ok bool) int { return v + 7 }, nil)
				model[k] += 7
			case 2:
				v, _ := m.GetForSet(m.hash(k), k)
				m.SetAfterGet(m.hash(k), k, v+1, nil)
				model[k] = v + 1
			case 3:
				m.Set(n+i, i)
				model[n+i] = i
			case 4:
				m.Delete(k)
				delete(model, k)
			}
		}
		if err := m.Check(); err != nil {
			t.Fatalf("round %d, after writes past the switch: %v", round, err)
		}
		held := map[int]int{}
		for k, v := range base.All() {
			held[k] = v
		}
		if !maps.Equal(held, frozen) {
			t.Fatalf("round %d: the capture no longer holds what the map held when it was taken", round)
		}
		next := m.Snapshot()
		if m.ownsAll() {
			t.Fatalf("round %d: writes take the no-capture paths after a new capture", round)
		}
		got := map[int]Change[int, int]{}
		for c := range DiffMaps(base, next) {
			c.Hash = 0 // the model has none
			got[c.Key] = c
		}
		want := modelDiff(frozen, model)
		if len(got) != len(want) {
			t.Errorf("round %d: the diff reports %d changes, the model %d", round, len(got), len(want))
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Fatalf("round %d: key %d: diff %+v (reported %v), model %+v", round, k, g, ok, w)
			}
		}
		base.Release()
		next.Release()
	}
}

// modelDiff is the change set from a to b, as DiffMaps reports it.
func modelDiff(a, b map[int]int) map[int]Change[int, int] {
	d := map[int]Change[int, int]{}
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d[k] = Change[int, int]{Kind: Removed, Key: k, Old: v}
		} else if w != v {
			d[k] = Change[int, int]{Kind: Changed, Key: k, Old: v, New: w}
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			d[k] = Change[int, int]{Kind: Added, Key: k, New: w}
		}
	}
	return d
}

// TestMap_ACursorNeverTakesTheNoCapturePathsUnderACapture: SetRoot can
// install nodes a capture shares, so a map used as a cursor keeps the
// live paths while a capture is live, however many leaves it copied.
func TestMap_ACursorNeverTakesTheNoCapturePathsUnderACapture(t *testing.T) {
	o := NewOwner()
	m := NewIntKeyedMap[int, int](o, nil)
	for i := range 5000 {
		m.Set(i, i)
	}
	root := m.Root()
	s := m.Snapshot()
	defer s.Release()
	for round := range 3 {
		for i := range 5000 {
			m.Set(i, i+round+1)
		}
		if m.ownsAll() {
			t.Fatalf("round %d: a cursor's writes take the no-capture paths with a capture live", round)
		}
	}
	m.SetRoot(root) // the captured version, shared with s
	m.Set(1, -1)
	if v, _ := s.Get(1); v != 1 {
		t.Fatalf("the capture reads %d for key 1 after the cursor's write, want 1", v)
	}
}

// TestMap_SetRootEndsTheNoCapturePaths: a map whose writes took the
// no-capture paths, given a root a live capture shares (SetRoot), copies
// what it writes instead of writing the capture's nodes in place.
func TestMap_SetRootEndsTheNoCapturePaths(t *testing.T) {
	o := NewOwner()
	src := NewIntKeyedMap[int, int](o, nil)
	m := NewIntKeyedMap[int, int](o, nil)
	for i := range 5000 {
		src.Set(i, i)
		m.Set(i, i)
	}
	root := src.Root()
	s := src.Snapshot() // shares root's nodes
	defer s.Release()
	for i := 0; !m.ownsAll(); i++ {
		if i > 50*5000 {
			t.Fatal("the map never took the no-capture paths")
		}
		m.Set(i%5000, -i)
	}
	m.SetRoot(root)
	for i := range 5000 {
		m.Set(i, -1)
	}
	for k, v := range s.All() {
		if v != k {
			t.Fatalf("the capture reads %d for key %d after writes through SetRoot's map, want %d", v, k, k)
		}
	}
}

// ownsAll reports whether m's writes take the no-capture paths with a
// capture live.
func (m *Map[K, V]) ownsAll() bool {
	return m.owner.high.Load() != 0 && m.copiedAll()
}
