package cow

import (
	"iter"
	"sync/atomic"
	"unsafe"

	"github.com/cowstate/cowstate/internal/invariants"
)

// Map is a persistent hash map with in-place writes between captures: a
// canonical hash trie (see mapNode) keyed by a caller-supplied 64-bit hash.
//
// The zero Map is not usable; create one with NewMap. All methods except
// those of the snapshots it hands out belong to the owner's single writer
// goroutine.
//
// Costs, for n entries: Get, Set and Delete are O(log32 n) node visits plus a
// search of a few entries of one leaf of at most mapLeafMax entries, where
// its slot says they start (seekLeaf: usually one cache line); with no live
// capture they allocate only when a leaf grows. With a live capture the first
// write to a leaf in an epoch copies the leaf and its path (O(mapLeafMax +
// depth*mapFanout) words); later writes to it in the same epoch are in place.
type Map[K comparable, V any] struct {
	owner *Owner
	root  mapSlot[K, V]
	len   int
	// rootEpoch is the epoch the root leaf was allocated in: the root leaf
	// has no parent branch to record its ownership.
	rootEpoch uint64
	hash      func(K) uint64
	equal     func(a, b V) bool
	oneWord   bool // equal is BytesEqual and V one aligned word (sameValue)
	hashKeyed bool // K is NoKey: an entry's hash is its identity (NewHashKeyedMap)
	intKeyed  bool // K is an 8-byte integer hashed inline by mixUint64 (NewIntKeyedMap)
	// growShift: a leaf an insert outgrows grows by len>>growShift entries
	// (a quarter, or an eighth after SetCompactLeaves).
	growShift uint8
	reuse     leafReuse[K, V]
	// branchesOff: the map retires no branch for reuse (a cursor; see
	// map_reuse_branch.go).
	branchesOff bool
	checks      invariants.Budget // when verify runs Check (-race, invariants tag)
	// front is how far the reader of a capture read once in hash order
	// has passed (MapSnapshot.Passed): set by that reader, loaded by the
	// writer only on a path that would otherwise copy (passedLeaf).
	front atomic.Pointer[readFrontier]
	// recent is where the writer's last GetForSet found its key (see
	// there): an entry SetAfterGet writes without walking down again.
	recent recentEntry[K, V]
	// owned counts down the leaves a capture may still share with the
	// live tree (map_owned_all.go).
	owned ownedAll
}

// NewMap returns an empty map owned by owner (one Owner may be shared by many
// structures written by the same goroutine; pass NewOwner() for a standalone
// map). hash must be deterministic and should spread keys uniformly over 64
// bits (xxhash of the key's encoding, say; NewIntKeyedMap hashes integer
// keys inline); colliding keys are handled, only slower. equal is value
// equality: a Set of a value equal to the present one is a no-op that
// copies nothing, so a Diff reports only real changes. It may be nil for
// a V with no pointers and no padding: values then compare by their bytes
// (BytesEqual), inline, the fastest choice for such types.
func NewMap[K comparable, V any](owner *Owner, hash func(K) uint64, equal func(a, b V) bool) *Map[K, V] {
	if owner == nil || hash == nil {
		panic("cow: NewMap: owner and hash must not be nil")
	}
	equal, bytewise, ok := valueEquality(equal)
	if !ok {
		panic("cow: NewMap: a nil equal needs a value type with no pointers and no padding")
	}
	m := &Map[K, V]{owner: owner, hash: hash, equal: equal, oneWord: bytewise && oneWord[V](), growShift: 2}
	m.reuse.init()
	return m
}

// NewIntKeyedMap returns an empty map of integer keys owned by owner: a
// NewMap whose hash of k mixes the bits of uint64(k) (MurmurHash3's
// 64-bit finalizer, a dozen instructions). Get, Set and Delete compute it
// inline where NewMap's maps call their hash function through a function
// value (xxhash.Sum64 of the key's encoding, the usual choice, is a call
// of about 60 instructions): a lookup that waits on a cache miss runs
// ahead into the next one only as far as the CPU's reorder window
// reaches, so each instruction it saves lets more misses overlap
// (BenchmarkGet, size=1000000; decision 0058). The order of All, scans
// and diffs is that hash's. equal is as for NewMap.
func NewIntKeyedMap[K ~int | ~int64 | ~uint | ~uint64 | ~uintptr, V any](owner *Owner, equal func(a, b V) bool) *Map[K, V] {
	m := NewMap(owner, func(k K) uint64 { return mixUint64(uint64(k)) }, equal)
	var k K
	m.intKeyed = unsafe.Sizeof(k) == 8 // else (int on a 32-bit platform) by the function
	return m
}

