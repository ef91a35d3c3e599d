package statetable

import (
	"bytes"
	"fmt"
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
// keeps): the key8 map holds them in insertion order, a file in key order.
var collidingInt64Keys = [2]int64{1346127, 1177662}

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
