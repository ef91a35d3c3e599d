package cow

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// A hash-keyed map is a map from hashes to values: against a builtin map
// of the same hashes, across captures, every write and read by hash, the
// diff of each pair of versions (each change naming its hash), scans in
// hash order, a restore of a version by SetRun, and Check. The hashes are
// drawn so that many share long prefixes (deep branches, leaves at the
// last depth) and some differ in one bit only.
func TestHashKeyedMap_IsAMapOfHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	draw := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return 0xABCD<<48 | r.Uint64N(64) // one deep corner
		case 1:
			return r.Uint64N(4) << 62 // few distinct
		}
		return r.Uint64()
	}
	m := NewHashKeyedMap[int64](NewOwner(), nil)
	model := map[uint64]int64{}
	var snaps []*MapSnapshot[NoKey, int64]
	var models []map[uint64]int64
	for round := range 8 {
		for range 600 {
			h := draw()
			switch r.IntN(6) {
			case 0:
				_, ok := m.DeleteHashed(h, NoKey{})
				if _, want := model[h]; ok != want {
					t.Fatalf("DeleteHashed(%#x) = %v, want %v", h, ok, want)
				}
				delete(model, h)
			case 1:
				m.UpdateHashed(h, NoKey{}, func(old int64, ok bool) int64 { return old + 1 }, nil)
				model[h]++
			case 2:
				// A Get then Set of one hash, or of the next hash drawn:
				// the Set writes where the Get found its hash only if
				// it is the same hash, with no write between.
				got, _ := m.GetForSet(h, NoKey{})
				if got != model[h] {
					t.Fatalf("GetForSet(%#x) = %d, want %d", h, got, model[h])
				}
				if r.IntN(2) == 0 {
					h = draw()
				}
				m.SetAfterGet(h, NoKey{}, got+1, nil)
				model[h] = got + 1
			default:
				v := r.Int64N(4)
				m.SetHashed(h, NoKey{}, v, nil)
				model[h] = v
			}
		}
		if err := m.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for h, want := range model {
			if got, ok := m.GetHashed(h, NoKey{}); !ok || got != want {
				t.Fatalf("round %d: GetHashed(%#x) = %d, %v, want %d", round, h, got, ok, want)
			}
		}
		snaps = append(snaps, m.Snapshot())
		models = append(models, maps.Clone(model))
	}
	for i, s := range snaps {
		var hs []uint64
		s.ScanLeaves(0, ^uint64(0), func(ents []MapEntry[NoKey, int64]) bool {
			for _, e := range ents {
				if models[i][e.Hash] != e.Val {
					t.Fatalf("version %d: %#x holds %d, want %d", i, e.Hash, e.Val, models[i][e.Hash])
				}
				hs = append(hs, e.Hash)
			}
			return true
		})
		if want := slices.Sorted(maps.Keys(models[i])); !slices.Equal(hs, want) {
			t.Fatalf("version %d: scan gives %d hashes, want %d in order", i, len(hs), len(want))
		}
		for j, u := range snaps {
			got := map[uint64]Change[NoKey, int64]{}
			for ch := range DiffMaps(s, u) {
				if _, twice := got[ch.Hash]; twice {
					t.Fatalf("diff %d -> %d names %#x twice", i, j, ch.Hash)
				}
				got[ch.Hash] = ch
			}
			want := map[uint64]Change[NoKey, int64]{}
			for h, a := range models[i] {
				if b, ok := models[j][h]; !ok {
					want[h] = Change[NoKey, int64]{Kind: Removed, Hash: h, Old: a}
				} else if a != b {
					want[h] = Change[NoKey, int64]{Kind: Changed, Hash: h, Old: a, New: b}
				}
			}
			for h, b := range models[j] {
				if _, ok := models[i][h]; !ok {
					want[h] = Change[NoKey, int64]{Kind: Added, Hash: h, New: b}
				}
			}
			if !maps.Equal(got, want) {
				t.Fatalf("diff %d -> %d: %d changes, want %d", i, j, len(got), len(want))
			}
		}
	}
	// A version restored from its entries is that version.
	last := len(snaps) - 1
	var run []MapEntry[NoKey, int64]
	snaps[last].ScanLeaves(0, ^uint64(0), func(ents []MapEntry[NoKey, int64]) bool {
		run = append(run, ents...)
		return true
	})
	restored := NewHashKeyedMap[int64](NewOwner(), nil)
	restored.SetRun(run)
	if err := restored.Check(); err != nil {
		t.Fatal(err)
	}
	rs := restored.Snapshot()
	for range DiffMaps(snaps[last], rs) {
		t.Fatal("the restored version differs")
	}
	for _, s := range snaps {
		s.Release()
	}
}

