package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// failingCtx is a context whose Err turns to context.Canceled after n
// calls: a restore cancelled part way, at a point the test chooses.
type failingCtx struct {
	context.Context
	n int
}

func (c *failingCtx) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestRestoreChains_AllOrNothing: a restore that fails part way, after
// entries went in (here: cancelled after a few key groups of the full
// snapshot, or in the delta after it), gives the backend back empty; a
// backend that holds state is refused before anything is read; chains over
// overlapping key groups are refused.
func TestRestoreChains_AllOrNothing(t *testing.T) {
	ctx := context.Background()
	src := testjob.New(t, 16, nil)
	src.Load(300, 1)
	s1 := src.B.Snapshot()
	full := testjob.Encode(t, s1, false)
	src.Load(300, 2)
	s2 := src.B.Snapshot()
	d, err := cowstate.Diff(s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	d.Base, d.Target = 1, 2
	want := src.Dump(t, s2)
	s1.Release()
	s2.Release()
	open := func() *snapshot.Reader {
		r, err := snapshot.Open(bytes.NewReader(full), int64(len(full)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dst := testjob.New(t, 16, nil)
	for _, n := range []int{3, 10, 16, 20, 25} { // 16 key groups in the full, 16 in the delta
		err := dst.B.RestoreChains(&failingCtx{ctx, n}, cowstate.Chain{Full: open(), FullID: 1, Deltas: []*delta.Delta{d}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled after %d checks: %v", n, err)
		}
		if !dst.B.Empty() {
			t.Fatalf("a restore cancelled after %d checks left %d lines", n, len(dst.Dump(t, nil)))
		}
	}
	// The same backend then restores the chain exactly.
	if err := dst.B.RestoreChains(ctx, cowstate.Chain{Full: open(), FullID: 1, Deltas: []*delta.Delta{d}}); err != nil {
		t.Fatal(err)
	}
	if got := dst.Dump(t, nil); !slices.Equal(got, want) {
		t.Fatalf("restored %d lines, want %d", len(got), len(want))
	}
	if err := dst.B.RestoreChains(ctx, cowstate.Chain{Full: open(), FullID: 1}); !errors.Is(err, cowstate.ErrNotEmpty) {
		t.Fatalf("restore into a backend that holds state: %v", err)
	}
	two := testjob.New(t, 16, &statetable.KeyGroupRange{First: 4, Last: 9})
	if err := two.B.RestoreChains(ctx, cowstate.Chain{Full: open(), FullID: 1}, cowstate.Chain{Full: open(), FullID: 1}); !errors.Is(err, snapshot.ErrMismatch) || !two.B.Empty() {
		t.Fatalf("two chains over the same key groups: %v", err)
	}
	if err := two.B.RestoreChains(ctx, cowstate.Chain{Full: open(), FullID: 7, Deltas: []*delta.Delta{d}}); !errors.Is(err, delta.ErrWrongBase) || !two.B.Empty() {
		t.Fatalf("a delta that does not follow: %v", err)
	}
}
