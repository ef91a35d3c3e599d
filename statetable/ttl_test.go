package statetable

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate/cow"
)

// ttlTable is a table whose clock the test sets.
type ttlTable struct {
	*Table
	now int64
}

func newTTLTable(t testing.TB) *ttlTable {
	tt := &ttlTable{}
	tb, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, Clock: func() int64 { return tt.now }})
	if err != nil {
		t.Fatal(err)
	}
	tt.Table = tb
	return tt
}

func ttl(ms int64) TTL { return TTL{Duration: time.Duration(ms) * time.Millisecond} }

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var void = VoidNamespace{}

func TestTTL_Value(t *testing.T) {
	for _, vis := range []TTLVisibility{NeverReturnExpired, ReturnExpiredIfNotCleanedUp} {
		tb := newTTLTable(t)
		v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, -1,
			TTL{Duration: 100 * time.Millisecond, Visibility: vis}))
		noErr(t, v.Put(1, void, 10))
		tb.now = 99
		if got, err := v.Get(1, void); err != nil || got != 10 {
			t.Fatalf("visibility %d: at 99 got %d, %v; want 10", vis, got, err)
		}
		tb.now = 100
		got, ok, err := v.Lookup(1, void)
		noErr(t, err)
		if want := vis == ReturnExpiredIfNotCleanedUp; ok != want || ok && got != 10 {
			t.Fatalf("visibility %d: expired value read as %d, %v; want found %v", vis, got, ok, want)
		}
		if v.Count() != 0 {
			t.Fatalf("visibility %d: the read left %d entries, want the expired one removed", vis, v.Count())
		}
		if got, _ := v.Get(1, void); got != -1 {
			t.Fatalf("visibility %d: second read of an expired value got %d, want the default", vis, got)
		}
		// A write refreshes.
		noErr(t, v.Put(2, void, 20))
		tb.now = 150
		noErr(t, v.Put(2, void, 21))
		tb.now = 249
		if got, _ := v.Get(2, void); got != 21 {
			t.Fatalf("rewritten value expired early: %d", got)
		}
	}
}

func TestTTL_UpdateOnRead(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0,
		TTL{Duration: 100 * time.Millisecond, Update: UpdateOnReadAndWrite}))
	w := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "w", Int64, Void, Int64, 0, ttl(100)))
	noErr(t, v.Put(1, void, 5))
	noErr(t, w.Put(1, void, 5))
	for _, now := range []int64{90, 180, 270} {
		tb.now = now
		if got, _ := v.Get(1, void); got != 5 {
			t.Fatalf("read at %d: %d, want 5 (each read refreshes)", now, got)
		}
	}
	if got, _ := w.Get(1, void); got != 0 {
		t.Fatalf("UpdateOnCreateAndWrite: read at 270 of a value written at 0 got %d", got)
	}
	tb.now = 370
	if got, _ := v.Get(1, void); got != 0 {
		t.Fatalf("read at 370, 100 after the last read: %d, want expired", got)
	}
}

