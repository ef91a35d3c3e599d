package cowstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// job is a backend with one state of every kind and a timer service, all
// keyed by string with string namespaces.
type job struct {
	b      *Backend
	value  *statetable.ValueState[string, string, int64]
	list   *statetable.ListState[string, string, int64]
	mp     *statetable.MapState[string, string, string, int64]
	reduce *statetable.ReducingState[string, string, int64]
	timers *TimerService[string, string]
}

func newJob(t testing.TB, maxPar int, kgs *statetable.KeyGroupRange) *job {
	b, err := New(Config{MaxParallelism: maxPar, KeyGroups: kgs, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	j := &job{b: b}
	j.value, _ = Value(b, "value", statetable.String, statetable.String, statetable.Int64, 0)
	j.list, _ = List(b, "list", statetable.String, statetable.String, statetable.Int64)
	j.mp, _ = Map(b, "map", statetable.String, statetable.String, statetable.String, statetable.Int64)
	j.reduce, _ = Reducing(b, "reduce", statetable.String, statetable.String, statetable.Int64, func(a, b int64) int64 { return a + b })
	j.timers, _ = Timers(b, "timers", statetable.String, statetable.String)
	return j
}

// dump renders everything a job holds (live, or in snap) as sorted lines:
// what a restore must reproduce exactly.
func (j *job) dump(t testing.TB, snap *Snapshot) []string {
	var out []string
	if snap == nil {
		snap = j.b.Snapshot()
		defer snap.Release()
	}
	st := snap.State()
	if err := st.KeyGroupEntries("value", -1, nil); !errors.Is(err, statetable.ErrConfig) {
		t.Fatalf("key group -1: %v", err)
	}
	for g := range j.b.MaxParallelism() {
		for _, name := range []string{"value", "list", "map", "reduce"} {
			st.KeyGroupEntries(name, g, func(key, cell []byte) bool {
				out = append(out, fmt.Sprintf("%s %d %x %x", name, g, key, cell))
				return true
			})
		}
	}
	for tm, err := range j.timers.EventTimersAt(snap) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("event %d %s %s", tm.Timestamp, tm.Key, tm.Namespace))
	}
	for tm, err := range j.timers.ProcessingTimersAt(snap) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("proc %d %s %s", tm.Timestamp, tm.Key, tm.Namespace))
	}
	slices.Sort(out)
	return out
}

// load writes a deterministic workload of n keys into j (keys j does not
// own are skipped).
func (j *job) load(n int, salt int) {
	for i := range n {
		k := fmt.Sprint("key-", i)
		w := fmt.Sprint("w", i%3)
		if j.value.Put(k, w, int64(i*salt)) != nil {
			continue
		}
		j.list.AddAll(k, w, slices.Values([]int64{int64(i), int64(salt)}))
		j.mp.Put(k, w, fmt.Sprint("u", i%5), int64(i))
		j.reduce.Add(k, w, int64(salt))
		j.timers.RegisterEventTime(k, w, int64(i%17))
		j.timers.RegisterProcessingTime(k, w, int64(i%5))
	}
}

