package cow

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cowstate/cowstate/internal/invariants"

	"github.com/cespare/xxhash/v2"
	"pgregory.net/rapid"
)

func hashInt(k int) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(k))
	return xxhash.Sum64(b[:])
}

// hashColliding maps keys onto only 16 distinct hashes, so most keys collide
// on all 64 bits: the leaves past the last hash bit get exercised.
func hashColliding(k int) uint64 { return hashInt(k % 16) }

func newIntMap(hash func(int) uint64) *Map[int, int] {
	return NewMap(NewOwner(), hash, Equal[int])
}

// mapContents returns the entries yielded by an iterator as a Go map,
// failing on duplicates.
func mapContents(t interface {
	Helper()
	Fatalf(string, ...any)
}, seq func(func(int, int) bool)) map[int]int {
	t.Helper()
	got := map[int]int{}
	for k, v := range seq {
		if _, dup := got[k]; dup {
			t.Fatalf("key %d yielded twice", k)
		}
		got[k] = v
	}
	return got
}

// frozenMap is a live snapshot with the model copy taken at its capture.
type frozenMap struct {
	snap  *MapSnapshot[int, int]
	model map[int]int
}

// mapMachine drives a Map and a Go map side by side, with snapshots.
type mapMachine struct {
	m      *Map[int, int]
	model  map[int]int
	frozen []frozenMap
	keys   *rapid.Generator[int]
}

func (mm *mapMachine) check(t *rapid.T) {
	if err := mm.m.Check(); err != nil {
		t.Fatal(err)
	}
	if mm.m.Len() != len(mm.model) {
		t.Fatalf("Len %d, model %d", mm.m.Len(), len(mm.model))
	}
	if got := mapContents(t, mm.m.All()); !maps.Equal(got, mm.model) {
		t.Fatalf("live map differs from model: got %d entries, want %d", len(got), len(mm.model))
	}
	for i, f := range mm.frozen {
		if f.snap.Len() != len(f.model) {
			t.Fatalf("snapshot %d (epoch %d): Len %d, frozen model %d", i, f.snap.Epoch(), f.snap.Len(), len(f.model))
		}
		if got := mapContents(t, f.snap.All()); !maps.Equal(got, f.model) {
			t.Fatalf("snapshot %d (epoch %d) changed after capture", i, f.snap.Epoch())
		}
	}
}