func TestTTL_ReducingAggregating(t *testing.T) {
	tb := newTTLTable(t)
	r := must[*ReducingState[string, VoidNamespace, int64]](t)(NewReducingWithTTL(tb.Table, "r", String, Void, Int64, func(a, b int64) int64 { return a + b }, ttl(100)))
	a := must[*AggregatingState[string, VoidNamespace, int64, [2]int64, string]](t)(NewAggregatingWithTTL(tb.Table, "a", String, Void, accCodec, AggregateFunction[int64, [2]int64, string](sumAgg{}), ttl(100)))
	noErr(t, r.Add("k", void, 1))
	noErr(t, a.Add("k", void, 1))
	tb.now = 50
	noErr(t, r.Add("k", void, 2))
	noErr(t, a.Add("k", void, 2))
	tb.now = 149
	if got, ok, _ := r.Get("k", void); !ok || got != 3 {
		t.Fatalf("reducing at 149: %d %v, want 3 (refreshed at 50)", got, ok)
	}
	if got, ok, _ := a.Get("k", void); !ok || got != "3/2" {
		t.Fatalf("aggregating at 149: %q %v", got, ok)
	}
	tb.now = 150
	noErr(t, r.Add("k", void, 7))
	noErr(t, a.Add("k", void, 7))
	if got, _, _ := r.Get("k", void); got != 7 {
		t.Fatalf("add to an expired value: %d, want a fresh 7", got)
	}
	if got, _, _ := a.Get("k", void); got != "7/1" {
		t.Fatalf("add to an expired accumulator: %q, want a fresh one", got)
	}
	// Merge: expired sources are skipped, the merged value is refreshed.
	rw := must[*ReducingState[string, string, int64]](t)(NewReducingWithTTL(tb.Table, "rw", String, String, Int64, func(a, b int64) int64 { return a + b }, ttl(100)))
	noErr(t, rw.Add("k", "old", 100))
	tb.now = 200
	noErr(t, rw.Add("k", "s1", 1))
	noErr(t, rw.Add("k", "s2", 2))
	tb.now = 260
	noErr(t, rw.MergeNamespaces("k", "t", "old", "s1", "s2"))
	tb.now = 359
	if got, ok, _ := rw.Get("k", "t"); !ok || got != 3 {
		t.Fatalf("merged: %d %v, want 3 without the expired source, refreshed at 260", got, ok)
	}
	if rw.Count() != 1 {
		t.Fatalf("merge left %d entries, want the target only", rw.Count())
	}
}

func TestTTL_ListPerElement(t *testing.T) {
	for _, long := range []bool{false, true} {
		tb := newTTLTable(t)
		l := must[*ListState[string, VoidNamespace, int64]](t)(NewListWithTTL(tb.Table, "l", String, Void, Int64, ttl(100)))
		early := 3
		if long {
			early = 12 // past the short form
		}
		for i := range early {
			noErr(t, l.Add("k", void, int64(i)))
		}
		tb.now = 50
		noErr(t, l.AddAll("k", void, slices.Values([]int64{100, 101})))
		tb.now = 120
		if n, _ := l.Len("k", void); n != 2 {
			t.Fatalf("long %v: Len at 120 = %d, want the 2 elements added at 50", long, n)
		}
		got := slices.Collect(must[func(func(int64) bool)](t)(l.Get("k", void)))
		if !slices.Equal(got, []int64{100, 101}) {
			t.Fatalf("long %v: Get at 120 = %v", long, got)
		}
		if c, _ := innerList(l).Len("k", void); c != 2 {
			t.Fatalf("long %v: the read left %d elements stored, want the expired ones removed", long, c)
		}
		tb.now = 150
		if got := slices.Collect(must[func(func(int64) bool)](t)(l.Get("k", void))); len(got) != 0 || l.Count() != 0 {
			t.Fatalf("long %v: at 150 got %v and %d entries, want nothing", long, got, l.Count())
		}
	}
}

// inner returns the list state of stamped elements behind a TTL list.
func innerList[K, N, E any](s *ListState[K, N, E]) *ListState[K, N, stamped[E]] {
	return s.ttl.(*ttlList[K, N, E]).inner
}

