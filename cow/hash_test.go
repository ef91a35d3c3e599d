package cow

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHashUint64 checks the inline hashes against xxhash.Sum64 of the
// same 8 bytes (HashUint64) and 4 bytes (HashUint32), and HashUint64's
// inverse both ways: a map keyed by these hashes recovers every key from
// its hash, and every word is some key's hash.
func TestHashUint64(t *testing.T) {
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
		if got, want := HashUint64(u), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("HashUint64(%#x) = %#x, xxhash.Sum64 = %#x", u, got, want)
		}
		if back := UnhashUint64(HashUint64(u)); back != u {
			t.Fatalf("UnhashUint64(HashUint64(%#x)) = %#x", u, back)
		}
		if h := UnhashUint64(u); HashUint64(h) != u {
			t.Fatalf("HashUint64(UnhashUint64(%#x)) = %#x", u, HashUint64(h))
		}
		if got, want := HashUint32(uint32(u)), xxhash.Sum64(b[:4]); got != want {
			t.Fatalf("HashUint32(%#x) = %#x, xxhash.Sum64 = %#x", uint32(u), got, want)
		}
	}
	for _, p := range [][2]uint64{{xxPrime1, xxInv1}, {xxPrime2, xxInv2}, {xxPrime3, xxInv3}} {
		if p[0]*p[1] != 1 {
			t.Fatalf("%#x is not the inverse of %#x", p[1], p[0])
		}
	}
}