func (mm *mapMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"": mm.check,
		"Set": func(t *rapid.T) {
			k, v := mm.keys.Draw(t, "k"), rapid.IntRange(0, 3).Draw(t, "v")
			_, had := mm.model[k]
			if replaced := mm.m.Set(k, v); replaced != had {
				t.Fatalf("Set(%d) replaced=%v, model had=%v", k, replaced, had)
			}
			mm.model[k] = v
		},
		"SetMany": func(t *rapid.T) {
			n := rapid.IntRange(1, 200).Draw(t, "n")
			base := mm.keys.Draw(t, "base")
			for i := range n {
				mm.m.Set(base+i, i)
				mm.model[base+i] = i
			}
		},
		"SetRun": func(t *rapid.T) {
			keys := rapid.SliceOfNDistinct(mm.keys, 1, 150, rapid.ID).Draw(t, "run keys")
			run := make([]MapEntry[int, int], len(keys))
			for i, k := range keys {
				run[i] = MapEntry[int, int]{Hash: mm.m.hash(k), Key: k, Val: i}
				mm.model[k] = i
			}
			slices.SortFunc(run, func(a, b MapEntry[int, int]) int { return cmp.Compare(a.Hash, b.Hash) })
			mm.m.SetRun(run)
		},
		"FindStore": func(t *rapid.T) {
			// A read-modify-write through Find and Store, sometimes with a
			// write of another key or a capture between the two: Store
			// must then walk again rather than write where Find was.
			k, v := mm.keys.Draw(t, "k"), rapid.IntRange(0, 3).Draw(t, "v")
			want, had := mm.model[k]
			old, p, ok := mm.m.Find(mm.m.hash(k), k)
			if ok != had || old != want {
				t.Fatalf("Find(%d) = %d,%v; model %d,%v", k, old, ok, want, had)
			}
			mm.between(t, rapid.IntRange(0, 3).Draw(t, "between"))
			mm.m.Store(&p, mm.m.hash(k), k, v, nil)
			mm.model[k] = v
		},
		"GetForSet": func(t *rapid.T) {
			// A read-modify-write as a Get then a Set: GetForSet notes
			// the entry, and SetAfterGet of the same key writes there
			// only if nothing (a write, a delete, a capture kept or
			// released) came between; of another key it ignores the
			// note.
			k, v := mm.keys.Draw(t, "k"), rapid.IntRange(0, 3).Draw(t, "v")
			want, had := mm.model[k]
			old, ok := mm.m.GetForSet(mm.m.hash(k), k)
			if ok != had || old != want {
				t.Fatalf("GetForSet(%d) = %d,%v; model %d,%v", k, old, ok, want, had)
			}
			mm.between(t, rapid.IntRange(0, 4).Draw(t, "between"))
			if !rapid.Bool().Draw(t, "same key") {
				k = mm.keys.Draw(t, "k2")
			}
			_, had = mm.model[k]
			if replaced := mm.m.SetAfterGet(mm.m.hash(k), k, v, nil); replaced != had {
				t.Fatalf("SetAfterGet(%d) reports replaced = %v; model had it: %v", k, replaced, had)
			}
			mm.model[k] = v
		},
		"Update": func(t *rapid.T) {
			// A read-modify-write through UpdateHashed, whose function
			// sometimes writes another key, takes a capture, or takes and
			// releases one: the write must then walk again rather than
			// write where the lookup was.
			k, v := mm.keys.Draw(t, "k"), rapid.IntRange(0, 3).Draw(t, "v")
			want, had := mm.model[k]
			between := rapid.IntRange(0, 4).Draw(t, "between")
			called := 0
			mm.m.UpdateHashed(mm.m.hash(k), k, func(old int, present bool) int {
				called++
				if present != had || old != want {
					t.Fatalf("UpdateHashed(%d) saw %d,%v; model %d,%v", k, old, present, want, had)
				}
				mm.between(t, between)
				return v
			}, nil)
			if called != 1 {
				t.Fatalf("UpdateHashed called its function %d times", called)
			}
			mm.model[k] = v
		},
		"Delete": func(t *rapid.T) {
			k := mm.keys.Draw(t, "k")
			want, had := mm.model[k]
			old, ok := mm.m.Delete(k)
			if ok != had || (ok && old != want) {
				t.Fatalf("Delete(%d) = %d,%v; model %d,%v", k, old, ok, want, had)
			}
			delete(mm.model, k)
		},
		"DeleteMany": func(t *rapid.T) {
			n := rapid.IntRange(1, 200).Draw(t, "n")
			base := mm.keys.Draw(t, "base")
			for i := range n {
				mm.m.Delete(base + i)
				delete(mm.model, base+i)
			}
		},
		"Get": func(t *rapid.T) {
			k := mm.keys.Draw(t, "k")
			want, had := mm.model[k]
			if v, ok := mm.m.Get(k); ok != had || v != want {
				t.Fatalf("Get(%d) = %d,%v; model %d,%v", k, v, ok, want, had)
			}
			for _, f := range mm.frozen {
				want, had := f.model[k]
				if v, ok := f.snap.Get(k); ok != had || v != want {
					t.Fatalf("snapshot epoch %d: Get(%d) = %d,%v; frozen %d,%v", f.snap.Epoch(), k, v, ok, want, had)
				}
			}
		},
		"Prefetch": func(t *rapid.T) {
			// A hint: the keys' values, present or not, and the shape
			// are what they were, in the live map and every capture.
			ks := rapid.SliceOfN(mm.keys, 0, 9).Draw(t, "ks")
			hs := make([]uint64, 0, len(ks)+1)
			for _, k := range ks {
				hs = append(hs, mm.m.hash(k))
			}
			hs = append(hs, rapid.Uint64().Draw(t, "any hash"))
			mm.m.Prefetch(hs)
			for _, k := range ks {
				want, had := mm.model[k]
				if v, ok := mm.m.Get(k); ok != had || v != want {
					t.Fatalf("after Prefetch: Get(%d) = %d,%v; model %d,%v", k, v, ok, want, had)
				}
			}
			if err := mm.m.Check(); err != nil {
				t.Fatalf("after Prefetch: %v", err)
			}
		},
		"Clear": func(t *rapid.T) {
			if rapid.IntRange(0, 9).Draw(t, "rare") == 0 {
				mm.m.Clear()
				clear(mm.model)
			}
		},
		"Snapshot": func(t *rapid.T) {
			if len(mm.frozen) < 6 {
				mm.frozen = append(mm.frozen, frozenMap{mm.m.Snapshot(), maps.Clone(mm.model)})
			}
		},
		"Release": func(t *rapid.T) {
			if len(mm.frozen) == 0 {
				return
			}
			i := rapid.IntRange(0, len(mm.frozen)-1).Draw(t, "i")
			mm.frozen[i].snap.Release()
			mm.frozen = slices.Delete(mm.frozen, i, i+1)
		},
		"Diff": func(t *rapid.T) {
			if len(mm.frozen) == 0 {
				return
			}
			f := mm.frozen[rapid.IntRange(0, len(mm.frozen)-1).Draw(t, "i")]
			cur := mm.m.Snapshot()
			defer cur.Release()
			got := maps.Clone(f.model)
			applyChanges(t, got, DiffMaps(f.snap, cur))
			if !maps.Equal(got, mm.model) {
				t.Fatalf("Diff(epoch %d, now) applied to the old version does not give the new one", f.snap.Epoch())
			}
		},
	}
}

