package statetable

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHash8 checks HashKey's inline hash of 8-byte keys (cow.HashUint64) against
// xxhash.Sum64, which every other length goes through: the key group of a
// key and the order of every file depend on them agreeing.
func TestHash8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var b [8]byte
	for i := range 100_000 {
		u := r.Uint64()
		switch i {
		case 0:
			u = 0
		case 1:
			u = ^uint64(0)
		}
		binary.LittleEndian.PutUint64(b[:], u)
		if got, want := HashKey(b[:]), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("HashKey(%x) = %x, xxhash.Sum64 = %x", b, got, want)
		}
	}
	for n := range 20 { // the other lengths still agree
		k := make([]byte, n)
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		if got, want := HashKey(k), xxhash.Sum64(k); got != want {
			t.Fatalf("HashKey of %d bytes = %x, xxhash.Sum64 = %x", n, got, want)
		}
	}
}
