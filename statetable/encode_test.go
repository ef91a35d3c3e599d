package statetable

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/cow"
)

// collidingShortNamespaces returns n namespaces short enough for inline
// keys whose entry hashes collide for any key.
func collidingShortNamespaces(n int) []string {
	const low = 1<<(64-keyHashBits) - 1
	seen := map[uint64][]string{}
	for i := 0; ; i++ {
		ns := fmt.Sprint("n", i)
		h := xxhash.Sum64String(ns) & low
		if seen[h] = append(seen[h], ns); len(seen[h]) == n {
			return seen[h]
		}
	}
}

// collidingInt64Keys are two int64 keys whose entry hashes in the void
// namespace are equal (their key hashes share the 40 bits an entry hash
// keeps): the key8 map holds them in the order of their key hashes, a
// file in key order.
var collidingInt64Keys = [2]int64{1346127, 1177662}

// mapLeafMaxForTest is more than a cow.Map leaf holds below the last
// depth (48).
const mapLeafMaxForTest = 49

// deepCollidingInt64Keys returns n int64 keys of state s (an Int64 key
// state with no namespace) whose entry hashes are all one: key hashes
// that share their leading keyHashBits bits, in random order. More than
// a leaf's worth of them put the key8 map's leaves below the entry
// hash's 40 bits, so that the run of one entry hash crosses leaves.
func deepCollidingInt64Keys[V any](s *ValueState[int64, VoidNamespace, V], n int, rng *rand.Rand) []int64 {
	top := rng.Uint64() &^ lowBits
	keys := make([]int64, n)
	for i := range keys {
		w := cow.UnhashUint64(top | rng.Uint64()&lowBits) // the key8 map's word of the key
		keys[i] = int64(bits.ReverseBytes64(w) ^ s.fixedKey.flip)
		if h := s.locate8(keys[i]); h&^lowBits != top {
			panic("deepCollidingInt64Keys: a key outside the run")
		}
	}
	return keys
}

// TestAppendKeyGroupEntries: the encoding appended per key group is the
// blobs of what KeyGroupEntries yields, byte for byte: for inline keys of
// up to 15 bytes (the leaf loop) with colliding entry hashes written in
// random order and cells of every length class, for 8-byte keys with
// 8-byte fixed-width cells (the word loop of appendLeaf8) with a colliding
// pair among them and with 4-byte cells, and for states with longer keys.
func TestAppendKeyGroupEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nss := collidingShortNamespaces(3)
	tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 8})
	if err != nil {
		t.Fatal(err)
	}
	short, _ := NewValue(tb, "short", String, String, Int64, 0)
	cells, _ := NewValue(tb, "cells", Int64, Void, String, "")
	mixed, _ := NewValue(tb, "mixed", String, String, Int64, 0)
	counts, _ := NewValue(tb, "counts", Int64, Void, Int64, 0)
	recounts, _ := NewValue(tb, "recounts", Int64, Void, Int64, 0)
	narrow, _ := NewValue(tb, "narrow", Int64, Void, Int32, 0)
	key := func(k int64) []byte { return Int64.Append(nil, k) }
	if a, b := collidingInt64Keys[0], collidingInt64Keys[1]; EntryHash(HashKey(key(a)), nil) != EntryHash(HashKey(key(b)), nil) {
		t.Fatalf("keys %d and %d: entry hashes differ; the test needs a colliding pair", a, b)
	}
	for i, k := range collidingInt64Keys { // both orders of insertion
		counts.Put(k, VoidNamespace{}, k)
		recounts.Put(collidingInt64Keys[1-i], VoidNamespace{}, k)
	}
	for range 5000 {
		k := int64(rng.Uint64())
		counts.Put(k, VoidNamespace{}, -k)
		narrow.Put(k, VoidNamespace{}, int32(k))
	}
	for _, k := range deepCollidingInt64Keys(counts, 3*mapLeafMaxForTest, rng) {
		counts.Put(k, VoidNamespace{}, k)
		narrow.Put(k, VoidNamespace{}, int32(k))
	}
	for _, i := range rng.Perm(3000) {
		k := fmt.Sprint(i % 1000)
		short.Put(k, nss[i%3], int64(i))
		mixed.Put(k, nss[i%3], int64(i))
		if i%10 == 0 {
			mixed.Put(strings.Repeat("long", 10)+k, "", int64(i))
		}
	}
	for i, l := range []int{0, 1, 126, 127, 128, 129, 300, 16383, 16384, 70000} {
		cells.Put(int64(i), VoidNamespace{}, strings.Repeat("c", l))
	}
	snap := tb.View(tb.Owner().Capture())
	defer snap.Capture().Release()
	for _, name := range []string{"short", "cells", "mixed", "counts", "recounts", "narrow"} {
		for g := range 8 {
			var want []byte
			wantN := 0
			snap.KeyGroupEntries(name, g, func(key, cell []byte) bool {
				want = appendBlob(appendBlob(want, key), cell)
				wantN++
				return true
			})
			prefix := []byte("prefix")
			got, n, err := snap.AppendKeyGroupEntries(bytes.Clone(prefix), name, g)
			if err != nil {
				t.Fatal(err)
			}
			if n != wantN || !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("state %s, key group %d: %d entries, %d bytes; want %d, %d", name, g, n, len(got)-len(prefix), wantN, len(want))
			}
		}
	}
	if _, _, err := snap.AppendKeyGroupEntries(nil, "short", 8); err == nil {
		t.Fatal("key group 8 of 8: no error")
	}
	if _, _, err := snap.AppendKeyGroupEntries(nil, "nope", 0); err == nil {
		t.Fatal("unknown state: no error")
	}
}