// keyWord returns the 8 bytes of an intKeyed map's key k as a word:
// uint64(k), which generic code over any comparable K cannot write.
func keyWord[K comparable](k *K) uint64 { return *(*uint64)(unsafe.Pointer(k)) }

// SetCompactLeaves makes a leaf that an insert outgrows grow by an eighth
// of its entries instead of a quarter: about half the spare capacity of
// leaves built by inserts, for about twice as many leaf reallocations on
// inserts (updates, deletes and copies are unchanged). Slack costs in
// proportion to the entry's size: the state table uses it for TTL states,
// whose entries carry an expiration timestamp (a value state of int64
// keys and values: 30.1 B/entry without a TTL, 36.2 with one and compact
// leaves, 38.6 without them; BenchmarkMemory, impl=state). Writer
// goroutine only.
func (m *Map[K, V]) SetCompactLeaves() { m.growShift = 3 }

// sameValue reports whether writing v over old changes nothing, by the
// map's equality. Inlined: for a one-word V compared by its bytes it is a
// compare, not a call.
func (m *Map[K, V]) sameValue(old, v *V) bool {
	if m.oneWord {
		return wordsEqual(unsafe.Pointer(old), unsafe.Pointer(v))
	}
	return m.equal(*old, *v)
}

// Owner returns the owner whose epochs the map's nodes carry.
func (m *Map[K, V]) Owner() *Owner { return m.owner }

// Len returns the number of entries. O(1).
func (m *Map[K, V]) Len() int { return m.len }

// Get returns the value of k and whether it is present.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m.intKeyed {
		return m.root.lookup(mixUint64(keyWord(&k)), k)
	}
	return m.root.lookup(m.hash(k), k)
}

// GetHashed is Get for a caller that already has h, the hash of k.
func (m *Map[K, V]) GetHashed(h uint64, k K) (V, bool) {
	return m.root.lookup(h, k)
}

// All yields every entry in hash order (deterministic for a given key set).
// The map must not be written during the iteration; iterate a snapshot to
// write meanwhile.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		m.root.all(yield, nil)
	}
}

// writeResult says what a write did to a subtree.
type writeResult uint8

const (
	unchanged writeResult = iota // nothing changed: every node kept
	updated                      // a value changed, the key set did not
	inserted                     // one entry was added
)

// Set sets k to v and reports whether k was already present. Setting a key
// to a value equal to its present one changes nothing and copies nothing.
func (m *Map[K, V]) Set(k K, v V) (replaced bool) {
	if m.intKeyed {
		return m.SetHashed(mixUint64(keyWord(&k)), k, v, nil)
	}
	return m.SetHashed(m.hash(k), k, v, nil)
}

// SetHashed is Set for a caller that already has h, the hash of k. If keep
// is not nil and k is not yet present, the map stores keep(k) instead of k:
// a caller can look up with a key that aliases a scratch buffer and copy it
// only when it must be kept.
func (m *Map[K, V]) SetHashed(h uint64, k K, v V, keep func(K) K) (replaced bool) {
	// beginWrite here and endWrite before each return, rather than around
	// a call of the body: the extra call is measurable on an in-cache put
	// (BenchmarkWriteFlag).
	m.owner.beginWrite()
	if m.owner.high.Load() == 0 || m.copiedAll() {
		// With no capture live (or none sharing a node, ownedAll), every
		// node the live root reaches is the writer's alone (a node shared
		// with another branch, a leaf its parent does not own, is shared
		// with a branch that only released captures reach): a present
		// key's value is written where a lookup finds it, with no branch
		// header read (updateInPlace reads the parent's, one more cache
		// line). Written out here rather than as a branch of
		// updateInPlace, which keeps the no-capture put free of the
		// general path's checks (BenchmarkPut, snap=none).
		if old, e, _, ok := seekLeaf(&m.root, h, h, k); ok {
			if !m.sameValue(&old, &v) {
				e.val = v // no diff needs the bounds (leafSame, ownedAll)
				m.owner.wroteAt(h)
				m.verify("Set")
			}
			m.owner.endWrite()
			return true
		}
	} else if m.updateInPlace(h, k, v) {
		m.owner.endWrite()
		return true
	}
	return m.setWalk(h, k, v, keep)
}

// setWalk is SetHashed's general path, a recursive walk that copies what a
// capture shares, for a write begun (beginWrite) that no in-place path
// took; it ends the write.
func (m *Map[K, V]) setWalk(h uint64, k K, v V, keep func(K) K) (replaced bool) {
	root, r, fresh, _ := m.set(&m.root, m.owner.writable(m.rootEpoch), 0, h, k, v, keep)
	switch r {
	case unchanged:
		m.owner.endWrite()
		return true
	case inserted:
		m.len++
	}
	m.owner.noteWrite(h)
	m.setRoot(root, fresh)
	m.verify("Set")
	m.owner.endWrite()
	return r == updated
}

