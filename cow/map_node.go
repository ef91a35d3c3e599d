package cow

// Shape of the hash trie. A branch at depth d splits on hash bits
// [64-mapBits*(d+1), 64-mapBits*d), most significant first, so an in-order
// walk visits entries in ascending hash order.
const (
	mapBits    = 5            // hash bits consumed per level
	mapFanout  = 1 << mapBits // slots per branch
	mapLeafMax = 48           // a subtree with at most this many entries is one leaf
	mapDepths  = 64 / mapBits // depth from which no hash bits are left to split on
)

// mapEntry is one key-value pair with its cached hash. Leaves keep entries
// sorted by hash; entries with equal hashes (true 64-bit collisions) stay in
// the order they were inserted.
type mapEntry[K comparable, V any] struct {
	hash uint64
	key  K
	val  V
}

// mapSlot is one subtree: a branch (branch != nil), a leaf (the entries
// ents, sorted by hash), or nothing (neither). A leaf is nothing but its
// entry array, held by the slot that points to it: one heap object per leaf,
// and a lookup reaches the entries straight from the parent.
//
// # Canonical shape
//
// A subtree is a leaf exactly when it holds at most mapLeafMax entries (or
// when no hash bits are left to split on); otherwise it is a branch. The shape
// therefore depends only on the set of keys, never on the order of inserts
// and deletes: inserts split a leaf that grows past mapLeafMax, deletes
// collapse a branch that shrinks to mapLeafMax. Equal key sets give equal
// shapes, which is what makes Diff exact and cheap.
//
// # Ownership
//
// epoch is the Owner epoch the leaf's entry array was created in (a branch
// carries its own). The writer mutates an entry array or a branch in place
// only while owner.writable(epoch); otherwise a live capture may see it and
// the writer works on a copy stamped with the writer epoch. Copying a branch
// copies its slots, so the copy points to the same entry arrays with the same
// epochs, and they are copied in turn when written. Nothing reachable from a
// live capture is ever written, so any number of goroutines may read it.
type mapSlot[K comparable, V any] struct {
	branch *mapBranch[K, V]
	ents   []mapEntry[K, V]
	epoch  uint64
}

// mapBranch is an interior node: one slot per value of the next mapBits hash
// bits, and the number of entries below it.
type mapBranch[K comparable, V any] struct {
	epoch uint64
	count int
	kids  [mapFanout]mapSlot[K, V]
}

func (s *mapSlot[K, V]) empty() bool { return s.branch == nil && len(s.ents) == 0 }

// count returns the number of entries in the subtree.
func (s *mapSlot[K, V]) count() int {
	if s.branch != nil {
		return s.branch.count
	}
	return len(s.ents)
}

// same reports whether two slots are the same subtree by identity: the same
// branch, or the same entry array with the same length. Captured arrays are
// never written, so identity implies equal contents.
func (s *mapSlot[K, V]) same(o *mapSlot[K, V]) bool {
	if s.branch != nil || o.branch != nil {
		return s.branch == o.branch
	}
	if len(s.ents) != len(o.ents) {
		return false
	}
	return len(s.ents) == 0 || &s.ents[0] == &o.ents[0]
}

// slotAt returns the slot of hash h in a branch at depth.
func slotAt(h uint64, depth int) int {
	return int(h << (mapBits * depth) >> (64 - mapBits))
}

// searchLeaf returns the index of the first entry of ents with hash >= h.
// The hashes of a leaf at depth share their first mapBits*depth bits and are
// spread uniformly below, so the position is interpolated from the
// remaining bits and then corrected by a short scan: one or two cache lines
// instead of a binary search's five or six.
func searchLeaf[K comparable, V any](ents []mapEntry[K, V], h uint64, depth int) int {
	n := len(ents)
	if n == 0 {
		return 0
	}
	rest := h << min(63, mapBits*depth) // the bits below the leaf's prefix
	i := int((rest >> 32) * uint64(n) >> 32)
	if ents[i].hash < h {
		for i++; i < n && ents[i].hash < h; i++ {
		}
		return i
	}
	for i > 0 && ents[i-1].hash >= h {
		i--
	}
	return i
}

// findEntry returns the index of key k with hash h in a leaf's entries, or
// the index where it would be inserted.
func findEntry[K comparable, V any](ents []mapEntry[K, V], h uint64, k K, depth int) (int, bool) {
	i := searchLeaf(ents, h, depth)
	for j := i; j < len(ents) && ents[j].hash == h; j++ {
		if ents[j].key == k {
			return j, true
		}
	}
	return i, false
}

// lookup finds k (hash h) below s. Read-only: safe on captured nodes.
func (s *mapSlot[K, V]) lookup(h uint64, k K) (V, bool) {
	depth := 0
	for s.branch != nil {
		s = &s.branch.kids[slotAt(h, depth)]
		depth++
	}
	if i, ok := findEntry(s.ents, h, k, depth); ok {
		return s.ents[i].val, true
	}
	var zero V
	return zero, false
}

// appendEntries appends every entry below s in hash order.
func (s *mapSlot[K, V]) appendEntries(dst []mapEntry[K, V]) []mapEntry[K, V] {
	if s.branch == nil {
		return append(dst, s.ents...)
	}
	for i := range s.branch.kids {
		dst = s.branch.kids[i].appendEntries(dst)
	}
	return dst
}

// all yields every entry below s in hash order, calling check (if not nil)
// before each leaf; false means the consumer stopped.
func (s *mapSlot[K, V]) all(yield func(K, V) bool, check func()) bool {
	if s.branch != nil {
		for i := range s.branch.kids {
			if !s.branch.kids[i].all(yield, check) {
				return false
			}
		}
		return true
	}
	if len(s.ents) > 0 && check != nil {
		check()
	}
	for i := range s.ents {
		if !yield(s.ents[i].key, s.ents[i].val) {
			return false
		}
	}
	return true
}

// buildSlot returns the canonical subtree at depth for entries sorted by
// hash, stamped with epoch. It takes ownership of ents when they form one
// leaf; otherwise every leaf gets a backing array of its own.
func buildSlot[K comparable, V any](ents []mapEntry[K, V], depth int, epoch uint64) mapSlot[K, V] {
	if len(ents) <= mapLeafMax || depth >= mapDepths {
		return mapSlot[K, V]{ents: ents, epoch: epoch}
	}
	b := &mapBranch[K, V]{epoch: epoch, count: len(ents)}
	// Entries sorted by hash are grouped by slot: each kid is one run.
	for i := 0; i < len(ents); {
		s := slotAt(ents[i].hash, depth)
		j := i + 1
		for j < len(ents) && slotAt(ents[j].hash, depth) == s {
			j++
		}
		run := ents[i:j:j]
		if j-i <= mapLeafMax {
			run = append([]mapEntry[K, V](nil), run...)
		}
		b.kids[s] = buildSlot(run, depth+1, epoch)
		i = j
	}
	return mapSlot[K, V]{branch: b}
}
