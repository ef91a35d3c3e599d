package statetable

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

func newTestTable(t testing.TB) *Table {
	tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Check(); err != nil {
			t.Errorf("table left broken: %v", err)
		}
	})
	return tb
}

type sumAgg struct{}

func (sumAgg) CreateAccumulator() [2]int64         { return [2]int64{} }
func (sumAgg) Add(in int64, acc [2]int64) [2]int64 { return [2]int64{acc[0] + in, acc[1] + 1} }
func (sumAgg) Result(acc [2]int64) string          { return fmt.Sprintf("%d/%d", acc[0], acc[1]) }
func (sumAgg) Merge(a, b [2]int64) [2]int64        { return [2]int64{a[0] + b[0], a[1] + b[1]} }

var accCodec = FuncCodec("acc2", func(b []byte, v [2]int64) []byte {
	return Int64.Append(Int64.Append(b, v[0]), v[1])
}, func(b []byte) ([2]int64, error) {
	if len(b) != 16 {
		return [2]int64{}, fmt.Errorf("%w acc2: %d bytes", ErrDecode, len(b))
	}
	x, _ := Int64.Decode(b[:8])
	y, _ := Int64.Decode(b[8:])
	return [2]int64{x, y}, nil
})

// model is the obviously correct keyed state: Go maps and slices, deep
// copied at each capture.
type model struct {
	value  map[[2]string]int64
	list   map[[2]string][]int64
	mp     map[[2]string]map[string]int64
	reduce map[[2]string]int64
	agg    map[[2]string][2]int64
}

func newModel() *model {
	return &model{map[[2]string]int64{}, map[[2]string][]int64{}, map[[2]string]map[string]int64{}, map[[2]string]int64{}, map[[2]string][2]int64{}}
}

func (m *model) clone() *model {
	c := newModel()
	c.value = maps.Clone(m.value)
	c.reduce = maps.Clone(m.reduce)
	c.agg = maps.Clone(m.agg)
	for k, v := range m.list {
		c.list[k] = slices.Clone(v)
	}
	for k, v := range m.mp {
		c.mp[k] = maps.Clone(v)
	}
	return c
}

type states struct {
	t      *Table
	value  *ValueState[string, string, int64]
	list   *ListState[string, string, int64]
	mp     *MapState[string, string, string, int64]
	reduce *ReducingState[string, string, int64]
	agg    *AggregatingState[string, string, int64, [2]int64, string]
}

func newStates(t testing.TB) *states {
	s := &states{t: newTestTable(t)}
	var err error
	must := func(e error) {
		if e != nil {
			t.Fatal(e)
		}
	}
	s.value, err = NewValue(s.t, "value", String, String, Int64, -1)
	must(err)
	s.list, err = NewList(s.t, "list", String, String, Int64)
	must(err)
	s.mp, err = NewMapState(s.t, "map", String, String, String, Int64)
	must(err)
	s.reduce, err = NewReducing(s.t, "reduce", String, String, Int64, func(a, b int64) int64 { return a + b })
	must(err)
	s.agg, err = NewAggregating(s.t, "agg", String, String, accCodec, sumAgg{})
	must(err)
	return s
}

type fatalf interface {
	Helper()
	Fatalf(string, ...any)
}

