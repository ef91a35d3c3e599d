package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// writeDelta encodes d and reads it back through the file format.
func writeDelta(t testing.TB, d *delta.Delta) []byte {
	var buf bytes.Buffer
	if err := delta.Write(context.Background(), &buf, d, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readDelta(t testing.TB, file []byte, kgs statetable.KeyGroupRange) *delta.Delta {
	r, err := delta.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Read(context.Background(), kgs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDelta_ChainRestoresEveryCheckpoint: a random history checkpointed as
// a full snapshot followed by deltas (through the file format); restoring
// the full and applying the chain up to any checkpoint, one delta at a
// time or merged, into all key groups or two halves, gives exactly the
// state frozen at that checkpoint.
func TestDelta_ChainRestoresEveryCheckpoint(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxPar = 16
		src := testjob.New(t, maxPar, nil)
		var full []byte
		var files [][]byte  // files[i]: delta from checkpoint i to i+1
		var want [][]string // want[i]: dump of checkpoint i
		var prev *cowstate.Snapshot
		checkpoints := rapid.IntRange(1, 6).Draw(rt, "checkpoints")
		for id := range checkpoints {
			for range rapid.IntRange(0, 40).Draw(rt, "steps") {
				src.RandomStep(rt)
			}
			snap := src.B.Snapshot()
			want = append(want, src.Dump(t, snap))
			if prev == nil {
				full = testjob.Encode(t, snap, false)
			} else {
				d, err := cowstate.Diff(prev, snap)
				if err != nil {
					rt.Fatal(err)
				}
				d.Base, d.Target = uint64(id-1), uint64(id)
				files = append(files, writeDelta(t, d))
				prev.Release()
			}
			prev = snap
		}
		prev.Release()

		at := rapid.IntRange(0, checkpoints-1).Draw(rt, "restore at")
		merged := rapid.Bool().Draw(rt, "merged")
		ranges := []statetable.KeyGroupRange{{First: 0, Last: maxPar - 1}}
		if rapid.Bool().Draw(rt, "rescale") {
			ranges = []statetable.KeyGroupRange{{First: 0, Last: 6}, {First: 7, Last: maxPar - 1}}
		}
		var got []string
		for _, kgs := range ranges {
			dst := testjob.New(t, maxPar, &kgs)
			dst.Restore(t, full)
			var chain []*delta.Delta
			for _, f := range files[:at] {
				chain = append(chain, readDelta(t, f, kgs))
			}
			if merged && len(chain) > 1 {
				m, err := delta.Merge(chain...)
				if err != nil {
					rt.Fatal(err)
				}
				chain = []*delta.Delta{readDelta(t, writeDelta(t, m), kgs)}
			}
			base := uint64(0)
			for _, d := range chain {
				if err := dst.B.ApplyDelta(context.Background(), base, d); err != nil {
					rt.Fatalf("apply %d->%d: %v", d.Base, d.Target, err)
				}
				base = d.Target
			}
			got = append(got, dst.Dump(t, nil)...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want[at]) {
			rt.Fatalf("checkpoint %d restored (merged %v, %d ranges):\n got %q\nwant %q", at, merged, len(ranges), got, want[at])
		}
	})
}

// TestDelta_SmallChangeSmallDelta: one append to a long list and one put
// into a big map make a delta of a few dozen bytes.
func TestDelta_SmallChangeSmallDelta(t *testing.T) {
	j := testjob.New(t, 16, nil)
	for i := range 2000 {
		j.List.Add("k", "n", int64(i))
		j.Map.Put("k", "n", fmt.Sprint(i), int64(i))
	}
	prev := j.B.Snapshot()
	defer prev.Release()
	full := testjob.Encode(t, prev, false)
	j.List.Add("k", "n", -1)
	j.Map.Put("k", "n", "x", 1)
	next := j.B.Snapshot()
	defer next.Release()
	d, err := cowstate.Diff(prev, next)
	if err != nil {
		t.Fatal(err)
	}
	file := writeDelta(t, d)
	if len(file) > len(full)/100 {
		t.Fatalf("delta of 2 changed elements is %d bytes; the full snapshot is %d", len(file), len(full))
	}
}

func TestDelta_WrongBase(t *testing.T) {
	src := testjob.New(t, 16, nil)
	src.Load(50, 1)
	s1 := src.B.Snapshot()
	defer s1.Release()
	src.Load(60, 2)
	s2 := src.B.Snapshot()
	defer s2.Release()
	d, err := cowstate.Diff(s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	d.Base, d.Target = 1, 2
	dst := testjob.New(t, 16, nil)
	if err := dst.B.ApplyDelta(context.Background(), 7, d); !errors.Is(err, delta.ErrWrongBase) {
		t.Fatalf("apply to checkpoint 7: %v", err)
	}
	d2 := *d
	d2.Base, d2.Target = 5, 6
	if _, err := delta.Merge(d, &d2); !errors.Is(err, delta.ErrWrongBase) {
		t.Fatalf("merge of a gap: %v", err)
	}
	other := testjob.New(t, 32, nil)
	if err := other.B.ApplyDelta(context.Background(), 1, d); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("apply to another max parallelism: %v", err)
	}
	if _, err := cowstate.Diff(s1, other.B.Snapshot()); !errors.Is(err, delta.ErrMismatch) {
		t.Fatalf("diff of two backends: %v", err)
	}
}

func deltaFile(t testing.TB) []byte {
	j := testjob.New(t, 16, nil)
	j.Load(40, 1)
	for i := range 20 {
		j.List.Add("key-1", "w1", int64(i))
	}
	s1 := j.B.Snapshot()
	defer s1.Release()
	j.Load(50, 2)
	j.List.Add("key-1", "w1", 99)
	j.Timers.DeleteEventTime("key-3", "w0", 3)
	s2 := j.B.Snapshot()
	defer s2.Release()
	d, err := cowstate.Diff(s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	d.Base, d.Target = 1, 2
	return writeDelta(t, d)
}

// TestDelta_Corrupt: every truncation and every bit flip of a delta file is
// an error (ErrCorrupt, or a decode error the checksums cannot see), never
// a panic.
func TestDelta_Corrupt(t *testing.T) {
	file := deltaFile(t)
	try := func(b []byte) error {
		r, err := delta.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		_, err = r.Read(context.Background(), statetable.KeyGroupRange{First: 0, Last: 15})
		return err
	}
	if err := try(file); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(file); n++ {
		if err := try(file[:n]); !errors.Is(err, delta.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range len(file) {
		b := bytes.Clone(file)
		b[i] ^= 0x10
		if err := try(b); !errors.Is(err, delta.ErrCorrupt) {
			t.Fatalf("bit flip at %d: %v", i, err)
		}
	}
}

func FuzzDeltaRead(f *testing.F) {
	f.Add(deltaFile(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := delta.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, delta.ErrCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		d, err := r.Read(context.Background(), statetable.KeyGroupRange{First: 0, Last: 15})
		if err != nil {
			return
		}
		dst := testjob.New(t, 16, nil)
		dst.B.ApplyDelta(context.Background(), d.Base, d) // must not panic
	})
}

// TestDelta_WriteDiffMatchesDiff: the streaming WriteDiff reads back as the
// same delta as Diff (compared through Write's canonical encoding).
func TestDelta_WriteDiffMatchesDiff(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := testjob.New(t, 16, nil)
		for range rapid.IntRange(0, 40).Draw(rt, "before") {
			src.RandomStep(rt)
		}
		prev := src.B.Snapshot()
		defer prev.Release()
		for range rapid.IntRange(0, 40).Draw(rt, "after") {
			src.RandomStep(rt)
		}
		next := src.B.Snapshot()
		defer next.Release()
		d, err := cowstate.Diff(prev, next)
		if err != nil {
			rt.Fatal(err)
		}
		d.Base, d.Target = 4, 5
		var streamed bytes.Buffer
		n, ok, err := cowstate.WriteDiff(context.Background(), &streamed, prev, next, 4, 5, -1)
		if err != nil || !ok {
			rt.Fatal(err, ok)
		}
		entries, timers := d.Changes()
		if n != entries+timers {
			rt.Fatalf("WriteDiff counted %d changes, cowstate.Diff %d+%d", n, entries, timers)
		}
		all := statetable.KeyGroupRange{First: 0, Last: 15}
		if a, b := writeDelta(t, d), writeDelta(t, readDelta(t, streamed.Bytes(), all)); !bytes.Equal(a, b) {
			rt.Fatalf("WriteDiff's delta differs from cowstate.Diff's: %d and %d bytes", len(a), len(b))
		}
		if n > 0 {
			var none bytes.Buffer
			if _, ok, err := cowstate.WriteDiff(context.Background(), &none, prev, next, 4, 5, n-1); ok || err != nil || none.Len() != 0 {
				rt.Fatalf("limit %d of %d changes: ok %v, err %v, %d bytes written", n-1, n, ok, err, none.Len())
			}
		}
	})
}
