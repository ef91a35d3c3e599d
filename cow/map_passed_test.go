package cow

import (
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// passedOp is one write of passedMachine's writer.
type passedOp struct {
	kind int // 0 Set, 1 UpdateHashed, 2 Find+Store, 3 Delete, 4 capture kept, 5 Prefetch
	key  int
	val  int
}

// TestMapSnapshot_PassedReaderSeesTheCapture is the contract of Passed:
// a reader that reads a capture once in hash order, range by range,
// promising after each range not to read it again, reads exactly the
// version captured, however the writer writes meanwhile (in place behind
// the reader); the live map stays its model; a capture taken meanwhile
// shows its own version; and diffs of later captures stay exact. The
// reader runs on its own goroutine, in lock step with the writer (a
// range, then a batch of writes: reproducible) or free (for -race).
func TestMapSnapshot_PassedReaderSeesTheCapture(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hash := rapid.SampledFrom([]func(int) uint64{hashInt, hashColliding}).Draw(t, "hash")
		keyspace := rapid.SampledFrom([]int{60, 600, 4000}).Draw(t, "keyspace")
		keys := rapid.IntRange(0, keyspace)
		m := newIntMap(hash)
		// Most keys present at the capture, so the map has many leaves
		// for the reader to pass.
		model := map[int]int{}
		present := rapid.IntRange(0, keyspace).Draw(t, "present")
		for k := range present {
			m.Set(k, k%4)
			model[k] = k % 4
		}
		s, frozen := m.Snapshot(), maps.Clone(model)

		// The reader's ranges: [cuts[i], cuts[i+1]-1], the last to 2^64-1.
		cuts := rapid.SliceOfNDistinct(rapid.Uint64(), 0, 12, rapid.ID).Draw(t, "cuts")
		cuts = append(cuts, 0)
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		batches := make([][]passedOp, len(cuts))
		for i := range batches {
			n := rapid.IntRange(0, 300).Draw(t, "batch size")
			batches[i] = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) passedOp {
				return passedOp{
					kind: rapid.IntRange(0, 5).Draw(t, "kind"),
					key:  keys.Draw(t, "key"),
					val:  rapid.IntRange(0, 3).Draw(t, "val"),
				}
			}), n, n).Draw(t, "writes")
		}
		lockStep := rapid.Bool().Draw(t, "lock step")

		read := make(chan map[int]int, 1)
		step := make(chan struct{})
		go func() {
			got := map[int]int{}
			for i, lo := range cuts {
				hi := uint64(math.MaxUint64)
				if i+1 < len(cuts) {
					hi = cuts[i+1] - 1
				}
				if i%2 == 0 {
					s.ScanLeaves(lo, hi, func(ents []MapEntry[int, int]) bool {
						for _, e := range ents {
							got[e.Key] = e.Val
						}
						return true
					})
				} else {
					s.Scan(lo, hi, func(_ uint64, k, v int) bool {
						got[k] = v
						return true
					})
				}
				if hi != math.MaxUint64 {
					s.Passed(hi + 1)
				}
				if lockStep {
					step <- struct{}{}
				}
			}
			s.Release()
			read <- got
		}()

		type kept struct {
			snap  *MapSnapshot[int, int]
			model map[int]int
		}
		var captures []kept
		for _, batch := range batches {
			if lockStep {
				<-step
			}
			for _, op := range batch {
				switch op.kind {
				case 0:
					m.Set(op.key, op.val)
					model[op.key] = op.val
				case 1:
					m.UpdateHashed(hash(op.key), op.key, func(old int, _ bool) int { return old + op.val }, nil)
					model[op.key] += op.val
				case 2:
					old, p, _ := m.Find(hash(op.key), op.key)
					m.Store(&p, hash(op.key), op.key, old+op.val+1, nil)
					model[op.key] += op.val + 1
				case 3:
					m.Delete(op.key)
					delete(model, op.key)
				case 4:
					if len(captures) < 3 {
						captures = append(captures, kept{m.Snapshot(), maps.Clone(model)})
					}
				case 5:
					m.Prefetch([]uint64{hash(op.key)})
				}
			}
		}
		if got := <-read; !maps.Equal(got, frozen) {
			t.Fatalf("the reader read %d entries unlike the %d captured", len(diffKeys(got, frozen)), len(frozen))
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
		if got := mapContents(t, m.All()); !maps.Equal(got, model) {
			t.Fatalf("live map differs from its model at %d keys", len(diffKeys(got, model)))
		}
		for _, c := range captures {
			if got := mapContents(t, c.snap.All()); !maps.Equal(got, c.model) {
				t.Fatalf("a capture taken during the read (epoch %d) changed", c.snap.Epoch())
			}
		}
		// Later versions diff exactly, against one another and against
		// the captures taken during the read.
		next, nextModel := m.Snapshot(), maps.Clone(model)
		for _, op := range batches[0] {
			m.Set(op.key, op.val+4)
			model[op.key] = op.val + 4
		}
		last := m.Snapshot()
		for _, from := range append(captures, kept{next, nextModel}) {
			got := maps.Clone(from.model)
			applyChanges(t, got, DiffMaps(from.snap, last))
			if !maps.Equal(got, model) {
				t.Fatalf("the diff from epoch %d to %d does not give the later version", from.snap.Epoch(), last.Epoch())
			}
			from.snap.Release()
		}
		last.Release()
	})
}

