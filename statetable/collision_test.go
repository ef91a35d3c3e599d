package statetable

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/cow"
)

// longKey is a key whose composite keys are too long to be held inline.
const longKey = "a-key-too-long-to-be-held-inline-0123456789"

// collidingNamespaces returns n namespaces whose entry hashes collide for
// any key (equal low bits of their hashes), some short and some long
// enough to put the composite key in the long-key map: colliding entries
// in both maps.
func collidingNamespaces(n int) []string {
	const low = 1<<(64-keyHashBits) - 1
	seen := map[uint64][]string{}
	for i := 0; ; i++ {
		ns := fmt.Sprint("ns", i)
		if i%2 == 1 {
			ns = fmt.Sprint("namespace-long-enough-for-the-long-map-", i)
		}
		h := xxhash.Sum64String(ns) & low
		seen[h] = append(seen[h], ns)
		if g := seen[h]; len(g) == n && len(g[0]) != len(g[len(g)-1]) {
			return g
		}
		if len(seen[h]) == n {
			delete(seen, h)
		}
	}
}

// TestExport_CollidingEntriesCanonical: entries whose 64-bit entry hashes
// collide are exported in key order, whatever order they were written in,
// and restore intact.
func TestExport_CollidingEntriesCanonical(t *testing.T) {
	nss := collidingNamespaces(3)
	export := func(order []int) []byte {
		tb, _ := NewTable(cow.NewOwner(), Config{MaxParallelism: 4})
		v, _ := NewValue(tb, "v", String, String, Int64, 0)
		for _, i := range order {
			v.Put("key", nss[i], int64(i))
		}
		snap := tb.View(tb.Owner().Capture())
		var out bytes.Buffer
		for g := range 4 {
			snap.KeyGroupEntries("v", g, func(key, cell []byte) bool {
				fmt.Fprintf(&out, "%x=%x;", key, cell)
				return true
			})
		}
		// And back: a restored table exports the same.
		tb2, _ := NewTable(cow.NewOwner(), Config{MaxParallelism: 4})
		v2, _ := NewValue(tb2, "v", String, String, Int64, 0)
		for g := range 4 {
			snap.KeyGroupEntries("v", g, func(key, cell []byte) bool {
				if err := tb2.RestoreEntry("v", key, cell); err != nil {
					t.Fatal(err)
				}
				return true
			})
		}
		for i, ns := range nss {
			if got, _ := v2.Get("key", ns); got != int64(i) {
				t.Fatalf("restored %s = %d, want %d", ns, got, i)
			}
		}
		return out.Bytes()
	}
	a, b := export([]int{0, 1, 2}), export([]int{2, 0, 1})
	if !bytes.Equal(a, b) {
		t.Fatalf("colliding entries exported in history order:\n%s\n%s", a, b)
	}
}