func TestTTL_MapPerUserKey(t *testing.T) {
	tb := newTTLTable(t)
	m := must[*MapState[string, VoidNamespace, string, int64]](t)(NewMapStateWithTTL(tb.Table, "m", String, Void, String, Int64,
		TTL{Duration: 100 * time.Millisecond, Visibility: ReturnExpiredIfNotCleanedUp}))
	noErr(t, m.Put("k", void, "a", 1))
	tb.now = 50
	noErr(t, m.PutAll("k", void, maps.All(map[string]int64{"b": 2, "c": 3})))
	tb.now = 100
	if n, _ := m.Len("k", void); n != 2 {
		t.Fatalf("Len at 100 = %d, want 2", n)
	}
	if v, ok, _ := m.Get("k", void, "a"); !ok || v != 1 {
		t.Fatalf("ReturnExpiredIfNotCleanedUp: expired entry read as %d %v, want it once", v, ok)
	}
	if ok, _ := m.Contains("k", void, "a"); ok {
		t.Fatal("an expired entry read once is still there")
	}
	tb.now = 149
	got := maps.Collect(must[func(func(string, int64) bool)](t)(m.Iterate("k", void)))
	if !maps.Equal(got, map[string]int64{"b": 2, "c": 3}) {
		t.Fatalf("Iterate at 149 = %v", got)
	}
	tb.now = 150
	if empty, _ := m.IsEmpty("k", void); !empty {
		t.Fatal("IsEmpty at 150: false, want every entry expired")
	}
	got = maps.Collect(must[func(func(string, int64) bool)](t)(m.Iterate("k", void)))
	if len(got) != 2 || m.Count() != 0 {
		t.Fatalf("Iterate of expired entries with ReturnExpiredIfNotCleanedUp = %v, %d entries left; want both once, none left", got, m.Count())
	}
}

func TestTTL_BadConfig(t *testing.T) {
	tb := newTTLTable(t)
	for _, c := range []struct {
		ttl  TTL
		want string
	}{
		{TTL{Duration: -time.Second}, "duration"},
		{TTL{}, "duration"},
		{TTL{Duration: time.Microsecond}, "duration"},
		{TTL{Duration: time.Second, Update: 7}, "update"},
		{TTL{Duration: time.Second, Visibility: 7}, "visibility"},
		{TTL{Duration: time.Second, CleanupPerAccess: -1}, "cleanup"},
	} {
		_, err := NewValueWithTTL(tb.Table, "bad", Int64, Void, Int64, 0, c.ttl)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TTL %+v: %v, want ErrConfig naming the state and the %s", c.ttl, err, c.want)
		}
		_, err = NewMapStateWithTTL(tb.Table, "badmap", Int64, Void, Int64, Int64, c.ttl)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("map state, TTL %+v: %v, want ErrConfig", c.ttl, err)
		}
	}
	if _, err := tb.State("bad"); err == nil {
		t.Error("a rejected registration left a state behind")
	}
	if _, err := NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewValue(tb.Table, "v", Int64, Void, Int64, 0); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `"v"`) {
		t.Errorf("re-registration without the TTL: %v, want ErrStateMismatch naming the state", err)
	}
	for _, other := range []TTL{ttl(200), {Duration: 100 * time.Millisecond, Update: UpdateOnReadAndWrite}} {
		if _, err := NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, other); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `"v"`) {
			t.Errorf("re-registration with TTL %+v: %v, want ErrStateMismatch naming the state", other, err)
		}
	}
	if _, err := NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)); err != nil {
		t.Errorf("re-registration with the same TTL: %v", err)
	}
	if _, err := NewList(tb.Table, "l", Int64, Void, Int64); err != nil {
		t.Fatal(err)
	}
	if _, err := NewListWithTTL(tb.Table, "l", Int64, Void, Int64, ttl(100)); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("list re-registered with a TTL: %v, want ErrStateMismatch", err)
	}
	sum := func(a, b int64) int64 { return a + b }
	agg := AggregateFunction[int64, [2]int64, string](sumAgg{})
	for name, pair := range map[string][2]func() error{ // registered with a TTL, then without
		"m": {func() error {
			_, err := NewMapStateWithTTL(tb.Table, "m", Int64, Void, Int64, Int64, ttl(100))
			return err
		},
			func() error { _, err := NewMapState(tb.Table, "m", Int64, Void, Int64, Int64); return err }},
		"r": {func() error {
			_, err := NewReducingWithTTL(tb.Table, "r", Int64, Void, Int64, sum, ttl(100))
			return err
		},
			func() error { _, err := NewReducing(tb.Table, "r", Int64, Void, Int64, sum); return err }},
		"a": {func() error {
			_, err := NewAggregatingWithTTL(tb.Table, "a", Int64, Void, accCodec, agg, ttl(100))
			return err
		},
			func() error { _, err := NewAggregating(tb.Table, "a", Int64, Void, accCodec, agg); return err }},
	} {
		if err := pair[0](); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := pair[1](); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%s re-registered without its TTL: %v, want ErrStateMismatch naming it", name, err)
		}
	}
}