// updateInPlace is Set's fast path, with a capture live, for a key already
// present under branches the writer owns, the common case: its value is
// replaced in one walk down without recursion (findLive, then storeAt),
// with no change of shape or counts. If the leaf itself is shared with a
// capture it is copied first and the copy put in its parent, which is what
// Set's general path would do, without walking down a second time. It
// reports false, having changed nothing, when a branch on the way is
// shared or the key is absent.
func (m *Map[K, V]) updateInPlace(h uint64, k K, v V) bool {
	high := m.owner.high.Load()
	// A walk that finds every node the writer's sends the next writes
	// to the no-capture path; this one's path is right either way.
	if m.owned.left == 0 {
		m.ownedNow(high)
	}
	_, p, ok := m.findLive(h, k, high, true)
	if !ok || p.e == nil {
		if e := m.passedEntry(h, k, high); e != nil {
			m.writePassed(e, v)
			return true
		}
		return false
	}
	if !m.sameValue(&p.e.val, &v) {
		m.storeAt(&p, v)
	}
	return true
}

func (m *Map[K, V]) setRoot(root mapSlot[K, V], fresh bool) {
	m.root = root
	if fresh {
		m.rootEpoch = m.owner.epoch
	}
	m.owner.wrote()
}

// set writes k=v below s and returns the new value of the slot and what
// changed. writable says whether the leaf at s (if s is a leaf) may be
// written in place; fresh says whether the returned leaf may be (the parent
// records it in its owned bitmap); edit what the write did to the leaf.
// Copies are made on the way back up, only when something below changed, so
// a no-op write keeps every node.
func (m *Map[K, V]) set(s *mapSlot[K, V], writable bool, depth int, h uint64, k K, v V, keep func(K) K) (_ mapSlot[K, V], _ writeResult, fresh bool, edit leafEdit) {
	if b := s.branch(); b != nil {
		i := slotAt(h, depth)
		kidWritable := b.owned&(1<<i) != 0 && m.owner.writable(b.epoch)
		kid, r, kidFresh, kidEdit := m.set(&b.kids[i], kidWritable, depth+1, h, k, v, keep)
		if r == unchanged {
			return *s, r, false, rebuilt
		}
		if r == updated && kidWritable && kid == b.kids[i] {
			b.narrow(i, kidEdit, false) // the leaf was written in place
			return *s, r, false, rebuilt
		}
		b = m.ownBranch(b)
		b.setKid(i, kid, kidFresh, kidEdit)
		if r == inserted {
			b.count++
		}
		return branchSlot(b), r, false, rebuilt
	}
	ents := s.ents()
	writable = writable && ents != nil
	i, found := findEntry(s, h, k, depth)
	if found {
		if m.sameValue(&ents[i].val, &v) {
			return *s, unchanged, false, rebuilt
		}
		if !writable {
			ents = m.newLeaf(ents, len(ents), len(ents))
			m.retireLeaf(*s)
		}
		ents[i].val = v
		return s.withEntries(ents), updated, true, editAt(i, len(ents))
	}
	if keep != nil {
		k = keep(k)
	}
	e := mapEntry[K, V]{h, k, v}
	n := len(ents)
	switch {
	case n+1 > mapLeafMax && depth < mapDepths:
		split := make([]mapEntry[K, V], n+1)
		copy(split, ents[:i])
		split[i] = e
		copy(split[i+1:], ents[i:])
		return buildSlot(split, depth, m.owner.epoch), inserted, true, rebuilt
	case writable && n < cap(ents):
		ents = ents[:n+1] // in place, in the spare capacity
	case writable:
		// Grow by a quarter (or an eighth), not double: leaves are many,
		// slack is memory.
		ents = append(make([]mapEntry[K, V], 0, n+n>>m.growShift+2), ents...)[:n+1]
	default:
		ents = m.newLeaf(ents, n+1, n+1) // copy-on-write: exact size
		m.retireLeaf(*s)
	}
	copy(ents[i+1:], ents[i:n])
	ents[i] = e
	return s.inserted(ents, h, depth), inserted, true, editAt(i, n+1)
}

// setKid stores kid in slot i of a writable branch, records whether the
// writer owns it, and what the write changed of the slot's leaf (edit).
func (b *mapBranch[K, V]) setKid(i int, kid mapSlot[K, V], fresh bool, edit leafEdit) {
	b.narrow(i, edit, b.dirty&(1<<i) == 0)
	b.kids[i] = kid
	b.dirty |= 1 << i
	if fresh && kid.isLeaf() {
		b.owned |= 1 << i
	} else {
		b.owned &^= 1 << i
	}
}