// check compares every state of the live table (snap == nil) or of a
// snapshot with the model.
func (s *states) check(t fatalf, m *model, snap *Snapshot, keys, nss []string) {
	t.Helper()
	for _, k := range keys {
		for _, ns := range nss {
			kn := [2]string{k, ns}
			var v int64
			var err error
			if snap == nil {
				v, err = s.value.Get(k, ns)
			} else {
				v, err = s.value.GetAt(snap, k, ns)
			}
			want, ok := m.value[kn]
			if !ok {
				want = -1
			}
			if err != nil || v != want {
				t.Fatalf("value %v = %d, %v; want %d", kn, v, err, want)
			}
			var seq func(func(int64) bool)
			if snap == nil {
				seq, err = s.list.Get(k, ns)
			} else {
				seq, err = s.list.GetAt(snap, k, ns)
			}
			if got := slices.Collect(seq); err != nil || !slices.Equal(got, m.list[kn]) {
				t.Fatalf("list %v = %v, %v; want %v", kn, got, err, m.list[kn])
			}
			var it func(func(string, int64) bool)
			if snap == nil {
				it, err = s.mp.Iterate(k, ns)
			} else {
				it, err = s.mp.IterateAt(snap, k, ns)
			}
			got := maps.Collect(it)
			if err != nil || !maps.Equal(got, m.mp[kn]) {
				t.Fatalf("map %v = %v, %v; want %v", kn, got, err, m.mp[kn])
			}
			var r int64
			var rok bool
			if snap == nil {
				r, rok, err = s.reduce.Get(k, ns)
			} else {
				r, rok, err = s.reduce.GetAt(snap, k, ns)
			}
			if wr, wok := m.reduce[kn]; err != nil || rok != wok || r != wr {
				t.Fatalf("reduce %v = %d,%v,%v; want %d,%v", kn, r, rok, err, wr, wok)
			}
			var a string
			var aok bool
			if snap == nil {
				a, aok, err = s.agg.Get(k, ns)
			} else {
				a, aok, err = s.agg.GetAt(snap, k, ns)
			}
			wa, wok := m.agg[kn]
			if err != nil || aok != wok || (wok && a != sumAgg{}.Result(wa)) {
				t.Fatalf("agg %v = %q,%v,%v; want %v,%v", kn, a, aok, err, wa, wok)
			}
		}
	}
	if snap == nil {
		if s.value.Count() != len(m.value) || s.list.Count() != len(m.list) || s.mp.Count() != len(m.mp) ||
			s.reduce.Count() != len(m.reduce) || s.agg.Count() != len(m.agg) {
			t.Fatalf("counts differ from the model")
		}
	}
}