// between does what a read-modify-write's two halves may see done
// between them: nothing (0), a write (1) or a delete (2) of another key, a
// capture kept (3), or a capture taken and released (4).
func (mm *mapMachine) between(t *rapid.T, what int) {
	switch what {
	case 1:
		k2, v2 := mm.keys.Draw(t, "k2"), rapid.IntRange(0, 3).Draw(t, "v2")
		mm.m.Set(k2, v2)
		mm.model[k2] = v2
	case 2:
		k2 := mm.keys.Draw(t, "k2")
		mm.m.Delete(k2)
		delete(mm.model, k2)
	case 3:
		if len(mm.frozen) < 6 {
			mm.frozen = append(mm.frozen, frozenMap{mm.m.Snapshot(), maps.Clone(mm.model)})
		}
	case 4:
		mm.m.Snapshot().Release()
	}
}

func runMapMachine(t *rapid.T, hash func(int) uint64) {
	m := newIntMap(hash)
	if rapid.Bool().Draw(t, "bytewise") { // nil equal: BytesEqual, compared inline
		m = NewMap[int, int](NewOwner(), hash, nil)
	}
	mm := &mapMachine{
		m:     m,
		model: map[int]int{},
		keys:  rapid.IntRange(0, rapid.SampledFrom([]int{50, 500, 3000}).Draw(t, "keyspace")),
	}
	t.Repeat(mm.actions())
}

func TestMap_StateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runMapMachine(t, hashInt) })
}

func TestMap_StateMachineColliding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runMapMachine(t, hashColliding) })
}

func FuzzMap(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { runMapMachine(t, hashInt) }))
}

