package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
)

// deliveries records a CallbackSink's deliveries as "id:record,record".
type deliveries []string

func (d *deliveries) deliver(_ context.Context, id uint64, records [][]byte) error {
	var rs []string
	for _, r := range records {
		rs = append(rs, string(r))
	}
	*d = append(*d, fmt.Sprintf("%d:%s", id, strings.Join(rs, ",")))
	return nil
}

func callbackLoop(t *testing.T, st, staging Storage, d *deliveries) (*Loop[int], *CallbackSink) {
	t.Helper()
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	sink, err := NewCallbackSink(staging, d.deliver)
	if err != nil {
		t.Fatal(err)
	}
	loop, _, err := Resume[int](bg, b, st, LoopOptions{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	return loop, sink
}

// A CallbackSink delivers each checkpoint's records once it is durable,
// in id order, and none for a checkpoint without output; after a crash
// the staged records of the restored checkpoint are delivered again,
// those of a checkpoint that never became durable never.
func TestCallbackSink_DeliversDurableCheckpoints(t *testing.T) {
	st, staging := Memory(), Memory()
	var d deliveries
	loop, sink := callbackLoop(t, st, staging, &d)
	if err := sink.Emit([]byte("a")); err != nil {
		t.Fatal(err)
	}
	sink.Emit([]byte("b"))
	if len(d) != 0 {
		t.Fatalf("delivered before any checkpoint: %q", d)
	}
	loop.Sync(bg, 2)
	loop.Sync(bg, 2) // nothing emitted since
	sink.Emit([]byte("c"))
	loop.Sync(bg, 3)
	if want := []string{"1:a,b", "3:c"}; !slices.Equal(d, want) {
		t.Fatalf("delivered %q, want %q", d, want)
	}
	// Staged, then the process dies before the checkpoint is taken.
	sink.Emit([]byte("lost"))
	if err := sink.Prepare(bg, 4); err != nil {
		t.Fatal(err)
	}
	loop.Close()

	var d2 deliveries
	loop2, _ := callbackLoop(t, st, staging, &d2)
	defer loop2.Close()
	if len(d2) != 0 {
		t.Fatalf("the recovery delivered %q: checkpoint 4 was never durable", d2)
	}
	names, _ := staging.List(bg)
	if len(names) != 1 || !strings.HasPrefix(names[0], recoveredPrefix) {
		t.Fatalf("after the recovery the staging holds %q, want only the recovery marker", names)
	}
}

// A fenced owner's staged records are never delivered by a later owner,
// and a damaged staged object is an ErrCorrupt naming it, never a wrong
// delivery.
func TestCallbackSink_FencedOwnerAndDamage(t *testing.T) {
	st, staging := Memory(), Memory()
	var d deliveries
	old, oldSink := callbackLoop(t, st, staging, &d)
	defer old.Close()
	var d2 deliveries
	loop, _ := callbackLoop(t, st, staging, &d2) // fences old
	// The fenced owner stages a checkpoint after the takeover.
	oldSink.Emit([]byte("zombie"))
	if _, err := old.Sync(bg, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced owner's checkpoint: %v, want ErrFenced", err)
	}
	if _, err := loop.Sync(bg, 5); err != nil { // checkpoint 1 of the new owner
		t.Fatal(err)
	}
	loop.Close()
	var d3 deliveries
	loop3, _ := callbackLoop(t, st, staging, &d3)
	loop3.Close()
	if len(d2)+len(d3) != 0 {
		t.Fatalf("delivered %q and %q: the fenced owner's records", d2, d3)
	}

	w, _ := staging.Create(bg, stagedName(98, 7))
	w.Write([]byte("not a staged object at all"))
	w.Commit()
	sink, _ := NewCallbackSink(staging, d.deliver)
	err := sink.Recover(bg, Recovery{Checkpoint: 9, Epoch: 99})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), stagedName(98, 7)) {
		t.Fatalf("recovering over a damaged staged object: %v, want ErrCorrupt naming it", err)
	}
}

func TestCallbackSink_Misuse(t *testing.T) {
	if _, err := NewCallbackSink(nil, func(context.Context, uint64, [][]byte) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("no staging: %v, want ErrInvalid", err)
	}
	sink, _ := NewCallbackSink(Memory(), func(context.Context, uint64, [][]byte) error { return nil })
	if err := sink.Emit([]byte("x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Emit before recovery: %v, want ErrInvalid", err)
	}
}