// TestTTL_Snapshot reads a snapshot at its capture's time and checks that a
// file's entries leave out what had expired, element by element.
func TestTTL_Snapshot(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	l := must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(tb.Table, "l", Int64, Void, Int64, ttl(100)))
	m := must[*MapState[int64, VoidNamespace, string, int64]](t)(NewMapStateWithTTL(tb.Table, "m", Int64, Void, String, Int64, ttl(100)))
	for k := range int64(10) {
		if k == 5 {
			tb.now = 60
		}
		noErr(t, v.Put(k, void, k))
		noErr(t, l.Add(0, void, k))
		noErr(t, m.Put(0, void, string(rune('a'+k)), k))
	}
	tb.now = 120
	snap := tb.View(tb.Owner().Capture())
	defer snap.Capture().Release()
	tb.now = 500 // the snapshot reads at its own time, not the writer's
	if snap.Time() != 120 {
		t.Fatalf("snapshot time %d, want 120", snap.Time())
	}
	if _, ok, _ := v.LookupAt(snap, 2, void); ok {
		t.Error("LookupAt of a value expired at the capture found it")
	}
	if got, ok, _ := v.LookupAt(snap, 7, void); !ok || got != 7 {
		t.Errorf("LookupAt of a live value: %d %v", got, ok)
	}
	if got := slices.Collect(must[func(func(int64) bool)](t)(l.GetAt(snap, 0, void))); !slices.Equal(got, []int64{5, 6, 7, 8, 9}) {
		t.Errorf("GetAt = %v, want the elements added at 60", got)
	}
	if got := maps.Collect(must[func(func(string, int64) bool)](t)(m.IterateAt(snap, 0, void))); len(got) != 5 {
		t.Errorf("IterateAt = %v, want the 5 entries put at 60", got)
	}
	// The file's entries: 5 values, and the list and map with 5 elements.
	for _, name := range []string{"v", "l", "m"} {
		n := 0
		var run []byte
		for g := range snap.MaxParallelism() {
			var err error
			var k int
			run, k, err = snap.AppendKeyGroupEntries(run, name, g)
			noErr(t, err)
			n += k
		}
		want := map[string]int{"v": 5, "l": 1, "m": 1}[name]
		if n != want {
			t.Fatalf("state %s: %d entries written, want %d", name, n, want)
		}
		tb2 := newTTLTable(t)
		tb2.now = 120
		v2 := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb2.Table, "v", Int64, Void, Int64, 0, ttl(100)))
		l2 := must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(tb2.Table, "l", Int64, Void, Int64, ttl(100)))
		m2 := must[*MapState[int64, VoidNamespace, string, int64]](t)(NewMapStateWithTTL(tb2.Table, "m", Int64, Void, String, Int64, ttl(100)))
		if _, err := tb2.RestoreRun(name, n, run); err != nil {
			t.Fatal(err)
		}
		switch name {
		case "v":
			if v2.Count() != 5 {
				t.Fatalf("restored %d values, want 5", v2.Count())
			}
		case "l":
			if n, _ := innerList(l2).Len(0, void); n != 5 {
				t.Fatalf("restored list holds %d elements, want 5", n)
			}
		case "m":
			if n, _ := m2.Len(0, void); n != 5 || m2.Count() != 1 {
				t.Fatalf("restored map holds %d entries, want 5", n)
			}
		}
		// Restored later, what expired meanwhile is dropped.
		tb3 := newTTLTable(t)
		tb3.now = 160
		v3 := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb3.Table, "v", Int64, Void, Int64, 0, ttl(100)))
		must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(tb3.Table, "l", Int64, Void, Int64, ttl(100)))
		must[*MapState[int64, VoidNamespace, string, int64]](t)(NewMapStateWithTTL(tb3.Table, "m", Int64, Void, String, Int64, ttl(100)))
		if _, err := tb3.RestoreRun(name, n, run); err != nil {
			t.Fatal(err)
		}
		if c, _ := tb3.Entries(name); c != 0 || v3.Count() != 0 {
			t.Fatalf("state %s restored after everything expired: %d entries", name, c)
		}
	}
}