// applyChanges applies a diff to a Go map, checking that each change is
// consistent with what the map holds.
func applyChanges(t interface {
	Helper()
	Fatalf(string, ...any)
}, m map[int]int, changes func(func(Change[int, int]) bool)) {
	t.Helper()
	for c := range changes {
		old, had := m[c.Key]
		switch c.Kind {
		case Added:
			if had {
				t.Fatalf("Added %d, already present", c.Key)
			}
			m[c.Key] = c.New
		case Removed:
			if !had || old != c.Old {
				t.Fatalf("Removed %d=%d, had %d,%v", c.Key, c.Old, old, had)
			}
			delete(m, c.Key)
		case Changed:
			if !had || old != c.Old || c.Old == c.New {
				t.Fatalf("Changed %d %d->%d, had %d,%v", c.Key, c.Old, c.New, old, had)
			}
			m[c.Key] = c.New
		default:
			t.Fatalf("bad change kind %v", c.Kind)
		}
	}
}

func TestMap_DiffUnrelated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hash := rapid.SampledFrom([]func(int) uint64{hashInt, hashColliding}).Draw(t, "hash")
		build := func(label string) (*MapSnapshot[int, int], map[int]int) {
			m := newIntMap(hash)
			model := rapid.MapOfN(rapid.IntRange(0, 400), rapid.IntRange(0, 2), 0, 300).Draw(t, label)
			for k, v := range model {
				m.Set(k, v)
			}
			return m.Snapshot(), model
		}
		a, ma := build("a")
		b, mb := build("b")
		got := maps.Clone(ma)
		applyChanges(t, got, DiffMaps(a, b))
		if !maps.Equal(got, mb) {
			t.Fatalf("Diff(a, b) applied to a does not give b")
		}
	})
}

// TestMap_Canonical builds one key set by different histories and checks the
// trees have the same shape.
func TestMap_Canonical(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.IntRange(0, 5000), 0, 600, rapid.ID).Draw(t, "keys")
		extra := rapid.SliceOfNDistinct(rapid.IntRange(5001, 9000), 0, 300, rapid.ID).Draw(t, "extra")
		a, b := newIntMap(hashInt), newIntMap(hashInt)
		for _, k := range keys {
			a.Set(k, 1)
		}
		snap := b.Snapshot() // b takes the copy-on-write paths
		for _, k := range extra {
			b.Set(k, 1)
		}
		for _, i := range rapid.Permutation(keys).Draw(t, "order") {
			b.Set(i, 1)
		}
		for _, k := range extra {
			b.Delete(k)
		}
		snap.Release()
		if sa, sb := shape(&a.root), shape(&b.root); sa != sb {
			t.Fatalf("same keys, different shapes:\n%s\n%s", sa, sb)
		}
		// The same keys stored in runs: the same shape again.
		c := newIntMap(hashInt)
		perm := rapid.Permutation(keys).Draw(t, "run order")
		for len(perm) > 0 {
			n := rapid.IntRange(1, len(perm)).Draw(t, "run length")
			run := make([]MapEntry[int, int], n)
			for i, k := range perm[:n] {
				run[i] = MapEntry[int, int]{Hash: hashInt(k), Key: k, Val: 1}
			}
			slices.SortFunc(run, func(a, b MapEntry[int, int]) int { return cmp.Compare(a.Hash, b.Hash) })
			c.SetRun(run)
			perm = perm[n:]
		}
		if sa, sc := shape(&a.root), shape(&c.root); sa != sc {
			t.Fatalf("same keys stored in runs, different shapes:\n%s\n%s", sa, sc)
		}
	})
}

func shape[K comparable, V any](s *mapSlot[K, V]) string {
	b := s.branch()
	if b == nil {
		return fmt.Sprint(len(s.ents()))
	}
	out := "("
	for i := range b.kids {
		out += shape(&b.kids[i]) + " "
	}
	return out + ")"
}

