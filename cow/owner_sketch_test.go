package cow

import (
	"fmt"
	"math"
	"testing"

	"github.com/cowstate/cowstate/internal/invariants"
)

// TestOwner_DistinctWrites: the estimate counts each entry written since
// the previous call once, whichever path wrote it: with no capture live,
// in place under a capture (the leaf copied by an earlier write), copying,
// or behind a reader's frontier; within 5% (three standard errors). A
// write of an equal value is no write, and the first call only starts
// counting.
func TestOwner_DistinctWrites(t *testing.T) {
	ops := map[string]func(m *Map[int, int], k int){
		"Set": func(m *Map[int, int], k int) { m.Set(k, k+1) },
		"UpdateHashed": func(m *Map[int, int], k int) {
			m.UpdateHashed(hashInt(k), k, func(old int, _ bool) int { return old + 1 }, nil)
		},
		"FindStore": func(m *Map[int, int], k int) {
			old, p, _ := m.Find(hashInt(k), k)
			m.Store(&p, hashInt(k), k, old+1, nil)
		},
		"Delete": func(m *Map[int, int], k int) { m.Delete(k) },
		"Insert": func(m *Map[int, int], k int) { m.Set(-1-k, k) },
		"SetRun": func(m *Map[int, int], k int) {
			m.SetRun([]MapEntry[int, int]{{Hash: hashInt(-1 - k), Key: -1 - k, Val: k}})
		},
	}
	for _, capture := range []string{"none", "live", "passed"} {
		for name, op := range ops {
			t.Run(fmt.Sprintf("capture=%s/op=%s", capture, name), func(t *testing.T) {
				o := NewOwner()
				m := NewMap[int, int](o, hashInt, nil)
				for k := range 4000 {
					m.Set(k, 0)
				}
				if _, ok := o.DistinctWrites(); ok {
					t.Fatal("the first call reports a count")
				}
				switch capture {
				case "live":
					defer m.Snapshot().Release()
					for k := 0; k < 800; k += 2 {
						m.Set(k, 1) // copies the leaves: the writes below are in place
					}
				case "passed":
					s := m.Snapshot()
					defer s.Release()
					s.Passed(1 << 63) // half the leaves written in place, half copied
				}
				o.DistinctWrites()
				for k := 1; k < 800; k += 2 {
					op(m, k)
				}
				v, _ := m.Get(0)
				m.Set(0, v) // an equal value: no write
				got, _ := o.DistinctWrites()
				if d := math.Abs(float64(got) - 400); d > 20 {
					t.Fatalf("estimate %d for 400 entries written", got)
				}
				if got, _ := o.DistinctWrites(); got != 0 {
					t.Fatalf("estimate %d with nothing written since the last call", got)
				}
			})
		}
	}
}

// TestOwner_DistinctWritesLarge: at 10^5 and 10^6 entries, each written
// several times, the estimate is within 5%.
func TestOwner_DistinctWritesLarge(t *testing.T) {
	o := NewOwner()
	m := NewMap[int, int](o, hashInt, nil)
	o.DistinctWrites()
	sizes := []int{100_000, 1_000_000}
	if invariants.Exhaustive {
		sizes = []int{3_000} // Check after every Set would make the test quadratic
	}
	for _, n := range sizes {
		for round := range 3 {
			for k := range n {
				m.Set(k, n+round)
			}
		}
		got, _ := o.DistinctWrites()
		if d := math.Abs(float64(got) - float64(n)); d > 0.05*float64(n) {
			t.Fatalf("estimate %d for %d entries written", got, n)
		}
	}
}
