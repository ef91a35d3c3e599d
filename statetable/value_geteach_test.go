package statetable

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate/cow"
	"pgregory.net/rapid"
)

// GetEach gives what Get of its keys in turn gives, on every path: int64
// keys (the key8 map, prefetched), int32 keys (a key15), namespaced
// string keys (prefetched or not, as drawn) and a TTL state (prefetched
// through its TTL side); with absent keys (the default), keys repeated
// within a group, and f writing the state it reads, so that a later key
// reads what f wrote. Side a reads by GetEach, side b by Get one after
// another, with the same writes between them.
func TestValueState_GetEachIsGetInTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ints := eachPair[int64, VoidNamespace]{name: "ints", key: func(k int) int64 { return int64(k) * 7919 }}
		i32s := eachPair[int32, VoidNamespace]{name: "i32s", key: func(k int) int32 { return int32(k) - 50 }}
		strs := eachPair[string, string]{name: "strs", ns: "ns", key: padded}
		ttls := eachPair[int64, VoidNamespace]{name: "ttls", key: func(k int) int64 { return int64(k) }}
		for side := range 2 {
			tab, err := NewTable(cow.NewOwner(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			v1, err1 := NewValue(tab, "ints", Int64, Void, Int64, -1)
			v2, err2 := NewValue(tab, "i32s", Int32, Void, Int64, -1)
			v3, err3 := NewValue(tab, "strs", String, String, Int64, -1)
			v4, err4 := NewValueWithTTL(tab, "ttls", Int64, Void, Int64, -1, TTL{Duration: time.Hour})
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				t.Fatal(err)
			}
			if side == 0 {
				ints.a, i32s.a, strs.a, ttls.a = v1, v2, v3, v4
				if rapid.Bool().Draw(t, "prefetch strs") {
					v3.prefetchFrom = 0
				}
			} else {
				ints.b, i32s.b, strs.b, ttls.b = v1, v2, v3, v4
			}
		}
		keyspace := rapid.SampledFrom([]int{5, 100, 2000}).Draw(t, "keyspace")
		for range rapid.IntRange(1, 8).Draw(t, "batches") {
			n := rapid.IntRange(0, 40).Draw(t, "n")
			ks := rapid.SliceOfN(rapid.IntRange(0, keyspace-1), n, n).Draw(t, "keys")
			adds := rapid.SliceOfN(rapid.Int64Range(-5, 5), n, n).Draw(t, "adds")
			reenter := rapid.IntRange(0, 4).Draw(t, "reenter")
			if rapid.Bool().Draw(t, "write") {
				eachBatch(t, ints, ks, adds, reenter)
				eachBatch(t, i32s, ks, adds, reenter)
				eachBatch(t, strs, ks, adds, reenter)
				eachBatch(t, ttls, ks, adds, reenter)
			}
			getEachBatch(t, ints, ks, reenter)
			getEachBatch(t, i32s, ks, reenter)
			getEachBatch(t, strs, ks, reenter)
			getEachBatch(t, ttls, ks, reenter)
		}
	})
}

// getEachBatch reads keys ks of p by GetEach on side a and by Get in turn
// on side b; at indexes i%5 == reenter, f first puts i into the next key,
// which a later index may read. The values seen must be equal.
func getEachBatch[K comparable, N any](t *rapid.T, p eachPair[K, N], ks []int, reenter int) {
	keys := make([]K, len(ks))
	for i, k := range ks {
		keys[i] = p.key(k)
	}
	write := func(s *ValueState[K, N, int64], i int) {
		if i%5 == reenter {
			if err := s.Put(p.key(ks[i]+1), p.ns, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got, want []int64
	if err := p.a.GetEach(keys, p.ns, func(i int, v int64) {
		if i != len(got) {
			t.Fatalf("%s: GetEach called f with index %d after %d calls", p.name, i, len(got))
		}
		got = append(got, v)
		write(p.a, i)
	}); err != nil {
		t.Fatalf("%s: GetEach: %v", p.name, err)
	}
	for i, k := range keys {
		v, err := p.b.Get(k, p.ns)
		if err != nil {
			t.Fatalf("%s: Get: %v", p.name, err)
		}
		want = append(want, v)
		write(p.b, i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: GetEach read %v\nGet in turn read %v", p.name, got, want)
	}
}

// GetEach stops at the first key in a key group the table does not own:
// f was called for the keys before it and no other, and the error matches
// ErrKeyGroupNotOwned and names the index.
func TestValueState_GetEachStopsAtAKeyGroupNotOwned(t *testing.T) {
	ints, strs, owned := halfOwnedValues(t)
	t.Run("int64", func(t *testing.T) {
		getEachStops(t, ints, Int64, owned, func(i int) int64 { return int64(i) })
	})
	t.Run("string", func(t *testing.T) {
		getEachStops(t, strs, String, owned, func(i int) string { return fmt.Sprint("k", i) })
	})
}

func getEachStops[K any](t *testing.T, s *ValueState[K, VoidNamespace, int64], kc Codec[K], owned KeyGroupRange, key func(int) K) {
	keys, stop, _ := keysToNotOwned(t, kc, owned, key)
	var called []int
	err := s.GetEach(keys, VoidNamespace{}, func(i int, _ int64) { called = append(called, i) })
	if !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("GetEach = %v; want an error matching ErrKeyGroupNotOwned", err)
	}
	if want := fmt.Sprintf("keys[%d]", stop); !strings.Contains(err.Error(), want) {
		t.Fatalf("GetEach = %v; want it to name %s", err, want)
	}
	if len(called) != stop {
		t.Fatalf("GetEach called f for %v; want the %d keys before the one not owned", called, stop)
	}
}
