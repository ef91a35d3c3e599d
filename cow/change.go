package cow

// ChangeKind says how one key differs between two versions of a structure.
type ChangeKind uint8

const (
	// Added: the key is only in the new version.
	Added ChangeKind = iota + 1
	// Removed: the key is only in the old version.
	Removed
	// Changed: the key is in both versions with values that are not equal
	// (by the structure's value equality).
	Changed
)

// String returns "added", "removed" or "changed", or "ChangeKind(n)" for an
// invalid kind.
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Changed:
		return "changed"
	}
	return "ChangeKind(" + itoa(uint64(k)) + ")"
}

// Change is one difference between two versions, as yielded by DiffMaps and
// DiffTrees. Old is the zero value for Added and New is the zero value for
// Removed.
type Change[K, V any] struct {
	Kind ChangeKind
	Key  K
	// Hash is the key's hash in a diff of maps (the map's hash of Key; of a
	// hash-keyed map, its one identity), 0 in a diff of trees.
	Hash     uint64
	Old, New V
}
