package statetable

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHash8 checks HashKey's inline hash of 8-byte keys against
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
		if back := unhash8(hash8(u)); back != u {
			t.Fatalf("unhash8(hash8(%#x)) = %#x", u, back)
		}
		if h := unhash8(u); hash8(h) != u { // every word is some key's hash
			t.Fatalf("hash8(unhash8(%#x)) = %#x", u, hash8(h))
		}
	}
	for _, p := range [][2]uint64{{xxPrime1, xxInv1}, {xxPrime2, xxInv2}, {xxPrime3, xxInv3}} {
		if p[0]*p[1] != 1 {
			t.Fatalf("%#x is not the inverse of %#x", p[1], p[0])
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
