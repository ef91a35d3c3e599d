package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

func writeSnap(t testing.TB, snap *cowstate.Snapshot, savepoint bool) []byte {
	var buf bytes.Buffer
	write := cowstate.WriteSnapshot
	if savepoint {
		write = cowstate.WriteSavepoint
	}
	if err := write(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func restoreInto(t testing.TB, j *testjob.Job, file []byte) {
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.B.Restore(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshot_RoundTrip(t *testing.T) {
	src := testjob.New(t, 64, nil)
	src.Load(500, 3)
	snap := src.B.Snapshot()
	file := writeSnap(t, snap, false)
	src.Load(100, 7) // later writes must not show in the file
	dst := testjob.New(t, 64, nil)
	restoreInto(t, dst, file)
	if got, want := dst.Dump(t, nil), src.Dump(t, snap); !slices.Equal(got, want) {
		t.Fatalf("restored %d lines, want %d", len(got), len(want))
	}
	snap.Release()
	// The restored backend goes on like the original: same timer order.
	var a, b []string
	src2 := testjob.New(t, 64, nil)
	src2.Load(500, 3)
	for _, x := range []struct {
		j   *testjob.Job
		out *[]string
	}{{src2, &a}, {dst, &b}} {
		x.j.Timers.AdvanceWatermark(10, func(k, w string, ts int64) error {
			*x.out = append(*x.out, fmt.Sprint(ts, k, w))
			return nil
		})
	}
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Fatalf("restored backend fires %d timers differently from the original's %d", len(b), len(a))
	}
}

func TestSnapshot_Rescale(t *testing.T) {
	const maxPar = 128
	src := testjob.New(t, maxPar, nil)
	src.Load(800, 5)
	snap := src.B.Snapshot()
	defer snap.Release()
	file := writeSnap(t, snap, false)
	want := src.Dump(t, snap)
	for _, parts := range [][]statetable.KeyGroupRange{
		{statetable.RangeForOperator(maxPar, 2, 0), statetable.RangeForOperator(maxPar, 2, 1)},
		{statetable.RangeForOperator(maxPar, 4, 0), statetable.RangeForOperator(maxPar, 4, 1), statetable.RangeForOperator(maxPar, 4, 2), statetable.RangeForOperator(maxPar, 4, 3)},
		{{First: 0, Last: 9}, {First: 10, Last: 100}, {First: 101, Last: 127}, {First: 5, Last: 4}},
	} {
		var got []string
		for _, kgs := range parts {
			dst := testjob.New(t, maxPar, &kgs)
			restoreInto(t, dst, file)
			d := dst.Dump(t, nil)
			if kgs.Empty() && len(d) != 0 {
				t.Fatalf("a backend owning no key group restored %d lines", len(d))
			}
			got = append(got, d...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("rescaled into %v: %d lines, want %d", parts, len(got), len(want))
		}
	}
	// A rescaled backend's own snapshot restores into a wider one.
	half := statetable.RangeForOperator(maxPar, 2, 1)
	a := testjob.New(t, maxPar, &half)
	restoreInto(t, a, file)
	again := writeSnap(t, a.B.Snapshot(), false)
	b := testjob.New(t, maxPar, nil)
	restoreInto(t, b, again)
	if !slices.Equal(b.Dump(t, nil), a.Dump(t, nil)) {
		t.Fatal("snapshot of a rescaled backend does not restore to the same state")
	}
}

func TestSnapshot_Mismatch(t *testing.T) {
	src := testjob.New(t, 64, nil)
	src.Load(20, 1)
	file := writeSnap(t, src.B.Snapshot(), false)
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	other := testjob.New(t, 32, nil)
	if err := other.B.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other max parallelism: %v", err)
	}
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 64})
	cowstate.Value(b, "value", statetable.String, statetable.String, statetable.Int32, 0)
	if err := b.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other codec: %v", err)
	}
	b2, _ := cowstate.New(cowstate.Config{MaxParallelism: 64})
	cowstate.List(b2, "value", statetable.String, statetable.String, statetable.Int64)
	if err := b2.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other kind: %v", err)
	}
}

