package bench

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/cowstate/cowstate/cow"
)

// BenchmarkWriteFlag overwrites random keys of a map, and of a tree, small
// enough to stay in the core's cache: the write's own work, where the
// owner's concurrent-writes flag (cow.Owner, beginWrite and endWrite) is
// the largest share it can be. At size=1000000 (BenchmarkPut) cache misses
// dominate. To price the flag, run this benchmark on a commit without it
// and with it, side by side. The builtin map is beside as the floor.
func BenchmarkWriteFlag(b *testing.B) {
	const size = 1000
	keys := randomKeys(size)
	b.Run(fmt.Sprintf("size=%d/impl=cow", size), func(b *testing.B) {
		m := cow.NewMap[int64, int64](cow.NewOwner(), hashInt64, nil)
		for i, k := range keys {
			m.Set(k, int64(i))
		}
		p := newPicker(size)
		i := int64(0)
		for b.Loop() {
			m.Set(keys[p.next()], i)
			i++
		}
	})
	b.Run(fmt.Sprintf("size=%d/impl=cowtree", size), func(b *testing.B) {
		t := cow.NewTree[int64, int64](cow.NewOwner(), cmp.Compare[int64], nil)
		for i, k := range keys {
			t.Set(k, int64(i))
		}
		p := newPicker(size)
		i := int64(0)
		for b.Loop() {
			t.Set(keys[p.next()], i)
			i++
		}
	})
	b.Run(fmt.Sprintf("size=%d/impl=gomap", size), func(b *testing.B) {
		m := make(map[int64]int64, size)
		for i, k := range keys {
			m[k] = int64(i)
		}
		p := newPicker(size)
		i := int64(0)
		for b.Loop() {
			m[keys[p.next()]] = i
			i++
		}
	})
}
