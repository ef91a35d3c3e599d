package statetable

import (
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHashKey checks HashKey against xxhash.Sum64 for keys of every
// length up to 19 bytes: the 8-byte ones go through cow.HashUint64
// inline (its own test checks it on many more words), all others through
// xxhash; the key group of a key and the order of every file depend on
// them agreeing.
func TestHashKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 20 {
		k := make([]byte, n)
		for i := range 200 {
			for j := range k {
				k[j] = byte(r.Uint32())
				if i < 2 { // all zeros, then all ones
					k[j] = byte(-i)
				}
			}
			if got, want := HashKey(k), xxhash.Sum64(k); got != want {
				t.Fatalf("HashKey(%x) = %#x, xxhash.Sum64 = %#x", k, got, want)
			}
		}
	}
}