// TestTTL_RestoreWithoutTimestamps restores entries written without TTL
// into states with one: they are stamped as written at the restore.
func TestTTL_RestoreWithoutTimestamps(t *testing.T) {
	src := newTTLTable(t)
	sv := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValue(src.Table, "v", Int64, Void, Int64, 0))
	sl := must[*ListState[int64, VoidNamespace, int64]](t)(NewList(src.Table, "l", Int64, Void, Int64))
	sm := must[*MapState[int64, VoidNamespace, string, int64]](t)(NewMapState(src.Table, "m", Int64, Void, String, Int64))
	noErr(t, sv.Put(1, void, 11))
	noErr(t, sl.AddAll(1, void, slices.Values([]int64{1, 2, 3})))
	noErr(t, sm.Put(1, void, "x", 5))
	snap := src.View(src.Owner().Capture())
	defer snap.Capture().Release()
	dst := newTTLTable(t)
	dst.now = 1000
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(dst.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	l := must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(dst.Table, "l", Int64, Void, Int64, ttl(100)))
	m := must[*MapState[int64, VoidNamespace, string, int64]](t)(NewMapStateWithTTL(dst.Table, "m", Int64, Void, String, Int64, ttl(100)))
	for _, name := range []string{"v", "l", "m"} {
		run, n := encodeRun(t, snap, name)
		if _, err := dst.RestoreRunFrom(name, false, n, run); err != nil {
			t.Fatal(err)
		}
	}
	dst.now = 1099
	if got, _ := v.Get(1, void); got != 11 {
		t.Fatalf("value: %d", got)
	}
	if got := slices.Collect(must[func(func(int64) bool)](t)(l.Get(1, void))); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("list: %v", got)
	}
	if got, ok, _ := m.Get(1, void, "x"); !ok || got != 5 {
		t.Fatalf("map: %d %v", got, ok)
	}
	dst.now = 1100
	if got, _ := v.Get(1, void); got != 0 {
		t.Fatalf("value restored at 1000 with a TTL of 100 still there at 1100: %d", got)
	}
	// Timestamps into a state without TTL are refused.
	plain := newTTLTable(t)
	must[*ValueState[int64, VoidNamespace, int64]](t)(NewValue(plain.Table, "v", Int64, Void, Int64, 0))
	if _, err := plain.RestoreRunFrom("v", true, 0, nil); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("stamped entries into a state without TTL: %v, want ErrStateMismatch", err)
	}
	if err := plain.ApplyEntriesFrom("v", true, nil); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("stamped changes into a state without TTL: %v, want ErrStateMismatch", err)
	}
}

