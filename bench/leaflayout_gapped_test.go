package bench

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGappedLeaves checks BenchmarkLeafLayout's gapped sorted leaves at
// both loads: every entry is found with its value by both searches, absent
// keys are not, the non-empty slots hold the entries in ascending hash
// order, and the layout does not depend on the order the entries come in.
// Besides 50K random keys it builds leaves crowded into a narrow range of
// hashes, with runs of equal hashes and the largest hash a real key may
// have, so that runs are long and entries are pushed past C.
func TestGappedLeaves(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	random := make([]layoutEntry, 50_000)
	for i := range random {
		k := r.Uint64()
		random[i] = layoutEntry{gappedHash(k), k, uint64(i)}
	}
	var crowded []layoutEntry
	for i := range 2_000 {
		h := gappedEmpty - 1 - r.Uint64N(1<<56) // the top 1/256 of the top leaf
		if i%10 == 0 && i > 0 {
			h = crowded[i-1].hash // an equal hash, another key
		}
		if i%500 == 0 {
			h = gappedEmpty - 1
		}
		crowded = append(crowded, layoutEntry{h, r.Uint64(), r.Uint64()})
	}
	for _, c := range []struct {
		name     string
		ents     []layoutEntry
		leafBits uint
	}{{"random", random, 11}, {"crowded", crowded, 4}} {
		for _, pct := range []int{80, 67} {
			g := buildGappedLeaves(c.ents, c.leafBits, pct)
			held := make(map[[2]uint64]bool, len(c.ents))
			for _, e := range c.ents {
				held[[2]uint64{e.hash, e.key}] = true
			}
			for _, e := range c.ents {
				for _, get := range []func(h, k uint64) (uint64, bool){g.get, g.getWindow} {
					if v, ok := get(e.hash, e.key); !ok || v != e.val {
						t.Fatalf("%s load %d%%: key %#x: got %d, %v, want %d", c.name, pct, e.key, v, ok, e.val)
					}
				}
			}
			for range 50_000 {
				// An absent key: a random hash, or a present hash with another key.
				e := c.ents[r.IntN(len(c.ents))]
				h, k := min(r.Uint64(), gappedEmpty-1), r.Uint64()
				if r.IntN(2) == 0 {
					h = e.hash
				}
				if held[[2]uint64{h, k}] {
					continue
				}
				for _, get := range []func(h, k uint64) (uint64, bool){g.get, g.getWindow} {
					if v, ok := get(h, k); ok {
						t.Fatalf("%s load %d%%: absent key %#x (hash %#x) found: %d", c.name, pct, k, h, v)
					}
				}
			}
			var got []layoutEntry
			over := 0
			for i, slot := range g.dir {
				for j, e := range g.slots(uint64(i) << g.shift) {
					if e.hash != gappedEmpty {
						got = append(got, e)
						if j >= int(slot.n) {
							over++
						}
					}
				}
			}
			if !slices.IsSortedFunc(got, func(a, b layoutEntry) int { return cmp.Compare(a.hash, b.hash) }) {
				t.Fatalf("%s load %d%%: the slots are not in hash order", c.name, pct)
			}
			want := slices.SortedFunc(slices.Values(c.ents), func(a, b layoutEntry) int {
				return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.key, b.key))
			})
			if !slices.Equal(got, want) {
				t.Fatalf("%s load %d%%: the slots hold %d entries, not the %d built", c.name, pct, len(got), len(want))
			}
			if c.name == "crowded" && over == 0 {
				t.Fatalf("crowded load %d%%: no entry pushed past C", pct)
			}
			shuffled := slices.Clone(c.ents)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			g2 := buildGappedLeaves(shuffled, c.leafBits, pct)
			for i := range g.dir {
				h := uint64(i) << g.shift
				if !slices.Equal(g.slots(h), g2.slots(h)) || g.dir[i].n != g2.dir[i].n {
					t.Fatalf("%s load %d%%: leaf %d depends on the entries' order", c.name, pct, i)
				}
			}
		}
	}
}
