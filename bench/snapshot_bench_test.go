package bench

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// counter is the job the snapshot benchmarks snapshot: one value state of
// size int64 keys.
type counter struct {
	b *cowstate.Backend
	v *statetable.ValueState[int64, statetable.VoidNamespace, int64]
}

func newCounter(b *testing.B, keys []int64) *counter {
	be := newBackend(b)
	v, err := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i, k := range keys {
		v.Put(k, void, int64(i))
	}
	return &counter{be, v}
}

// gobState is the naive backend's snapshot: the map of encoded keys to
// values, serialized with encoding/gob.
func gobState(keys []int64) map[string]int64 {
	m := make(map[string]int64, len(keys))
	var buf []byte
	for i, k := range keys {
		buf = statetable.Int64.Append(buf[:0], k)
		m[string(buf)] = int64(i)
	}
	return m
}

type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkSnapshotWrite serializes a full snapshot of size entries (1M
// and 10M: at 10M the write is what a checkpoint's snapshot is live for
// while a job writes on, and the leaves it reads no longer fit in cache).
func BenchmarkSnapshotWrite(b *testing.B) {
	for _, size := range []int{1_000_000, 10_000_000} {
		keys := randomKeys(size)
		b.Run(fmt.Sprintf("size=%d/impl=cowstate", size), func(b *testing.B) {
			c := newCounter(b, keys)
			b.ReportAllocs()
			var out countingDiscard
			for b.Loop() {
				snap := c.b.Snapshot()
				if err := cowstate.WriteSnapshot(context.Background(), &out, snap, nil); err != nil {
					b.Fatal(err)
				}
				snap.Release()
			}
			b.ReportMetric(float64(out.n)/float64(b.N), "bytes/op")
		})
		b.Run(fmt.Sprintf("size=%d/impl=gob", size), func(b *testing.B) {
			m := gobState(keys)
			b.ReportAllocs()
			var out countingDiscard
			for b.Loop() {
				if err := gob.NewEncoder(&out).Encode(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.n)/float64(b.N), "bytes/op")
		})
	}
}

// BenchmarkRestore restores a full snapshot of size entries into an empty
// backend.
func BenchmarkRestore(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		b.Run(fmt.Sprintf("size=%d/impl=cowstate", size), func(b *testing.B) {
			c := newCounter(b, keys)
			var file bytes.Buffer
			snap := c.b.Snapshot()
			if err := cowstate.WriteSnapshot(context.Background(), &file, snap, nil); err != nil {
				b.Fatal(err)
			}
			snap.Release()
			data := file.Bytes()
			b.ReportAllocs()
			for b.Loop() {
				be := newBackend(b)
				v, _ := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
				r, err := snapshot.Open(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					b.Fatal(err)
				}
				if err := be.RestoreSnapshot(context.Background(), r); err != nil {
					b.Fatal(err)
				}
				if v.Count() != size {
					b.Fatalf("restored %d entries, want %d", v.Count(), size)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%d/impl=gob", size), func(b *testing.B) {
			var file bytes.Buffer
			if err := gob.NewEncoder(&file).Encode(gobState(keys)); err != nil {
				b.Fatal(err)
			}
			data := file.Bytes()
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]int64
				if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
					b.Fatal(err)
				}
				if len(m) != size {
					b.Fatalf("decoded %d entries", len(m))
				}
			}
		})
	}
}

// BenchmarkPutWhileWriting measures the writer's put rate while a snapshot
// of size entries is being written on another goroutine (impl=cowstate),
// against the same puts with no write going on (impl=idle). Each op is one
// put; a new snapshot write starts whenever the previous one ends.
func BenchmarkPutWhileWriting(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		for _, impl := range []string{"idle", "cowstate"} {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				c := newCounter(b, keys)
				p := newPicker(size)
				var w *cowstate.Write
				writes := 0
				i := int64(0)
				for b.Loop() {
					if impl == "cowstate" && (w == nil || isDone(w)) {
						if w != nil {
							if err := w.Wait(); err != nil {
								b.Fatal(err)
							}
						}
						w = cowstate.StartWrite(context.Background(), io.Discard, c.b.Snapshot(), false)
						writes++
					}
					c.v.Put(keys[p.next()], void, i)
					i++
				}
				if w != nil {
					w.Wait()
				}
				b.ReportMetric(float64(writes), "writes")
			})
		}
	}
}

func isDone(w *cowstate.Write) bool {
	select {
	case <-w.Done():
		return true
	default:
		return false
	}
}
