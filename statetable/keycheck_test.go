package statetable

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// decimal is a key codec whose Decode refuses what is not a decimal
// integer: bytes another codec wrote under its ID.
var decimal = FuncCodec("decimal",
	func(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) },
	func(b []byte) (int, error) { return strconv.Atoi(string(b)) })

// TestRestore_KeysThatDoNotDecode is the promise that lets enumerations
// yield plain sequences: a restore refuses, with ErrDecode naming the
// state, every composite key whose key or namespace its codecs cannot
// decode, and stores nothing of the run, on every restore path.
func TestRestore_KeysThatDoNotDecode(t *testing.T) {
	src := newTestTable(t)
	sv, _ := NewValue(src, "v", String, Void, Int64, 0)
	for i := range 200 {
		sv.Put(fmt.Sprint(i), VoidNamespace{}, int64(i))
	}
	sv.Put("not-a-number", VoidNamespace{}, -1)
	snap := src.View(src.owner.Capture())
	defer snap.Capture().Release()
	run, n := encodeRun(t, snap, "v")

	wrun, wn := int64Run(t, 200)

	for _, c := range []struct {
		name string
		run  []byte
		n    int
		reg  func(*Table) (func() int, error)
		want string
	}{
		{"a key its codec refuses", run, n, func(tb *Table) (func() int, error) {
			v, err := NewValue(tb, "v", decimal, Void, Int64, 0)
			return v.Count, err
		}, "a key its codec cannot decode"},
		{"8-byte keys into a 4-byte codec", wrun, wn, func(tb *Table) (func() int, error) {
			v, err := NewValue(tb, "v", Signed[int32](), Void, Int64, 0)
			return v.Count, err
		}, "a key of 8 bytes, where its codec encodes 4"},
		{"a namespace where none is", run, n, func(tb *Table) (func() int, error) {
			v, err := NewValue(tb, "v", String, Signed[int32](), Int64, 0)
			return v.Count, err
		}, "a namespace of 0 bytes, where its codec encodes 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := newTestTable(t)
			count, err := c.reg(dst)
			if err != nil {
				t.Fatal(err)
			}
			_, err = dst.RestoreRun("v", c.n, c.run)
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), `state "v"`) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("RestoreRun: %v, want ErrDecode naming the state and %q", err, c.want)
			}
			if count() != 0 {
				t.Fatalf("RestoreRun failed and stored %d entries", count())
			}
		})
	}

	dst := newTestTable(t)
	dv, _ := NewValue(dst, "v", decimal, Void, Int64, 0)
	err := dst.ApplyEntries("v", []EntryOp{{Key: []byte("\x02ab"), Put: true, Cell: make([]byte, 8)}})
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "a key its codec cannot decode") {
		t.Fatalf("ApplyEntries: %v, want ErrDecode", err)
	}
	if dv.Count() != 0 {
		t.Fatalf("ApplyEntries failed and stored %d entries", dv.Count())
	}
	// What decodes restores, and enumerates.
	if _, err := dst.RestoreRun("v", 1, appendBlob(appendBlob(nil, []byte("\x0242")), make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	for k := range dv.Keys(VoidNamespace{}) {
		if k != 42 {
			t.Fatalf("key %d, want 42", k)
		}
	}
}