func TestTable_StateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newStates(t)
		m := newModel()
		keys := []string{"a", "b", "c", "d", longKey}
		nss := []string{"w1", "w2", "w3"}
		type frozen struct {
			snap *Snapshot
			m    *model
		}
		var live []frozen
		key := rapid.SampledFrom(keys)
		ns := rapid.SampledFrom(nss)
		val := rapid.Int64Range(-3, 3)
		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				s.check(rt, m, nil, keys, nss)
				for _, f := range live {
					s.check(rt, f.m, f.snap, keys, nss)
				}
			},
			"ValuePut": func(rt *rapid.T) {
				k, n, v := key.Draw(rt, "k"), ns.Draw(rt, "ns"), val.Draw(rt, "v")
				if err := s.value.Put(k, n, v); err != nil {
					rt.Fatal(err)
				}
				m.value[[2]string{k, n}] = v
			},
			"ValueClear": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				if err := s.value.Clear(k, n); err != nil {
					rt.Fatal(err)
				}
				delete(m.value, [2]string{k, n})
			},
			"ListAdd": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				es := rapid.SliceOfN(val, 0, 70).Draw(rt, "es")
				if err := s.list.AddAll(k, n, slices.Values(es)); err != nil {
					rt.Fatal(err)
				}
				if kn := [2]string{k, n}; len(m.list[kn])+len(es) > 0 {
					m.list[kn] = append(m.list[kn], es...)
				}
			},
			"ListUpdate": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				es := rapid.SliceOfN(val, 0, 5).Draw(rt, "es")
				if err := s.list.Update(k, n, slices.Values(es)); err != nil {
					rt.Fatal(err)
				}
				if len(es) == 0 {
					delete(m.list, [2]string{k, n})
				} else {
					m.list[[2]string{k, n}] = es
				}
			},
			"ListMerge": func(rt *rapid.T) {
				k, target := key.Draw(rt, "k"), ns.Draw(rt, "target")
				srcs := rapid.SliceOfN(ns, 0, 3).Draw(rt, "srcs")
				if err := s.list.MergeNamespaces(k, target, srcs...); err != nil {
					rt.Fatal(err)
				}
				tk := [2]string{k, target}
				for _, src := range srcs {
					sk := [2]string{k, src}
					if src == target || len(m.list[sk]) == 0 {
						continue
					}
					m.list[tk] = append(m.list[tk], m.list[sk]...)
					delete(m.list, sk)
				}
			},
			"MapPut": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				uk, v := strconv.Itoa(rapid.IntRange(0, 80).Draw(rt, "uk")), val.Draw(rt, "v")
				if err := s.mp.Put(k, n, uk, v); err != nil {
					rt.Fatal(err)
				}
				kn := [2]string{k, n}
				if m.mp[kn] == nil {
					m.mp[kn] = map[string]int64{}
				}
				m.mp[kn][uk] = v
			},
			"MapRemove": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				uk := strconv.Itoa(rapid.IntRange(0, 80).Draw(rt, "uk"))
				if err := s.mp.Remove(k, n, uk); err != nil {
					rt.Fatal(err)
				}
				kn := [2]string{k, n}
				delete(m.mp[kn], uk)
				if len(m.mp[kn]) == 0 {
					delete(m.mp, kn)
				}
			},
			"MapIterateRemoving": func(rt *rapid.T) {
				k, n := key.Draw(rt, "k"), ns.Draw(rt, "ns")
				it, err := s.mp.Iterate(k, n)
				if err != nil {
					rt.Fatal(err)
				}
				kn := [2]string{k, n}
				seen := map[string]int64{}
				for uk, v := range it {
					seen[uk] = v
					if v%2 == 0 { // remove while iterating
						if err := s.mp.Remove(k, n, uk); err != nil {
							rt.Fatal(err)
						}
						delete(m.mp[kn], uk)
					}
				}
				if len(m.mp[kn]) == 0 {
					delete(m.mp, kn)
				}
				for uk := range m.mp[kn] {
					if _, ok := seen[uk]; !ok {
						rt.Fatalf("iteration missed %q", uk)
					}
				}
			},
			"ReduceAdd": func(rt *rapid.T) {
				k, n, v := key.Draw(rt, "k"), ns.Draw(rt, "ns"), val.Draw(rt, "v")
				if err := s.reduce.Add(k, n, v); err != nil {
					rt.Fatal(err)
				}
				m.reduce[[2]string{k, n}] += v
			},
			"ReduceMerge": func(rt *rapid.T) {
				k, target := key.Draw(rt, "k"), ns.Draw(rt, "target")
				srcs := rapid.SliceOfN(ns, 0, 3).Draw(rt, "srcs")
				if err := s.reduce.MergeNamespaces(k, target, srcs...); err != nil {
					rt.Fatal(err)
				}
				tk := [2]string{k, target}
				for _, src := range srcs {
					sk := [2]string{k, src}
					v, ok := m.reduce[sk]
					if src == target || !ok {
						continue
					}
					m.reduce[tk] += v
					delete(m.reduce, sk)
				}
			},
			"AggAdd": func(rt *rapid.T) {
				k, n, v := key.Draw(rt, "k"), ns.Draw(rt, "ns"), val.Draw(rt, "v")
				if err := s.agg.Add(k, n, v); err != nil {
					rt.Fatal(err)
				}
				kn := [2]string{k, n}
				m.agg[kn] = sumAgg{}.Add(v, m.agg[kn])
			},
			"AggMerge": func(rt *rapid.T) {
				k, target := key.Draw(rt, "k"), ns.Draw(rt, "target")
				srcs := rapid.SliceOfN(ns, 0, 3).Draw(rt, "srcs")
				if err := s.agg.MergeNamespaces(k, target, srcs...); err != nil {
					rt.Fatal(err)
				}
				tk := [2]string{k, target}
				for _, src := range srcs {
					sk := [2]string{k, src}
					v, ok := m.agg[sk]
					if src == target || !ok {
						continue
					}
					m.agg[tk] = sumAgg{}.Merge(m.agg[tk], v)
					delete(m.agg, sk)
				}
			},
			"KeysClear": func(rt *rapid.T) {
				n := ns.Draw(rt, "ns")
				for k := range s.value.Keys(n) {
					delete(m.value, [2]string{k, n})
					if err := s.value.Clear(k, n); err != nil {
						rt.Fatal(err)
					}
				}
			},
			"Snapshot": func(rt *rapid.T) {
				if len(live) < 4 {
					c := s.t.Owner().Capture()
					live = append(live, frozen{s.t.View(c), m.clone()})
				}
			},
			"Release": func(rt *rapid.T) {
				if len(live) == 0 {
					return
				}
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "i")
				live[i].snap.Capture().Release()
				live = slices.Delete(live, i, i+1)
			},
		})
	})
}

func TestTable_Keys(t *testing.T) {
	s := newStates(t)
	for _, k := range []string{"x", "y", "z"} {
		s.value.Put(k, "w1", 1)
	}
	s.value.Put("y", "w2", 2)
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range s.value.Keys("w1") {
			yield(k)
		}
	})
	if !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("Keys(w1) = %v", got)
	}
	n := 0
	for range s.value.Pairs() {
		n++
	}
	if n != 4 || s.value.Count() != 4 {
		t.Fatalf("%d pairs, count %d; want 4", n, s.value.Count())
	}
}

