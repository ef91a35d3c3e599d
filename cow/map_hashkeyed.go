package cow

// NoKey is the key type of a hash-keyed map (NewHashKeyedMap): a map whose
// entries are told apart by their 64-bit hashes alone and hold no key.
type NoKey struct{}

// NewHashKeyedMap returns an empty map from 64-bit hashes to values,
// owned by owner: a Map whose key is the hash itself. It serves keys that
// a hash maps one to one onto 64 bits (a bijection of an 8-byte key, such
// as xxhash64 of its 8 bytes), which the caller recovers from the hash
// when it needs them: an entry is then the hash and the value, with no
// copy of the key beside its hash (16 bytes for an 8-byte value, not 24),
// and a lookup compares hashes only. Two hashes are two entries.
//
// Every method of Map and of its snapshots works, with the key NoKey{},
// except those that hash a key: Get, Set, Delete and MapSnapshot.Get
// panic; use GetHashed, SetHashed, UpdateHashed, DeleteHashed. Scans and
// ScanLeaves give each entry's hash, and DiffMaps each change's
// (Change.Hash). equal is as for NewMap.
func NewHashKeyedMap[V any](owner *Owner, equal func(a, b V) bool) *Map[NoKey, V] {
	m := NewMap(owner, hashOfNoKey, equal)
	m.hashKeyed = true
	return m
}

// hashOfNoKey is the hash function of a hash-keyed map, which has none:
// its entries are addressed by hash.
func hashOfNoKey(NoKey) uint64 {
	panic("cow: a hash-keyed map is addressed by hash (GetHashed, SetHashed, UpdateHashed, DeleteHashed)")
}
