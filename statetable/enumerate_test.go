package statetable

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestState_PairsAt: the pairs of a snapshot are those that had state when
// it was taken, whatever the writer does afterwards, in key-group order,
// and a second iteration yields the same sequence.
func TestState_PairsAt(t *testing.T) {
	s := newStates(t)
	want := map[[2]string]bool{}
	for i := range 200 {
		k, ns := fmt.Sprint("key-", i), fmt.Sprint("w", i%3)
		if i%7 == 0 {
			k += "-long-enough-to-be-stored-apart-from-short-keys"
		}
		if err := s.list.Add(k, ns, int64(i)); err != nil {
			t.Fatal(err)
		}
		want[[2]string{k, ns}] = true
	}
	c := s.t.Owner().Capture()
	defer c.Release()
	snap := s.t.View(c)
	// Writes after the capture: none of them may show.
	for i := range 50 {
		s.list.Clear(fmt.Sprint("key-", i+1), fmt.Sprint("w", (i+1)%3))
		s.list.Add(fmt.Sprint("new-", i), "w0", 1)
	}
	seq, err := s.list.PairsAt(snap)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]string
	lastGroup := -1
	for k, ns := range seq {
		got = append(got, [2]string{k, ns})
		g := KeyGroupOf(HashKey([]byte(k)), snap.MaxParallelism())
		if g < lastGroup {
			t.Fatalf("pair (%q, %q) of key group %d after one of key group %d", k, ns, g, lastGroup)
		}
		lastGroup = g
	}
	gotSet := map[[2]string]bool{}
	for _, p := range got {
		if gotSet[p] {
			t.Fatalf("pair %q yielded twice", p)
		}
		gotSet[p] = true
	}
	if !maps.Equal(gotSet, want) {
		t.Fatalf("PairsAt yielded %d pairs, want the %d captured", len(gotSet), len(want))
	}
	var again [][2]string
	for k, ns := range seq {
		again = append(again, [2]string{k, ns})
	}
	if !slices.Equal(got, again) {
		t.Fatal("a second iteration of PairsAt yielded another sequence")
	}
	n := 0
	for range seq {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("stopped after %d pairs, want 3", n)
	}
}

// TestState_KeysAt: the keys of one namespace in a snapshot, and the
// errors of a state the snapshot does not hold and of a nil namespace.
func TestState_KeysAt(t *testing.T) {
	s := newStates(t)
	for _, k := range []string{"x", "y", "z"} {
		s.value.Put(k, "w1", 1)
	}
	s.value.Put("y", "w2", 2)
	c := s.t.Owner().Capture()
	defer c.Release()
	snap := s.t.View(c)
	s.value.Put("late", "w1", 1)
	s.value.Clear("x", "w1")
	seq, err := s.value.KeysAt(snap, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(seq); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("KeysAt(w1) = %q, want x y z", got)
	}
	if got := slices.Collect(mustSeq(t)(s.value.KeysAt(snap, "none"))); len(got) != 0 {
		t.Fatalf("KeysAt of a namespace without state = %q", got)
	}
	late, err := NewValue(s.t, "late", String, String, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.PairsAt(snap); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("PairsAt of a state registered after the snapshot: %v, want ErrUnknownState", err)
	}
	if _, err := late.KeysAt(snap, "w1"); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("KeysAt of a state registered after the snapshot: %v, want ErrUnknownState", err)
	}
	bs, err := NewValue(s.t, "bytes-ns", String, Bytes, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.KeysAt(snap, nil); !errors.Is(err, ErrNilNamespace) {
		t.Fatalf("KeysAt with a nil namespace: %v", err)
	}
}

func mustSeq(t *testing.T) func(seq func(func(string) bool), err error) func(func(string) bool) {
	return func(seq func(func(string) bool), err error) func(func(string) bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
}