// TestSnapshot_SavepointCanonical: two different histories that end in the
// same logical state give byte-identical savepoints.
func TestSnapshot_SavepointCanonical(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.IntRange(0, 300), 1, 60, rapid.ID).Draw(rt, "keys")
		a, b := testjob.New(t, 32, nil), testjob.New(t, 32, nil)
		for _, k := range keys {
			a.Value.Put(fmt.Sprint(k), "w", int64(k))
			a.Map.Put(fmt.Sprint(k), "w", "x", 1)
			a.Timers.RegisterEventTime(fmt.Sprint(k), "w", int64(k%7))
		}
		// b: another order, junk written and removed, snapshots in between.
		extra := rapid.SliceOfN(rapid.IntRange(301, 600), 0, 40).Draw(rt, "extra")
		s1 := b.B.Snapshot()
		for _, k := range extra {
			b.Value.Put(fmt.Sprint(k), "w", 9)
			b.Map.Put(fmt.Sprint(k), "w", "y", 2)
			b.Timers.RegisterEventTime(fmt.Sprint(k), "w", 3)
		}
		for _, i := range rapid.Permutation(keys).Draw(rt, "order") {
			b.Map.Put(fmt.Sprint(i), "w", "tmp", 5)
			b.Map.Put(fmt.Sprint(i), "w", "x", 1)
			b.Map.Remove(fmt.Sprint(i), "w", "tmp")
			b.Value.Put(fmt.Sprint(i), "w", -1)
			b.Value.Put(fmt.Sprint(i), "w", int64(i))
			b.Timers.RegisterEventTime(fmt.Sprint(i), "w", int64(i%7))
		}
		s1.Release()
		for _, k := range extra {
			b.Value.Clear(fmt.Sprint(k), "w")
			b.Map.Clear(fmt.Sprint(k), "w")
			b.Timers.DeleteEventTime(fmt.Sprint(k), "w", 3)
		}
		b.B.Snapshot().Release()
		pa, pb := writeSnap(t, a.B.Snapshot(), true), writeSnap(t, b.B.Snapshot(), true)
		if !bytes.Equal(pa, pb) {
			rt.Fatalf("savepoints of the same logical state differ: %d and %d bytes", len(pa), len(pb))
		}
	})
}

// TestSnapshot_WriteWhileMutating writes many captures, each on its own
// goroutine, while the writer goes on; every file restores to exactly the
// state frozen at its capture. Run with -race.
func TestSnapshot_WriteWhileMutating(t *testing.T) {
	j := testjob.New(t, 32, nil)
	type inflight struct {
		w    *cowstate.Write
		buf  *bytes.Buffer
		want []string
	}
	var all []inflight
	for round := range 12 {
		j.Load(60, round+1)
		for i := range 30 {
			j.Value.Clear(fmt.Sprint("key-", (i*7+round)%60), "w0")
		}
		snap := j.B.Snapshot()
		want := j.Dump(t, snap)
		buf := &bytes.Buffer{}
		all = append(all, inflight{cowstate.StartWrite(context.Background(), buf, snap, false), buf, want})
	}
	for i, f := range all {
		if err := f.w.Wait(); err != nil {
			t.Fatal(err)
		}
		if _, entries := f.w.Progress(); entries == 0 {
			t.Fatalf("write %d reported no progress", i)
		}
		dst := testjob.New(t, 32, nil)
		restoreInto(t, dst, f.buf.Bytes())
		if got := dst.Dump(t, nil); !slices.Equal(got, f.want) {
			t.Fatalf("write %d restores %d lines, want %d", i, len(got), len(f.want))
		}
	}
	if n := j.B.LiveSnapshots(); n != 0 {
		t.Fatalf("%d snapshots still live after the writes", n)
	}
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.buf.Write(p)
}

func TestSnapshot_ParallelWrites(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(100, 1)
	first := j.B.Snapshot()
	want1 := j.Dump(t, first)
	slow := &blockingWriter{release: make(chan struct{})}
	w1 := cowstate.StartWrite(context.Background(), slow, first, false)
	j.Load(100, 2)
	second := j.B.Snapshot()
	want2 := j.Dump(t, second)
	var fast bytes.Buffer
	if err := cowstate.StartWrite(context.Background(), &fast, second, false).Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w1.Done():
		t.Fatal("the blocked write finished")
	default:
	}
	close(slow.release)
	if err := w1.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		file []byte
		want []string
	}{{slow.buf.Bytes(), want1}, {fast.Bytes(), want2}} {
		dst := testjob.New(t, 16, nil)
		restoreInto(t, dst, c.file)
		if !slices.Equal(dst.Dump(t, nil), c.want) {
			t.Fatalf("snapshot %d restored wrong", i+1)
		}
	}
}

