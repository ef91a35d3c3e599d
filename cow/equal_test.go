package cow

import (
	"math"
	"testing"
)

func TestBytesEqual(t *testing.T) {
	nan := math.NaN()
	type pair struct{ a, b int32 }
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{"equal int64", BytesEqual[int64](5, 5), true},
		{"unequal int64", BytesEqual[int64](5, -5), false},
		{"NaN equals its own bytes", BytesEqual(nan, nan), true},
		{"-0.0 is not +0.0", BytesEqual(math.Copysign(0, -1), 0.0), false},
		{"equal structs", BytesEqual(pair{1, 2}, pair{1, 2}), true},
		{"structs differing in the last field", BytesEqual(pair{1, 2}, pair{1, 3}), false},
		{"arrays differing in the last byte", BytesEqual([3]byte{1, 2, 3}, [3]byte{1, 2, 4}), false},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestMap_NilEqual checks the bytewise equality a nil equal gives, on the
// inline one-word path and the called one, with and without a capture live:
// an equal write is a no-op that copies nothing, an unequal one is written.
func TestMap_NilEqual(t *testing.T) {
	type pair struct{ a, b int32 } // one word, 4-aligned: the called path
	t.Run("int64", func(t *testing.T) { checkNilEqual(t, int64(1), int64(2)) })
	t.Run("float64", func(t *testing.T) { checkNilEqual(t, math.NaN(), 0.5) })
	t.Run("pair", func(t *testing.T) { checkNilEqual(t, pair{1, 2}, pair{1, 3}) })
	t.Run("array", func(t *testing.T) { checkNilEqual(t, [3]uint64{1, 2, 3}, [3]uint64{1, 2, 4}) })
}

func checkNilEqual[V comparable](t *testing.T, v, other V) {
	m := NewMap[int, V](NewOwner(), hashInt, nil)
	for k := range 5000 {
		m.Set(k, v)
	}
	for _, captured := range []bool{false, true} {
		var before *MapSnapshot[int, V]
		if captured {
			before = m.Snapshot()
		}
		root := m.root
		writes := m.owner.writes
		for k := range 5000 {
			if !m.Set(k, v) {
				t.Fatalf("Set(%d) of a present key reported it absent", k)
			}
		}
		if m.root != root || m.owner.writes != writes {
			t.Fatalf("captured=%v: writes of equal bytes changed the map", captured)
		}
		m.Set(77, other)
		if got, _ := m.Get(77); got != other {
			t.Fatalf("captured=%v: Get(77) = %v after Set(77, %v)", captured, got, other)
		}
		if captured {
			after := m.Snapshot()
			n := 0
			for c := range DiffMaps(before, after) {
				if c.Key != 77 || c.Kind != Changed {
					t.Fatalf("diff has %+v, want only key 77 changed", c)
				}
				n++
			}
			if n != 1 {
				t.Fatalf("diff has %d changes, want 1", n)
			}
			after.Release()
			before.Release()
		}
		m.Set(77, v)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestNewMap_NilEqualNeedsPlainValues(t *testing.T) {
	type padded struct {
		a int8
		b int64
	}
	for name, f := range map[string]func(){
		"string": func() { NewMap[int, string](NewOwner(), hashInt, nil) },
		"padded": func() { NewMap[int, padded](NewOwner(), hashInt, nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r != "cow: NewMap: a nil equal needs a value type with no pointers and no padding" {
					t.Errorf("%s: recovered %v", name, r)
				}
			}()
			f()
		}()
	}
}
