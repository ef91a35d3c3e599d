package bench

import (
	"encoding/binary"
	"maps"

	"github.com/benbjohnson/immutable"
	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/cow"
	gbtree "github.com/google/btree"
	tbtree "github.com/tidwall/btree"
)

// kv is what the map benchmarks drive: a key-value store of int64 that can
// take a snapshot (a version that later writes do not change) and give it
// back. The interface call costs the same for every implementation.
type kv interface {
	Put(k, v int64)
	Get(k int64) (int64, bool)
	Snapshot() // capture the current version, keep it until Release
	Release()  // give back the oldest kept snapshot, if any
	Len() int
}

// impls names the implementations in the order they are reported.
var impls = []string{"cow", "gomap", "googlebtree", "immutable", "tidwall"}

func newKV(impl string) kv {
	switch impl {
	case "cow":
		// A nil equal compares int64 values by their bytes, inline: what
		// the state table does for values with no pointers.
		return &cowKV{m: cow.NewIntKeyedMap[int64, int64](cow.NewOwner(), nil)}
	case "gomap":
		return &gomapKV{m: map[int64]int64{}}
	case "googlebtree":
		return &googleKV{t: gbtree.NewG(32, func(a, b pair) bool { return a.k < b.k })}
	case "immutable":
		return &immutableKV{m: immutable.NewMap[int64, int64](nil)}
	case "tidwall":
		return &tidwallKV{m: tbtree.NewMap[int64, int64](0)}
	}
	panic("bench: unknown impl " + impl)
}

// hashInt64 is the hash the state table uses for keys: xxhash over the
// key's encoded bytes.
func hashInt64(k int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(k))
	return xxhash.Sum64(b[:])
}

type cowKV struct {
	m     *cow.Map[int64, int64]
	snaps []*cow.MapSnapshot[int64, int64]
}

func (c *cowKV) Put(k, v int64)            { c.m.Set(k, v) }
func (c *cowKV) Get(k int64) (int64, bool) { return c.m.Get(k) }
func (c *cowKV) Snapshot()                 { c.snaps = append(c.snaps, c.m.Snapshot()) }
func (c *cowKV) Release()                  { c.snaps = releaseOldest(c.snaps, (*cow.MapSnapshot[int64, int64]).Release) }
func (c *cowKV) Len() int                  { return c.m.Len() }

// gomapKV snapshots by deep copy: the builtin map has no other way.
type gomapKV struct {
	m     map[int64]int64
	snaps []map[int64]int64
}

func (g *gomapKV) Put(k, v int64)            { g.m[k] = v }
func (g *gomapKV) Get(k int64) (int64, bool) { v, ok := g.m[k]; return v, ok }
func (g *gomapKV) Snapshot()                 { g.snaps = append(g.snaps, maps.Clone(g.m)) }
func (g *gomapKV) Release()                  { g.snaps = releaseOldest(g.snaps, nil) }
func (g *gomapKV) Len() int                  { return len(g.m) }

type pair struct{ k, v int64 }

// googleKV snapshots with BTreeG.Clone: lazy copy-on-write of both trees.
type googleKV struct {
	t     *gbtree.BTreeG[pair]
	snaps []*gbtree.BTreeG[pair]
}

func (g *googleKV) Put(k, v int64) { g.t.ReplaceOrInsert(pair{k, v}) }
func (g *googleKV) Get(k int64) (int64, bool) {
	p, ok := g.t.Get(pair{k: k})
	return p.v, ok
}
func (g *googleKV) Snapshot() { g.snaps = append(g.snaps, g.t.Clone()) }
func (g *googleKV) Release()  { g.snaps = releaseOldest(g.snaps, nil) }
func (g *googleKV) Len() int  { return g.t.Len() }

// immutableKV is a persistent HAMT: every version is a snapshot, so taking
// one is keeping a pointer, and every write copies its path.
type immutableKV struct {
	m     *immutable.Map[int64, int64]
	snaps []*immutable.Map[int64, int64]
}

func (i *immutableKV) Put(k, v int64)            { i.m = i.m.Set(k, v) }
func (i *immutableKV) Get(k int64) (int64, bool) { return i.m.Get(k) }
func (i *immutableKV) Snapshot()                 { i.snaps = append(i.snaps, i.m) }
func (i *immutableKV) Release()                  { i.snaps = releaseOldest(i.snaps, nil) }
func (i *immutableKV) Len() int                  { return i.m.Len() }

// tidwallKV snapshots with Map.Copy: lazy copy-on-write like google/btree.
type tidwallKV struct {
	m     *tbtree.Map[int64, int64]
	snaps []*tbtree.Map[int64, int64]
}

func (t *tidwallKV) Put(k, v int64)            { t.m.Set(k, v) }
func (t *tidwallKV) Get(k int64) (int64, bool) { return t.m.Get(k) }
func (t *tidwallKV) Snapshot()                 { t.snaps = append(t.snaps, t.m.Copy()) }
func (t *tidwallKV) Release()                  { t.snaps = releaseOldest(t.snaps, nil) }
func (t *tidwallKV) Len() int                  { return t.m.Len() }

// releaseOldest drops the oldest snapshot, calling release on it if given.
func releaseOldest[S any](snaps []S, release func(S)) []S {
	if len(snaps) == 0 {
		return snaps
	}
	if release != nil {
		release(snaps[0])
	}
	var zero S
	snaps[0] = zero
	return snaps[1:]
}
