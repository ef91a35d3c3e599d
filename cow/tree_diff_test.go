package cow

import (
	"cmp"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// treeApply applies a diff to a Go map, checking that each change fits what
// the map holds and that keys come in strictly ascending order.
func treeApply(t treeTB, m map[int]int, changes iter.Seq[Change[int, int]]) {
	t.Helper()
	first, last := true, 0
	for c := range changes {
		if !first && c.Key <= last {
			t.Fatalf("change of key %d after key %d: not in ascending order", c.Key, last)
		}
		first, last = false, c.Key
		old, had := m[c.Key]
		switch c.Kind {
		case Added:
			if had || c.Old != 0 {
				t.Fatalf("%v %d (old %d): the old version has it: %v", c.Kind, c.Key, c.Old, had)
			}
			m[c.Key] = c.New
		case Removed:
			if !had || old != c.Old || c.New != 0 {
				t.Fatalf("%v %d=%d (new %d): the old version has %d,%v", c.Kind, c.Key, c.Old, c.New, old, had)
			}
			delete(m, c.Key)
		case Changed:
			if !had || old != c.Old || c.Old == c.New {
				t.Fatalf("%v %d %d->%d: the old version has %d,%v", c.Kind, c.Key, c.Old, c.New, old, had)
			}
			m[c.Key] = c.New
		default:
			t.Fatalf("bad change kind %v", c.Kind)
		}
	}
}

// treeDiffCount diffs a and b, applies the changes to a copy of want-a and
// checks the result is want-b; it returns the nodes read and the changes.
func treeDiffCheck(t treeTB, a, b *TreeSnapshot[int, int], ma, mb map[int]int) (nodes, changes int) {
	t.Helper()
	var st treeDiffStats
	got := maps.Clone(ma)
	treeApply(t, got, func(yield func(Change[int, int]) bool) {
		treeDiff(a, b, &st, func(c Change[int, int]) bool { changes++; return yield(c) })
	})
	if !maps.Equal(got, mb) {
		t.Fatalf("Diff(epoch %d, epoch %d) applied to the first does not give the second", a.Epoch(), b.Epoch())
	}
	return st.nodes, changes
}

// TestTree_Diff diffs consecutive versions of one tree, both ways.
func TestTree_Diff(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.SampledFrom(treeWidths).Draw(t, "widths")
		space := treeSize(rapid.SampledFrom([]int{50, 2000, 20_000}).Draw(t, "keyspace"))
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		tr := newIntTree(w[0], w[1])
		model := map[int]int{}
		treeRandomOps(t, rng, tr, model, rapid.IntRange(0, 2*space).Draw(t, "size"), space)
		var frozen []treeFrozen
		defer func() {
			for _, f := range frozen {
				f.snap.Release()
			}
		}()
		frozen = append(frozen, treeFrozen{tr.Snapshot(), maps.Clone(model)})
		for range 4 {
			treeRandomOps(t, rng, tr, model, rapid.IntRange(0, space/10).Draw(t, "ops"), space)
			frozen = append(frozen, treeFrozen{tr.Snapshot(), maps.Clone(model)})
		}
		for i := range frozen {
			for j := range frozen {
				treeDiffCheck(t, frozen[i].snap, frozen[j].snap, frozen[i].model, frozen[j].model)
			}
		}
	})
}

// TestTree_DiffUnrelated diffs trees that share no node: different key sets,
// insertion orders, node widths and heights.
func TestTree_DiffUnrelated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		build := func(label string) (*TreeSnapshot[int, int], map[int]int) {
			w := rapid.SampledFrom(treeWidths).Draw(t, label+" widths")
			tr := newIntTree(w[0], w[1])
			model := rapid.MapOf(rapid.IntRange(0, 600), rapid.IntRange(0, 2)).Draw(t, label)
			keys := rapid.Permutation(slices.Collect(maps.Keys(model))).Draw(t, label+" order")
			for _, k := range keys {
				tr.Set(k, model[k])
			}
			return tr.Snapshot(), model
		}
		a, ma := build("a")
		b, mb := build("b")
		defer a.Release()
		defer b.Release()
		treeDiffCheck(t, a, b, ma, mb)
		treeDiffCheck(t, b, a, mb, ma)
	})
}

