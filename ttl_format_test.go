package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

var void = statetable.VoidNamespace{}

// v1States are the states of testdata/v1: a full snapshot and a delta in
// format version 1, written before TTL existed (value "v" of keys 0..19
// with k*10, map "m" of user keys a=k and b=-k, reducing "r" of k, list
// "l" with 12 elements under "long" and one under "short"; the delta
// rewrites v of 0..4 to k*100, puts m[k]["c"]=7 for 0..4, clears v of 19
// and appends "z" to the long list).
type v1States struct {
	v *statetable.ValueState[int64, statetable.VoidNamespace, int64]
	l *statetable.ListState[string, statetable.VoidNamespace, string]
	m *statetable.MapState[int64, statetable.VoidNamespace, string, int64]
	r *statetable.ReducingState[int64, statetable.VoidNamespace, int64]
}

func registerV1(t *testing.T, b *cowstate.Backend, ttl *cowstate.TTL) v1States {
	t.Helper()
	var s v1States
	var err error
	sum := func(a, x int64) int64 { return a + x }
	if ttl == nil {
		s.v, err = cowstate.NamespacedValue(b, "v", statetable.Int64, statetable.Void, statetable.Int64, 0)
	} else {
		s.v, err = cowstate.NamespacedValueWithTTL(b, "v", statetable.Int64, statetable.Void, statetable.Int64, 0, *ttl)
	}
	if err != nil {
		t.Fatal(err)
	}
	if ttl == nil {
		s.l, err = cowstate.NamespacedList(b, "l", statetable.String, statetable.Void, statetable.String)
	} else {
		s.l, err = cowstate.NamespacedListWithTTL(b, "l", statetable.String, statetable.Void, statetable.String, *ttl)
	}
	if err != nil {
		t.Fatal(err)
	}
	if ttl == nil {
		s.m, err = cowstate.NamespacedMap(b, "m", statetable.Int64, statetable.Void, statetable.String, statetable.Int64)
	} else {
		s.m, err = cowstate.NamespacedMapWithTTL(b, "m", statetable.Int64, statetable.Void, statetable.String, statetable.Int64, *ttl)
	}
	if err != nil {
		t.Fatal(err)
	}
	if ttl == nil {
		s.r, err = cowstate.NamespacedReducing(b, "r", statetable.Int64, statetable.Void, statetable.Int64, sum)
	} else {
		s.r, err = cowstate.NamespacedReducingWithTTL(b, "r", statetable.Int64, statetable.Void, statetable.Int64, sum, *ttl)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openV1(t *testing.T) (*snapshot.Reader, *delta.Delta) {
	t.Helper()
	full, err := os.ReadFile("testdata/v1/full.snap")
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.Open(bytes.NewReader(full), int64(len(full)))
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile("testdata/v1/delta-1-2.delta")
	if err != nil {
		t.Fatal(err)
	}
	dr, err := delta.Open(bytes.NewReader(db), int64(len(db)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dr.Read(context.Background(), statetable.KeyGroupRange{First: 0, Last: 7})
	if err != nil {
		t.Fatal(err)
	}
	return r, d
}

// TestTTL_RestoreVersion1 restores files of format version 1 into states
// without TTL (as before) and with one (every entry stamped as written at
// the restore, so it expires a TTL later).
func TestTTL_RestoreVersion1(t *testing.T) {
	for _, withTTL := range []bool{false, true} {
		now := int64(10_000)
		b, err := cowstate.New(cowstate.Config{MaxParallelism: 8, Clock: func() int64 { return now }})
		if err != nil {
			t.Fatal(err)
		}
		var ttl *cowstate.TTL
		if withTTL {
			ttl = &cowstate.TTL{Duration: time.Second}
		}
		s := registerV1(t, b, ttl)
		r, d := openV1(t)
		if err := b.RestoreChains(context.Background(), cowstate.Chain{Full: r, FullID: 1, Deltas: []*delta.Delta{d}}); err != nil {
			t.Fatalf("TTL %v: %v", withTTL, err)
		}
		now = 10_999
		check := func(what string, got, want any) {
			t.Helper()
			if !reflectEqual(got, want) {
				t.Fatalf("TTL %v: %s = %v, want %v", withTTL, what, got, want)
			}
		}
		for k := range int64(20) {
			want := k * 10
			switch {
			case k < 5:
				want = k * 100
			case k == 19:
				want = 0
			}
			got, _ := s.v.Get(k, void)
			check("v", got, want)
			rv, _, _ := s.r.Get(k, void)
			check("r", rv, k)
			seq, _ := s.m.Iterate(k, void)
			wantM := map[string]int64{"a": k, "b": -k}
			if k < 5 {
				wantM["c"] = 7
			}
			check("m", maps.Collect(seq), wantM)
		}
		long, _ := s.l.Get("long", void)
		check("long list", slices.Collect(long), []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "z"})
		now = 11_000
		got, _ := s.v.Get(3, void)
		short, _ := s.l.Get("short", void)
		if n := len(slices.Collect(short)); withTTL != (got == 0 && n == 0) {
			t.Fatalf("TTL %v: a TTL after the restore, value %d and %d elements", withTTL, got, n)
		}
	}
}

func reflectEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]int64:
		return maps.Equal(x, b.(map[string]int64))
	case []string:
		return slices.Equal(x, b.([]string))
	}
	return a == b
}

