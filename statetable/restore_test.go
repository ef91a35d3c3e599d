package statetable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/cow"
)

// encodeRun returns the entries of state name in snap, every key group, as
// a snapshot section's record holds them: key blob, cell blob.
func encodeRun(t testing.TB, snap *Snapshot, name string) (run []byte, n int) {
	t.Helper()
	for g := range snap.MaxParallelism() {
		err := snap.KeyGroupEntries(name, g, func(key, cell []byte) bool {
			run = appendBlob(appendBlob(run, key), cell)
			n++
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return run, n
}

// int64Run returns the run of a value state "v" of int64 keys 0..n-1, each
// holding itself, as encodeRun encodes it.
func int64Run(t testing.TB, n int) ([]byte, int) {
	t.Helper()
	src := newTestTable(t)
	v, _ := NewValue(src, "v", Int64, Void, Int64, 0)
	for i := range n {
		v.Put(int64(i), VoidNamespace{}, int64(i))
	}
	snap := src.View(src.owner.Capture())
	t.Cleanup(snap.Capture().Release)
	return encodeRun(t, snap, "v")
}

// TestRestoreRun restores a run of keys of every length class (inline 15
// and 31 bytes, long) and namespaces (empty and not) and checks it holds
// exactly what was written, for runs cut at every length, whatever the
// bytes after the run.
func TestRestoreRun(t *testing.T) {
	tb := newTestTable(t)
	v, err := NewValue(tb, "v", String, String, Int64, -1)
	if err != nil {
		t.Fatal(err)
	}
	type kn struct{ k, ns string }
	want := map[kn]int64{}
	for i := range 400 {
		k := fmt.Sprint(i)
		switch i % 4 {
		case 1:
			k = strings.Repeat("x", 14) // 15 bytes with its length byte: a full key15
		case 2:
			k = fmt.Sprint("key-of-twenty-bytes-", i) // key31
		case 3:
			k = strings.Repeat("long", 10) + k // a long key
		}
		ns := ""
		if i%3 == 0 {
			ns = fmt.Sprint("n", i%7)
		}
		v.Put(k, ns, int64(i))
		want[kn{k, ns}] = int64(i)
	}
	snap := tb.View(tb.owner.Capture())
	defer snap.Capture().Release()
	run, n := encodeRun(t, snap, "v")
	for _, tail := range [][]byte{nil, {0}, bytes.Repeat([]byte{0xff}, 40)} {
		dst := newTestTable(t)
		dv, _ := NewValue(dst, "v", String, String, Int64, -1)
		b := append(bytes.Clone(run), tail...)
		used, err := dst.RestoreRun("v", n, b)
		if err != nil || used != len(run) {
			t.Fatalf("tail %x: used %d of %d, %v", tail, used, len(run), err)
		}
		if err := dv.cells.m.check(); err != nil {
			t.Fatal(err)
		}
		if dv.Count() != len(want) {
			t.Fatalf("restored %d entries, want %d", dv.Count(), len(want))
		}
		for e, x := range want {
			if got, err := dv.Get(e.k, e.ns); err != nil || got != x {
				t.Fatalf("%q/%q: got %d, %v; want %d", e.k, e.ns, got, err, x)
			}
		}
	}
	// Every cut of the run is an error wrapping ErrDecode, not a panic, and
	// stores nothing.
	for cut := range len(run) {
		dst := newTestTable(t)
		dv, _ := NewValue(dst, "v", String, String, Int64, -1)
		if _, err := dst.RestoreRun("v", n, run[:cut]); !errors.Is(err, ErrDecode) {
			t.Fatalf("run cut at %d of %d: %v, want ErrDecode", cut, len(run), err)
		}
		if dv.Count() != 0 {
			t.Fatalf("run cut at %d: %d entries stored", cut, dv.Count())
		}
	}
}

// TestRestoreRun_Bad: bad bytes and keys of other key groups are errors
// naming the state.
func TestRestoreRun_Bad(t *testing.T) {
	key := func(k string) []byte { return append([]byte{byte(len(k))}, k...) }
	cell := Int64.Append(nil, 7)
	tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &KeyGroupRange{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewValue(tb, "v", String, Void, Int64, -1); err != nil {
		t.Fatal(err)
	}
	var own, other string // keys in key group 0 and outside it
	for i := 0; own == "" || other == ""; i++ {
		if k := fmt.Sprint(i); KeyGroupOf(HashKey([]byte(k)), 16) != 0 {
			other = k
		} else {
			own = k
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		n    int
		want error
	}{
		{"empty key", appendBlob(appendBlob(nil, nil), cell), 1, ErrDecode},
		{"key length past the key", appendBlob(appendBlob(nil, []byte{9, 'a'}), cell), 1, ErrDecode},
		{"overlong key length", appendBlob(appendBlob(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), cell), 1, ErrDecode},
		{"bad cell", appendBlob(appendBlob(nil, key(own)), []byte{1, 2}), 1, ErrDecode},
		{"count past the bytes", appendBlob(appendBlob(nil, key(own)), cell), 1000, ErrDecode},
		{"key group not owned", appendBlob(appendBlob(nil, key(other)), cell), 1, ErrKeyGroupNotOwned},
	} {
		_, err := tb.RestoreRun("v", c.n, c.b)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `"v"`) {
			t.Errorf("%s: %v, want %v naming the state", c.name, err, c.want)
		}
	}
	if _, err := tb.RestoreRun("nope", 0, nil); !errors.Is(err, ErrUnknownState) {
		t.Errorf("unknown state: %v", err)
	}
}

// TestLoadKey15 checks the two-word load against makeKey for every length,
// with garbage after the key.
func TestLoadKey15(t *testing.T) {
	for n := range key15Max + 1 {
		ck := strings.Repeat("k", n)
		p := append(append([]byte{byte(n)}, ck...), bytes.Repeat([]byte{0xee}, 16)...)
		var k key15
		loadKey15(&k, p[:16])
		if k != makeKey[key15](ck) {
			t.Fatalf("length %d: %x, want %x", n, k, makeKey[key15](ck))
		}
	}
}

// TestRestoreRun_TwoByteLength: a key blob whose length takes two bytes
// (a valid uvarint, if not the shortest) restores the same key.
func TestRestoreRun_TwoByteLength(t *testing.T) {
	tb := newTestTable(t)
	v, err := NewValue(tb, "v", String, Void, Int64, -1)
	if err != nil {
		t.Fatal(err)
	}
	ck := []byte{5, 'a', 'b', 'c', 'd', 'e'}
	b := append([]byte{0x80 | byte(len(ck)), 0}, ck...)
	b = appendBlob(b, Int64.Append(nil, 42))
	b = append(b, bytes.Repeat([]byte{0xaa}, 20)...)
	if _, err := tb.RestoreRun("v", 1, b); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Get("abcde", VoidNamespace{}); err != nil || got != 42 {
		t.Fatalf("got %d, %v", got, err)
	}
	if err := v.cells.m.check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRestoreRun restores one key group's run of a value state of
// int64 keys and values (8192 entries, as one of 128 key groups of
// BenchmarkRestore's 1M) into a new table: the per-entry cost of a
// restore without the file's reading and checksum.
func BenchmarkRestoreRun(b *testing.B) {
	src, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 1})
	if err != nil {
		b.Fatal(err)
	}
	v, _ := NewValue(src, "v", Int64, Void, Int64, 0)
	const n = 8192
	for i := range n {
		v.Put(int64(uint64(i)*0x9E3779B97F4A7C15), VoidNamespace{}, int64(i))
	}
	snap := src.View(src.owner.Capture())
	run, got := encodeRun(b, snap, "v")
	snap.Capture().Release()
	if got != n {
		b.Fatalf("%d entries", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		dst, _ := NewTable(cow.NewOwner(), Config{MaxParallelism: 1})
		NewValue(dst, "v", Int64, Void, Int64, 0)
		if _, err := dst.RestoreRun("v", n, run); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}

// restoreFixed restores the entries of a value state of int64 keys and
// values of codec vc (one of the fixed-width codecs a restore decodes
// inline) and checks they read back.
func restoreFixed[V comparable](t *testing.T, vc Codec[V], val func(i int) V) {
	t.Helper()
	src := newTestTable(t)
	v, err := NewValue(src, "v", Int64, Void, vc, val(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		v.Put(int64(i)*7919-5000, VoidNamespace{}, val(i))
	}
	snap := src.View(src.owner.Capture())
	defer snap.Capture().Release()
	run, got := encodeRun(t, snap, "v")
	if got != n {
		t.Fatalf("%d entries encoded", got)
	}
	// A snapshot file's sections (AppendKeyGroupEntries) encode
	// fixed-width cells inline: the same bytes, and each cell blob what
	// the codec's Append gives.
	var file []byte
	for g := range snap.MaxParallelism() {
		if file, _, err = snap.AppendKeyGroupEntries(file, "v", g); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(file, run) {
		t.Fatalf("%s: AppendKeyGroupEntries wrote %d bytes unlike KeyGroupEntries' %d", vc.ID(), len(file), len(run))
	}
	blob := func(off int) ([]byte, int) {
		l, m := binary.Uvarint(run[off:])
		if m <= 0 || off+m+int(l) > len(run) {
			t.Fatalf("%s: bad blob at %d", vc.ID(), off)
		}
		return run[off+m : off+m+int(l)], off + m + int(l)
	}
	for off, e := 0, 0; off < len(run); e++ {
		var key, cell []byte
		key, off = blob(off)
		cell, off = blob(off)
		k, err := Int64.Decode(key[1:])
		if err != nil || key[0] != 8 {
			t.Fatalf("%s: entry %d: key %x: %v", vc.ID(), e, key, err)
		}
		if want := vc.Append(nil, val(int((k+5000)/7919))); !bytes.Equal(cell, want) {
			t.Fatalf("%s: entry %d (key %d): cell %x, the codec encodes %x", vc.ID(), e, k, cell, want)
		}
	}
	dst := newTestTable(t)
	dv, _ := NewValue(dst, "v", Int64, Void, vc, val(0))
	if used, err := dst.RestoreRun("v", n, run); err != nil || used != len(run) {
		t.Fatalf("%s: used %d of %d, %v", vc.ID(), used, len(run), err)
	}
	if err := dv.cells.m.check(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got, err := dv.Get(int64(i)*7919-5000, VoidNamespace{}); err != nil || got != val(i) {
			t.Fatalf("%s: key %d: got %v, %v; want %v", vc.ID(), i, got, err, val(i))
		}
	}
}

// TestRestoreRun_FixedCells writes and restores values of every
// fixed-width codec (encoded and decoded inline, without the codec),
// negative ones included.
func TestRestoreRun_FixedCells(t *testing.T) {
	restoreFixed(t, Int64, func(i int) int64 { return int64(i)*-12345678901 + 3 })
	restoreFixed(t, Int32, func(i int) int32 { return int32(i*-70001 + 11) })
	restoreFixed(t, Int, func(i int) int { return i*-99 - 1 })
	restoreFixed(t, Uint64, func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 })
	restoreFixed(t, Uint32, func(i int) uint32 { return uint32(i) * 2654435761 })
	restoreFixed(t, Signed[int16](), func(i int) int16 { return int16(i*-13 + 7) })
	restoreFixed(t, Unsigned[uint8](), func(i int) uint8 { return uint8(i * 31) })
	restoreFixed(t, Signed[int8](), func(i int) int8 { return int8(i*17 - 100) })
	restoreFixed(t, Unsigned[uint16](), func(i int) uint16 { return uint16(i * 40503) })
	restoreFixed(t, Float64, func(i int) float64 { return float64(i) * -1.5 })
}

// TestRestoreRun_BadMidRun: a run of entries laid out alike (the restore
// then computes each entry's bounds from the one before) with one entry
// broken part way: a cell of another width, a key or cell length that
// differs, a key length prefix that differs, a run cut anywhere. Each is an
// error wrapping ErrDecode or a restore of exactly what the bytes say,
// never a panic, and an error stores nothing.
func TestRestoreRun_BadMidRun(t *testing.T) {
	src := newTestTable(t)
	v, _ := NewValue(src, "v", Int64, Void, Int64, 0)
	const n = 200
	for i := range n {
		v.Put(int64(i), VoidNamespace{}, int64(i))
	}
	snap := src.View(src.owner.Capture())
	defer snap.Capture().Release()
	run, _ := encodeRun(t, snap, "v")
	const entry = 1 + 9 + 1 + 8 // key blob (length, key length, key), cell blob
	if len(run) != n*entry {
		t.Fatalf("run of %d bytes, want %d", len(run), n*entry)
	}
	restore := func(b []byte) (int, error, *ValueState[int64, VoidNamespace, int64]) {
		dst := newTestTable(t)
		dv, _ := NewValue(dst, "v", Int64, Void, Int64, 0)
		used, err := dst.RestoreRun("v", n, b)
		if err != nil && dv.Count() != 0 {
			t.Fatalf("%v, and %d entries stored", err, dv.Count())
		}
		if err == nil {
			if err := dv.cells.m.check(); err != nil {
				t.Fatal(err)
			}
		}
		return used, err, dv
	}
	at := 100 * entry // entry 100, after a hundred alike
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"cell of 7 bytes", func(b []byte) []byte { b[at+10] = 7; return b }},
		{"cell of 9 bytes", func(b []byte) []byte { b[at+10] = 9; return b }},
		{"key blob of 10 bytes", func(b []byte) []byte { b[at] = 10; return b }},
		{"key blob of 8 bytes", func(b []byte) []byte { b[at] = 8; return b }},
		{"key blob length of two bytes", func(b []byte) []byte { b[at] = 0x89; return b }},
		{"key length prefix of 9", func(b []byte) []byte { b[at+1] = 9; return b }},
		{"key length prefix of 7", func(b []byte) []byte { b[at+1] = 7; return b }},
		{"key length prefix of two bytes", func(b []byte) []byte { b[at+1] = 0x88; return b }},
	} {
		b := c.edit(bytes.Clone(run))
		used, err, dv := restore(b)
		switch {
		case err != nil:
			if !errors.Is(err, ErrDecode) {
				t.Errorf("%s: %v, want ErrDecode", c.name, err)
			}
		case used > len(b):
			t.Errorf("%s: used %d of %d bytes", c.name, used, len(b))
		default:
			// The bytes may still parse (a shorter key with a namespace,
			// say): then the first hundred entries are exactly as written.
			for i := range 100 {
				if got, err := dv.Get(int64(i), VoidNamespace{}); err != nil || got != int64(i) {
					t.Errorf("%s: key %d: %d, %v", c.name, i, got, err)
				}
			}
		}
	}
	for cut := len(run) - 3*entry; cut < len(run); cut++ {
		if _, err, _ := restore(run[:cut]); !errors.Is(err, ErrDecode) {
			t.Fatalf("run cut at %d of %d: %v, want ErrDecode", cut, len(run), err)
		}
	}
	if used, err, dv := restore(run); err != nil || used != len(run) || dv.Count() != n {
		t.Fatalf("whole run: used %d of %d, %d entries, %v", used, len(run), dv.Count(), err)
	}
}

// TestRestoreRun_NotOwnedMidRun: a run of keys laid out alike in which
// one key, after many, is of a key group the table does not own: an error
// matching ErrKeyGroupNotOwned, and nothing stored.
func TestRestoreRun_NotOwnedMidRun(t *testing.T) {
	run, n := int64Run(t, 500) // key groups ascending: 0 to 15
	for _, owned := range []KeyGroupRange{{0, 14}, {1, 15}, {3, 9}, {5, 4}} {
		dst, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &owned})
		if err != nil {
			t.Fatal(err)
		}
		dv, _ := NewValue(dst, "v", Int64, Void, Int64, 0)
		if _, err := dst.RestoreRun("v", n, run); !errors.Is(err, ErrKeyGroupNotOwned) {
			t.Fatalf("owning %v: %v, want ErrKeyGroupNotOwned", owned, err)
		}
		if dv.Count() != 0 {
			t.Fatalf("owning %v: %d entries stored", owned, dv.Count())
		}
	}
}