func TestMap_DiffCost(t *testing.T) {
	n := 100_000
	if invariants.Exhaustive {
		n = 3_000 // Check after every Set would make the build quadratic
	}
	m := newIntMap(hashInt)
	for i := range n {
		m.Set(i, i)
	}
	a := m.Snapshot()
	d := mapDiff[int, int]{equal: Equal[int], yield: func(Change[int, int]) bool { return true }, check: func() {}}
	d.slots(&a.root, &a.root, 0)
	if d.visited != 0 {
		t.Fatalf("Diff(a, a) visited %d node pairs, want 0", d.visited)
	}
	m.Set(42, -1)
	b := m.Snapshot()
	var changes []Change[int, int]
	d = mapDiff[int, int]{equal: Equal[int], yield: func(c Change[int, int]) bool { changes = append(changes, c); return true }, check: func() {}}
	d.slots(&a.root, &b.root, 0)
	if len(changes) != 1 || changes[0] != (Change[int, int]{Kind: Changed, Key: 42, Hash: hashInt(42), Old: 42, New: -1}) {
		t.Fatalf("changes = %v", changes)
	}
	if d.visited > 5 {
		t.Fatalf("Diff of one change in 100k entries visited %d node pairs, want at most the depth", d.visited)
	}
}

func TestMap_NoOpWrites(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	m := newIntMap(hashInt)
	for i := range 10_000 {
		m.Set(i, i)
	}
	s := m.Snapshot()
	defer s.Release()
	root := m.root.branch()
	allocs := testing.AllocsPerRun(100, func() {
		m.Set(7, 7)  // equal value
		m.Delete(-1) // absent
		m.Set(9_999, 9_999)
	})
	if allocs != 0 {
		t.Fatalf("no-op writes allocated %v times per run", allocs)
	}
	if m.root.branch() != root {
		t.Fatal("no-op writes replaced the root")
	}
	s2 := m.Snapshot()
	defer s2.Release()
	for c := range DiffMaps(s, s2) {
		t.Fatalf("no-op writes produced a change: %v", c)
	}
}

func TestMap_InPlaceWithoutSnapshot(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	m := newIntMap(hashInt)
	for i := range 10_000 {
		m.Set(i, i)
	}
	s := m.Snapshot()
	s.Release()
	allocs := testing.AllocsPerRun(100, func() { m.Set(5, m.len) })
	if allocs != 0 {
		t.Fatalf("an overwrite with no live snapshot allocated %v times", allocs)
	}
}

func TestMap_ReleasedSnapshotPanics(t *testing.T) {
	m := newIntMap(hashInt)
	m.Set(1, 1)
	s := m.Snapshot()
	s.Release()
	s.Release() // idempotent
	for name, read := range map[string]func(){
		"Get": func() { s.Get(1) },
		"Len": func() { s.Len() },
		"All": func() {
			for range s.All() {
			}
		},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("%s on a released snapshot did not panic", name)
				} else if err, ok := r.(error); !ok || !errors.Is(err, ErrReleased) {
					t.Errorf("%s on a released snapshot: panic %#v does not match ErrReleased", name, r)
				}
			}()
			read()
		}()
	}
}

func TestMap_ViewAfterWritePanics(t *testing.T) {
	m := newIntMap(hashInt)
	c := m.Owner().Capture()
	defer c.Release()
	m.Set(1, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("View after a write did not panic")
		}
	}()
	m.View(c)
}

// TestMap_ConcurrentReaders reads snapshots on other goroutines while the
// writer goes on, checking every snapshot against its frozen model; readers
// release their snapshots, so the writer's copies reuse what they pinned
// while other readers are still at work. Run with -race: a node reused
// while a live snapshot still reached it would be a reported race, besides
// a content mismatch.
func TestMap_ConcurrentReaders(t *testing.T) {
	for _, shape := range []struct{ rounds, writes int }{{40, 500}, {400, 30}} {
		t.Run(fmt.Sprintf("rounds=%d/writes=%d", shape.rounds, shape.writes), func(t *testing.T) {
			concurrentReaders(t, shape.rounds, shape.writes)
		})
	}
}