// TestTTL_Cleanup runs the incremental cleanup in bounded steps and checks
// that one round removes exactly what expired, and that the diff across
// it carries the expirations as deletes (and a list's as a change of the
// list).
func TestTTL_Cleanup(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	w := must[*ValueState[string, string, int64]](t)(NewValueWithTTL(tb.Table, "w", String, String, Int64, 0, ttl(100))) // 31-byte and long keys
	l := must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(tb.Table, "l", Int64, Void, Int64, ttl(100)))
	plain := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValue(tb.Table, "plain", Int64, Void, Int64, 0))
	const n = 1000
	expired := map[int64]bool{}
	for k := range int64(n) {
		tb.now = 50
		if k%10 == 3 {
			tb.now = 0
			expired[k] = true
		}
		noErr(t, v.Put(k, void, k))
		noErr(t, plain.Put(k, void, k))
		noErr(t, w.Put(strings.Repeat("k", int(k%40)), string(rune('a'+k%7)), k))
		noErr(t, l.Add(k%10, void, k))
	}
	tb.now = 100
	before := tb.View(tb.Owner().Capture())
	defer before.Capture().Release()
	steps, visited, removed := 0, 0, 0
	total := v.Count() + w.Count() + l.Count()
	for visited < total+3*64 && steps < 1000 {
		vi, re := tb.CleanupExpired(64)
		if vi > 64+8 { // a step may finish a run of equal hashes
			t.Fatalf("step visited %d entries, budget 64", vi)
		}
		visited += vi
		removed += re
		steps++
	}
	if v.Count() != n-len(expired) {
		t.Fatalf("after a round: %d values, want %d", v.Count(), n-len(expired))
	}
	if plain.Count() != n {
		t.Fatalf("cleanup touched a state without TTL: %d entries left of %d", plain.Count(), n)
	}
	for k, ns := range w.Pairs() {
		if _, ok, _ := w.Lookup(k, ns); !ok {
			t.Fatalf("state w: entry (%q, %q) expired but not cleaned up", k, ns)
		}
	}
	for k := range int64(n) {
		_, ok, _ := v.Lookup(k, void)
		if ok == expired[k] {
			t.Fatalf("key %d: present %v after cleanup, expired %v", k, ok, expired[k])
		}
	}
	after := tb.View(tb.Owner().Capture())
	defer after.Capture().Release()
	deletes := 0
	noErr(t, DiffState(before, after, "v", func(c EntryChange) bool {
		if c.Op != OpDelete {
			t.Fatalf("cleanup diff has a %v, want deletes only", c.Op)
		}
		deletes++
		return true
	}))
	if deletes != len(expired) {
		t.Fatalf("diff across the cleanup: %d deletes, want %d", deletes, len(expired))
	}
	listChanges := 0
	noErr(t, DiffState(before, after, "l", func(c EntryChange) bool { listChanges++; return true }))
	if listChanges != 1 { // only key 3's list had elements written at 0
		t.Fatalf("diff of the list state: %d changes, want 1", listChanges)
	}
	if got, _ := l.Len(3, void); got != 0 || l.Count() != 9 {
		t.Fatalf("list 3: %d elements, %d lists; want the expired list gone", got, l.Count())
	}
}

// TestTTL_CleanupPerAccess checks that accesses of a state with
// CleanupPerAccess clean up expired entries elsewhere in the state.
func TestTTL_CleanupPerAccess(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0,
		TTL{Duration: 100 * time.Millisecond, CleanupPerAccess: 5}))
	for k := range int64(100) {
		noErr(t, v.Put(k, void, k))
	}
	tb.now = 100
	noErr(t, v.Put(1000, void, 1)) // a live entry, accessed over and over
	for range 25 {
		if _, err := v.Get(1000, void); err != nil {
			t.Fatal(err)
		}
	}
	if v.Count() != 1 {
		t.Fatalf("after 26 accesses visiting 5 entries each, %d entries left, want the live one", v.Count())
	}
}

