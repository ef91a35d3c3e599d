package cow

import (
	"fmt"
	"unsafe"
)

// HashedEntry is an entry with its hash, for LoadSorted. Its layout is that
// of the map's own entries, so loading does not copy them twice.
type HashedEntry[K comparable, V any] struct {
	Hash uint64
	Key  K
	Val  V
}

// LoadSorted fills an empty map from entries in strictly ascending hash
// order (as a snapshot file delivers them), building the canonical trie
// bottom-up in O(n) instead of n inserts. The map copies what it keeps: ents
// may be reused afterwards. It returns an error, leaving the map empty, if
// the map is not empty or a hash is out of order or repeated (colliding keys
// must go through Set). Under the invariants build tag it also checks every
// hash against the key. Writer goroutine only.
func (m *Map[K, V]) LoadSorted(ents []HashedEntry[K, V]) error {
	if m.len != 0 {
		return fmt.Errorf("cow: LoadSorted into a map of %d entries", m.len)
	}
	for i := 1; i < len(ents); i++ {
		if ents[i].Hash <= ents[i-1].Hash {
			return fmt.Errorf("cow: LoadSorted: entry %d has hash %#x after %#x", i, ents[i].Hash, ents[i-1].Hash)
		}
	}
	if len(ents) == 0 {
		return nil
	}
	own := unsafe.Slice((*mapEntry[K, V])(unsafe.Pointer(unsafe.SliceData(ents))), len(ents))
	if len(own) <= mapLeafMax {
		own = append([]mapEntry[K, V](nil), own...) // buildSlot keeps a single leaf's array
	}
	m.setRoot(buildSlot(own, 0, m.owner.epoch), true)
	m.len = len(ents)
	m.verify("LoadSorted")
	return nil
}