func concurrentReaders(t *testing.T, rounds, writes int) {
	m := newIntMap(hashInt)
	model := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for round := range rounds {
		for i := range writes {
			k := (round*131 + i*7) % 3000
			if i%5 == 0 {
				m.Delete(k)
				delete(model, k)
			} else {
				m.Set(k, round)
				model[k] = round
			}
		}
		s, want := m.Snapshot(), maps.Clone(model)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Release()
			for range 3 {
				got := map[int]int{}
				for k, v := range s.All() {
					got[k] = v
				}
				if !maps.Equal(got, want) || s.Len() != len(want) {
					select {
					case errs <- fmt.Errorf("snapshot epoch %d differs from its frozen model", s.Epoch()):
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := m.Owner().LiveCaptures(); n != 0 {
		t.Fatalf("%d captures still live", n)
	}
}

func TestMap_Scan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newIntMap(hashInt)
		for _, k := range rapid.SliceOfN(rapid.IntRange(0, 5000), 0, 400).Draw(t, "keys") {
			m.Set(k, k)
		}
		s := m.Snapshot()
		defer s.Release()
		lo, hi := rapid.Uint64().Draw(t, "lo"), rapid.Uint64().Draw(t, "hi")
		if lo > hi {
			lo, hi = hi, lo
		}
		want := map[int]int{}
		for k, v := range s.All() {
			if h := hashInt(k); h >= lo && h <= hi {
				want[k] = v
			}
		}
		got := map[int]int{}
		last := uint64(0)
		s.Scan(lo, hi, func(h uint64, k, v int) bool {
			if h < last || h != hashInt(k) {
				t.Fatalf("scan out of order or wrong hash at %d", k)
			}
			last = h
			got[k] = v
			return true
		})
		if !maps.Equal(got, want) {
			t.Fatalf("Scan(%#x, %#x) = %d entries, want %d", lo, hi, len(got), len(want))
		}
	})
}

// seekLeaf, for a key the leaf does not hold, finds the first entry of hash
// >= h in any sorted leaf at any depth, whatever the guess's error: leaves
// of every length up to past mapLeafMax, hashes spread, bunched and
// repeated below the leaf's prefix, targets below, between, on and above
// them; for a key it holds, that entry, wherever it is among the entries
// of its hash. Each leaf is searched with its slot's starts (leafSlot, up
// to leafStartsMaxLen entries) and without them (rawLeafSlot, the
// interpolated window). Lengths past 127 take the wide slot's fields
// (lenCap), whose length shares no bit with the starts' flag.
func TestSeekLeaf_AgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lengths := []int{127, 128, 129, 255, 256, 300}
	for n := 1; n <= 2*mapLeafMax; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for range 200 {
			depth := rng.IntN(5)
			below := ^uint64(0) >> (mapBits * depth) // the bits under the leaf's prefix
			ents := make([]mapEntry[int, int], n)
			spread := []uint64{math.MaxUint64, 1 << 20, 4}[rng.IntN(3)]
			base := rng.Uint64()
			prefix := base &^ below
			for i := range ents {
				ents[i].hash = prefix | (base+rng.Uint64N(spread))&below
			}
			slices.SortFunc(ents, func(a, b mapEntry[int, int]) int { return cmp.Compare(a.hash, b.hash) })
			slots := []mapSlot[int, int]{rawLeafSlot[int, int](unsafe.Pointer(unsafe.SliceData(ents)), n, n)}
			if started := leafSlot(ents, depth); started.meta&metaStarts != 0 {
				slots = append(slots, started)
			} else if n <= leafStartsMaxLen {
				t.Fatalf("leaf of %d entries: no starts", n)
			}
			for range 20 {
				h := ents[rng.IntN(n)].hash + uint64(rng.IntN(3)) - 1
				if rng.IntN(8) == 0 {
					h = rng.Uint64()
				}
				h = prefix | h&below // a hash the walk leads to this leaf
				for _, leaf := range slots {
					want := 0
					for want < n && ents[want].hash < h {
						want++
					}
					if _, _, got, ok := seekLeaf(&leaf, h, h<<(mapBits*depth), -1); ok || int(got) != want {
						t.Fatalf("leaf of %d at depth %d (meta %#x), hash %x, absent key: seekLeaf = %d, %v, want %d, false", n, depth, uint64(leaf.meta), h, got, ok, want)
					}
					for want < n && ents[want].hash == h && rng.IntN(2) == 0 {
						want++
					}
					if want < n && ents[want].hash == h {
						ents[want].key, ents[want].val = 1, 7
						v, e, got, ok := seekLeaf(&leaf, h, h<<(mapBits*depth), 1)
						if !ok || int(got) != want || e != &ents[want] || v != 7 {
							t.Fatalf("leaf of %d at depth %d (meta %#x), hash %x, key at %d: seekLeaf = %d, %v, value %d", n, depth, uint64(leaf.meta), h, want, got, ok, v)
						}
						ents[want].key, ents[want].val = 0, 0
					}
				}
			}
		}
	}
}

