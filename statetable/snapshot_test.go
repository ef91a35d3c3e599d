package statetable

import (
	"errors"
	"testing"
)

// A snapshot read through a state of another table is refused, whether
// that table has a state of the same name and types (which would read the
// other table's entries) or of other types (which would not type-check),
// and so is a nil snapshot; so is a diff between snapshots of two tables.
func TestSnapshot_Foreign(t *testing.T) {
	mine := newStates(t)
	same := newStates(t) // same names, same types
	if err := same.value.Put("k", "ns", 42); err != nil {
		t.Fatal(err)
	}
	other := newTestTable(t) // same names, other types
	if _, err := NewValue(other, "value", Int64, Int64, String, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := NewList(other, "list", Int64, Int64, String); err != nil {
		t.Fatal(err)
	}
	sameSnap := same.t.View(same.t.Owner().Capture())
	defer sameSnap.Capture().Release()
	otherSnap := other.View(other.Owner().Capture())
	defer otherSnap.Capture().Release()
	mineSnap := mine.t.View(mine.t.Owner().Capture())
	defer mineSnap.Capture().Release()
	noChange := func(EntryChange) bool { return true }

	for name, snap := range map[string]*Snapshot{"same types": sameSnap, "other types": otherSnap, "nil": nil} {
		reads := map[string]func() error{
			"Value.GetAt":       func() error { _, err := mine.value.GetAt(snap, "k", "ns"); return err },
			"Value.LookupAt":    func() error { _, _, err := mine.value.LookupAt(snap, "k", "ns"); return err },
			"Value.PairsAt":     func() error { _, err := mine.value.PairsAt(snap); return err },
			"Value.KeysAt":      func() error { _, err := mine.value.KeysAt(snap, "ns"); return err },
			"List.GetAt":        func() error { _, err := mine.list.GetAt(snap, "k", "ns"); return err },
			"Map.IterateAt":     func() error { _, err := mine.mp.IterateAt(snap, "k", "ns"); return err },
			"Reducing.GetAt":    func() error { _, _, err := mine.reduce.GetAt(snap, "k", "ns"); return err },
			"DiffState from it": func() error { return DiffState(snap, mineSnap, "value", noChange) },
			"DiffState to it":   func() error { return DiffState(mineSnap, snap, "value", noChange) },
			"Aggregating.GetAt": func() error {
				_, _, err := mine.agg.GetAt(snap, "k", "ns")
				return err
			},
		}
		for read, f := range reads {
			if err := f(); !errors.Is(err, ErrForeignSnapshot) {
				t.Errorf("%s at a snapshot of another table (%s): %v; want ErrForeignSnapshot", read, name, err)
			}
		}
	}

	// The table's own snapshot still reads.
	if err := mine.value.Put("k", "ns", 1); err != nil {
		t.Fatal(err)
	}
	own := mine.t.View(mine.t.Owner().Capture())
	defer own.Capture().Release()
	if v, ok, err := mine.value.LookupAt(own, "k", "ns"); err != nil || !ok || v != 1 {
		t.Fatalf("own snapshot: %d, %v, %v", v, ok, err)
	}
}
