package contract_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

func newContract(t *testing.T, cfg cowstate.Config) contract.Backend {
	t.Helper()
	c, err := contract.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOf_Errors: what the contract calls errors is one on the adapter, and
// matches the sentinel that names it.
func TestOf_Errors(t *testing.T) {
	c := newContract(t, cowstate.Config{MaxParallelism: 4})
	if err := c.RegisterState("v", statetable.KindValue); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterState("v", statetable.KindValue); err != nil {
		t.Fatalf("registering again with the same kind: %v", err)
	}
	if err := c.RegisterState("v", statetable.KindList); !errors.Is(err, statetable.ErrStateMismatch) {
		t.Fatalf("registering again with another kind: %v, want ErrStateMismatch", err)
	}
	if err := c.RegisterState("x", statetable.Kind(99)); !errors.Is(err, contract.ErrKind) {
		t.Fatalf("registering an unknown kind: %v, want ErrKind", err)
	}
	if err := c.Add("v", "k", "", "a"); !errors.Is(err, contract.ErrKind) {
		t.Fatalf("Add to a value state: %v, want ErrKind", err)
	}
	if err := c.Put("nope", "k", "", "a"); !errors.Is(err, statetable.ErrUnknownState) {
		t.Fatalf("Put to an unregistered state: %v, want ErrUnknownState", err)
	}
	if _, err := c.RegisterTimer("nope", timerqueue.EventTime, "k", "", 1); !errors.Is(err, contract.ErrUnknownTimerService) {
		t.Fatalf("RegisterTimer of an unregistered service: %v, want ErrUnknownTimerService", err)
	} else if want := `contract: timer service not registered: "nope"`; err.Error() != want {
		t.Fatalf("error text %q, want %q", err, want)
	}
	if _, err := c.AdvanceWatermark("nope", 1, nil); !errors.Is(err, contract.ErrUnknownTimerService) {
		t.Fatalf("AdvanceWatermark of an unregistered service: %v", err)
	}
	if _, err := c.TimerEntries("nope", timerqueue.EventTime); !errors.Is(err, contract.ErrUnknownTimerService) {
		t.Fatalf("TimerEntries of an unregistered service: %v", err)
	}
}

// TestOf_SameStateAsTyped: a contract state is the typed state with String
// codecs: what one writes the other reads, and the fixed functions show.
func TestOf_SameStateAsTyped(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := contract.Of(b)
	for name, kind := range map[string]statetable.Kind{"r": statetable.KindReducing, "a": statetable.KindAggregating} {
		if err := c.RegisterState(name, kind); err != nil {
			t.Fatal(err)
		}
	}
	typed, err := cowstate.NamespacedReducing(b, "r", statetable.String, statetable.String, statetable.String, contract.Reduce)
	if err != nil {
		t.Fatalf("the typed state of a contract state: %v", err)
	}
	for _, v := range []string{"x", "y", "z"} {
		if err := c.Add("r", "k", "w", v); err != nil {
			t.Fatal(err)
		}
		if err := c.Add("a", "k", "w", v); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := typed.Get("k", "w"); err != nil || !ok || v != "((x+y)+z)" {
		t.Fatalf("typed Get = %q, %v, %v; want ((x+y)+z)", v, ok, err)
	}
	if v, _, _ := c.Get("a", "k", "w"); v != "=(((0+x)+y)+z)" {
		t.Fatalf("aggregating Get = %q, want =(((0+x)+y)+z)", v)
	}
	c.Add("a", "k", "w2", "q")
	if err := c.MergeNamespaces("a", "k", "w", []string{"w2"}); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := c.Get("a", "k", "w"); v != "=((((0+x)+y)+z)|(0+q))" {
		t.Fatalf("merged aggregating Get = %q", v)
	}
}

// TestOf_View: a view holds what was there at capture, is read on another
// goroutine while the writer goes on, and writes a snapshot that restores.
func TestOf_View(t *testing.T) {
	c := newContract(t, cowstate.Config{MaxParallelism: 8})
	c.RegisterState("l", statetable.KindList)
	c.RegisterTimerService("t")
	for _, k := range []string{"a", "b", "c"} {
		c.Add("l", k, "", "1")
		c.RegisterTimer("t", timerqueue.EventTime, k, "", 5)
	}
	v := c.Capture()
	defer v.Release()
	done := make(chan error)
	go func() {
		es, err := v.StateEntries("l")
		if err == nil && len(es) != 3 {
			err = errors.New("view does not hold the 3 entries captured")
		}
		done <- err
	}()
	c.ClearState("l", "a", "")
	c.Add("l", "b", "", "2")
	c.AdvanceWatermark("t", 10, func(string, string, int64) error { return nil })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	es, _ := v.StateEntries("l")
	for _, e := range es {
		if !slices.Equal(e.List, []string{"1"}) {
			t.Fatalf("view entry %+v, want list [1]", e)
		}
	}
	if ts, _ := v.TimerEntries("t", timerqueue.EventTime); len(ts) != 3 {
		t.Fatalf("view timers %+v, want the 3 captured", ts)
	}
	c.RegisterState("late", statetable.KindValue)
	if _, err := v.StateEntries("late"); !errors.Is(err, statetable.ErrUnknownState) {
		t.Fatalf("a state registered after capture, read from the view: %v", err)
	}
	var buf bytes.Buffer
	if err := v.WriteSnapshot(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	r := newContract(t, cowstate.Config{MaxParallelism: 8})
	r.RegisterState("l", statetable.KindList)
	r.RegisterTimerService("t")
	if err := r.RestoreSnapshot(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatal(err)
	}
	if es, _ := r.StateEntries("l"); len(es) != 3 {
		t.Fatalf("restored %d entries, want 3", len(es))
	}
	if ts, _ := r.TimerEntries("t", timerqueue.EventTime); len(ts) != 3 {
		t.Fatalf("restored %d timers, want 3", len(ts))
	}
}
