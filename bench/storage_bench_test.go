package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"github.com/cowstate/cowstate/statetable"
	_ "gocloud.dev/blob/s3blob" // s3://
)

// benchStorage opens a fresh store location of the kind named: a
// temporary directory, or a prefix of a bucket on a local S3 server
// (versitygw, started for the benchmark). S3 benchmarks are skipped, saying
// why, when no server binary is installed (scripts/install-s3-server).
func benchStorage(b *testing.B, kind string) checkpoint.Storage {
	switch kind {
	case "dir":
		st, err := checkpoint.Dir(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return st
	case "s3":
		if _, err := s3test.Binary(); err != nil {
			b.Skipf("no S3 server to benchmark against: %v", err)
		}
		srv := s3test.Start(b)
		srv.SetEnv(b)
		st, err := storeurl.Open(context.Background(), srv.URL("bench/"))
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	b.Fatalf("unknown storage %q", kind)
	return nil
}

// BenchmarkCheckpointStorage takes checkpoints of a value state of 1M
// entries into a real storage, a directory (fsync on) or S3 (a local
// server on loopback): changed=0.1pct lets the default policy take an
// incremental checkpoint after 0.1% of the keys changed, changed=full
// writes a full snapshot. An op is capture, write, commit and confirm (the
// writes between checkpoints are not timed); bytes/op is what the
// checkpoint wrote.
func BenchmarkCheckpointStorage(b *testing.B) {
	keys := randomKeys(1_000_000)
	for _, kind := range []string{"dir", "s3"} {
		for _, changed := range []string{"0.1pct", "full"} {
			b.Run(fmt.Sprintf("storage=%s/changed=%s", kind, changed), func(b *testing.B) {
				st := benchStorage(b, kind)
				c := newCounter(b, keys)
				cps, err := checkpoint.Open(context.Background(), c.b, st, checkpoint.Options{Policy: checkpoint.Policy{AlwaysFull: changed == "full"}})
				if err != nil {
					b.Fatal(err)
				}
				defer cps.Close()
				rng := rand.New(rand.NewPCG(5, 6))
				id := uint64(1)
				takeCheckpoint(b, cps, id)
				var written int64
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					id++
					changeShare(c, keys, 0.001, rng, int64(id))
					b.StartTimer()
					written += takeCheckpoint(b, cps, id)
				}
				b.ReportMetric(float64(written)/float64(b.N), "bytes/op")
			})
		}
	}
}

// BenchmarkRestoreRange restores a quarter of the key groups of a
// checkpoint of 1M entries (a full snapshot and a delta of 0.1%) from S3
// into a backend that owns that quarter, as one of four instances does
// after a rescale: it reads the segments' skeletons and that quarter's
// sections by ranged reads. Metrics: fetched-bytes/op, what the restore
// read, and checkpoint-bytes, the checkpoint's size.
func BenchmarkRestoreRange(b *testing.B) {
	keys := randomKeys(1_000_000)
	b.Run("share=1of4/storage=s3", func(b *testing.B) {
		st := benchStorage(b, "s3")
		c := newCounter(b, keys)
		cps, err := checkpoint.Open(context.Background(), c.b, st, checkpoint.Options{})
		if err != nil {
			b.Fatal(err)
		}
		takeCheckpoint(b, cps, 1)
		changeShare(c, keys, 0.001, rand.New(rand.NewPCG(7, 8)), 2)
		takeCheckpoint(b, cps, 2)
		m := cps.Checkpoints()[len(cps.Checkpoints())-1]
		if len(m.Segments) != 2 {
			b.Fatalf("checkpoint 2 has %d segments, want a full and a delta", len(m.Segments))
		}
		cps.Close()
		quarter := statetable.KeyGroupRange{First: 0, Last: c.b.MaxParallelism()/4 - 1}
		var fetched int64
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			be, err := cowstate.New(cowstate.Config{KeyGroups: &quarter})
			if err != nil {
				b.Fatal(err)
			}
			v, _ := cowstate.NamespacedValue(be, "count", statetable.Int64, statetable.Void, statetable.Int64, 0)
			counted := &segmentReads{Storage: st}
			_, err = checkpoint.RestoreFrom(context.Background(), be, checkpoint.Source{Storage: counted, ID: 2})
			if err != nil {
				b.Fatal(err)
			}
			n := counted.n.Load()
			if v.Count() < len(keys)/5 || v.Count() > len(keys)/3 {
				b.Fatalf("restored %d entries of %d for a quarter of the key groups", v.Count(), len(keys))
			}
			fetched += n
		}
		b.ReportMetric(float64(fetched)/float64(b.N), "fetched-bytes/op")
		b.ReportMetric(float64(m.Size()), "checkpoint-bytes")
	})
}

// segmentReads is a Storage that counts the bytes read from segments
// (snapshot and delta files), not from manifests: what a restore fetched
// of the checkpoint.
type segmentReads struct {
	checkpoint.Storage
	n atomic.Int64
}

func (s *segmentReads) Open(ctx context.Context, name string) (checkpoint.ObjectReader, error) {
	r, err := s.Storage.Open(ctx, name)
	if err != nil || !strings.HasSuffix(name, ".cws") && !strings.HasSuffix(name, ".cwd") {
		return r, err
	}
	return countedReader{r, &s.n}, nil
}

type countedReader struct {
	checkpoint.ObjectReader
	n *atomic.Int64
}

func (r countedReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.ObjectReader.ReadAt(p, off)
	r.n.Add(int64(n))
	return n, err
}
