package statetable

import (
	"errors"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/cow"
)

// Lookup tells a stored value equal to the default from an absent one,
// live and at a snapshot, where Get cannot.
func TestValueState_Lookup(t *testing.T) {
	s := newStates(t) // "value" has default -1
	if err := s.value.Put("stored-default", "ns", -1); err != nil {
		t.Fatal(err)
	}
	if err := s.value.Put("stored", "ns", 7); err != nil {
		t.Fatal(err)
	}
	snap := s.t.View(s.t.Owner().Capture())
	defer snap.Capture().Release()
	if err := s.value.Clear("stored", "ns"); err != nil { // after the snapshot
		t.Fatal(err)
	}

	for _, c := range []struct {
		key       string
		live      int64
		liveOK    bool
		atSnap    int64
		atSnapOK  bool
		getResult int64 // Get, which cannot tell absent from default
	}{
		{"absent", 0, false, 0, false, -1},
		{"stored-default", -1, true, -1, true, -1},
		{"stored", 0, false, 7, true, -1},
	} {
		v, ok, err := s.value.Lookup(c.key, "ns")
		if err != nil || v != c.live || ok != c.liveOK {
			t.Errorf("Lookup(%q) = %d, %v, %v; want %d, %v", c.key, v, ok, err, c.live, c.liveOK)
		}
		v, ok, err = s.value.LookupAt(snap, c.key, "ns")
		if err != nil || v != c.atSnap || ok != c.atSnapOK {
			t.Errorf("LookupAt(%q) = %d, %v, %v; want %d, %v", c.key, v, ok, err, c.atSnap, c.atSnapOK)
		}
		if v, err := s.value.Get(c.key, "ns"); err != nil || v != c.getResult {
			t.Errorf("Get(%q) = %d, %v; want %d", c.key, v, err, c.getResult)
		}
	}
}

func TestValueState_LookupKeyGroupNotOwned(t *testing.T) {
	half, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &KeyGroupRange{First: 0, Last: 7}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(half, "v", String, String, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		_, ok, err := v.Lookup(k, "")
		if errors.Is(err, ErrKeyGroupNotOwned) {
			refused++
		} else if err != nil || ok {
			t.Fatalf("Lookup(%q) on an empty state: %v, %v", k, ok, err)
		}
	}
	if refused == 0 {
		t.Fatal("no key of another key group refused")
	}
}

// Registering a value state again is idempotent only with the same
// default; another default is refused with an error naming the state,
// and so are another kind, codec, or Go type behind the same codec ID.
func TestValueState_Reregister(t *testing.T) {
	tb := newTestTable(t)
	first, err := NewValue(tb, "count", String, String, Int64, 10)
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewValue(tb, "count", String, String, Int64, 10)
	if err != nil || again != first {
		t.Fatalf("same default: %v, same handle %v", err, again == first)
	}
	_, err = NewValue(tb, "count", String, String, Int64, 0)
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `"count"`) ||
		!strings.Contains(err.Error(), "10") {
		t.Fatalf("another default: %v; want ErrStateMismatch naming the state and its default", err)
	}
	if v, err := first.Get("absent", ""); err != nil || v != 10 {
		t.Fatalf("the refused registration changed the default: %d, %v", v, err)
	}
	if _, err := NewReducing(tb, "count", String, String, Int64, func(a, b int64) int64 { return a + b }); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("another kind: %v", err)
	}
	if _, err := NewValue(tb, "count", String, String, Int32, 10); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("another codec: %v", err)
	}
	sameID := FuncCodec(Int64.ID(), func(b []byte, v uint64) []byte { return Int64.Append(b, int64(v)) },
		func(b []byte) (uint64, error) { v, err := Int64.Decode(b); return uint64(v), err })
	if _, err := NewValue(tb, "count", String, String, sameID, 10); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("another Go type behind the same codec ID: %v", err)
	}
}
