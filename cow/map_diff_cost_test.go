package cow

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cowstate/cowstate/internal/invariants"
)

// hashSkewed sends a quarter of the keys into the subtree of one root slot,
// so that subtree is deeper than the rest and a diff meets leaf pairs at
// different depths, interleaved in hash order.
func hashSkewed(k int) uint64 {
	h := hashInt(k)
	if k%4 == 0 {
		h &^= 0xfff << 52
	}
	return h
}

// wantChanges returns the changes that turn a into b, in ascending hash
// order.
func wantChanges(a, b map[int]int, hash func(int) uint64) []Change[int, int] {
	var cs []Change[int, int]
	for k, va := range a {
		if vb, ok := b[k]; !ok {
			cs = append(cs, Change[int, int]{Kind: Removed, Key: k, Hash: hash(k), Old: va})
		} else if va != vb {
			cs = append(cs, Change[int, int]{Kind: Changed, Key: k, Hash: hash(k), Old: va, New: vb})
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			cs = append(cs, Change[int, int]{Kind: Added, Key: k, Hash: hash(k), New: vb})
		}
	}
	slices.SortFunc(cs, func(x, y Change[int, int]) int {
		return cmp.Or(cmp.Compare(hash(x.Key), hash(y.Key)), cmp.Compare(x.Key, y.Key))
	})
	return cs
}

// pairsDiffering counts the node pairs a diff of a and b may compare: every
// pair of slots at one position that are not the same subtree, descending
// into pairs of branches. Of these it also counts the pairs of leaves with
// bitwise equal entries (a leaf copied and written back), which the diff
// skips when the copy's bounds (leafSame) say so.
func pairsDiffering[K comparable, V any](a, b *mapSlot[K, V]) (pairs, equalLeaves int) {
	if a.same(b) {
		return 0, 0
	}
	ba, bb := a.branch(), b.branch()
	if ba == nil || bb == nil {
		if a.isLeaf() && b.isLeaf() && entryWordsEqual(a.ents(), b.ents()) {
			return 1, 1
		}
		return 1, 0
	}
	pairs = 1
	for i := range ba.kids {
		p, e := pairsDiffering(&ba.kids[i], &bb.kids[i])
		pairs += p
		equalLeaves += e
	}
	return pairs, equalLeaves
}

func entryWordsEqual[K comparable, V any](x, y []mapEntry[K, V]) bool {
	return slices.Equal(entryWords(x), entryWords(y))
}

// TestMap_DiffWide diffs versions that differ in many leaves, so that the
// levels of the breadth-first walk overflow their buffers and are walked in
// chunks, with leaf pairs at several depths.
func TestMap_DiffWide(t *testing.T) {
	n := 100_000
	if invariants.Exhaustive {
		n = 5_000
	}
	for _, hash := range []func(int) uint64{hashInt, hashSkewed} {
		for _, writes := range []int{1, 100, 3_000, n / 2} {
			r := rand.New(rand.NewPCG(uint64(writes), 1))
			m := NewMap(NewOwner(), hash, Equal[int])
			model := map[int]int{}
			for i := range n {
				m.Set(i, i)
				model[i] = i
			}
			a := m.Snapshot()
			modelA := maps.Clone(model)
			for range writes {
				k := r.IntN(2 * n)
				switch r.IntN(4) {
				case 0:
					m.Delete(k)
					delete(model, k)
				default:
					v := r.IntN(3)
					m.Set(k, v)
					model[k] = v
				}
			}
			b := m.Snapshot()
			want := wantChanges(modelA, model, hash)

			var got []Change[int, int]
			d := mapDiff[int, int]{equal: Equal[int], yield: func(c Change[int, int]) bool { got = append(got, c); return true }, check: func() {}}
			d.slots(&a.root, &b.root, 0)
			if !slices.Equal(got, want) {
				t.Fatalf("writes=%d: %d changes, want %d (or not in the same order)", writes, len(got), len(want))
			}
			if want, equal := pairsDiffering(&a.root, &b.root); d.visited > want || d.visited < want-equal {
				t.Fatalf("writes=%d: visited %d node pairs, want %d less at most %d equal leaf pairs", writes, d.visited, want, equal)
			}

			// Stopping early yields a prefix.
			for _, stop := range []int{1, len(want) / 3, len(want) - 1} {
				if stop < 1 {
					continue
				}
				got = got[:0]
				for c := range DiffMaps(a, b) {
					got = append(got, c)
					if len(got) == stop {
						break
					}
				}
				if !slices.Equal(got, want[:stop]) {
					t.Fatalf("writes=%d: stopping after %d changes yielded %d, not a prefix", writes, stop, len(got))
				}
			}
			a.Release()
			b.Release()
		}
	}
}

// TestMap_DiffReleasedDuring releases a snapshot while its diff runs: the
// diff panics instead of reading on.
func TestMap_DiffReleasedDuring(t *testing.T) {
	m := newIntMap(hashInt)
	for i := range 20_000 {
		m.Set(i, i)
	}
	a := m.Snapshot()
	for i := range 2_000 {
		m.Set(i*7, -i)
	}
	b := m.Snapshot()
	defer b.Release()
	seen := 0
	defer func() {
		if recover() == nil {
			t.Fatalf("diff went on after its snapshot was released (%d changes)", seen)
		}
	}()
	for range DiffMaps(a, b) {
		seen++
		a.Release()
	}
}