func writeSnap(t testing.TB, snap *Snapshot, savepoint bool) []byte {
	var buf bytes.Buffer
	write := WriteSnapshot
	if savepoint {
		write = WriteSavepoint
	}
	if err := write(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func restoreInto(t testing.TB, j *job, file []byte) {
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.b.Restore(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshot_RoundTrip(t *testing.T) {
	src := newJob(t, 64, nil)
	src.load(500, 3)
	snap := src.b.Snapshot()
	file := writeSnap(t, snap, false)
	src.load(100, 7) // later writes must not show in the file
	dst := newJob(t, 64, nil)
	restoreInto(t, dst, file)
	if got, want := dst.dump(t, nil), src.dump(t, snap); !slices.Equal(got, want) {
		t.Fatalf("restored %d lines, want %d", len(got), len(want))
	}
	snap.Release()
	// The restored backend goes on like the original: same timer order.
	var a, b []string
	src2 := newJob(t, 64, nil)
	src2.load(500, 3)
	for _, x := range []struct {
		j   *job
		out *[]string
	}{{src2, &a}, {dst, &b}} {
		x.j.timers.AdvanceWatermark(10, func(k, w string, ts int64) error {
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
	src := newJob(t, maxPar, nil)
	src.load(800, 5)
	snap := src.b.Snapshot()
	defer snap.Release()
	file := writeSnap(t, snap, false)
	want := src.dump(t, snap)
	for _, parts := range [][]statetable.KeyGroupRange{
		{statetable.RangeForOperator(maxPar, 2, 0), statetable.RangeForOperator(maxPar, 2, 1)},
		{statetable.RangeForOperator(maxPar, 4, 0), statetable.RangeForOperator(maxPar, 4, 1), statetable.RangeForOperator(maxPar, 4, 2), statetable.RangeForOperator(maxPar, 4, 3)},
		{{First: 0, Last: 9}, {First: 10, Last: 100}, {First: 101, Last: 127}, {First: 5, Last: 4}},
	} {
		var got []string
		for _, kgs := range parts {
			dst := newJob(t, maxPar, &kgs)
			restoreInto(t, dst, file)
			d := dst.dump(t, nil)
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
	a := newJob(t, maxPar, &half)
	restoreInto(t, a, file)
	again := writeSnap(t, a.b.Snapshot(), false)
	b := newJob(t, maxPar, nil)
	restoreInto(t, b, again)
	if !slices.Equal(b.dump(t, nil), a.dump(t, nil)) {
		t.Fatal("snapshot of a rescaled backend does not restore to the same state")
	}
}

func TestSnapshot_Mismatch(t *testing.T) {
	src := newJob(t, 64, nil)
	src.load(20, 1)
	file := writeSnap(t, src.b.Snapshot(), false)
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	other := newJob(t, 32, nil)
	if err := other.b.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other max parallelism: %v", err)
	}
	b, _ := New(Config{MaxParallelism: 64})
	Value(b, "value", statetable.String, statetable.String, statetable.Int32, 0)
	if err := b.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other codec: %v", err)
	}
	b2, _ := New(Config{MaxParallelism: 64})
	List(b2, "value", statetable.String, statetable.String, statetable.Int64)
	if err := b2.Restore(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other kind: %v", err)
	}
}

// TestSnapshot_SavepointCanonical: two different histories that end in the
// same logical state give byte-identical savepoints.
func TestSnapshot_SavepointCanonical(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.IntRange(0, 300), 1, 60, rapid.ID).Draw(rt, "keys")
		a, b := newJob(t, 32, nil), newJob(t, 32, nil)
		for _, k := range keys {
			a.value.Put(fmt.Sprint(k), "w", int64(k))
			a.mp.Put(fmt.Sprint(k), "w", "x", 1)
			a.timers.RegisterEventTime(fmt.Sprint(k), "w", int64(k%7))
		}
		// b: another order, junk written and removed, snapshots in between.
		extra := rapid.SliceOfN(rapid.IntRange(301, 600), 0, 40).Draw(rt, "extra")
		s1 := b.b.Snapshot()
		for _, k := range extra {
			b.value.Put(fmt.Sprint(k), "w", 9)
			b.mp.Put(fmt.Sprint(k), "w", "y", 2)
			b.timers.RegisterEventTime(fmt.Sprint(k), "w", 3)
		}
		for _, i := range rapid.Permutation(keys).Draw(rt, "order") {
			b.mp.Put(fmt.Sprint(i), "w", "tmp", 5)
			b.mp.Put(fmt.Sprint(i), "w", "x", 1)
			b.mp.Remove(fmt.Sprint(i), "w", "tmp")
			b.value.Put(fmt.Sprint(i), "w", -1)
			b.value.Put(fmt.Sprint(i), "w", int64(i))
			b.timers.RegisterEventTime(fmt.Sprint(i), "w", int64(i%7))
		}
		s1.Release()
		for _, k := range extra {
			b.value.Clear(fmt.Sprint(k), "w")
			b.mp.Clear(fmt.Sprint(k), "w")
			b.timers.DeleteEventTime(fmt.Sprint(k), "w", 3)
		}
		b.b.Snapshot().Release()
		pa, pb := writeSnap(t, a.b.Snapshot(), true), writeSnap(t, b.b.Snapshot(), true)
		if !bytes.Equal(pa, pb) {
			rt.Fatalf("savepoints of the same logical state differ: %d and %d bytes", len(pa), len(pb))
		}
	})
}

// TestSnapshot_WriteWhileMutating writes many captures, each on its own
// goroutine, while the writer goes on; every file restores to exactly the
// state frozen at its capture. Run with -race.
func TestSnapshot_WriteWhileMutating(t *testing.T) {
	j := newJob(t, 32, nil)
	type inflight struct {
		w    *Write
		buf  *bytes.Buffer
		want []string
	}
	var all []inflight
	for round := range 12 {
		j.load(60, round+1)
		for i := range 30 {
			j.value.Clear(fmt.Sprint("key-", (i*7+round)%60), "w0")
		}
		snap := j.b.Snapshot()
		want := j.dump(t, snap)
		buf := &bytes.Buffer{}
		all = append(all, inflight{StartWrite(context.Background(), buf, snap, false), buf, want})
	}
	for i, f := range all {
		if err := f.w.Wait(); err != nil {
			t.Fatal(err)
		}
		if _, entries := f.w.Progress(); entries == 0 {
			t.Fatalf("write %d reported no progress", i)
		}
		dst := newJob(t, 32, nil)
		restoreInto(t, dst, f.buf.Bytes())
		if got := dst.dump(t, nil); !slices.Equal(got, f.want) {
			t.Fatalf("write %d restores %d lines, want %d", i, len(got), len(f.want))
		}
	}
	if n := j.b.LiveSnapshots(); n != 0 {
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
	j := newJob(t, 16, nil)
	j.load(100, 1)
	first := j.b.Snapshot()
	want1 := j.dump(t, first)
	slow := &blockingWriter{release: make(chan struct{})}
	w1 := StartWrite(context.Background(), slow, first, false)
	j.load(100, 2)
	second := j.b.Snapshot()
	want2 := j.dump(t, second)
	var fast bytes.Buffer
	if err := StartWrite(context.Background(), &fast, second, false).Wait(); err != nil {
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
		dst := newJob(t, 16, nil)
		restoreInto(t, dst, c.file)
		if !slices.Equal(dst.dump(t, nil), c.want) {
			t.Fatalf("snapshot %d restored wrong", i+1)
		}
	}
}

func TestSnapshot_CancelStopsWrite(t *testing.T) {
	j := newJob(t, 16, nil)
	j.load(200, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := StartWrite(ctx, io.Discard, j.b.Snapshot(), false)
	if err := w.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v", err)
	}
	if j.b.LiveSnapshots() != 0 {
		t.Fatal("a cancelled write kept its snapshot")
	}
}

// TestSnapshot_Corrupt: truncations and bit flips give ErrCorrupt (or a
// decode error), never a panic.
func TestSnapshot_Corrupt(t *testing.T) {
	j := newJob(t, 16, nil)
	j.load(40, 1)
	file := writeSnap(t, j.b.Snapshot(), false)
	try := func(b []byte) error {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		return newJob(t, 16, nil).b.Restore(context.Background(), r)
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
	j := newJob(f, 16, nil)
	j.load(30, 1)
	f.Add(writeSnap(f, j.b.Snapshot(), false))
	f.Add(writeSnap(f, j.b.Snapshot(), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		newJob(t, 16, nil).b.Restore(context.Background(), r) // must not panic
	})
}

// TestStartWrite_Released: writing a snapshot that was already released is
// an error matching ErrReleased, from Wait as from WriteSnapshot and
// WriteSavepoint, with nothing written; never a panic (which, on
// StartWrite's goroutine, killed the process).
func TestStartWrite_Released(t *testing.T) {
	j := newJob(t, 16, nil)
	j.load(50, 1)
	snap := j.b.Snapshot()
	snap.Release()
	ctx := context.Background()
	var buf bytes.Buffer
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"StartWrite", func() error { return StartWrite(ctx, &buf, snap, false).Wait() }},
		{"StartWrite savepoint", func() error { return StartWrite(ctx, &buf, snap, true).Wait() }},
		{"WriteSnapshot", func() error { return WriteSnapshot(ctx, &buf, snap, nil) }},
		{"WriteSavepoint", func() error { return WriteSavepoint(ctx, &buf, snap, nil) }},
	} {
		err := c.write()
		if !errors.Is(err, ErrReleased) || !strings.Contains(err.Error(), "released before the write started") {
			t.Errorf("%s of a released snapshot: %v, want ErrReleased, released before the write started", c.name, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s of a released snapshot wrote %d bytes", c.name, buf.Len())
		}
	}
	if n := j.b.LiveSnapshots(); n != 0 {
		t.Fatalf("%d snapshots live", n)
	}
}

// releasingWriter releases snap on its first Write: the header's.
type releasingWriter struct {
	snap *Snapshot
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
		j := newJob(t, 16, nil)
		j.load(50, 1)
		w := &releasingWriter{snap: j.b.Snapshot()}
		mustReleasedDuring(t, StartWrite(context.Background(), w, w.snap, false).Wait())
	})
	const n = 10_000
	for _, at := range []int{100, n} { // mid-scan, after the last read
		t.Run(fmt.Sprintf("at=entry-%d-of-%d", at, n), func(t *testing.T) {
			b, err := New(Config{MaxParallelism: 1}) // one key group: one scan of n entries
			if err != nil {
				t.Fatal(err)
			}
			var snap *Snapshot
			calls := 0
			releasing := statetable.FuncCodec("releasing-int64", func(dst []byte, v int64) []byte {
				if calls++; calls == at {
					snap.Release()
				}
				return statetable.Int64.Append(dst, v)
			}, statetable.Int64.Decode)
			v, _ := Value(b, "v", statetable.Int64, statetable.Void, releasing, 0)
			for i := range int64(n) {
				v.Put(i, statetable.VoidNamespace{}, i)
			}
			snap = b.Snapshot()
			mustReleasedDuring(t, StartWrite(context.Background(), io.Discard, snap, false).Wait())
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
	if !errors.Is(err, ErrReleased) || !strings.Contains(err.Error(), "released while being written") {
		t.Fatalf("write of a snapshot released meanwhile: %v, want ErrReleased, released while being written", err)
	}
}