// A hash-keyed map has no hash of keys: a call that would hash one panics
// and says what to call instead.
func TestHashKeyedMap_KeyCallsPanic(t *testing.T) {
	m := NewHashKeyedMap[int64](NewOwner(), nil)
	m.SetHashed(7, NoKey{}, 1, nil)
	for name, call := range map[string]func(){
		"Get":    func() { m.Get(NoKey{}) },
		"Set":    func() { m.Set(NoKey{}, 1) },
		"Delete": func() { m.Delete(NoKey{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			call()
		}()
	}
	if v, ok := m.GetHashed(7, NoKey{}); !ok || v != 1 {
		t.Fatalf("GetHashed(7) = %d, %v", v, ok)
	}
}

// A SetAfterGet writes where the GetForSet before it found the key only
// while nothing has moved the entry: a delete or an insert in its leaf
// shifts it, an insert past the leaf's bound splits the leaf, a write
// under a live capture copies it. In a hash-keyed map the entry has no
// key to tell it from its neighbour, so only the write count can.
func TestHashKeyedMap_SetAfterGetSeesWhatMovedTheEntry(t *testing.T) {
	between := map[string]func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func(){
		"nothing": func(*Map[NoKey, int64], map[uint64]int64, []uint64) func() { return nil },
		"a delete before it": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			m.DeleteHashed(hs[3], NoKey{})
			delete(model, hs[3])
			return nil
		},
		"a delete of the key": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			m.DeleteHashed(hs[5], NoKey{})
			delete(model, hs[5])
			return nil
		},
		"an insert before it": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			h := hs[3] + 1
			m.SetHashed(h, NoKey{}, 7, nil)
			model[h] = 7
			return nil
		},
		"an insert that splits its leaf": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			for i := range mapLeafMax {
				h := uint64(i+1) << 40
				m.SetHashed(h, NoKey{}, 8, nil)
				model[h] = 8
			}
			return nil
		},
		"a capture kept": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			s, frozen := m.Snapshot(), maps.Clone(model)
			return func() {
				for h, want := range frozen {
					if got, ok := s.GetHashed(h, NoKey{}); !ok || got != want {
						t.Errorf("the capture holds %#x = %d, %v; want %d", h, got, ok, want)
					}
				}
				s.Release()
			}
		},
		"a capture taken and released": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) func() {
			m.Snapshot().Release()
			return nil
		},
	}
	// Where the key is at the Get: the map has three leaves under its
	// root branch, the key's (slot 0) and two others.
	where := map[string]func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) (captured map[uint64]int64, s *MapSnapshot[NoKey, int64]){
		"no capture live": func(*Map[NoKey, int64], map[uint64]int64, []uint64) (map[uint64]int64, *MapSnapshot[NoKey, int64]) {
			return nil, nil
		},
		// Captured, and the key's leaf copied by a write since: the Get
		// finds it in a leaf the writer owns, the common case between two
		// checkpoints.
		"a capture live, the key's leaf the writer's": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) (map[uint64]int64, *MapSnapshot[NoKey, int64]) {
			s, frozen := m.Snapshot(), maps.Clone(model)
			m.SetHashed(hs[0], NoKey{}, -1, nil)
			model[hs[0]] = -1
			return frozen, s
		},
		// Captured, and another leaf written since: the branch is the
		// writer's copy, the key's leaf still the capture's.
		"a capture live, the key's leaf shared": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) (map[uint64]int64, *MapSnapshot[NoKey, int64]) {
			s, frozen := m.Snapshot(), maps.Clone(model)
			h := uint64(1)<<59 | 1<<40
			m.SetHashed(h, NoKey{}, -1, nil)
			model[h] = -1
			return frozen, s
		},
		"a capture live, the path shared": func(m *Map[NoKey, int64], model map[uint64]int64, hs []uint64) (map[uint64]int64, *MapSnapshot[NoKey, int64]) {
			return maps.Clone(model), m.Snapshot()
		},
	}
	for wname, at := range where {
		for name, do := range between {
			t.Run(wname+"/"+name, func(t *testing.T) {
				m := NewHashKeyedMap[int64](NewOwner(), nil)
				model := map[uint64]int64{}
				var hs []uint64
				for i := range 10 {
					h := uint64(i+1) << 48
					hs = append(hs, h)
					m.SetHashed(h, NoKey{}, int64(i), nil)
					model[h] = int64(i)
				}
				for slot := uint64(1); slot <= 2; slot++ {
					for j := range uint64(25) {
						h := slot<<59 | (j+1)<<40
						m.SetHashed(h, NoKey{}, 1000, nil)
						model[h] = 1000
					}
				}
				if frozen, s := at(m, model, hs); s != nil {
					defer func() {
						for h, want := range frozen {
							if got, ok := s.GetHashed(h, NoKey{}); !ok || got != want {
								t.Errorf("the first capture holds %#x = %d, %v; want %d", h, got, ok, want)
							}
						}
						// The diff to the final map, whose bounds on what
						// copied leaves share (leafSame) every write lowered.
						now := m.Snapshot()
						changed := map[uint64]int64{}
						for c := range DiffMaps(s, now) {
							changed[c.Hash] = c.New
						}
						now.Release()
						for h, v := range model {
							if old, ok := frozen[h]; !ok || old != v {
								if got, ok := changed[h]; !ok || got != v {
									t.Errorf("the diff since the first capture has %#x = %d, %v; want %d", h, got, ok, v)
								}
								delete(changed, h)
							}
						}
						for h := range frozen {
							if _, ok := model[h]; !ok {
								delete(changed, h)
							}
						}
						if len(changed) != 0 {
							t.Errorf("the diff since the first capture has changes the model has not: %v", changed)
						}
						s.Release()
					}()
				}
				k := hs[5]
				if v, ok := m.GetForSet(k, NoKey{}); !ok || v != 5 {
					t.Fatalf("GetForSet = %d, %v; want 5", v, ok)
				}
				after := do(m, model, hs)
				_, had := model[k]
				if replaced := m.SetAfterGet(k, NoKey{}, 100, nil); replaced != had {
					t.Fatalf("SetAfterGet reports replaced = %v, want %v", replaced, had)
				}
				model[k] = 100
				if err := m.Check(); err != nil {
					t.Fatal(err)
				}
				if m.Len() != len(model) {
					t.Fatalf("Len = %d, want %d", m.Len(), len(model))
				}
				for h, want := range model {
					if got, ok := m.GetHashed(h, NoKey{}); !ok || got != want {
						t.Fatalf("%#x = %d, %v; want %d", h, got, ok, want)
					}
				}
				if after != nil {
					after()
				}
			})
		}
	}
}