func TestTable_Misuse(t *testing.T) {
	s := newStates(t)
	if _, err := NewList(s.t, "value", String, String, Int64); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("re-registering with another kind: %v", err)
	}
	if _, err := NewValue(s.t, "value", String, String, Int32, 0); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("re-registering with another codec: %v", err)
	}
	again, err := NewValue(s.t, "value", String, String, Int64, -1)
	if err != nil || again != s.value {
		t.Fatalf("re-registering the same state: %v, same handle %v", err, again == s.value)
	}
	if _, err := s.t.State("nope"); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("unknown state: %v", err)
	}
	bs, err := NewValue(s.t, "bytes-ns", String, Bytes, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Put("k", nil, 1); !errors.Is(err, ErrNilNamespace) {
		t.Fatalf("nil namespace: %v", err)
	}
	half, _ := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &KeyGroupRange{0, 7}})
	hv, _ := NewValue(half, "v", String, String, Int64, 0)
	var inside, outside int
	for i := range 100 {
		k := strconv.Itoa(i)
		err := hv.Put(k, "", 1)
		switch {
		case err == nil:
			inside++
		case errors.Is(err, ErrKeyGroupNotOwned):
			outside++
		default:
			t.Fatal(err)
		}
	}
	if inside == 0 || outside == 0 || hv.Count() != inside {
		t.Fatalf("owned-range writes: %d inside, %d refused, count %d", inside, outside, hv.Count())
	}
}

func TestKeyGroup_Ranges(t *testing.T) {
	for _, p := range []int{1, 3, 128, 1000, MaxParallelismLimit} {
		for g := 0; g < min(p, 50); g++ {
			start, _ := KeyGroupStart(g, p)
			if got := KeyGroupOf(start, p); got != g {
				t.Fatalf("p=%d: KeyGroupOf(start of %d) = %d", p, g, got)
			}
			if start > 0 && KeyGroupOf(start-1, p) != g-1 {
				t.Fatalf("p=%d: hash before the start of %d is in %d", p, g, KeyGroupOf(start-1, p))
			}
		}
	}
	// Stable across processes and Go versions: golden values. xxhash64 of
	// the empty input is the published constant 0xef46db3751d8e999.
	for _, c := range []struct {
		key          string
		hash         uint64
		g128, g32768 int
	}{
		{"", 0xef46db3751d8e999, 119, 30627},
		{"a", 0xd24ec4f1a98c6e5b, 105, 26919},
		{"user-42", 0x397e9d3a76af7c81, 28, 7359},
	} {
		h := HashKey([]byte(c.key))
		if h != c.hash || KeyGroupOf(h, 128) != c.g128 || KeyGroupOf(h, 32768) != c.g32768 {
			t.Fatalf("key %q: hash %#x, key groups %d and %d; want %#x, %d, %d",
				c.key, h, KeyGroupOf(h, 128), KeyGroupOf(h, 32768), c.hash, c.g128, c.g32768)
		}
	}
}

func TestCodecs_RoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		i := rapid.Int64().Draw(rt, "i")
		if v, err := Int64.Decode(Int64.Append(nil, i)); err != nil || v != i {
			rt.Fatalf("int64 %d -> %d, %v", i, v, err)
		}
		j := rapid.Int64().Draw(rt, "j")
		if (i < j) != (string(Int64.Append(nil, i)) < string(Int64.Append(nil, j))) {
			rt.Fatalf("int64 byte order differs from numeric order for %d, %d", i, j)
		}
		i8 := rapid.Int8().Draw(rt, "i8")
		if v, err := Signed[int8]().Decode(Signed[int8]().Append(nil, i8)); err != nil || v != i8 {
			rt.Fatalf("int8 %d -> %d, %v", i8, v, err)
		}
		f := rapid.Float64().Draw(rt, "f")
		if v, err := Float64.Decode(Float64.Append(nil, f)); err != nil || v != f {
			rt.Fatalf("float64 %v -> %v, %v", f, v, err)
		}
		bad := rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "bad")
		if len(bad) != 8 {
			if _, err := Int64.Decode(bad); !errors.Is(err, ErrDecode) {
				rt.Fatalf("int64 decode of %d bytes: %v", len(bad), err)
			}
		}
	})
}
