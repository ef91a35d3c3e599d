package cow

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// TestSamePrefixSuffix checks the word-by-word scans against counting
// equal entries one by one, on leaves that share a prefix and a suffix and
// differ in between in any field of an entry.
func TestSamePrefixSuffix(t *testing.T) {
	type wide struct{ a, b int64 } // an entry of four words
	entry := rapid.Custom(func(t *rapid.T) mapEntry[int64, wide] {
		return mapEntry[int64, wide]{
			hash: rapid.Uint64Range(0, 3).Draw(t, "hash"),
			key:  rapid.Int64Range(0, 3).Draw(t, "key"),
			val:  wide{rapid.Int64Range(0, 3).Draw(t, "a"), rapid.Int64Range(0, 3).Draw(t, "b")},
		}
	})
	entries := rapid.SliceOfN(entry, 0, 6)
	rapid.Check(t, func(t *rapid.T) {
		pre, suf := entries.Draw(t, "prefix"), entries.Draw(t, "suffix")
		x := append(append(append([]mapEntry[int64, wide]{}, pre...), entries.Draw(t, "x")...), suf...)
		y := append(append(append([]mapEntry[int64, wide]{}, pre...), entries.Draw(t, "y")...), suf...)
		n := min(len(x), len(y))
		wantPre, wantSuf := 0, 0
		for wantPre < n && x[wantPre] == y[wantPre] {
			wantPre++
		}
		for wantSuf < n && x[len(x)-1-wantSuf] == y[len(y)-1-wantSuf] {
			wantSuf++
		}
		if got := samePrefix(x, y); got != wantPre {
			t.Fatalf("samePrefix = %d, want %d", got, wantPre)
		}
		if got := sameSuffix(x, y); got != wantSuf {
			t.Fatalf("sameSuffix = %d, want %d", got, wantSuf)
		}
	})
}

// TestMap_DiffReadsWhatWasWritten checks that a diff of two versions of a
// map with big leaves compares only the entries written between them, not
// the whole leaves (leafSame): for one update, insert or delete, one entry
// of one or both leaves; for two writes to one leaf in one epoch (the second
// in place), the entries between them.
func TestMap_DiffReadsWhatWasWritten(t *testing.T) {
	const n = 1000 // 32 leaves of about 31 entries under the root
	m := NewMap(NewOwner(), hashInt, Equal[int])
	for i := range n {
		m.Set(i, i)
	}
	// Keys of one leaf, in hash order.
	var leaf []int
	for i := range n {
		if slotAt(hashInt(i), 0) == slotAt(hashInt(0), 0) {
			leaf = append(leaf, i)
		}
	}
	slices.SortFunc(leaf, func(a, b int) int { return cmp.Compare(hashInt(a), hashInt(b)) })
	if len(leaf) < 20 {
		t.Fatalf("leaf of %d entries; the test wants a big one", len(leaf))
	}
	mid := leaf[len(leaf)/2]
	for _, tc := range []struct {
		name  string
		write func()
		most  int // entries the diff may compare
	}{
		{"update", func() { m.Set(mid, -1) }, 2},
		{"delete", func() { m.Delete(mid) }, 1},
		{"insert", func() { m.Set(mid, 7) }, 1},
		{"two updates in one epoch", func() { m.Set(leaf[3], -2); m.Set(leaf[6], -3) }, 8},
		{"update then delete in one epoch", func() { m.Set(leaf[9], -4); m.Delete(leaf[4]) }, 12},
	} {
		a := m.Snapshot()
		tc.write()
		b := m.Snapshot()
		d := mapDiff[int, int]{equal: Equal[int], yield: func(Change[int, int]) bool { return true }, check: func() {}}
		d.slots(&a.root, &b.root, 0)
		if d.entered == 0 || d.entered > tc.most {
			t.Errorf("%s: the diff compared %d entries, want 1 to %d", tc.name, d.entered, tc.most)
		}
		a.Release()
		b.Release()
	}
}

// TestMap_DiffChainBothWays diffs versions of a map each a few writes from
// the last, every one a copy with its own bounds (leafSame) on what it
// shares with the version before, forwards and backwards and across the
// chain: backwards, the bounds to use are the older version's, the copy's.
func TestMap_DiffChainBothWays(t *testing.T) {
	const n = 1000 // leaves of about 31 entries
	m := NewMap(NewOwner(), hashInt, Equal[int])
	model := map[int]int{}
	for i := range n {
		m.Set(i, i)
		model[i] = i
	}
	r := rand.New(rand.NewPCG(7, 7))
	var snaps []*MapSnapshot[int, int]
	var models []map[int]int
	for range 6 {
		snaps = append(snaps, m.Snapshot())
		models = append(models, maps.Clone(model))
		for range 40 { // about one write per leaf, at different places
			k := r.IntN(n + n/10)
			if r.IntN(5) == 0 {
				m.Delete(k)
				delete(model, k)
			} else {
				v := r.IntN(1000)
				m.Set(k, v)
				model[k] = v
			}
		}
	}
	for i := range snaps {
		for j := range snaps {
			got := slices.Collect(DiffMaps(snaps[i], snaps[j]))
			if want := wantChanges(models[i], models[j], hashInt); !slices.Equal(got, want) {
				t.Fatalf("diff of version %d against %d: %d changes, want %d (or not in the same order)", i, j, len(got), len(want))
			}
		}
	}
}

// TestMapBranchSize keeps a branch in its size class: the room leafSame
// takes is what the class had left (see leafSameMax).
func TestMapBranchSize(t *testing.T) {
	if got := unsafe.Sizeof(mapBranch[int64, int64]{}); got+8 > 576 {
		t.Fatalf("a branch is %d bytes, and its allocation with the 8-byte header %d, over the 576-byte size class", got, got+8)
	}
}

// sameBounds.find is the first record with the slot byte asked for, as a
// scan of the five would find it, whatever the other bytes hold.
func TestSameBounds_FindIsTheFirstMatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s sameBounds
		for j := range leafSameMax {
			s.slot[j] = rapid.Uint8Range(0, 40).Draw(t, "slot")
			s.prefix[j] = rapid.Uint8().Draw(t, "prefix")
			s.suffix[j] = rapid.Uint8().Draw(t, "suffix")
		}
		x := rapid.Uint8Range(0, 40).Draw(t, "x")
		want := -1
		for j := range leafSameMax {
			if s.slot[j] == x {
				want = j
				break
			}
		}
		if got := s.find(x); got != want {
			t.Fatalf("find(%d) in %v = %d, want %d", x, s.slot, got, want)
		}
	})
}
