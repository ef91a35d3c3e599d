package cow

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// An int-keyed map is the map NewMap makes with mixUint64 of the key as
// its hash: Get, Set and Delete (which hash inline) agree with a builtin
// map across captures, each snapshot (which hashes through the function)
// reads what was live when it was taken, and the entries come out in the
// order of a NewMap of the same keys and hash, each under mixUint64 of
// its key. Keys are a named int64 type, negative and positive, so that
// both the inline word and the function see the key's sign.
func TestIntKeyedMap_HashesKeysInline(t *testing.T) {
	type id int64
	r := rand.New(rand.NewPCG(5, 6))
	o := NewOwner()
	m := NewIntKeyedMap[id, int64](o, nil)
	ref := NewMap(o, func(k id) uint64 { return mixUint64(uint64(k)) }, Equal[int64])
	model := map[id]int64{}
	type frozen struct {
		snap  *MapSnapshot[id, int64]
		model map[id]int64
	}
	var frozens []frozen
	for round := range 6 {
		for range 3000 {
			k := id(r.Int64N(4000) - 2000)
			switch r.IntN(4) {
			case 0:
				_, ok := m.Delete(k)
				ref.Delete(k)
				if _, want := model[k]; ok != want {
					t.Fatalf("Delete(%d) = %v, want %v", k, ok, want)
				}
				delete(model, k)
			default:
				v := r.Int64()
				_, present := model[k]
				if replaced := m.Set(k, v); replaced != present {
					t.Fatalf("Set(%d) replaced = %v, want %v", k, replaced, present)
				}
				ref.Set(k, v)
				model[k] = v
			}
		}
		if err := m.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for k := id(-2000); k < 2000; k++ {
			got, ok := m.Get(k)
			want, present := model[k]
			if ok != present || got != want {
				t.Fatalf("round %d: Get(%d) = %d, %v, want %d, %v", round, k, got, ok, want, present)
			}
		}
		if m.Len() != len(model) {
			t.Fatalf("round %d: Len = %d, want %d", round, m.Len(), len(model))
		}
		var order []id
		for k, v := range m.All() {
			if model[k] != v {
				t.Fatalf("round %d: All yields %d: %d, want %d", round, k, v, model[k])
			}
			order = append(order, k)
		}
		i := 0
		for k := range ref.All() {
			if i >= len(order) || order[i] != k {
				t.Fatalf("round %d: entry %d differs from a NewMap's of mixUint64", round, i)
			}
			i++
		}
		if i != len(order) {
			t.Fatalf("round %d: All yields %d entries, a NewMap of mixUint64 %d", round, len(order), i)
		}
		frozens = append(frozens, frozen{m.Snapshot(), maps.Clone(model)})
	}
	for i, f := range frozens {
		for k := id(-2000); k < 2000; k++ {
			got, ok := f.snap.Get(k)
			want, present := f.model[k]
			if ok != present || got != want {
				t.Fatalf("snapshot %d: Get(%d) = %d, %v, want %d, %v", i, k, got, ok, want, present)
			}
		}
		f.snap.Release()
	}
}

// mixUint64 spreads keys over the hash's leading bits, which choose a
// map's branches and place an entry in its leaf: sequential keys, keys
// that differ only in their high bits, and keys that are multiples of a
// large power of two each fill the 1024 ranges of the top ten bits within
// a factor of two of even, and no two of the 2^16 keys of a set share a
// hash.
func TestMixUint64_Spreads(t *testing.T) {
	for _, set := range []struct {
		name string
		key  func(i uint64) uint64
	}{
		{"sequential", func(i uint64) uint64 { return i }},
		{"high bits", func(i uint64) uint64 { return i << 48 }},
		{"multiples of 2^20", func(i uint64) uint64 { return i << 20 }},
		{"negative", func(i uint64) uint64 { return -i }},
	} {
		const n, ranges = 1 << 16, 1 << 10
		var counts [ranges]int
		seen := make(map[uint64]bool, n)
		for i := range uint64(n) {
			h := mixUint64(set.key(i))
			if seen[h] {
				t.Fatalf("%s: two keys hash to %#x", set.name, h)
			}
			seen[h] = true
			counts[h>>54]++
		}
		for r, c := range counts {
			if c < n/ranges/2 || c > n/ranges*2 {
				t.Fatalf("%s: range %d holds %d keys, want %d within a factor of two", set.name, r, c, n/ranges)
			}
		}
	}
}