// TestTTL_FileRoundTrip writes snapshots and a delta of TTL states: the
// files leave out what had expired at the capture, a delta across a
// cleanup carries the expirations as deletes, and a restore drops what
// has expired since.
func TestTTL_FileRoundTrip(t *testing.T) {
	now := int64(0)
	clock := func() int64 { return now }
	ttl := &cowstate.TTL{Duration: 100 * time.Millisecond}
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	s := registerV1(t, b, ttl)
	for k := range int64(100) {
		now = 0
		if k%2 == 1 {
			now = 50
		}
		for _, err := range []error{s.v.Put(k, void, k), s.m.Put(k, void, "x", k), s.r.Add(k, void, k), s.l.Add("list", void, "e")} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	now = 60
	s0 := b.Snapshot()
	var full bytes.Buffer
	if err := cowstate.WriteSnapshot(context.Background(), &full, s0, nil); err != nil {
		t.Fatal(err)
	}
	now = 100 // the even keys and half of the list expire
	if _, removed := b.CleanupExpired(1 << 20); removed == 0 {
		t.Fatal("cleanup removed nothing")
	}
	s1 := b.Snapshot()
	d, err := cowstate.Diff(s0, s1)
	if err != nil {
		t.Fatal(err)
	}
	var dbuf bytes.Buffer
	if _, _, err := cowstate.WriteDiff(context.Background(), &dbuf, s0, s1, 1, 2, -1); err != nil {
		t.Fatal(err)
	}
	var sp bytes.Buffer
	if err := cowstate.WriteSavepoint(context.Background(), &sp, s1, nil); err != nil {
		t.Fatal(err)
	}
	s0.Release()
	s1.Release()
	if entries, _ := d.Changes(); entries == 0 {
		t.Fatal("a delta across the cleanup is empty")
	}
	restore := func(at int64, chain func(b *cowstate.Backend) error) v1States {
		t.Helper()
		now = at
		b2, err := cowstate.New(cowstate.Config{MaxParallelism: 8, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		s2 := registerV1(t, b2, ttl)
		if err := chain(b2); err != nil {
			t.Fatal(err)
		}
		return s2
	}
	open := func(buf []byte) *snapshot.Reader {
		r, err := snapshot.Open(bytes.NewReader(buf), int64(len(buf)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Meta().States[0].TTL != true {
			t.Fatalf("metadata: %+v, want states with TTL", r.Meta().States)
		}
		return r
	}
	fromFull := func(b2 *cowstate.Backend) error { return b2.RestoreSnapshot(context.Background(), open(full.Bytes())) }
	fromChain := func(b2 *cowstate.Backend) error {
		dr, err := delta.Open(bytes.NewReader(dbuf.Bytes()), int64(dbuf.Len()))
		if err != nil {
			return err
		}
		dd, err := dr.Read(context.Background(), statetable.KeyGroupRange{First: 0, Last: 7})
		if err != nil {
			return err
		}
		return b2.RestoreChains(context.Background(), cowstate.Chain{Full: open(full.Bytes()), FullID: 1, Deltas: []*delta.Delta{dd}})
	}
	fromSavepoint := func(b2 *cowstate.Backend) error { return b2.RestoreSnapshot(context.Background(), open(sp.Bytes())) }
	for _, c := range []struct {
		name  string
		at    int64
		chain func(*cowstate.Backend) error
		want  int // values of each value, map, reducing state; elements of the list
	}{
		{"full at 60", 60, fromFull, 100},
		{"full at 100", 100, fromFull, 50},
		{"chain at 100", 100, fromChain, 50},
		{"savepoint at 100", 100, fromSavepoint, 50},
		{"savepoint at 150", 150, fromSavepoint, 0},
	} {
		s2 := restore(c.at, c.chain)
		listLen, _ := s2.l.Len("list", void)
		if s2.v.Count() != c.want || s2.m.Count() != c.want || s2.r.Count() != c.want || listLen != c.want {
			t.Fatalf("%s: %d values, %d maps, %d reductions, %d list elements; want %d each",
				c.name, s2.v.Count(), s2.m.Count(), s2.r.Count(), listLen, c.want)
		}
	}
	// A file with TTL states does not restore into states without.
	b3, err := cowstate.New(cowstate.Config{MaxParallelism: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	registerV1(t, b3, nil)
	if err := b3.RestoreSnapshot(context.Background(), open(full.Bytes())); !errors.Is(err, snapshot.ErrMismatch) || !errors.Is(err, statetable.ErrStateMismatch) {
		t.Fatalf("TTL file into states without TTL: %v, want ErrMismatch", err)
	}
}
