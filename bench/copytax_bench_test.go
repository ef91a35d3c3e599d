package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// key16 and key32 are fixed-size map keys shaped like the state table's
// inline composite keys (a length byte, then the bytes): map entries of 32
// and 48 bytes with int64 values.
type (
	key16 struct {
		n uint8
		b [15]byte
	}
	key32 struct {
		n uint8
		b [31]byte
	}
)

// BenchmarkCopyTax separates the copy-on-write tax of puts from the cost of
// the goroutine that writes a snapshot. A cow.Map of 1M int64 keys held
// inline takes random overwrites: with no capture (mode=idle), with a
// capture taken every 40 ms and released 40 ms later by a timer, nothing
// reading it (mode=capture), and with each capture scanned whole on another
// goroutine and the next taken when the scan ends (mode=scan, the shape of
// BenchmarkPutWhileWriting). entry= is the size of a map entry, what a leaf
// copy copies.
func BenchmarkCopyTax(b *testing.B) {
	const size = 1_000_000
	b.Run("entry=32B", func(b *testing.B) { copyTax(b, size, inlineInt64[key16]) })
	b.Run("entry=48B", func(b *testing.B) { copyTax(b, size, inlineInt64[key32]) })
}

// inlineInt64 encodes x as the state table encodes an int64 key with no
// namespace (a length byte, 8 bytes) into an inline key: length, then bytes.
func inlineInt64[K key16 | key32](x int64) K {
	var k K
	b := unsafe.Slice((*byte)(unsafe.Pointer(&k)), unsafe.Sizeof(k))
	b[0], b[1] = 9, 8
	binary.LittleEndian.PutUint64(b[2:], uint64(x))
	return k
}

func copyTax[K comparable](b *testing.B, size int, key func(int64) K) {
	raw := randomKeys(size)
	keys := make([]K, size)
	hashes := make([]uint64, size)
	m := cow.NewMap(cow.NewOwner(), func(K) uint64 { panic("bench: hashed access only") }, cow.Equal[int64])
	for i, x := range raw {
		keys[i], hashes[i] = key(x), hashInt64(x)
		m.SetHashed(hashes[i], keys[i], int64(i), nil)
	}
	for _, mode := range []string{"idle", "capture", "scan"} {
		b.Run("mode="+mode, func(b *testing.B) {
			var (
				snap  *cow.MapSnapshot[K, int64]
				done  chan struct{}
				epoch int
			)
			p := newPicker(size)
			i := int64(0)
			runtime.GC() // not the setup's garbage
			for b.Loop() {
				if mode != "idle" {
					select {
					case <-done:
						snap.Release()
						done = nil
					default:
					}
					if done == nil {
						snap, done = m.Snapshot(), make(chan struct{})
						epoch++
						if mode == "capture" {
							time.AfterFunc(40*time.Millisecond, func() { close(done) })
						} else {
							go func(s *cow.MapSnapshot[K, int64], done chan struct{}) {
								var sum int64
								s.Scan(0, ^uint64(0), func(_ uint64, _ K, v int64) bool { sum += v; return true })
								runtime.KeepAlive(sum)
								close(done)
							}(snap, done)
						}
					}
				}
				j := p.next()
				m.SetHashed(hashes[j], keys[j], i, nil)
				i++
			}
			if done != nil {
				<-done
				snap.Release()
			}
			b.ReportMetric(float64(epoch), "captures")
		})
	}
}

// BenchmarkLeafCopy is what one copy-on-write of a leaf costs by itself:
// a random one of 33K arrays of 30 32-byte entries (a 1M-entry map's
// leaves, 32 MB, cold in cache) copied into fresh memory, the previous
// copy becoming garbage.
func BenchmarkLeafCopy(b *testing.B) {
	type entry struct{ hash, k1, k2, val uint64 }
	const leaves, perLeaf = 33_000, 30
	src := make([][]entry, leaves)
	for i := range src {
		src[i] = make([]entry, perLeaf)
	}
	copies := make([][]entry, leaves)
	r := rand.New(rand.NewPCG(5, 6))
	b.Run(fmt.Sprintf("bytes=%d", perLeaf*32), func(b *testing.B) {
		for b.Loop() {
			i := r.IntN(leaves)
			copies[i] = slices.Clone(src[i])
		}
	})
}