// Keys of one entry hash, more than a leaf holds, among others: two
// tables that wrote them in different orders write the same bytes, in
// key order within the run; a restore of those bytes holds every key
// and writes them again byte for byte; and the diff between a version
// and one with some of them changed names exactly those, in entry-hash
// order.
func TestKey8_DeepCollisionsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	newState := func() (*Table, *ValueState[int64, VoidNamespace, int64]) {
		tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 4})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := NewValue(tb, "v", Int64, Void, Int64, 0)
		return tb, v
	}
	tb1, v1 := newState()
	keys := deepCollidingInt64Keys(v1, 4*mapLeafMaxForTest, rng)
	for range 2000 {
		keys = append(keys, int64(rng.Uint64()))
	}
	tb2, v2 := newState()
	for _, i := range rng.Perm(len(keys)) {
		v1.Put(keys[i], VoidNamespace{}, keys[i])
	}
	for _, i := range rng.Perm(len(keys)) {
		v2.Put(keys[i], VoidNamespace{}, keys[i])
	}
	write := func(tb *Table) (runs [][]byte, counts []int) {
		snap := tb.View(tb.Owner().Capture())
		defer snap.Capture().Release()
		for g := range 4 {
			b, n, err := snap.AppendKeyGroupEntries(nil, "v", g)
			if err != nil {
				t.Fatal(err)
			}
			runs, counts = append(runs, b), append(counts, n)
		}
		return runs, counts
	}
	runs1, counts := write(tb1)
	runs2, _ := write(tb2)
	for g := range runs1 {
		if !bytes.Equal(runs1[g], runs2[g]) {
			t.Fatalf("key group %d: the two insertion orders write different bytes", g)
		}
	}
	tb3, v3 := newState()
	for g := range runs1 {
		if _, err := tb3.RestoreRun("v", counts[g], runs1[g]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb3.Check(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if got, _ := v3.Get(k, VoidNamespace{}); got != k {
			t.Fatalf("restored key %d holds %d", k, got)
		}
	}
	runs3, _ := write(tb3)
	for g := range runs1 {
		if !bytes.Equal(runs1[g], runs3[g]) {
			t.Fatalf("key group %d: the restored table writes other bytes", g)
		}
	}

	before := tb1.View(tb1.Owner().Capture())
	changed := map[string]bool{}
	for _, k := range keys[:3*mapLeafMaxForTest] { // mostly the colliding run
		if rng.IntN(2) == 0 {
			v1.Put(k, VoidNamespace{}, -k)
			changed[string(Int64.Append(nil, k))] = true
		}
	}
	after := tb1.View(tb1.Owner().Capture())
	var last uint64
	err := DiffState(before, after, "v", func(ch EntryChange) bool {
		key := string(ch.Key[1:]) // the composite key: its length byte, the key
		if !changed[key] {
			t.Fatalf("the diff names %x, which did not change", ch.Key)
		}
		delete(changed, key)
		if h := EntryHash(HashKey(ch.Key[1:]), nil); h < last {
			t.Fatalf("the diff goes back from entry hash %#x to %#x", last, h)
		} else {
			last = h
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) > 0 {
		t.Fatalf("the diff misses %d changed keys", len(changed))
	}
}