// TestMap_UpdateInPlaceUnderCapture: with a capture live, the first write
// to a leaf copies it and records what the copy shares with the original;
// a later read-modify-write of another entry of the copy, written in
// place, must narrow that record, or a diff against the capture misses it.
func TestMap_UpdateInPlaceUnderCapture(t *testing.T) {
	m := newIntMap(hashInt)
	model := map[int]int{}
	bySlot := map[int][]int{}
	for k := range 200 { // a root branch over leaves of a few entries
		m.Set(k, k)
		model[k] = k
		bySlot[slotAt(hashInt(k), 0)] = append(bySlot[slotAt(hashInt(k), 0)], k)
	}
	var leaf []int
	for _, keys := range bySlot {
		if len(keys) >= 4 {
			leaf = keys
			break
		}
	}
	if leaf == nil {
		t.Fatal("no leaf of 4 entries")
	}
	slices.SortFunc(leaf, func(a, b int) int { return cmp.Compare(hashInt(a), hashInt(b)) })
	first, last := leaf[0], leaf[len(leaf)-1]

	snap := m.Snapshot()
	defer snap.Release()
	before := maps.Clone(model)
	for _, k := range []int{first, last} { // copies the leaf, then writes the copy in place
		m.UpdateHashed(hashInt(k), k, func(old int, present bool) int {
			if !present || old != model[k] {
				t.Fatalf("UpdateHashed(%d) saw %d,%v; want %d", k, old, present, model[k])
			}
			return old + 1000
		}, nil)
		model[k] += 1000
	}
	now := m.Snapshot()
	defer now.Release()
	got := maps.Clone(before)
	applyChanges(t, got, DiffMaps(snap, now))
	if !maps.Equal(got, model) {
		t.Fatalf("the diff against the capture misses a write made in place: got %d->%d, %d->%d", first, got[first], last, got[last])
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// A write copies the whole path to what it writes, so no branch the writer
// may write lies under one a capture shares: the in-place paths rely on it
// and read only a leaf's parent. Check reports a map where it fails.
func TestMap_CheckFindsAWritableBranchUnderASharedOne(t *testing.T) {
	m := newIntMap(hashInt)
	for i := range 5000 { // branches two deep
		m.Set(i, i)
	}
	c := m.Snapshot()
	defer c.Release()
	m.Set(1, -1) // copies the path to 1's leaf
	if err := m.Check(); err != nil {
		t.Fatalf("Check after a write under a capture: %v", err)
	}
	root := m.root.branch()
	if root == nil || root.epoch <= m.owner.High() {
		t.Fatal("the write did not copy the root branch")
	}
	root.epoch = m.owner.High() // planted: the root as if shared with the capture
	if err := m.Check(); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "under a branch shared") {
		t.Fatalf("Check = %v, want a writable branch under a shared one", err)
	}
}