// TestTree_DiffSelf: a version diffed with itself, or with a later capture
// of the same version, yields nothing and reads no node.
func TestTree_DiffSelf(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range treeSize(100_000) {
		tr.Set(k, k)
	}
	s1 := tr.Snapshot()
	defer s1.Release()
	s2 := tr.Snapshot()
	defer s2.Release()
	for _, pair := range [][2]*TreeSnapshot[int, int]{{s1, s1}, {s1, s2}, {s2, s1}} {
		var st treeDiffStats
		treeDiff(pair[0], pair[1], &st, func(c Change[int, int]) bool {
			t.Fatalf("Diff of a version with itself yielded %v", c)
			return false
		})
		if st.nodes != 0 {
			t.Fatalf("Diff of a version with itself read %d nodes", st.nodes)
		}
	}
	for c := range DiffTrees(s1, s2) {
		t.Fatalf("DiffTrees of a version with itself yielded %v", c)
	}
}

// TestTree_DiffNoopWrites: writes that change nothing between two snapshots
// keep the root and give an empty diff.
func TestTree_DiffNoopWrites(t *testing.T) {
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	for k := range 10_000 {
		tr.Set(2*k, k)
	}
	s1 := tr.Snapshot()
	defer s1.Release()
	root := tr.root
	tr.Set(200, 100)
	tr.Delete(201)
	tr.DeleteRange(201, 202)
	tr.PopMinUntil(-1, 10, nil)
	if tr.root != root {
		t.Fatal("no-op writes replaced the root")
	}
	s2 := tr.Snapshot()
	defer s2.Release()
	if s1.v.root != s2.v.root {
		t.Fatal("snapshots around no-op writes have different roots")
	}
	if nodes, changes := treeDiffCheck(t, s1, s2, nil, nil); nodes != 0 || changes != 0 {
		t.Fatalf("Diff across no-op writes: %d changes, %d nodes read", changes, nodes)
	}
}

// TestTree_DiffCost: at 1e5 entries, versions a few writes apart diff by
// reading a few nodes per write, whatever the kind of write and wherever it
// lands (edges, splits, merges).
func TestTree_DiffCost(t *testing.T) {
	size := treeSize(100_000)
	tr := NewTree(NewOwner(), cmp.Compare[int], Equal[int])
	model := map[int]int{}
	for k := range size {
		tr.Set(2*k, 0)
		model[2*k] = 0
	}
	depth := tr.height + 1
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 0
	for round := range treeSize(400) {
		writes := 1 + round%3
		a, ma := tr.Snapshot(), maps.Clone(model)
		for range writes {
			var k int
			switch rng.IntN(4) {
			case 0:
				k = 0 // the left edge
			case 1:
				k = 2*size - 2 // the right edge
			default:
				k = rng.IntN(2 * size)
			}
			if _, ok := model[k]; ok && rng.IntN(2) == 0 {
				tr.Delete(k)
				delete(model, k)
			} else {
				tr.Set(k, round+1)
				model[k] = round + 1
			}
		}
		b := tr.Snapshot()
		nodes, changes := treeDiffCheck(t, a, b, ma, model)
		if changes > writes {
			t.Fatalf("%d writes gave %d changes", writes, changes)
		}
		// Per write: both cursors descend the changed path (2 per level),
		// and the nodes a split, merge or borrow touched next to it (up to
		// 2 more per level), plus a few peeks where node boundaries moved.
		if limit := writes * (4*depth + 4); nodes > limit {
			t.Fatalf("round %d: diff of %d writes read %d nodes (depth %d), want <= %d", round, writes, nodes, depth, limit)
		}
		worst = max(worst, nodes/writes)
		a.Release()
		b.Release()
	}
	t.Logf("depth %d: at most %d nodes read per write", depth, worst)
}

// TestTree_DiffStops: the consumer can stop the iteration early.
func TestTree_DiffStops(t *testing.T) {
	a := newIntTree(4, 4)
	for k := range 100 {
		a.Set(k, k)
	}
	s1 := a.Snapshot()
	defer s1.Release()
	a.DeleteRange(0, 100)
	s2 := a.Snapshot()
	defer s2.Release()
	n := 0
	for c := range DiffTrees(s1, s2) {
		if c.Kind != Removed || c.Key != n {
			t.Fatalf("change %d: %v", n, c)
		}
		if n++; n == 10 {
			break
		}
	}
	if n != 10 {
		t.Fatalf("%d changes before the break", n)
	}
}
