package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// changeShare writes new values to share of c's keys, chosen at random.
func changeShare(c *counter, keys []int64, share float64, rng *rand.Rand, salt int64) {
	n := int(float64(len(keys)) * share)
	for range n {
		c.v.Put(keys[rng.IntN(len(keys))], void, salt)
	}
}

// takeCheckpoint checkpoints, waits and confirms; it returns the bytes the
// checkpoint wrote (its last segment).
func takeCheckpoint(b *testing.B, cps *checkpoint.Store, id uint64) int64 {
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
					policy := checkpoint.Policy{AlwaysFull: mode == "full"}
					cps, err := checkpoint.Open(context.Background(), c.b, checkpoint.Memory(), checkpoint.Options{Policy: policy})
					if err != nil {
						b.Fatal(err)
					}
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
				st := checkpoint.Memory()
				cps, err := checkpoint.Open(context.Background(), c.b, st, checkpoint.Options{})
				if err != nil {
					b.Fatal(err)
				}
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
					v, _ := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
					ms, err := checkpoint.RestoreFrom(context.Background(), be, checkpoint.Source{Storage: st})
					if err != nil {
						b.Fatal(err)
					}
					m := ms[0]
					if v.Count() != want || m.ID != uint64(chain+1) {
						b.Fatalf("restored checkpoint %d with %d entries, want %d with %d", m.ID, v.Count(), chain+1, want)
					}
				}
			})
		}
	}
}
