package cow

import "math/bits"

// HashUint64 is xxhash64 with seed 0 of the 8 bytes whose little-endian
// value is u (what xxhash.Sum64 returns for them), computed inline: the
// algorithm's path for an input of 8 bytes, one lane folded into the
// short-input accumulator and then the final avalanche. It spreads keys
// over 64 bits as a map's hash must; the state table hashes 8-byte keys
// by it, since their key groups and the order of their files depend on
// xxhash64. Any goroutine.
func HashUint64(u uint64) uint64 {
	h := xxPrime5 + 8
	h ^= bits.RotateLeft64(u*xxPrime2, 31) * xxPrime1
	return xxAvalanche(bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4)
}

// HashUint32 is xxhash64 with seed 0 of the 4 bytes whose little-endian
// value is u (what xxhash.Sum64 returns for them), computed inline as
// HashUint64 is: the state table hashes 4-byte keys (int32, uint32) by it.
// Any goroutine.
func HashUint32(u uint32) uint64 {
	h := xxPrime5 + 4
	h ^= uint64(u) * xxPrime1
	return xxAvalanche(bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3)
}

// xxAvalanche is xxhash64's final mix of its accumulator.
func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// UnhashUint64 returns the u whose HashUint64 is h. Each step of the hash
// is one to one on 64 bits (a multiply by an odd constant, a rotate, an
// xor with a constant or with the word's own higher bits, an add), so the
// hash has an inverse, its steps undone in reverse order: a map keyed by
// the hashes of 8-byte keys (NewHashKeyedMap) need not store the keys.
// Any goroutine.
func UnhashUint64(h uint64) uint64 {
	h ^= h >> 32
	h *= xxInv3
	h ^= h>>29 ^ h>>58
	h *= xxInv2
	h ^= h >> 33
	h = bits.RotateLeft64((h-xxPrime4)*xxInv1, -27)
	h ^= xxPrime5 + 8
	return bits.RotateLeft64(h*xxInv1, -31) * xxInv2
}

// The primes of xxhash64, and the inverses of the first three modulo 2^64
// (each prime times its inverse is 1: TestHashUint64).
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5

	xxInv1 uint64 = 0x0887493432BADB37
	xxInv2 uint64 = 0x0BA79078168D4BAF
	xxInv3 uint64 = 0xE9E9F4C41D6DF849
)

// mixUint64 is the hash of the maps NewIntKeyedMap makes: the 64-bit
// finalizer of MurmurHash3, two multiplies and three xor-shifts, one to
// one on 64 bits, each input bit flipping each output bit with a
// probability near a half. It is no file's hash, only an in-memory
// map's, so it need not be xxhash64: it takes 12 instructions fewer
// than HashUint64 (callgrind, BenchmarkGet at size=10000; decision
// 0058). Any goroutine.
func mixUint64(u uint64) uint64 {
	u ^= u >> 33
	u *= 0xFF51AFD7ED558CCD
	u ^= u >> 33
	u *= 0xC4CEB9FE1A85EC53
	u ^= u >> 33
	return u
}