func TestSnapshot_CancelStopsWrite(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(200, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := cowstate.StartWrite(ctx, io.Discard, j.B.Snapshot(), false)
	if err := w.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	if j.B.LiveSnapshots() != 0 {
		t.Fatal("a cancelled write kept its snapshot")
	}
}

// TestSnapshot_Corrupt: truncations and bit flips give ErrCorrupt (or a
// decode error), never a panic.
func TestSnapshot_Corrupt(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(40, 1)
	file := writeSnap(t, j.B.Snapshot(), false)
	try := func(b []byte) error {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		return testjob.New(t, 16, nil).B.Restore(context.Background(), r)
	}
	for n := 0; n < len(file); n++ {
		if err := try(file[:n]); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range len(file) {
		b := bytes.Clone(file)
		b[i] ^= 0x10
		err := try(b)
		if err == nil {
			t.Fatalf("bit flip at %d not detected", i)
		}
		if !errors.Is(err, snapshot.ErrCorrupt) && !errors.Is(err, snapshot.ErrMismatch) && !errors.Is(err, statetable.ErrDecode) {
			t.Fatalf("bit flip at %d: %v", i, err)
		}
	}
	huge := bytes.Clone(file)
	copy(huge[len(huge)-32:], []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // index offset 2^63
	if err := try(huge); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("huge index offset: %v", err)
	}
}

func FuzzSnapshotRestore(f *testing.F) {
	j := testjob.New(f, 16, nil)
	j.Load(30, 1)
	f.Add(writeSnap(f, j.B.Snapshot(), false))
	f.Add(writeSnap(f, j.B.Snapshot(), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		testjob.New(t, 16, nil).B.Restore(context.Background(), r) // must not panic
	})
}

// TestStartWrite_Released: writing a snapshot that was already released is
// an error matching ErrReleased, from Wait as from WriteSnapshot and
// WriteSavepoint, with nothing written; never a panic (which, on
// StartWrite's goroutine, killed the process).
func TestStartWrite_Released(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(50, 1)
	snap := j.B.Snapshot()
	snap.Release()
	ctx := context.Background()
	var buf bytes.Buffer
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"StartWrite", func() error { return cowstate.StartWrite(ctx, &buf, snap, false).Wait() }},
		{"StartWrite savepoint", func() error { return cowstate.StartWrite(ctx, &buf, snap, true).Wait() }},
		{"WriteSnapshot", func() error { return cowstate.WriteSnapshot(ctx, &buf, snap, nil) }},
		{"WriteSavepoint", func() error { return cowstate.WriteSavepoint(ctx, &buf, snap, nil) }},
	} {
		err := c.write()
		if !errors.Is(err, cowstate.ErrReleased) || !strings.Contains(err.Error(), "released before the write started") {
			t.Errorf("%s of a released snapshot: %v, want cowstate.ErrReleased, released before the write started", c.name, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s of a released snapshot wrote %d bytes", c.name, buf.Len())
		}
	}
	if n := j.B.LiveSnapshots(); n != 0 {
		t.Fatalf("%d snapshots live", n)
	}
}

// releasingWriter releases snap on its first Write: the header's.
type releasingWriter struct {
	snap *cowstate.Snapshot
	bytes.Buffer
}

func (w *releasingWriter) Write(p []byte) (int, error) {
	w.snap.Release()
	return w.Buffer.Write(p)
}

// TestStartWrite_ReleasedDuring: a snapshot released while it is being
// written (a misuse: another goroutine's Release, played here on the
// write's own goroutine, from the writer or from a value codec, to be
// deterministic) makes Wait return ErrReleased, wherever the write was:
// between sections (the source's check), in the middle of a state's
// entries (the next read panics in cow; the write's goroutine recovers it),
// or after the last read (the check at the end: what was read after the
// release may be another version's).
func TestStartWrite_ReleasedDuring(t *testing.T) {
	t.Run("at=header", func(t *testing.T) {
		j := testjob.New(t, 16, nil)
		j.Load(50, 1)
		w := &releasingWriter{snap: j.B.Snapshot()}
		mustReleasedDuring(t, cowstate.StartWrite(context.Background(), w, w.snap, false).Wait())
	})
	const n = 10_000
	for _, at := range []int{100, n} { // mid-scan, after the last read
		t.Run(fmt.Sprintf("at=entry-%d-of-%d", at, n), func(t *testing.T) {
			b, err := cowstate.New(cowstate.Config{MaxParallelism: 1}) // one key group: one scan of n entries
			if err != nil {
				t.Fatal(err)
			}
			var snap *cowstate.Snapshot
			calls := 0
			releasing := statetable.FuncCodec("releasing-int64", func(dst []byte, v int64) []byte {
				if calls++; calls == at {
					snap.Release()
				}
				return statetable.Int64.Append(dst, v)
			}, statetable.Int64.Decode)
			v, _ := cowstate.Value(b, "v", statetable.Int64, statetable.Void, releasing, 0)
			for i := range int64(n) {
				v.Put(i, statetable.VoidNamespace{}, i)
			}
			snap = b.Snapshot()
			mustReleasedDuring(t, cowstate.StartWrite(context.Background(), io.Discard, snap, false).Wait())
			if calls-at > 48 { // the rest of a leaf at most (cow.mapLeafMax): reads check per leaf
				t.Fatalf("the write encoded %d values after the release at %d", calls-at, at)
			}
			if b.LiveSnapshots() != 0 {
				t.Fatal("the write kept its snapshot")
			}
		})
	}
}

func mustReleasedDuring(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, cowstate.ErrReleased) || !strings.Contains(err.Error(), "released while being written") {
		t.Fatalf("write of a snapshot released meanwhile: %v, want cowstate.ErrReleased, released while being written", err)
	}
}
