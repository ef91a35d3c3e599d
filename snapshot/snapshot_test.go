// The format's tests: files written by the backend (package cowstate builds
// them from its snapshots), read back whole and by key group range,
// refused when they do not fit the backend, byte-identical for the same
// logical state (savepoints), and never a panic on damaged input.
package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// TestSnapshot_OpenBytes: a file read in place restores the state a copy
// of it does.
func TestSnapshot_OpenBytes(t *testing.T) {
	src := testjob.New(t, 16, nil)
	src.Load(400, 5)
	snap := src.B.Snapshot()
	defer snap.Release()
	file := testjob.Encode(t, snap, false)
	r, err := snapshot.OpenBytes(file)
	if err != nil {
		t.Fatal(err)
	}
	dst := testjob.New(t, 16, nil)
	if err := dst.B.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got, want := dst.Dump(t, nil), src.Dump(t, snap); !slices.Equal(got, want) {
		t.Fatalf("restored %d lines, want %d", len(got), len(want))
	}
}

func TestSnapshot_Rescale(t *testing.T) {
	const maxPar = 128
	src := testjob.New(t, maxPar, nil)
	src.Load(800, 5)
	snap := src.B.Snapshot()
	defer snap.Release()
	file := testjob.Encode(t, snap, false)
	want := src.Dump(t, snap)
	for _, parts := range [][]statetable.KeyGroupRange{
		{statetable.RangeForOperator(maxPar, 2, 0), statetable.RangeForOperator(maxPar, 2, 1)},
		{statetable.RangeForOperator(maxPar, 4, 0), statetable.RangeForOperator(maxPar, 4, 1), statetable.RangeForOperator(maxPar, 4, 2), statetable.RangeForOperator(maxPar, 4, 3)},
		{{First: 0, Last: 9}, {First: 10, Last: 100}, {First: 101, Last: 127}, {First: 5, Last: 4}},
	} {
		var got []string
		for _, kgs := range parts {
			dst := testjob.New(t, maxPar, &kgs)
			dst.Restore(t, file)
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
	a.Restore(t, file)
	again := testjob.Encode(t, a.B.Snapshot(), false)
	b := testjob.New(t, maxPar, nil)
	b.Restore(t, again)
	if !slices.Equal(b.Dump(t, nil), a.Dump(t, nil)) {
		t.Fatal("snapshot of a rescaled backend does not restore to the same state")
	}
}

func TestSnapshot_Mismatch(t *testing.T) {
	src := testjob.New(t, 64, nil)
	src.Load(20, 1)
	file := testjob.Encode(t, src.B.Snapshot(), false)
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	other := testjob.New(t, 32, nil)
	if err := other.B.RestoreSnapshot(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other max parallelism: %v", err)
	}
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 64})
	cowstate.NamespacedValue(b, "value", statetable.String, statetable.String, statetable.Int32, 0)
	if err := b.RestoreSnapshot(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("other codec: %v", err)
	}
	b2, _ := cowstate.New(cowstate.Config{MaxParallelism: 64})
	cowstate.NamespacedList(b2, "value", statetable.String, statetable.String, statetable.Int64)
	if err := b2.RestoreSnapshot(context.Background(), r); !errors.Is(err, snapshot.ErrMismatch) {
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
		pa, pb := testjob.Encode(t, a.B.Snapshot(), true), testjob.Encode(t, b.B.Snapshot(), true)
		if !bytes.Equal(pa, pb) {
			rt.Fatalf("savepoints of the same logical state differ: %d and %d bytes", len(pa), len(pb))
		}
	})
}

// TestSnapshot_Corrupt: truncations and bit flips give ErrCorrupt (or a
// decode error), never a panic, read through Open or OpenBytes alike.
func TestSnapshot_Corrupt(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(40, 1)
	file := testjob.Encode(t, j.B.Snapshot(), false)
	try := func(b []byte) error {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		err = testjob.New(t, 16, nil).B.RestoreSnapshot(context.Background(), r)
		rb, errBytes := snapshot.OpenBytes(bytes.Clone(b))
		if errBytes == nil {
			errBytes = testjob.New(t, 16, nil).B.RestoreSnapshot(context.Background(), rb)
		}
		if (err == nil) != (errBytes == nil) {
			t.Fatalf("Open and Restore: %v; OpenBytes and Restore: %v", err, errBytes)
		}
		return err
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
	f.Add(testjob.Encode(f, j.B.Snapshot(), false))
	f.Add(testjob.Encode(f, j.B.Snapshot(), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		testjob.New(t, 16, nil).B.RestoreSnapshot(context.Background(), r) // must not panic
	})
}

// TestSnapshot_WriteIsIndependentOfEarlierWrites: Write appends a key
// group's entries to a buffer an earlier write used (and grew), so the
// bytes of a small state are checked against themselves written first,
// after a larger state's write, and while others run on other goroutines.
func TestSnapshot_WriteIsIndependentOfEarlierWrites(t *testing.T) {
	small := testjob.New(t, 16, nil)
	small.Load(30, 2)
	smallSnap := small.B.Snapshot()
	defer smallSnap.Release()
	want := testjob.Encode(t, smallSnap, false)

	large := testjob.New(t, 16, nil)
	large.Load(2000, 5)
	largeSnap := large.B.Snapshot()
	defer largeSnap.Release()
	testjob.Encode(t, largeSnap, false)
	if got := testjob.Encode(t, smallSnap, false); !bytes.Equal(got, want) {
		t.Fatalf("after a larger write: %d bytes, differ from the first write's %d", len(got), len(want))
	}

	// Each writer its own capture: a capture is read by one goroutine.
	const writers = 4
	errs := make(chan error, writers)
	for i := range writers {
		snap := small.B.Snapshot()
		if i%2 == 1 {
			snap = large.B.Snapshot()
		}
		file := testjob.Encode(t, snap, false) // a capture's time is in its header
		go func() {
			defer snap.Release()
			for range 5 {
				var buf bytes.Buffer
				if err := cowstate.WriteSnapshot(context.Background(), &buf, snap, nil); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf.Bytes(), file) {
					errs <- fmt.Errorf("writer %d: %d bytes, want %d", i, buf.Len(), len(file))
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