// diffKeys returns the keys on which a and b differ.
func diffKeys(a, b map[int]int) []int {
	var ks []int
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			ks = append(ks, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// leafRanges returns each leaf below s by its address, with the last hash
// its path covers.
func leafRanges[K comparable, V any](s *mapSlot[K, V], depth int, prefix uint64, into map[unsafe.Pointer]uint64) {
	if b := s.branch(); b != nil {
		shift := 64 - mapBits*(depth+1)
		for i := range b.kids {
			leafRanges(&b.kids[i], depth+1, prefix|uint64(i)<<shift, into)
		}
		return
	}
	if s.isLeaf() {
		into[s.p] = prefix | ^uint64(0)>>(mapBits*depth)
	}
}

// TestMapSnapshot_PassedLeavesAreNotCopied is what Passed is for: after
// the reader passes half the hash space, updating every key copies the
// leaves ahead of it and none behind; with a second capture live, it
// copies them all.
func TestMapSnapshot_PassedLeavesAreNotCopied(t *testing.T) {
	const n, half = 20000, uint64(1) << 63
	for _, second := range []bool{false, true} {
		m := newIntMap(hashInt)
		for k := range n {
			m.Set(k, k)
		}
		s := m.Snapshot()
		captured := map[unsafe.Pointer]uint64{}
		leafRanges(&s.root, 0, 0, captured)
		s.Passed(half)
		if second {
			defer m.Snapshot().Release()
		}
		for k := range n {
			switch k % 3 {
			case 0:
				m.Set(k, k+1)
			case 1:
				m.UpdateHashed(hashInt(k), k, func(old int, _ bool) int { return old + 1 }, nil)
			default:
				old, p, _ := m.Find(hashInt(k), k)
				m.Store(&p, hashInt(k), k, old+1, nil)
			}
		}
		live := map[unsafe.Pointer]uint64{}
		leafRanges(&m.root, 0, 0, live)
		var behind, kept, ahead, copied int
		for p, last := range captured {
			_, same := live[p]
			if last < half {
				behind++
				if same {
					kept++
				}
			} else {
				ahead++
				if !same {
					copied++
				}
			}
		}
		if behind == 0 || ahead == 0 {
			t.Fatalf("%d leaves behind and %d ahead: the test needs both", behind, ahead)
		}
		if copied != ahead {
			t.Errorf("second capture %v: %d of %d leaves ahead of the reader copied, want all", second, copied, ahead)
		}
		if want := behind; second {
			if kept != 0 {
				t.Errorf("with a second capture live, %d of %d leaves behind the reader written in place, want none", kept, behind)
			}
		} else if kept != want {
			t.Errorf("%d of %d leaves behind the reader kept, want all (written in place)", kept, behind)
		}
		s.Scan(half, math.MaxUint64, func(_ uint64, k, v int) bool {
			if v != k {
				t.Fatalf("key %d ahead of the reader reads %d, captured %d", k, v, k)
			}
			return true
		})
		s.Release()
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMapSnapshot_ReadBehindPassedPanics: a read of what the reader
// promised not to read again panics with an error matching ErrPassed
// (the writer may have written it); reads ahead of it are served.
func TestMapSnapshot_ReadBehindPassedPanics(t *testing.T) {
	m := newIntMap(hashInt)
	for k := range 1000 {
		m.Set(k, k)
	}
	s := m.Snapshot()
	defer s.Release()
	const below = uint64(1) << 62
	s.Passed(below)
	s.Passed(below / 2) // lower: no change
	var behindKey, aheadKey = -1, -1
	for k := range 1000 {
		if hashInt(k) < below && behindKey < 0 {
			behindKey = k
		}
		if hashInt(k) >= below && aheadKey < 0 {
			aheadKey = k
		}
	}
	for name, read := range map[string]func(){
		"Get":       func() { s.Get(behindKey) },
		"GetHashed": func() { s.GetHashed(hashInt(behindKey), behindKey) },
		"Scan":      func() { s.Scan(below-1, math.MaxUint64, func(uint64, int, int) bool { return true }) },
		"ScanLeaves": func() {
			s.ScanLeaves(0, math.MaxUint64, func([]MapEntry[int, int]) bool { return true })
		},
		"All":      func() { s.All()(func(int, int) bool { return true }) },
		"DiffMaps": func() { DiffMaps(s, s)(func(Change[int, int]) bool { return true }) },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrPassed) {
					t.Errorf("%s behind the reader: panic %v, want ErrPassed", name, err)
				}
			}()
			read()
		}()
	}
	if v, ok := s.Get(aheadKey); !ok || v != aheadKey {
		t.Errorf("Get(%d) ahead of the reader = %d, %v", aheadKey, v, ok)
	}
	if s.Len() != 1000 {
		t.Errorf("Len = %d, want 1000", s.Len())
	}
}