// Delete removes k and reports whether it was present. Deleting an absent
// key changes nothing and copies nothing.
func (m *Map[K, V]) Delete(k K) (old V, deleted bool) {
	if m.intKeyed {
		return m.DeleteHashed(mixUint64(keyWord(&k)), k)
	}
	return m.DeleteHashed(m.hash(k), k)
}

// DeleteHashed is Delete for a caller that already has h, the hash of k.
func (m *Map[K, V]) DeleteHashed(h uint64, k K) (old V, deleted bool) {
	m.owner.beginWrite()
	root, old, ok, fresh, _ := m.del(&m.root, m.owner.writable(m.rootEpoch), 0, h, k)
	if ok {
		m.len--
		m.owner.noteWrite(h)
		m.setRoot(root, fresh)
		m.verify("Delete")
	}
	m.owner.endWrite()
	return old, ok
}

// del removes k below s and returns the new value of the slot, the removed
// value, whether k was present, whether the returned leaf is the writer's
// and what the delete did to it (writable, fresh and edit as for set).
func (m *Map[K, V]) del(s *mapSlot[K, V], writable bool, depth int, h uint64, k K) (_ mapSlot[K, V], old V, found, fresh bool, edit leafEdit) {
	if b := s.branch(); b != nil {
		i := slotAt(h, depth)
		kidWritable := b.owned&(1<<i) != 0 && m.owner.writable(b.epoch)
		kid, old, found, kidFresh, kidEdit := m.del(&b.kids[i], kidWritable, depth+1, h, k)
		if !found {
			return *s, old, false, false, rebuilt
		}
		if b.count-1 <= mapLeafMax {
			// The subtree shrank to one leaf's worth: every kid is a leaf
			// (canonical shape), so the collapse is a concatenation.
			ents := make([]mapEntry[K, V], 0, b.count-1)
			for j := range b.kids {
				if j == i {
					ents = append(ents, kid.ents()...)
				} else {
					ents = append(ents, b.kids[j].ents()...)
				}
			}
			return leafSlot(ents, depth), old, true, true, rebuilt
		}
		b = m.ownBranch(b)
		b.setKid(i, kid, kidFresh, kidEdit)
		b.count--
		return branchSlot(b), old, true, false, rebuilt
	}
	ents := s.ents()
	i, found := findEntry(s, h, k, depth)
	if !found {
		return *s, old, false, false, rebuilt
	}
	old = ents[i].val
	n := len(ents)
	if n == 1 {
		return mapSlot[K, V]{}, old, true, false, rebuilt
	}
	// The entries after i keep their distance from the end: n-1-i of them.
	edit = leafEdit{i, n - 1 - i}
	if !writable {
		rest := m.newLeaf(ents[:i], n-1, n-1)
		copy(rest[i:], ents[i+1:])
		m.retireLeaf(*s)
		return s.deleted(rest, h, depth), old, true, true, edit
	}
	copy(ents[i:], ents[i+1:])
	ents[n-1] = mapEntry[K, V]{} // let the collector have what it held
	return s.deleted(ents[:n-1], h, depth), old, true, true, edit
}

// ownBranch returns b if the writer may mutate it, else a copy stamped with
// the writer epoch (sharing b's kids until they are written). The caller
// puts the copy in b's place, so b leaves the live tree (retireBranch).
func (m *Map[K, V]) ownBranch(b *mapBranch[K, V]) *mapBranch[K, V] {
	if m.owner.writable(b.epoch) {
		return b
	}
	c := m.newBranch()
	*c = *b
	c.epoch = m.owner.epoch
	c.owned = 0 // the copy shares every leaf until it writes it
	c.dirty, c.id, c.origin = 0, branchIDs.Add(1), b.id
	c.same = sameBounds{}
	m.retireBranch(b)
	return c
}

// Clear removes every entry in O(1); captured versions keep theirs.
func (m *Map[K, V]) Clear() {
	if m.len == 0 {
		return
	}
	m.owner.beginWrite()
	m.root, m.len = mapSlot[K, V]{}, 0
	m.owner.wrote()
	m.owner.endWrite()
}

// verify runs Check after a mutation: after every one under the
// invariants build tag, on a Budget under -race.
func (m *Map[K, V]) verify(op string) {
	if invariants.Enabled && m.checks.Due(m.len) {
		if err := m.Check(); err != nil {
			panic("cow: Map invariant broken after " + op + ": " + err.Error())
		}
	}
}
