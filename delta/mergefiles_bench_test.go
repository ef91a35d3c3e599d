package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// BenchmarkMergeFiles merges an older delta of older entries with a newer
// one of 1000, both puts of 8-byte cells under 8-byte keys spread over
// 128 key groups, as a checkpoint chain of a count state holds them; an
// op is one MergeFiles to io.Discard, and ns/entry divides it by the
// entries read.
func BenchmarkMergeFiles(b *testing.B) {
	meta := snapshot.Meta{MaxParallelism: 128, KeyGroups: statetable.KeyGroupRange{First: 0, Last: 127},
		States: []statetable.StateInfo{{Name: "count", Kind: statetable.KindValue, Codec: []string{"int64", "void", "int64"}}}}
	file := func(rng *rand.Rand, base uint64, n int) []byte {
		d := &Delta{Base: base, Target: base + 1, Meta: meta}
		for range n {
			k := binary.BigEndian.AppendUint64(nil, rng.Uint64())
			d.group(int(k[0]) % 128).ops("count")[string(k)] = &entryOp{put: true, cell: k}
		}
		var buf bytes.Buffer
		if err := Write(context.Background(), &buf, d, nil); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, older := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("older=%d/newer=1000", older), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			old, recent := file(rng, 1, older), file(rng, 2, 1000)
			for b.Loop() {
				r1, err := OpenBytes(old)
				if err != nil {
					b.Fatal(err)
				}
				r2, err := OpenBytes(recent)
				if err != nil {
					b.Fatal(err)
				}
				if err := MergeFiles(context.Background(), io.Discard, r1, r2); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(older+1000), "ns/entry")
		})
	}
}
