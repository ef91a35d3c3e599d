package statetable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

// dump returns every entry of every state of snap, key group by key group.
func dump(t testing.TB, snap *Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, info := range snap.States() {
		for g := range snap.MaxParallelism() {
			err := snap.KeyGroupEntries(info.Name, g, func(key, cell []byte) bool {
				out[info.Name] = append(out[info.Name], fmt.Sprintf("%d %x=%x", g, key, cell))
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// applyChange replays one change on a table.
func applyChange(t *Table, name string, c EntryChange) error {
	switch c.Op {
	case OpPut:
		return t.RestoreEntry(name, c.Key, c.Cell)
	case OpDelete:
		return t.DeleteEntry(name, c.Key)
	default:
		return t.PatchEntry(name, c.Key, c.Parts)
	}
}

// randomWrites applies n random writes of every kind to s, over a small key
// space so that lists grow past their short form.
func randomWrites(rt *rapid.T, s *states, n int) {
	keys := []string{"a", "b", "c", longKey}
	nss := []string{"x", "y"}
	for range n {
		k := rapid.SampledFrom(keys).Draw(rt, "key")
		ns := rapid.SampledFrom(nss).Draw(rt, "ns")
		v := rapid.Int64Range(0, 9).Draw(rt, "v")
		var err error
		switch rapid.IntRange(0, 9).Draw(rt, "op") {
		case 0:
			err = s.value.Put(k, ns, v)
		case 1:
			err = s.value.Clear(k, ns)
		case 2, 3:
			err = s.list.Add(k, ns, v)
		case 4:
			err = s.list.Update(k, ns, func(yield func(int64) bool) {
				for i := range v {
					if !yield(i) {
						return
					}
				}
			})
		case 5:
			err = s.mp.Put(k, ns, fmt.Sprint(v), v)
		case 6:
			err = s.mp.Remove(k, ns, fmt.Sprint(v))
		case 7:
			err = s.reduce.Add(k, ns, v)
		case 8:
			err = s.agg.Add(k, ns, v)
		case 9:
			err = s.list.MergeNamespaces(k, ns, nss...)
		}
		if err != nil {
			rt.Fatal(err)
		}
	}
}

// TestDiffState_ReplaysToNext restores a copy of an older snapshot, replays
// DiffState's changes on it, and expects exactly the newer snapshot.
func TestDiffState_ReplaysToNext(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		src := newStates(t)
		randomWrites(rt, src, rapid.IntRange(0, 80).Draw(rt, "before"))
		prev := src.t.View(src.t.owner.Capture())
		defer prev.Capture().Release()

		dst := newStates(t)
		for name, entries := range map[string]bool{"value": true, "list": true, "map": true, "reduce": true, "agg": true} {
			_ = entries
			for g := range prev.MaxParallelism() {
				prev.KeyGroupEntries(name, g, func(key, cell []byte) bool {
					if err := dst.t.RestoreEntry(name, bytes.Clone(key), cell); err != nil {
						rt.Fatal(err)
					}
					return true
				})
			}
		}

		randomWrites(rt, src, rapid.IntRange(0, 80).Draw(rt, "after"))
		next := src.t.View(src.t.owner.Capture())
		defer next.Capture().Release()
		for _, info := range next.States() {
			lastGroup := -1
			err := DiffState(prev, next, info.Name, func(c EntryChange) bool {
				if c.Group < lastGroup {
					rt.Fatalf("%s: key group %d after %d", info.Name, c.Group, lastGroup)
				}
				lastGroup = c.Group
				if err := applyChange(dst.t, info.Name, c); err != nil {
					rt.Fatalf("%s: %v %x: %v", info.Name, c.Op, c.Key, err)
				}
				return true
			})
			if err != nil {
				rt.Fatal(err)
			}
		}
		got := dst.t.View(dst.t.owner.Capture())
		defer got.Capture().Release()
		want, have := dump(t, next), dump(t, got)
		for name := range want {
			if fmt.Sprint(want[name]) != fmt.Sprint(have[name]) {
				rt.Fatalf("state %s after replay:\n got %v\nwant %v", name, have[name], want[name])
			}
		}
	})
}

// TestDiffState_AppendIsOnePart checks that appending to a long list and
// putting into a big map are patches of one part, not rewrites.
func TestDiffState_AppendIsOnePart(t *testing.T) {
	s := newStates(t)
	for i := range 1000 {
		if err := s.list.Add("k", "n", int64(i)); err != nil {
			t.Fatal(err)
		}
		if err := s.mp.Put("k", "n", fmt.Sprint(i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	prev := s.t.View(s.t.owner.Capture())
	defer prev.Capture().Release()
	s.list.Add("k", "n", 1000)
	s.mp.Put("k", "n", "7", -7)
	next := s.t.View(s.t.owner.Capture())
	defer next.Capture().Release()
	for _, name := range []string{"list", "map"} {
		var changes []EntryChange
		if err := DiffState(prev, next, name, func(c EntryChange) bool { changes = append(changes, c); return true }); err != nil {
			t.Fatal(err)
		}
		if len(changes) != 1 || changes[0].Op != OpPatch || len(changes[0].Parts) != 1 {
			t.Fatalf("%s: got %d changes %+v, want one patch of one part", name, len(changes), changes)
		}
	}
}

func TestPatchEntry_Misuse(t *testing.T) {
	s := newStates(t)
	ck := []byte("\x01kn")
	if err := s.t.PatchEntry("list", ck, []Part{{Key: []byte{0}, Value: Int64.Append(nil, 1)}}); err == nil {
		t.Fatal("patch of an absent entry: no error")
	}
	if err := s.t.PatchEntry("value", ck, nil); err == nil {
		t.Fatal("patch of a value state: no error")
	}
	s.list.Update("k", "n", func(yield func(int64) bool) {
		for i := range 20 {
			yield(int64(i))
		}
	})
	if err := s.t.PatchEntry("list", ck, []Part{{Key: appendPosition(nil, 40), Value: Int64.Append(nil, 1)}}); err == nil {
		t.Fatal("patch leaving a hole in a list: no error")
	}
}

func TestPatchEntry_FailureKeepsCell(t *testing.T) {
	s := newStates(t)
	ck := []byte("\x01kn")
	s.list.Update("k", "n", func(yield func(int64) bool) {
		for i := range 20 {
			yield(int64(i))
		}
	})
	bad := []Part{{Key: appendPosition(nil, 3), Value: Int64.Append(nil, 99)}, {Key: appendPosition(nil, 40), Value: Int64.Append(nil, 1)}}
	if err := s.t.PatchEntry("list", ck, bad); err == nil {
		t.Fatal("patch leaving a hole in a list: no error")
	}
	n := 0
	seq, _ := s.list.Get("k", "n")
	for e := range seq {
		if e != int64(n) {
			t.Fatalf("element %d is %d after a failed patch", n, e)
		}
		n++
	}
	if n != 20 {
		t.Fatalf("%d elements after a failed patch", n)
	}
}

// TestRestoreRun_AnyOrder: a run that is not in canonical order, with a
// repeated key, restores like entry-by-entry restores (last value wins).
func TestRestoreRun_AnyOrder(t *testing.T) {
	src := newStates(t)
	for i := range 300 {
		src.value.Put(fmt.Sprint("k", i), "n", int64(i))
	}
	snap := src.t.View(src.t.owner.Capture())
	defer snap.Capture().Release()
	var keys, cells [][]byte
	for g := range snap.MaxParallelism() {
		snap.KeyGroupEntries("value", g, func(key, cell []byte) bool {
			keys, cells = append(keys, bytes.Clone(key)), append(cells, bytes.Clone(cell))
			return true
		})
	}
	dst := newStates(t)
	var run []byte
	for i := len(keys) - 1; i >= 0; i-- {
		run = appendBlob(appendBlob(run, keys[i]), cells[i])
	}
	run = appendBlob(appendBlob(run, keys[5]), Int64.Append(nil, -5)) // a repeat, later: it wins
	if used, err := dst.t.RestoreRun("value", len(keys)+1, run); err != nil || used != len(run) {
		t.Fatalf("used %d of %d bytes: %v", used, len(run), err)
	}
	if err := dst.value.cells.m.check(); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		k := fmt.Sprint("k", i)
		want, _ := src.value.Get(k, "n")
		got, _ := dst.value.Get(k, "n")
		if string(keys[5])[1:] == k+"n" { // one length byte, key, namespace
			want = -5
		}
		if got != want {
			t.Fatalf("%s: got %d want %d", k, got, want)
		}
	}
}

// The bytes of a diff's changes come from shared chunks (changeBytes),
// yet each slice is its receiver's, as EntryChange promises: writing into
// one or appending to it leaves every other change as it was.
func TestDiffState_ChangesOwnTheirBytes(t *testing.T) {
	tb, err := NewTable(cow.NewOwner(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(tb, "v", Int64, Void, String, "")
	if err != nil {
		t.Fatal(err)
	}
	prev := tb.View(tb.owner.Capture())
	defer prev.Capture().Release()
	want := map[string]string{}
	for k := range int64(2000) {
		val := strings.Repeat("x", int(k%300)) // some cells larger than the room left in a chunk
		if err := v.Put(k, VoidNamespace{}, val); err != nil {
			t.Fatal(err)
		}
		want[string(Int64.Append(binary.AppendUvarint(nil, 8), k))] = string(String.Append(nil, val))
	}
	next := tb.View(tb.owner.Capture())
	defer next.Capture().Release()
	var got []EntryChange
	if err := DiffState(prev, next, "v", func(c EntryChange) bool {
		got = append(got, c)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].Key = append(got[i].Key, 0xff) // must copy, not write into the next change
		got[i].Cell = append(got[i].Cell, 0xff)
		if len(got[i].Cell) > 1 {
			got[i].Cell[0] ^= 0xff
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d changes, want %d", len(got), len(want))
	}
	for _, c := range got {
		key, cell := string(c.Key[:len(c.Key)-1]), c.Cell[:len(c.Cell)-1]
		if len(cell) > 0 {
			cell = append([]byte(nil), cell...)
			cell[0] ^= 0xff
		}
		if w, ok := want[key]; c.Op != OpPut || !ok || string(cell) != w {
			t.Fatalf("change of key %x: op %v, cell %q; want a put of %q", key, c.Op, cell, w)
		}
	}
}
