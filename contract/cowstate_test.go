package contract_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
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

// TestSchema_Reads: which schema reads which is statetable.Struct's rule
// on the value structs, and a key or namespace codec never changes.
func TestSchema_Reads(t *testing.T) {
	v := map[string]contract.ValueSchema{}
	for _, s := range contract.ValueSchemas {
		v[s.String()] = s
	}
	schema := func(id string) contract.Schema {
		s, ok := v[id]
		if !ok {
			t.Fatalf("no value schema %s among %v", id, contract.ValueSchemas)
		}
		return contract.Schema{Value: s}
	}
	for _, c := range []struct {
		cur, old string
		want     error // nil, statetable.ErrIncompatible
	}{
		{"struct{V string}", "struct{V string}", nil},
		{"struct{V string;N int32}", "struct{V string}", nil},                                            // N added
		{"struct{V string}", "struct{N int64;V string;F float32}", nil},                                  // N and F removed
		{"struct{N int64;V string;F float32}", "struct{V string;N int32}", nil},                          // N widened, F added, reordered
		{"struct{V string;F float64}", "struct{N int64;V string;F float32}", nil},                        // F widened
		{"struct{V string;N int32}", "struct{V string;N int16}", nil},                                    // N widened
		{"struct{V string;N int32}", "struct{N int64;V string;F float32}", statetable.ErrIncompatible},   // narrowed
		{"struct{N int64;V string;F float32}", "struct{V string;F float64}", statetable.ErrIncompatible}, // narrowed
		{"struct{V string;N string}", "struct{V string;N int32}", statetable.ErrIncompatible},            // another kind
		{"struct{V string;N int16}", "struct{V string;N string}", statetable.ErrIncompatible},            // another kind
	} {
		err := schema(c.cur).Reads(schema(c.old))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s reads %s: %v, want %v", c.cur, c.old, err, c.want)
		}
	}
	s := schema("struct{V string}")
	for _, other := range []contract.Schema{{Value: s.Value, Key: 1}, {Value: s.Value, Namespace: 1}} {
		if err := other.Reads(s); !errors.Is(err, statetable.ErrStateMismatch) || errors.Is(err, statetable.ErrIncompatible) {
			t.Errorf("%v reads %v: %v, want ErrStateMismatch (keys and namespaces never migrate)", other, s, err)
		}
	}
}

// TestOf_SchemaUpgrade: a snapshot of states of one schema restores into
// states of a schema that reads it, every kind's values migrated; one of a
// schema that cannot read it, or of another key codec, is refused and
// leaves nothing behind.
func TestOf_SchemaUpgrade(t *testing.T) {
	v1 := contract.Schema{Value: contract.ValueSchemas[1]} // struct{V string;N int32}
	v2 := contract.Schema{Value: contract.ValueSchemas[2]} // struct{N int64;V string;F float32}
	kinds := []statetable.Kind{statetable.KindValue, statetable.KindList, statetable.KindMap, statetable.KindReducing, statetable.KindAggregating}
	register := func(c contract.Backend, s contract.Schema) {
		for _, k := range kinds {
			if err := c.(contract.SchemaBackend).RegisterStateSchema(k.String(), k, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	src := newContract(t, cowstate.Config{MaxParallelism: 8})
	register(src, v1)
	if err := src.(contract.SchemaBackend).RegisterStateSchema("value", statetable.KindValue, v2); !errors.Is(err, statetable.ErrStateMismatch) {
		t.Fatalf("registering again with another schema: %v, want ErrStateMismatch", err)
	}
	if err := src.(contract.SchemaBackend).RegisterStateSchema("other", statetable.KindValue, contract.Schema{}); !errors.Is(err, statetable.ErrConfig) {
		t.Fatalf("registering with the zero schema: %v, want ErrConfig", err)
	}
	for _, k := range []string{"a", "bb"} {
		for _, err := range []error{
			src.Put("value", k, "", "v-"+k),
			src.Add("list", k, "ns", "x"),
			src.Add("list", k, "ns", "y"),
			src.PutMapEntry("map", k, "", "u", "w-"+k),
			src.Add("reducing", k, "", "r"),
			src.Add("reducing", k, "", "s"),
			src.Add("aggregating", k, "", "g"),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	view := src.Capture()
	defer view.Release()
	var buf bytes.Buffer
	if err := view.WriteSnapshot(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	restore := func(s contract.Schema) (contract.Backend, error) {
		dst := newContract(t, cowstate.Config{MaxParallelism: 8})
		register(dst, s)
		return dst, dst.RestoreSnapshot(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	}

	dst, err := restore(v2)
	if err != nil {
		t.Fatalf("upgrade %v -> %v: %v", v1, v2, err)
	}
	for _, k := range kinds {
		got, _ := dst.StateEntries(k.String())
		want, _ := view.StateEntries(k.String())
		sortEntries(got)
		sortEntries(want)
		if len(got) != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("state %v after the upgrade: %+v, want %+v", k, got, want)
		}
	}

	for _, s := range []contract.Schema{{Value: contract.ValueSchemas[4]}, {Value: v1.Value, Key: 1}} {
		dst, err := restore(s)
		if err == nil || !errors.Is(err, statetable.ErrStateMismatch) {
			t.Fatalf("upgrade %v -> %v: %v, want refused", v1, s, err)
		}
		for _, k := range kinds {
			if es, _ := dst.StateEntries(k.String()); len(es) != 0 {
				t.Errorf("refused upgrade to %v left %d entries in state %v", s, len(es), k)
			}
		}
	}
}

func sortEntries(es []contract.Entry) {
	slices.SortFunc(es, func(a, b contract.Entry) int {
		return strings.Compare(a.Key+"\x00"+a.Namespace, b.Key+"\x00"+b.Namespace)
	})
}