// TestTTL_CleanupFloor checks that a clean round lets later steps skip a
// state until its least expiration, and that what may bring older
// timestamps in (a restore, a clock that goes back, a merge of lists)
// makes the next steps look again.
func TestTTL_CleanupFloor(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	for k := range int64(500) {
		noErr(t, v.Put(k, void, k))
	}
	tb.now = 10
	if vi, re := tb.CleanupExpired(10_000); vi != 500 || re != 0 {
		t.Fatalf("first round: visited %d, removed %d; want 500, 0", vi, re)
	}
	tb.now = 99
	if vi, _ := tb.CleanupExpired(10_000); vi != 0 {
		t.Fatalf("before the least expiration (100): visited %d, want 0", vi)
	}
	tb.now = 100
	if vi, re := tb.CleanupExpired(10_000); vi != 500 || re != 500 {
		t.Fatalf("at the least expiration: visited %d, removed %d; want 500, 500", vi, re)
	}

	// A clock that goes back writes timestamps below the floor.
	noErr(t, v.Put(1, void, 1)) // expires at 200
	tb.CleanupExpired(10_000)   // floor 200
	tb.now = -50
	noErr(t, v.Put(2, void, 2)) // expires at 50
	tb.now = 60
	if _, re := tb.CleanupExpired(10_000); re != 1 || v.Count() != 1 {
		t.Fatalf("after the clock went back: removed %d, %d entries left; want the entry written then removed", re, v.Count())
	}

	// A restore brings timestamps older than the floor.
	src := newTTLTable(t)
	sv := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(src.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	noErr(t, sv.Put(7, void, 7)) // expires at 100
	snap := src.View(src.Owner().Capture())
	run, n := encodeRun(t, snap, "v")
	snap.Capture().Release()
	tb.CleanupExpired(10_000) // floor 160 (written at 60)
	if _, err := tb.RestoreRun("v", n, run); err != nil {
		t.Fatal(err)
	}
	tb.now = 100
	if _, re := tb.CleanupExpired(10_000); re != 1 {
		t.Fatalf("after a restore of an entry expiring at 100: removed %d at 100, want 1", re)
	}

	// A merge of lists moves elements with their timestamps, maybe from
	// an entry the round has not visited yet into one it has.
	tm := newTTLTable(t)
	l := must[*ListState[int64, string, int64]](t)(NewListWithTTL(tm.Table, "l", Int64, String, Int64, ttl(100)))
	ha, _, _ := innerList(l).locate(1, "a")
	hb, _, _ := innerList(l).locate(1, "b")
	first, second := "a", "b" // in hash order: the round visits first first
	if hb < ha {
		first, second = "b", "a"
	}
	noErr(t, l.Add(1, second, 1)) // expires at 100
	tm.now = 50
	noErr(t, l.Add(1, first, 2)) // expires at 150
	tm.now = 60
	if vi, _ := tm.CleanupExpired(1); vi != 1 {
		t.Fatalf("a step of 1: visited %d", vi)
	}
	noErr(t, l.MergeNamespaces(1, first, second))
	tm.CleanupExpired(10) // the rest of the round
	tm.now = 100
	if _, re := tm.CleanupExpired(10); re != 1 {
		t.Fatalf("after a merge behind the cursor, the element expiring at 100 was not cleaned up at 100 (removed %d)", re)
	}
	if got := slices.Collect(must[func(func(int64) bool)](t)(innerListValues(l, first))); !slices.Equal(got, []int64{2}) {
		t.Fatalf("merged list after cleanup: %v, want [2]", got)
	}
}

// innerListValues yields the elements held in the list of (1, ns), expired
// ones included.
func innerListValues(l *ListState[int64, string, int64], ns string) (func(func(int64) bool), error) {
	seq, err := innerList(l).Get(1, ns)
	return func(yield func(int64) bool) {
		for e := range seq {
			if !yield(e.v) {
				return
			}
		}
	}, err
}

// TestTTL_CleanupBuckets: once a round has run, a cleanup visits only the
// buckets of hashes where something may have expired, and still removes
// all of it, also after writes with a clock that went back.
func TestTTL_CleanupBuckets(t *testing.T) {
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	const n, early = 20_000, 10
	for k := range int64(early) { // expire at 100
		noErr(t, v.Put(k, void, k))
	}
	tb.now = 50
	for k := int64(early); k < n+early; k++ { // expire at 150
		noErr(t, v.Put(k, void, k))
	}
	tb.now = 60
	if vi, re := tb.CleanupExpired(1 << 30); vi != n+early || re != 0 {
		t.Fatalf("first round: visited %d, removed %d; want %d, 0", vi, re, n+early)
	}
	tb.now = 100
	vi, re := tb.CleanupExpired(1 << 30)
	if re != early || v.Count() != n {
		t.Fatalf("at 100: removed %d, %d left; want %d, %d", re, v.Count(), early, n)
	}
	if vi > early*4*bucketEntries {
		t.Fatalf("at 100: visited %d entries to remove %d; want at most %d (the buckets they are in)", vi, early, early*4*bucketEntries)
	}

	tb.now = 20 // back in time: these expire at 120, before the floors of 150
	for k := range int64(early) {
		noErr(t, v.Put(k, void, k))
	}
	tb.now = 120
	if _, re := tb.CleanupExpired(1 << 30); re != early || v.Count() != n {
		t.Fatalf("at 120, after writes with the clock back: removed %d, %d left; want %d, %d", re, v.Count(), early, n)
	}
	tb.now = 150
	if _, re := tb.CleanupExpired(1 << 30); re != n || v.Count() != 0 {
		t.Fatalf("at 150: removed %d, %d left; want all %d", re, v.Count(), n)
	}
	for k := range int64(n / 2) { // into buckets a round found empty (as many: the same buckets)
		noErr(t, v.Put(k, void, k)) // expire at 250
	}
	tb.now = 250
	if _, re := tb.CleanupExpired(1 << 30); re != n/2 || v.Count() != 0 {
		t.Fatalf("at 250: removed %d, %d left; want all %d written into emptied buckets", re, v.Count(), n/2)
	}
}

// TestTTL_CleanupBucketsRandom writes and cleans a TTL state at random
// with small budgets (the cursor stopping inside buckets), the clock
// mostly going forward but sometimes back: after every whole round
// nothing expired is left, and nothing live was removed.
func TestTTL_CleanupBucketsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tb := newTTLTable(t)
	v := must[*ValueState[int64, VoidNamespace, int64]](t)(NewValueWithTTL(tb.Table, "v", Int64, Void, Int64, 0, ttl(100)))
	// The model: each key's expiration, and the latest time a cleanup ran
	// since it was written (a cleanup then may have removed it if it had
	// expired by that time, though the clock went back since).
	type entry struct{ exp, cleaned int64 }
	model := map[int64]*entry{}
	has := func(k int64) bool {
		_, ok, err := v.Lookup(k, void)
		noErr(t, err)
		return ok
	}
	for step := range 5000 {
		switch r := rng.IntN(100); {
		case r < 60:
			k := rng.Int64N(5000)
			noErr(t, v.Put(k, void, k))
			model[k] = &entry{exp: tb.now + 100, cleaned: math.MinInt64}
		case r < 62:
			tb.now -= rng.Int64N(30)
		case r < 80:
			tb.now += rng.Int64N(5)
		default:
			tb.CleanupExpired(1 + rng.IntN(300))
			for _, e := range model {
				e.cleaned = max(e.cleaned, tb.now)
			}
		}
		if step%500 == 499 { // two whole rounds: nothing expired may remain
			tb.CleanupExpired(1 << 30)
			tb.CleanupExpired(1 << 30)
			live, maybe := 0, 0
			for k, e := range model {
				switch {
				case e.exp <= tb.now:
					delete(model, k)
				case e.exp <= e.cleaned:
					maybe++
				default:
					live++
					if !has(k) {
						t.Fatalf("step %d: live key %d (expires at %d, now %d) was removed", step, k, e.exp, tb.now)
					}
				}
			}
			if n := v.Count(); n < live || n > live+maybe {
				t.Fatalf("step %d: %d entries after whole rounds; the model has %d live and %d that a cleanup may have removed", step, n, live, maybe)
			}
			for k, e := range model { // settle: what may have gone, went or stays
				if e.exp <= e.cleaned {
					if !has(k) {
						delete(model, k)
					}
				}
			}
		}
	}
}
