package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"

	"github.com/cowstate/cowstate/statetable"
)

func TestSnapshot_RoundTrip(t *testing.T) {
	src := testjob.New(t, 64, nil)
	src.Load(500, 3)
	snap := src.B.Snapshot()
	file := testjob.Encode(t, snap, false)
	src.Load(100, 7) // later writes must not show in the file
	dst := testjob.New(t, 64, nil)
	dst.Restore(t, file)
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
		dst.Restore(t, f.buf.Bytes())
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
		dst.Restore(t, c.file)
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
			v, _ := cowstate.NamespacedValue(b, "v", statetable.Int64, statetable.Void, releasing, 0)
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

// TestWriteSnapshotAndRelease_RestoresTheCapture: a write that releases
// its snapshot as it goes restores to exactly the state frozen at the
// capture, while the writer updates every state meanwhile (in place
// behind the write, copying ahead of it); the live state stays its
// model, and a snapshot taken during the write keeps its own version.
// Run with -race: the write's reads and the writer's in-place writes
// must be ordered.
func TestWriteSnapshotAndRelease_RestoresTheCapture(t *testing.T) {
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprintf("second snapshot=%v", second), func(t *testing.T) {
			const n = 30000 // int64 keys: a trie of branches over many leaves
			j := testjob.New(t, 128, nil)
			counts, err := cowstate.Value[int64, int64](j.B, "counts")
			if err != nil {
				t.Fatal(err)
			}
			j.Load(3000, 3)
			model := map[int64]int64{}
			for k := range int64(n) {
				if err := counts.Put(k, k); err != nil {
					t.Fatal(err)
				}
				model[k] = k
			}
			snap := j.B.Snapshot()
			wantDump, frozen := j.Dump(t, snap), maps.Clone(model)

			var buf bytes.Buffer
			var writeErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				writeErr = cowstate.WriteSnapshotAndRelease(context.Background(), &buf, snap, nil)
			}()
			var (
				other     *cowstate.Snapshot
				otherDump []string
				otherWant map[int64]int64
				keys      = make([]int64, 256)
			)
			// Writes while the snapshot is written, and at least 20 rounds.
			for round := 0; round < 20 || !closed(done); round++ {
				for i := range keys {
					keys[i] = int64((round*7919 + i*104729) % n)
				}
				if err := counts.UpdateEach(keys, func(i int, old int64) int64 { return old*3 + int64(i) }); err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					model[k] = model[k]*3 + int64(i)
				}
				k := int64(round*31) % n
				if err := counts.Update(k, func(v int64) int64 { return v + 1 }); err != nil {
					t.Fatal(err)
				}
				model[k]++
				j.Load(300, round+5) // strings, lists, maps, reductions and timers
				if second && round == 3 {
					other = j.B.Snapshot()
					otherDump, otherWant = j.Dump(t, other), maps.Clone(model)
				}
			}
			<-done
			if writeErr != nil {
				t.Fatal(writeErr)
			}
			if !snap.Released() {
				t.Fatal("the snapshot is still live after WriteSnapshotAndRelease returned")
			}

			dst := testjob.New(t, 128, nil)
			restored, err := cowstate.Value[int64, int64](dst.B, "counts")
			if err != nil {
				t.Fatal(err)
			}
			dst.Restore(t, buf.Bytes())
			if got := dst.Dump(t, nil); !slices.Equal(got, wantDump) {
				t.Fatalf("the file restores %d lines of the other states, captured %d", len(got), len(wantDump))
			}
			for k, x := range frozen {
				if got, err := restored.Get(k); err != nil || got != x {
					t.Fatalf("restored key %d = %d, %v; captured %d", k, got, err, x)
				}
			}
			for k, x := range model {
				if got, err := counts.Get(k); err != nil || got != x {
					t.Fatalf("live key %d = %d, %v; want %d", k, got, err, x)
				}
			}
			if other != nil {
				if got := j.Dump(t, other); !slices.Equal(got, otherDump) {
					t.Fatal("a snapshot taken during the write changed")
				}
				for k, x := range otherWant {
					if got, err := counts.GetAt(other, k); err != nil || got != x {
						t.Fatalf("key %d in the snapshot taken during the write = %d, %v; want %d", k, got, err, x)
					}
				}
				other.Release()
			}
			if err := j.B.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// closed reports whether c is closed, without waiting.
func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
