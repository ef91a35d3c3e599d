package cow

import (
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// BenchmarkUpdateOwned measures a read-modify-write (UpdateHashed) of a
// present int64 key, at 1M and 10M entries, by the path it takes, on one
// map and the same memory, so that the paths compare side by side:
//
//   - path=live: a capture is live, and the writer has copied every
//     node since it was taken (ownAll), but the map is kept from finding
//     it out (ownedAll), so every update is written in place after
//     updateLive's walk, which checks the parent's epoch and the leaf's
//     owned bit: the path of a write to a leaf the writer has copied
//     while others are still shared;
//   - path=owned: the same, with the map let find out: after one walk of
//     the branches every update takes the no-capture path;
//   - path=none: the capture released, the same leaves written where a
//     lookup finds them, with no check;
//   - path=passed: a new capture live, whose reader has passed every leaf
//     (MapSnapshot.Passed, as a streamed checkpoint's reader does behind
//     it), so every update is written in place after the same walk and a
//     check of the frontier;
//   - path=walk: the walk and the write alone (seekLeaf from the root,
//     then the store), the floor under both.
//
// Each run measures the five in turn; to compare them side by side, run
// the test binary several times. Decisions 0043 and 0066 record what they
// measured.
func BenchmarkUpdateOwned(b *testing.B) {
	for _, size := range []int{1 << 20, 10_000_000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) { updateOwnedPaths(b, size) })
	}
}

// updateOwnedPaths runs BenchmarkUpdateOwned's five paths at one size.
func updateOwnedPaths(b *testing.B, size int) {
	u := updateOwnedSetup(b, size)
	inc := func(v int64, _ bool) int64 { return v + 1 }
	updates := func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := u.keys[i&(len(u.keys)-1)]
			u.m.UpdateHashed(u.hashes[k], k, inc, nil)
			i++
		}
	}
	c := u.m.owner.Capture()
	u.m.ownAll()
	u.m.owned = ownedAll{epoch: u.m.owner.epoch, left: math.MaxInt} // no walk
	b.Run("path=live", updates)
	u.m.owned.left = 0 // the next write walks, and finds every leaf copied
	b.Run("path=owned", updates)
	c.Release()
	b.Run("path=none", updates)
	s := u.m.Snapshot()
	s.Passed(^uint64(0))
	b.Run("path=passed", updates)
	s.Release()
	b.Run("path=walk", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := u.keys[i&(len(u.keys)-1)]
			if old, e, _, ok := seekLeaf(&u.m.root, u.hashes[k], u.hashes[k], k); ok {
				e.val = inc(old, true)
			}
			i++
		}
	})
}

type updateOwned struct {
	m      *Map[uint64, int64]
	hashes []uint64 // of key i
	keys   []uint64 // uniform, a power of two of them
}

// updateOwnedMaps keeps the benchmark's maps across -count runs: a 10M map
// takes seconds to build.
var updateOwnedMaps = map[int]*updateOwned{}

func updateOwnedSetup(b *testing.B, size int) *updateOwned {
	if u := updateOwnedMaps[size]; u != nil {
		return u
	}
	b.StopTimer()
	defer b.StartTimer()
	hash := func(k uint64) uint64 { return mix64(k) }
	u := &updateOwned{
		m:      NewMap[uint64, int64](NewOwner(), hash, Equal[int64]),
		hashes: make([]uint64, size),
		keys:   make([]uint64, 1<<20),
	}
	for k := range uint64(size) {
		u.hashes[k] = hash(k)
		u.m.SetHashed(u.hashes[k], k, 0, nil)
	}
	x := uint64(0x9E3779B97F4A7C15)
	for i := range u.keys {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		u.keys[i] = x % uint64(size)
	}
	updateOwnedMaps[size] = u
	return u
}

// mix64 is a 64-bit finalizer (splitmix64's): hashes spread over every
// bit, as the tables' xxhash does, without importing it into cow's tests.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// ownAll copies every node a live capture shares, as the first write
// under it to each leaf would: afterwards every present key's update
// takes the owned path. Writer goroutine only; a benchmark's helper.
func (m *Map[K, V]) ownAll() {
	if m.root.meta != metaBranch {
		return
	}
	m.owner.beginWrite()
	if b := m.ownSubtree((*mapBranch[K, V])(m.root.p)); unsafe.Pointer(b) != m.root.p {
		m.setRoot(branchSlot(b), true)
	}
	m.owner.endWrite()
}

func (m *Map[K, V]) ownSubtree(b *mapBranch[K, V]) *mapBranch[K, V] {
	b = m.ownBranch(b)
	for i := range b.kids {
		kid := b.kids[i]
		if kid.meta == metaBranch {
			old := (*mapBranch[K, V])(kid.p)
			if nb := m.ownSubtree(old); nb != old {
				b.setKid(i, branchSlot(nb), false, rebuilt)
			}
			continue
		}
		if !kid.isLeaf() || b.owned&(1<<i) != 0 {
			continue
		}
		ents := m.newLeaf(kid.ents(), kid.len(), kid.len())
		m.retireLeaf(kid)
		b.setKid(i, kid.withEntries(ents), true, rebuilt)
	}
	return b
}
