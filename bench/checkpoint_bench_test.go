package bench

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// memStorage is a cowstate.Storage in memory, so the checkpoint benchmarks
// measure the engine, not the disk.
type memStorage struct {
	mu    sync.Mutex
	files map[string]*bytes.Buffer
}

func newMemStorage() *memStorage { return &memStorage{files: map[string]*bytes.Buffer{}} }

type memFile struct{ *bytes.Buffer }

func (memFile) Sync() error  { return nil }
func (memFile) Close() error { return nil }

type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

func (s *memStorage) Create(name string) (cowstate.StorageFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &bytes.Buffer{}
	s.files[name] = b
	return memFile{b}, nil
}

func (s *memStorage) Open(name string) (cowstate.StorageReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return memReader{bytes.NewReader(b.Bytes())}, nil
}

func (s *memStorage) Rename(from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[from]
	if !ok {
		return fs.ErrNotExist
	}
	delete(s.files, from)
	s.files[to] = b
	return nil
}

func (s *memStorage) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[name]; !ok {
		return fs.ErrNotExist
	}
	delete(s.files, name)
	return nil
}

func (s *memStorage) List() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.files)), nil
}

func (s *memStorage) SyncDir() error { return nil }

// changeShare writes new values to share of c's keys, chosen at random.
func changeShare(c *counter, keys []int64, share float64, rng *rand.Rand, salt int64) {
	n := int(float64(len(keys)) * share)
	for range n {
		c.v.Put(keys[rng.IntN(len(keys))], void, salt)
	}
}

// takeCheckpoint checkpoints, waits and confirms; it returns the bytes the
// checkpoint wrote (its last segment).
func takeCheckpoint(b *testing.B, cps *cowstate.Checkpoints, id uint64) int64 {
	cp, err := cps.Checkpoint(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	if err := cp.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := cps.Confirm(id); err != nil {
		b.Fatal(err)
	}
	m := cp.Manifest()
	return m.Segments[len(m.Segments)-1].Size
}

// BenchmarkCheckpoint takes a checkpoint of a value state of size entries
// after changed of them were written (the writes are not timed): mode=full
// writes a full snapshot every time, mode=incremental lets the default
// policy choose (a delta from the previous checkpoint, merged or full when
// the chain grows). An op is capture, write (to memory), commit and
// confirm; bytes/op is what the checkpoint wrote.
func BenchmarkCheckpoint(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		for _, changed := range []struct {
			name  string
			share float64
		}{{"0.1pct", 0.001}, {"1pct", 0.01}, {"10pct", 0.1}} {
			for _, mode := range []string{"incremental", "full"} {
				b.Run(fmt.Sprintf("size=%d/changed=%s/mode=%s", size, changed.name, mode), func(b *testing.B) {
					c := newCounter(b, keys)
					policy := cowstate.CheckpointPolicy{AlwaysFull: mode == "full"}
					cps := cowstate.NewCheckpoints(c.b, newMemStorage(), cowstate.CheckpointOptions{Policy: policy})
					rng := rand.New(rand.NewPCG(1, 2))
					id := uint64(1)
					takeCheckpoint(b, cps, id) // the first is full in both modes
					var written int64
					b.ResetTimer()
					for b.Loop() {
						b.StopTimer()
						id++
						changeShare(c, keys, changed.share, rng, int64(id))
						b.StartTimer()
						written += takeCheckpoint(b, cps, id)
					}
					b.ReportMetric(float64(written)/float64(b.N), "bytes/op")
				})
			}
		}
		keys = nil
	}
}

// BenchmarkRestoreChain restores the newest checkpoint of a store holding a
// full checkpoint of size entries followed by chain checkpoints of 0.1%
// changes each, with the default policy (so chains longer than its limit
// are merged): an op is a restore into a fresh backend.
func BenchmarkRestoreChain(b *testing.B) {
	for _, size := range []int{1_000_000} {
		keys := randomKeys(size)
		for _, chain := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("size=%d/chain=%d", size, chain), func(b *testing.B) {
				c := newCounter(b, keys)
				st := newMemStorage()
				cps := cowstate.NewCheckpoints(c.b, st, cowstate.CheckpointOptions{})
				rng := rand.New(rand.NewPCG(3, 4))
				takeCheckpoint(b, cps, 1)
				for i := range chain {
					changeShare(c, keys, 0.001, rng, int64(i))
					takeCheckpoint(b, cps, uint64(i+2))
				}
				want := c.v.Count()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					be := newBackend(b)
					v, _ := cowstate.Value(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
					m, err := cowstate.NewCheckpoints(be, st, cowstate.CheckpointOptions{}).Restore(context.Background(), 0)
					if err != nil {
						b.Fatal(err)
					}
					if v.Count() != want || m.ID != uint64(chain+1) {
						b.Fatalf("restored checkpoint %d with %d entries, want %d with %d", m.ID, v.Count(), chain+1, want)
					}
				}
			})
		}
	}
}
