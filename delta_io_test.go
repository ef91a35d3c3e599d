package cowstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

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

// randomStep applies one random write to j: every state kind, lists long
// enough to be trees, namespace merges, timers registered, deleted and
// fired (the firing callback writes state and registers timers).
func randomStep(rt *rapid.T, j *job) {
	k := fmt.Sprint("k", rapid.IntRange(0, 15).Draw(rt, "key"))
	ns := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "ns")
	v := rapid.Int64Range(0, 20).Draw(rt, "v")
	switch rapid.IntRange(0, 11).Draw(rt, "op") {
	case 0:
		j.value.Put(k, ns, v)
	case 1:
		j.value.Clear(k, ns)
	case 2, 3:
		j.list.AddAll(k, ns, slices.Values([]int64{v, v + 1, v + 2}))
	case 4:
		j.list.Update(k, ns, slices.Values(make([]int64, v)))
	case 5:
		j.mp.Put(k, ns, fmt.Sprint(v%7), v)
	case 6:
		j.mp.Remove(k, ns, fmt.Sprint(v%7))
	case 7:
		j.reduce.Add(k, ns, v)
	case 8:
		j.list.MergeNamespaces(k, "a", "b")
	case 9:
		j.timers.RegisterEventTime(k, ns, v)
		j.timers.RegisterProcessingTime(k, ns, v)
	case 10:
		j.timers.DeleteEventTime(k, ns, v)
	case 11:
		j.timers.AdvanceWatermark(j.timers.CurrentWatermark()+v/4, func(key, ns string, ts int64) error {
			j.value.Put(key, ns, ts)
			_, err := j.timers.RegisterEventTime(key, ns, ts+3)
			return err
		})
	}
}

// TestDelta_ChainRestoresEveryCheckpoint: a random history checkpointed as
// a full snapshot followed by deltas (through the file format); restoring
// the full and applying the chain up to any checkpoint, one delta at a
// time or merged, into all key groups or two halves, gives exactly the
// state frozen at that checkpoint.
func TestDelta_ChainRestoresEveryCheckpoint(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxPar = 16
		src := newJob(t, maxPar, nil)
		var full []byte
		var files [][]byte  // files[i]: delta from checkpoint i to i+1
		var want [][]string // want[i]: dump of checkpoint i
		var prev *Snapshot
		checkpoints := rapid.IntRange(1, 6).Draw(rt, "checkpoints")
		for id := range checkpoints {
			for range rapid.IntRange(0, 40).Draw(rt, "steps") {
				randomStep(rt, src)
			}
			snap := src.b.Snapshot()
			want = append(want, src.dump(t, snap))
			if prev == nil {
				full = writeSnap(t, snap, false)
			} else {
				d, err := Diff(prev, snap)
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
			dst := newJob(t, maxPar, &kgs)
			restoreInto(t, dst, full)
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
				if err := dst.b.ApplyDelta(context.Background(), base, d); err != nil {
					rt.Fatalf("apply %d->%d: %v", d.Base, d.Target, err)
				}
				base = d.Target
			}
			got = append(got, dst.dump(t, nil)...)
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
	j := newJob(t, 16, nil)
	for i := range 2000 {
		j.list.Add("k", "n", int64(i))
		j.mp.Put("k", "n", fmt.Sprint(i), int64(i))
	}
	prev := j.b.Snapshot()
	defer prev.Release()
	full := writeSnap(t, prev, false)
	j.list.Add("k", "n", -1)
	j.mp.Put("k", "n", "x", 1)
	next := j.b.Snapshot()
	defer next.Release()
	d, err := Diff(prev, next)
	if err != nil {
		t.Fatal(err)
	}
	file := writeDelta(t, d)
	if len(file) > len(full)/100 {
		t.Fatalf("delta of 2 changed elements is %d bytes; the full snapshot is %d", len(file), len(full))
	}
}

func TestDelta_WrongBase(t *testing.T) {
	src := newJob(t, 16, nil)
	src.load(50, 1)
	s1 := src.b.Snapshot()
	defer s1.Release()
	src.load(60, 2)
	s2 := src.b.Snapshot()
	defer s2.Release()
	d, err := Diff(s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	d.Base, d.Target = 1, 2
	dst := newJob(t, 16, nil)
	if err := dst.b.ApplyDelta(context.Background(), 7, d); !errors.Is(err, delta.ErrWrongBase) {
		t.Fatalf("apply to checkpoint 7: %v", err)
	}
	d2 := *d
	d2.Base, d2.Target = 5, 6
	if _, err := delta.Merge(d, &d2); !errors.Is(err, delta.ErrWrongBase) {
		t.Fatalf("merge of a gap: %v", err)
	}
	other := newJob(t, 32, nil)
	if err := other.b.ApplyDelta(context.Background(), 1, d); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("apply to another max parallelism: %v", err)
	}
	if _, err := Diff(s1, other.b.Snapshot()); !errors.Is(err, delta.ErrMismatch) {
		t.Fatalf("diff of two backends: %v", err)
	}
}

func deltaFile(t testing.TB) []byte {
	j := newJob(t, 16, nil)
	j.load(40, 1)
	for i := range 20 {
		j.list.Add("key-1", "w1", int64(i))
	}
	s1 := j.b.Snapshot()
	defer s1.Release()
	j.load(50, 2)
	j.list.Add("key-1", "w1", 99)
	j.timers.DeleteEventTime("key-3", "w0", 3)
	s2 := j.b.Snapshot()
	defer s2.Release()
	d, err := Diff(s1, s2)
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
		dst := newJob(t, 16, nil)
		dst.b.ApplyDelta(context.Background(), d.Base, d) // must not panic
	})
}

// TestDelta_WriteDiffMatchesDiff: the streaming WriteDiff reads back as the
// same delta as Diff (compared through Write's canonical encoding).
func TestDelta_WriteDiffMatchesDiff(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := newJob(t, 16, nil)
		for range rapid.IntRange(0, 40).Draw(rt, "before") {
			randomStep(rt, src)
		}
		prev := src.b.Snapshot()
		defer prev.Release()
		for range rapid.IntRange(0, 40).Draw(rt, "after") {
			randomStep(rt, src)
		}
		next := src.b.Snapshot()
		defer next.Release()
		d, err := Diff(prev, next)
		if err != nil {
			rt.Fatal(err)
		}
		d.Base, d.Target = 4, 5
		var streamed bytes.Buffer
		n, ok, err := delta.WriteDiff(context.Background(), &streamed, prev.deltaVersion(), next.deltaVersion(), 4, 5, -1)
		if err != nil || !ok {
			rt.Fatal(err, ok)
		}
		entries, timers := d.Changes()
		if n != entries+timers {
			rt.Fatalf("WriteDiff counted %d changes, Diff %d+%d", n, entries, timers)
		}
		all := statetable.KeyGroupRange{First: 0, Last: 15}
		if a, b := writeDelta(t, d), writeDelta(t, readDelta(t, streamed.Bytes(), all)); !bytes.Equal(a, b) {
			rt.Fatalf("WriteDiff's delta differs from Diff's: %d and %d bytes", len(a), len(b))
		}
		if n > 0 {
			var none bytes.Buffer
			if _, ok, err := delta.WriteDiff(context.Background(), &none, prev.deltaVersion(), next.deltaVersion(), 4, 5, n-1); ok || err != nil || none.Len() != 0 {
				rt.Fatalf("limit %d of %d changes: ok %v, err %v, %d bytes written", n-1, n, ok, err, none.Len())
			}
		}
	})
}
