package statetable

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/cow"
)

// MaxParallelismLimit is the largest supported number of key groups (as in
// Flink: 2^15).
const MaxParallelismLimit = 1 << 15

// DefaultMaxParallelism is the number of key groups when none is configured.
const DefaultMaxParallelism = 128

// keyHashBits is how many leading bits of a key's hash decide its key group
// and lead the hash of every entry of that key. The remaining low bits of an
// entry hash come from the namespace, so all namespaces of one key fall into
// the same key group, and each key group is one contiguous range of entry
// hashes: an in-order walk of a state table visits key groups in order.
const keyHashBits = 40

// HashKey returns the stable hash of an encoded key: xxhash64 of its bytes,
// the same in every process and Go version (never Go's per-process map hash).
// An 8-byte key (an int64 or uint64 key's encoding) is hashed inline by
// cow.HashUint64, the same function: the call of xxhash.Sum64 and its length
// dispatch were a fifth of a restore (BenchmarkRestore). Any goroutine.
func HashKey(encodedKey []byte) uint64 {
	if len(encodedKey) == 8 {
		return cow.HashUint64(binary.LittleEndian.Uint64(encodedKey))
	}
	return xxhash.Sum64(encodedKey)
}

// KeyGroupOf returns the key group of a key with hash keyHash, for
// maxParallelism key groups: a monotone range reduction of the key hash's
// leading keyHashBits bits, floor(top * maxParallelism / 2^keyHashBits).
// maxParallelism must be in [1, MaxParallelismLimit].
func KeyGroupOf(keyHash uint64, maxParallelism int) int {
	top := keyHash >> (64 - keyHashBits)
	return int(top * uint64(maxParallelism) >> keyHashBits)
}

// KeyGroupOfKey returns the key group of an encoded key for maxParallelism
// key groups: KeyGroupOf(HashKey(encodedKey), maxParallelism), the rule
// every backend follows. A key's encoding is its key codec's (the bytes
// of a string key, for statetable.String). Any goroutine.
func KeyGroupOfKey(encodedKey []byte, maxParallelism int) int {
	return KeyGroupOf(HashKey(encodedKey), maxParallelism)
}

// EntryHash returns the hash of the state entry (key, namespace): the key's
// leading keyHashBits bits followed by the namespace hash's low bits. It
// orders a state table by key group, then key, then namespace.
func EntryHash(keyHash uint64, encodedNamespace []byte) uint64 {
	const low = 1<<(64-keyHashBits) - 1
	return keyHash&^low | xxhash.Sum64(encodedNamespace)&low
}

// KeyGroupStart returns the first entry hash of key group g: the entries of
// key groups [lo, hi] are exactly those with hash in
// [KeyGroupStart(lo), KeyGroupStart(hi+1)) (the end is 2^64 when hi is the
// last key group, which KeyGroupStart reports as 0 with ok false).
func KeyGroupStart(g, maxParallelism int) (start uint64, ok bool) {
	if g >= maxParallelism {
		return 0, false
	}
	// The smallest top with floor(top*P / 2^bits) >= g is ceil(g*2^bits / P).
	top := (uint64(g)<<keyHashBits + uint64(maxParallelism) - 1) / uint64(maxParallelism)
	return top << (64 - keyHashBits), true
}

// KeyGroupRange is an inclusive range of key groups [First, Last]; the empty
// range has Last < First. In JSON (a checkpoint manifest) it is
// {"first":F,"last":L}, which encoding/json also reads from the
// capitalised keys of the untagged form.
type KeyGroupRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// AllKeyGroups returns the range of every key group for maxParallelism.
func AllKeyGroups(maxParallelism int) KeyGroupRange {
	return KeyGroupRange{0, maxParallelism - 1}
}

// Contains reports whether g is in the range.
func (r KeyGroupRange) Contains(g int) bool { return g >= r.First && g <= r.Last }

// Len returns the number of key groups in the range.
func (r KeyGroupRange) Len() int { return max(0, r.Last-r.First+1) }

// Empty reports whether the range holds no key group.
func (r KeyGroupRange) Empty() bool { return r.Last < r.First }

func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d, %d]", r.First, r.Last) }

// RangeForOperator returns the key groups owned by operator index i of
// parallelism p, as Flink assigns them: contiguous, balanced ranges.
func RangeForOperator(maxParallelism, p, i int) KeyGroupRange {
	return KeyGroupRange{
		First: (i*maxParallelism + p - 1) / p,
		Last:  ((i+1)*maxParallelism+p-1)/p - 1,
	}
}
