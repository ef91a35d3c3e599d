package statetable

import (
	"errors"
	"testing"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/internal/invariants"
)

// Check finds what no write through the API can make: an entry stored under
// a hash that is not its key's, and a key of a key group the table does not
// own.
func TestTable_CheckFindsPlantedCorruption(t *testing.T) {
	tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(tb, "v", String, Void, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := v.Put(k, VoidNamespace{}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.Check(); err != nil {
		t.Fatalf("a table written through its API: %v", err)
	}

	h, ck, err := v.locate("d", VoidNamespace{})
	if err != nil {
		t.Fatal(err)
	}
	// Stored under another key's hash. Under the invariants tag the map's
	// own check after the write catches it first.
	plant := func() (caught bool) {
		defer func() { caught = recover() != nil }()
		v.m.k15.SetHashed(h^1, makeKey[key15](ck), 1, nil)
		return false
	}
	if caught := plant(); caught != invariants.Exhaustive {
		t.Fatalf("the write's own check caught it: %v, want %v", caught, invariants.Exhaustive)
	} else if caught {
		return
	}
	err = tb.Check()
	if !errors.Is(err, cow.ErrInvariant) {
		t.Fatalf("an entry under a wrong hash: Check = %v, want cow.ErrInvariant", err)
	}
	t.Log(err)
	v.m.k15.DeleteHashed(h^1, makeKey[key15](ck))

	// A key of a group outside the range: the table now owns group 0 only.
	tb.owned, tb.ownsAll = KeyGroupRange{First: 0, Last: 0}, false
	err = tb.Check()
	if !errors.Is(err, cow.ErrInvariant) {
		t.Fatalf("keys outside the owned key groups: Check = %v, want cow.ErrInvariant", err)
	}
	t.Log(err)
}
