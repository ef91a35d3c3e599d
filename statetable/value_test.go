package statetable

import (
	"errors"
	"maps"
	"strconv"
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

// Update is Get then Put: checked against a Go map for integer keys with no
// namespace (the inline composite key of locateFixed) and string keys with
// a namespace, with captures taken and released between updates and each
// captured version checked against the model frozen at its capture, and
// with f writing the state itself (another key, and the same key).
func TestValueState_UpdateIsGetThenPut(t *testing.T) {
	tab, err := NewTable(cow.NewOwner(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ints, err := NewValue(tab, "ints", Int64, Void, Int64, -1)
	if err != nil {
		t.Fatal(err)
	}
	strs, err := NewValue(tab, "strs", String, String, Int64, -1)
	if err != nil {
		t.Fatal(err)
	}
	type frozen struct {
		snap       *Snapshot
		ints, strs map[int64]int64
	}
	var live []frozen
	model := map[string]map[int64]int64{"ints": {}, "strs": {}}
	get := func(m map[int64]int64, k int64) int64 {
		if v, ok := m[k]; ok {
			return v
		}
		return -1
	}
	key := func(k int64) string { return strings.Repeat("k", int(k%40)) + strconv.FormatInt(k, 10) } // short and long
	for i := range 20000 {
		k := int64(i*7919) % 3000
		switch i % 5 {
		case 0, 1, 2: // plain increments
			if err := ints.Update(k, VoidNamespace{}, func(v int64) int64 { return v + 1 }); err != nil {
				t.Fatal(err)
			}
			model["ints"][k] = get(model["ints"], k) + 1
			if err := strs.Update(key(k), "ns", func(v int64) int64 { return v + 2 }); err != nil {
				t.Fatal(err)
			}
			model["strs"][k] = get(model["strs"], k) + 2
		case 3: // f writes another key of the same state, then the result lands
			other := (k + 1) % 3000
			if err := ints.Update(k, VoidNamespace{}, func(v int64) int64 {
				if err := ints.Put(other, VoidNamespace{}, 100); err != nil {
					t.Fatal(err)
				}
				return v * 2
			}); err != nil {
				t.Fatal(err)
			}
			old := get(model["ints"], k)
			model["ints"][other] = 100
			model["ints"][k] = old * 2
			if err := strs.Update(key(k), "ns", func(v int64) int64 {
				if _, err := strs.Get(key(other), "other ns"); err != nil { // a locate of its own
					t.Fatal(err)
				}
				return v + 5
			}); err != nil {
				t.Fatal(err)
			}
			model["strs"][k] = get(model["strs"], k) + 5
		case 4: // f writes the same key: f's result wins, as with Get then Put
			if err := ints.Update(k, VoidNamespace{}, func(v int64) int64 {
				if err := ints.Clear(k, VoidNamespace{}); err != nil {
					t.Fatal(err)
				}
				return v + 10
			}); err != nil {
				t.Fatal(err)
			}
			model["ints"][k] = get(model["ints"], k) + 10
		}
		if i%997 == 0 && len(live) < 4 {
			live = append(live, frozen{tab.View(tab.Owner().Capture()), maps.Clone(model["ints"]), maps.Clone(model["strs"])})
		}
		if i%1499 == 0 && len(live) > 0 {
			live[0].snap.Capture().Release()
			live = live[1:]
		}
	}
	for k := int64(0); k < 3000; k++ {
		if v, err := ints.Get(k, VoidNamespace{}); err != nil || v != get(model["ints"], k) {
			t.Fatalf("ints %d = %d, %v; want %d", k, v, err, get(model["ints"], k))
		}
		if v, err := strs.Get(key(k), "ns"); err != nil || v != get(model["strs"], k) {
			t.Fatalf("strs %q = %d, %v; want %d", key(k), v, err, get(model["strs"], k))
		}
		for _, f := range live {
			if v, err := ints.GetAt(f.snap, k, VoidNamespace{}); err != nil || v != get(f.ints, k) {
				t.Fatalf("ints %d at a snapshot = %d, %v; want %d as captured", k, v, err, get(f.ints, k))
			}
			if v, err := strs.GetAt(f.snap, key(k), "ns"); err != nil || v != get(f.strs, k) {
				t.Fatalf("strs %q at a snapshot = %d, %v; want %d as captured", key(k), v, err, get(f.strs, k))
			}
		}
	}
	if got, want := ints.Count(), len(model["ints"]); got != want {
		t.Fatalf("ints Count = %d, want %d", got, want)
	}
	for _, f := range live {
		f.snap.Capture().Release()
	}
}

// An Update of a key in a key group the table does not own is an error
// matching ErrKeyGroupNotOwned, and f is not called; on the fixed-width path
// as on the general one.
func TestValueState_UpdateKeyGroupNotOwned(t *testing.T) {
	ints, strs, _ := halfOwnedValues(t)
	var refusedInt, refusedStr int
	for k := range int64(64) {
		called := false
		f := func(v int64) int64 { called = true; return v + 1 }
		err := ints.Update(k, VoidNamespace{}, f)
		if errors.Is(err, ErrKeyGroupNotOwned) {
			refusedInt++
			if called {
				t.Fatalf("key %d: f called for a key group not owned", k)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		called = false
		err = strs.Update(string(rune('a'+k)), VoidNamespace{}, f)
		if errors.Is(err, ErrKeyGroupNotOwned) {
			refusedStr++
			if called {
				t.Fatalf("key %q: f called for a key group not owned", string(rune('a'+k)))
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refusedInt == 0 || refusedInt == 64 || refusedStr == 0 || refusedStr == 64 {
		t.Fatalf("refused %d and %d of 64 keys; want some of each, with half the key groups owned", refusedInt, refusedStr)
	}
}

// On a table that owns only some key groups, every operation of a value
// state of int64 keys (which locates keys inline, decision 0042) refuses
// a key of a group it does not own and takes any other: its key group is
// KeyGroupOf the hash of the key's encoding, whichever operation asks.
func TestValueState_Int64KeysKeyGroupNotOwned(t *testing.T) {
	const maxPar = 16
	owned := KeyGroupRange{First: 0, Last: 7}
	half, err := NewTable(cow.NewOwner(), Config{MaxParallelism: maxPar, KeyGroups: &owned})
	if err != nil {
		t.Fatal(err)
	}
	ints, err := NewValue(half, "ints", Int64, Void, Int64, -1)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for k := range int64(64) {
		want := owned.Contains(KeyGroupOf(HashKey(Int64.Append(nil, k)), maxPar))
		if !want {
			refused++
		}
		ops := map[string]error{"Put": ints.Put(k, VoidNamespace{}, k)}
		_, ops["Get"] = ints.Get(k, VoidNamespace{})
		_, _, ops["Lookup"] = ints.Lookup(k, VoidNamespace{})
		ops["Update"] = ints.Update(k, VoidNamespace{}, func(v int64) int64 { return v + 1 })
		if want {
			if v, err := ints.Get(k, VoidNamespace{}); err != nil || v != k+1 {
				t.Fatalf("key %d: Get after Put and Update = %d, %v; want %d", k, v, err, k+1)
			}
		}
		ops["Clear"] = ints.Clear(k, VoidNamespace{})
		for op, err := range ops {
			if got := !errors.Is(err, ErrKeyGroupNotOwned); got != want || want && err != nil {
				t.Fatalf("key %d: %s = %v; the table owns its key group: %v", k, op, err, want)
			}
		}
	}
	if refused == 0 || refused == 64 {
		t.Fatalf("%d of 64 keys in groups not owned; want some", refused)
	}
}

// halfOwnedValues returns an int64-keyed and a string-keyed value state,
// both with default 0, of a table of 16 key groups that owns groups 0-7,
// and the groups it owns. The string-keyed one prefetches its batches
// though it is small (prefetchFrom 0), so that the general path's
// prefetch, which skips keys not owned, is what the batch methods meet.
func halfOwnedValues(t *testing.T) (ints *ValueState[int64, VoidNamespace, int64], strs *ValueState[string, VoidNamespace, int64], owned KeyGroupRange) {
	owned = KeyGroupRange{First: 0, Last: 7}
	half, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &owned})
	if err != nil {
		t.Fatal(err)
	}
	if ints, err = NewValue(half, "ints", Int64, Void, Int64, 0); err != nil {
		t.Fatal(err)
	}
	if strs, err = NewValue(half, "strs", String, Void, Int64, 0); err != nil {
		t.Fatal(err)
	}
	strs.prefetchFrom = 0
	return ints, strs, owned
}
