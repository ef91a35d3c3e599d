package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

func newBackend(t *testing.T, cfg cowstate.Config) *cowstate.Backend {
	t.Helper()
	b, err := cowstate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// must returns v, or fails t with err: must(f())(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// A value state keyed by string with int64 values needs no codec and no
// namespace; a snapshot keeps what it saw.
func TestValue_InferredCodecsNoNamespace(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	count := must(cowstate.Value[string, int64](b, "count"))(t)
	inc := func(n int64) int64 { return n + 1 }
	for _, u := range []string{"ann", "bob", "ann"} {
		if err := count.Update(u, inc); err != nil {
			t.Fatal(err)
		}
	}
	snap := b.Snapshot()
	defer snap.Release()
	if err := count.Put("ann", 10); err != nil {
		t.Fatal(err)
	}
	if err := count.Clear("bob"); err != nil {
		t.Fatal(err)
	}

	if n := must(count.Get("ann"))(t); n != 10 {
		t.Errorf("Get(ann) = %d, want 10", n)
	}
	if n, ok, err := count.Lookup("bob"); n != 0 || ok || err != nil {
		t.Errorf("Lookup(bob) = %d, %v, %v; want 0, false, nil", n, ok, err)
	}
	if n := must(count.GetAt(snap, "ann"))(t); n != 2 {
		t.Errorf("GetAt(snap, ann) = %d, want 2", n)
	}
	if n, ok, err := count.LookupAt(snap, "bob"); n != 1 || !ok || err != nil {
		t.Errorf("LookupAt(snap, bob) = %d, %v, %v; want 1, true, nil", n, ok, err)
	}
	if got := slices.Sorted(count.Keys()); !slices.Equal(got, []string{"ann"}) || count.Count() != 1 {
		t.Errorf("Keys() = %v, Count() = %d; want [ann], 1", got, count.Count())
	}
	at := slices.Sorted(must(count.KeysAt(snap))(t))
	if !slices.Equal(at, []string{"ann", "bob"}) {
		t.Errorf("KeysAt(snap) = %v, want [ann bob]", at)
	}
}

// Every sequence of the library iterates what was there when the loop
// began, so the loop's body may write: keys it adds, clears and rewrites
// change the state and not the loop, and the loop holds nothing once it
// ends, stopped early or not.
func TestKeys_LoopBodyWrites(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	count := must(cowstate.Value[int64, int64](b, "count"))(t)
	timers := must(cowstate.Timers[int64](b, "t"))(t)
	for k := range int64(100) {
		if err := count.Put(k, k); err != nil {
			t.Fatal(err)
		}
		if _, err := timers.RegisterEventTime(k, 10+k); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	for k := range count.Keys() {
		seen = append(seen, k)
		if err := count.Clear(k); err != nil { // the key yielded
			t.Fatal(err)
		}
		if err := count.Put(1000+k, k); err != nil { // a key the loop will not see
			t.Fatal(err)
		}
	}
	if slices.Sort(seen); len(seen) != 100 || seen[0] != 0 || seen[99] != 99 {
		t.Fatalf("the loop saw %d keys, want the 100 there when it began", len(seen))
	}
	if got := slices.Sorted(count.Keys()); len(got) != 100 || got[0] != 1000 || count.Count() != 100 {
		t.Fatalf("after the loop the state holds %d keys from %v, want 1000..1099", count.Count(), got[:1])
	}
	fired := 0
	for tm := range timers.EventTimers() {
		if _, err := timers.DeleteEventTime(tm.Key, tm.Timestamp); err != nil {
			t.Fatal(err)
		}
		if _, err := timers.RegisterEventTime(tm.Key, tm.Timestamp+1000); err != nil {
			t.Fatal(err)
		}
		if fired++; fired == 50 {
			break
		}
	}
	list := must(cowstate.List[int64, string](b, "list"))(t)
	for _, e := range []string{"a", "b", "c"} {
		if err := list.Add(7, e); err != nil {
			t.Fatal(err)
		}
	}
	var elems []string
	for e := range must(list.Get(7))(t) {
		elems = append(elems, e)
		if err := list.Add(7, e+e); err != nil { // the list being read
			t.Fatal(err)
		}
	}
	if !slices.Equal(elems, []string{"a", "b", "c"}) {
		t.Fatalf("the loop over the list saw %v, want [a b c]", elems)
	}
	if got := slices.Collect(must(list.Get(7))(t)); !slices.Equal(got, []string{"a", "b", "c", "aa", "bb", "cc"}) {
		t.Fatalf("after the loop the list is %v", got)
	}
	if n := b.LiveSnapshots(); n != 0 {
		t.Fatalf("%d snapshots live after the loops, want 0", n)
	}
	next, _ := timers.NextEventTime()
	if next != 60 {
		t.Fatalf("earliest timer %d after moving the first 50, want 60", next)
	}
}

// The state a new-style handle registers is the namespaced state with the
// void namespace and the inferred codecs: the same bytes, so a snapshot
// written through one restores through the other.
func TestValue_SameStateAsNamespacedWithVoid(t *testing.T) {
	old := newBackend(t, cowstate.Config{})
	v := must(cowstate.NamespacedValue(old, "count", statetable.String, statetable.Void, statetable.Int64, 0))(t)
	for i, u := range []string{"ann", "bob"} {
		if err := v.Put(u, cowstate.VoidNamespace{}, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	snap := old.Snapshot()
	var buf bytes.Buffer
	err := cowstate.WriteSnapshot(context.Background(), &buf, snap, nil)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}

	b := newBackend(t, cowstate.Config{})
	count := must(cowstate.Value[string, int64](b, "count"))(t)
	r, err := snapshot.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := must(count.Get("bob"))(t); n != 2 {
		t.Errorf("restored Get(bob) = %d, want 2", n)
	}
	if count.Namespaced() != must(cowstate.NamespacedValue(b, "count", statetable.String, statetable.Void, statetable.Int64, 0))(t) {
		t.Error("Namespaced() is not the state NamespacedValue registers under the name")
	}
}

// Registering a name again returns a handle on the same state; another
// default, value type or kind is an error naming the state.
func TestValue_Reregistration(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	a := must(cowstate.Value[string, int64](b, "count", cowstate.WithDefault[int64](7)))(t)
	again := must(cowstate.Value[string, int64](b, "count", cowstate.WithDefault[int64](7)))(t)
	if err := a.Put("ann", 1); err != nil {
		t.Fatal(err)
	}
	if n := must(again.Get("ann"))(t); n != 1 {
		t.Errorf("second handle Get(ann) = %d, want 1", n)
	}
	if n := must(again.Get("bob"))(t); n != 7 {
		t.Errorf("Get(bob) = %d, want the default 7", n)
	}
	for name, register := range map[string]func() error{
		"other default": func() error { _, err := cowstate.Value[string, int64](b, "count"); return err },
		"other value":   func() error { _, err := cowstate.Value[string, string](b, "count"); return err },
		"other kind":    func() error { _, err := cowstate.List[string, int64](b, "count"); return err },
	} {
		err := register()
		if !errors.Is(err, cowstate.ErrStateMismatch) || !strings.Contains(err.Error(), `"count"`) {
			t.Errorf("%s: %v, want an error matching ErrStateMismatch naming the state", name, err)
		}
	}
}

type point struct{ X, Y int }

// Options of the wrong Go type, of no use to the kind or given twice, and
// types with no inferred codec, are errors matching ErrConfig that name
// the state; registration leaves nothing behind.
func TestStateOptions_Errors(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	pointCodec := statetable.FuncCodec("point",
		func(dst []byte, p point) []byte { return append(dst, byte(p.X), byte(p.Y)) },
		func(src []byte) (point, error) {
			if len(src) != 2 {
				return point{}, statetable.ErrDecode
			}
			return point{int(src[0]), int(src[1])}, nil
		})
	cases := []struct {
		name     string
		register func() error
		want     error
		mention  string
	}{
		{"no codec", func() error { _, err := cowstate.Value[string, chan int](b, "s1"); return err }, cowstate.ErrNoCodec, "value codec"},
		{"key codec type", func() error {
			_, err := cowstate.Value[string, int64](b, "s2", cowstate.WithKeyCodec(statetable.Int64))
			return err
		}, cowstate.ErrConfig, "Codec[string]"},
		{"default type", func() error {
			_, err := cowstate.Value[string, int64](b, "s3", cowstate.WithDefault(7)) // an int, not an int64
			return err
		}, cowstate.ErrConfig, "default is a int"},
		{"default on a list", func() error {
			_, err := cowstate.List[string, int64](b, "s4", cowstate.WithDefault[int64](7))
			return err
		}, cowstate.ErrConfig, "list state has no default"},
		{"twice", func() error {
			_, err := cowstate.Value[string, int64](b, "s5", cowstate.WithDefault[int64](1), cowstate.WithDefault[int64](2))
			return err
		}, cowstate.ErrConfig, "given twice"},
		{"zero option", func() error {
			_, err := cowstate.Value[string, int64](b, "s6", cowstate.StateOption{})
			return err
		}, cowstate.ErrConfig, "zero StateOption"},
		{"user key codec on a value state", func() error {
			_, err := cowstate.Value[string, int64](b, "s7", cowstate.WithUserKeyCodec(statetable.String))
			return err
		}, cowstate.ErrConfig, "no user key codec"},
	}
	for _, c := range cases {
		err := c.register()
		if !errors.Is(err, c.want) || !errors.Is(err, cowstate.ErrConfig) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %v; want an error matching %v and ErrConfig, mentioning %q", c.name, err, c.want, c.mention)
		}
	}
	if states := len(b.Stats().States); states != 0 {
		t.Errorf("failed registrations left %d states", states)
	}

	// With its codec given, the same state registers and works.
	p := must(cowstate.Value[string, point](b, "s1", cowstate.WithValueCodec(pointCodec)))(t)
	if err := p.Put("a", point{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := must(p.Get("a"))(t); got != (point{1, 2}) {
		t.Errorf("Get(a) = %v, want {1 2}", got)
	}
}

type average struct{}

func (average) CreateAccumulator() [2]int64         { return [2]int64{} }
func (average) Add(in int64, acc [2]int64) [2]int64 { return [2]int64{acc[0] + in, acc[1] + 1} }
func (average) Result(acc [2]int64) float64         { return float64(acc[0]) / float64(acc[1]) }
func (average) Merge(a, b [2]int64) [2]int64        { return [2]int64{a[0] + b[0], a[1] + b[1]} }
func sumAcc(dst []byte, a [2]int64) []byte {
	return statetable.Int64.Append(statetable.Int64.Append(dst, a[0]), a[1])
}
func decodeAcc(src []byte) (a [2]int64, err error) {
	if len(src) != 16 {
		return a, statetable.ErrDecode
	}
	a[0], err = statetable.Int64.Decode(src[:8])
	if err == nil {
		a[1], err = statetable.Int64.Decode(src[8:])
	}
	return a, err
}

// Lists, maps, reducing and aggregating states without a namespace, read
// live and at a snapshot.
func TestKeyedStates_Kinds(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	events := must(cowstate.List[string, string](b, "events"))(t)
	attrs := must(cowstate.Map[string, string, int64](b, "attrs"))(t)
	total := must(cowstate.Reducing[string](b, "total", func(a, v int64) int64 { return a + v }))(t)
	avg := must(cowstate.Aggregating[string](b, "avg", average{},
		cowstate.WithValueCodec(statetable.FuncCodec("avg-acc", sumAcc, decodeAcc))))(t)

	for _, e := range []string{"view", "click"} {
		if err := errors.Join(events.Add("ann", e), attrs.Put("ann", e, int64(len(e))), total.Add("ann", 2), avg.Add("ann", int64(len(e)))); err != nil {
			t.Fatal(err)
		}
	}
	snap := b.Snapshot()
	defer snap.Release()
	if err := errors.Join(events.Add("ann", "buy"), attrs.Remove("ann", "view"), total.Add("ann", 5), avg.Clear("ann")); err != nil {
		t.Fatal(err)
	}

	if got := slices.Collect(must(events.Get("ann"))(t)); !slices.Equal(got, []string{"view", "click", "buy"}) {
		t.Errorf("list = %v", got)
	}
	if got := slices.Collect(must(events.GetAt(snap, "ann"))(t)); !slices.Equal(got, []string{"view", "click"}) {
		t.Errorf("list at snapshot = %v", got)
	}
	if n := must(events.Len("ann"))(t); n != 3 {
		t.Errorf("list Len = %d", n)
	}
	if got := maps.Collect(must(attrs.Iterate("ann"))(t)); !maps.Equal(got, map[string]int64{"click": 5}) {
		t.Errorf("map = %v", got)
	}
	if got := maps.Collect(must(attrs.IterateAt(snap, "ann"))(t)); !maps.Equal(got, map[string]int64{"view": 4, "click": 5}) {
		t.Errorf("map at snapshot = %v", got)
	}
	if ok := must(attrs.Contains("ann", "view"))(t); ok {
		t.Error("map still contains a removed key")
	}
	if n, ok, err := total.Get("ann"); n != 9 || !ok || err != nil {
		t.Errorf("reducing Get = %d, %v, %v; want 9", n, ok, err)
	}
	if n, ok, err := total.GetAt(snap, "ann"); n != 4 || !ok || err != nil {
		t.Errorf("reducing GetAt = %d, %v, %v; want 4", n, ok, err)
	}
	if _, ok, err := avg.Get("ann"); ok || err != nil {
		t.Errorf("cleared aggregate: ok %v, %v", ok, err)
	}
	if a, ok, err := avg.GetAt(snap, "ann"); a != 4.5 || !ok || err != nil {
		t.Errorf("aggregate at snapshot = %v, %v, %v; want 4.5", a, ok, err)
	}
}

// A TTL state without a namespace expires on the backend's clock.
func TestValueWithTTL_Expires(t *testing.T) {
	now := time.UnixMilli(1000)
	b := newBackend(t, cowstate.Config{Clock: func() int64 { return now.UnixMilli() }})
	seen := must(cowstate.ValueWithTTL[string, time.Time](b, "last-seen", cowstate.TTL{Duration: time.Second}))(t)
	if err := seen.Put("ann", now); err != nil {
		t.Fatal(err)
	}
	if _, ok := must2(t)(seen.Lookup("ann")); !ok {
		t.Fatal("a fresh value is absent")
	}
	now = now.Add(2 * time.Second)
	if _, ok := must2(t)(seen.Lookup("ann")); ok {
		t.Error("a value older than its TTL is still there")
	}
	if _, err := cowstate.ValueWithTTL[string, time.Time](b, "bad", cowstate.TTL{}); !errors.Is(err, cowstate.ErrConfig) {
		t.Errorf("zero TTL: %v, want ErrConfig", err)
	}
}

func must2(t *testing.T) func(time.Time, bool, error) (time.Time, bool) {
	return func(v time.Time, ok bool, err error) (time.Time, bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
}

// A key outside the backend's key groups is an error matching
// ErrKeyGroupNotOwned from the root package.
func TestValue_KeyGroupNotOwned(t *testing.T) {
	b := newBackend(t, cowstate.Config{MaxParallelism: 128, KeyGroups: &statetable.KeyGroupRange{First: 0, Last: 0}})
	count := must(cowstate.Value[string, int64](b, "count"))(t)
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		err = count.Put(strings.Repeat("k", i), 1)
	}
	if !errors.Is(err, cowstate.ErrKeyGroupNotOwned) {
		t.Errorf("writes outside key group 0: %v, want ErrKeyGroupNotOwned", err)
	}
}

// A timer service keyed by string needs no codec and no namespace: timers
// fire by timestamp then key, once each however often they were
// registered, a snapshot keeps those it saw, and it is the namespaced
// service over VoidNamespace registered under the name.
func TestTimers_NoNamespace(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	timers := must(cowstate.Timers[string](b, "timeouts"))(t)
	for _, tm := range []struct {
		key string
		ts  int64
	}{{"bob", 20}, {"ann", 20}, {"ann", 10}, {"ann", 20}, {"cat", 30}} {
		if _, err := timers.RegisterEventTime(tm.key, tm.ts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := timers.RegisterProcessingTime("ann", 5); err != nil {
		t.Fatal(err)
	}
	if ok := must(timers.DeleteEventTime("cat", 30))(t); !ok {
		t.Error("DeleteEventTime(cat, 30) found no timer")
	}
	snap := b.Snapshot()
	defer snap.Release()
	var fired []string
	n, err := timers.AdvanceWatermark(25, func(key string, ts int64) error {
		fired = append(fired, key+"@"+strconv.FormatInt(ts, 10))
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("AdvanceWatermark(25) fired %d, %v; want 3", n, err)
	}
	if want := []string{"ann@10", "ann@20", "bob@20"}; !slices.Equal(fired, want) {
		t.Errorf("fired %v, want %v", fired, want)
	}
	if wm := timers.CurrentWatermark(); wm != 25 {
		t.Errorf("CurrentWatermark = %d, want 25", wm)
	}
	if _, err := timers.AdvanceWatermark(10, func(string, int64) error { return nil }); err != nil || timers.CurrentWatermark() != 25 {
		t.Errorf("a lower watermark: %v, CurrentWatermark %d; want no error and 25 kept", err, timers.CurrentWatermark())
	}
	var atSnap int
	for range must(timers.EventTimersAt(snap))(t) {
		atSnap++
	}
	if atSnap != 3 {
		t.Errorf("the snapshot holds %d event-time timers, want the 3 registered before it", atSnap)
	}
	if ts, ok := timers.NextProcessingTime(); !ok || ts != 5 {
		t.Errorf("NextProcessingTime = %d, %v; want 5", ts, ok)
	}
	if timers.Namespaced() != must(cowstate.NamespacedTimers(b, "timeouts", statetable.String, statetable.Void))(t) {
		t.Error("Namespaced() is not the service NamespacedTimers registers under the name")
	}
	if _, err := cowstate.Timers[int64](b, "timeouts"); !errors.Is(err, cowstate.ErrTimerService) {
		t.Errorf("registering timeouts again keyed by int64: %v, want ErrTimerService", err)
	}
	if _, err := cowstate.Timers[string](b, "other", cowstate.WithDefault[int64](1)); !errors.Is(err, cowstate.ErrConfig) {
		t.Errorf("a default for a timer service: %v, want ErrConfig", err)
	}
	if _, err := cowstate.Timers[map[string]int](b, "points"); !errors.Is(err, cowstate.ErrConfig) {
		t.Errorf("a key type with no inferred codec: %v, want ErrConfig", err)
	}
}

// View hands fn a snapshot released when fn returns; a snapshot taken
// beside it lives on.
func TestBackend_View(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	count := must(cowstate.Value[string, int64](b, "count"))(t)
	count.Put("ann", 1)
	other := b.Snapshot()
	defer other.Release()
	var seen *cowstate.Snapshot
	err := b.View(func(snap *cowstate.Snapshot) error {
		seen = snap
		count.Put("ann", 2) // the writer goes on; the snapshot keeps 1
		if n := must(count.GetAt(snap, "ann"))(t); n != 1 {
			t.Errorf("GetAt in View = %d, want 1", n)
		}
		return errors.New("done reading")
	})
	if err == nil || err.Error() != "done reading" {
		t.Fatalf("View returned %v, want fn's error", err)
	}
	if !seen.Released() || other.Released() {
		t.Fatalf("after View: its snapshot released %v (want true), the other %v (want false)", seen.Released(), other.Released())
	}
	if n := must(count.GetAt(other, "ann"))(t); n != 1 {
		t.Errorf("the other snapshot reads %d, want 1", n)
	}
}

// A restore refuses keys its codecs cannot decode, of states and timers
// alike, with an error naming what: that is what lets Keys and the timer
// sequences yield plain values. The file here was written by a codec that
// another codec of the same ID cannot read.
func TestRestore_KeysTheCodecsCannotDecode(t *testing.T) {
	digits := statetable.FuncCodec("string",
		func(dst []byte, s string) []byte { return append(dst, s...) },
		func(b []byte) (string, error) {
			if _, err := strconv.Atoi(string(b)); err != nil {
				return "", err
			}
			return string(b), nil
		})
	for _, c := range []struct {
		name, want string
		write      func(*cowstate.Backend) error
		register   func(*cowstate.Backend) error
	}{
		{"state", `state "count"`, func(b *cowstate.Backend) error {
			return must(cowstate.Value[string, int64](b, "count"))(t).Put("ann", 1)
		}, func(b *cowstate.Backend) error {
			_, err := cowstate.NamespacedValue(b, "count", digits, statetable.Void, statetable.Int64, 0)
			return err
		}},
		{"timer", `timer service "t"`, func(b *cowstate.Backend) error {
			_, err := must(cowstate.Timers[string](b, "t"))(t).RegisterEventTime("ann", 5)
			return err
		}, func(b *cowstate.Backend) error {
			_, err := cowstate.NamespacedTimers(b, "t", digits, statetable.Void)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := newBackend(t, cowstate.Config{})
			if err := c.write(src); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := src.View(func(snap *cowstate.Snapshot) error {
				return cowstate.WriteSnapshot(context.Background(), &buf, snap, nil)
			}); err != nil {
				t.Fatal(err)
			}
			dst := newBackend(t, cowstate.Config{})
			if err := c.register(dst); err != nil {
				t.Fatal(err)
			}
			r, err := snapshot.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			err = dst.RestoreSnapshot(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cannot decode") {
				t.Fatalf("Restore: %v, want an error naming %s and the key", err, c.want)
			}
			if !errors.Is(err, statetable.ErrDecode) && !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("Restore: %v matches neither ErrDecode nor snapshot.ErrCorrupt", err)
			}
			if !dst.Empty() {
				t.Fatal("a failed restore left state behind")
			}
		})
	}
}

type eventID [16]byte

type userName string

// A state keyed by a byte array (an event's UUID) needs no codec: its keys
// are their bytes, iterate back as arrays and restore from a snapshot.
func TestValue_ByteArrayKeys(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	seen := must(cowstate.Value[eventID, int64](b, "seen"))(t)
	ids := make([]eventID, 300)
	for i := range ids {
		ids[i][0], ids[i][15] = byte(i), byte(i>>8)
	}
	if err := seen.UpdateEach(ids, func(i int, n int64) int64 { return n + int64(i) }); err != nil {
		t.Fatal(err)
	}
	if err := seen.Update(ids[7], func(n int64) int64 { return n * 10 }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.View(func(snap *cowstate.Snapshot) error {
		return cowstate.WriteSnapshot(context.Background(), &buf, snap, nil)
	}); err != nil {
		t.Fatal(err)
	}

	restored := newBackend(t, cowstate.Config{})
	again := must(cowstate.Value[eventID, int64](restored, "seen"))(t)
	r := must(snapshot.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len())))(t)
	if err := restored.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		want := int64(i)
		if i == 7 {
			want = 70
		}
		if n := must(again.Get(id))(t); n != want {
			t.Fatalf("restored Get(ids[%d]) = %d, want %d", i, n, want)
		}
	}
	keys := slices.SortedFunc(again.Keys(), func(a, b eventID) int { return bytes.Compare(a[:], b[:]) })
	want := slices.SortedFunc(slices.Values(ids), func(a, b eventID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(keys, want) {
		t.Fatalf("restored Keys() = %d keys, want the %d written", len(keys), len(want))
	}
}

// An update of a present key allocates nothing, whatever the key's type:
// an integer, a string, a named string, a byte array.
func TestValue_UpdateOfAPresentKeyDoesNotAllocate(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	updateDoesNotAllocate(t, b, int64(42))
	updateDoesNotAllocate(t, b, "alice")
	updateDoesNotAllocate(t, b, userName("bob"))
	updateDoesNotAllocate(t, b, eventID{1, 2, 3})
}

// A batch add to present keys allocates nothing: a sum of int64 keys and
// of int32 keys, whose batches locate each key once.
func TestReducing_AddEachOfPresentKeysDoesNotAllocate(t *testing.T) {
	b := newBackend(t, cowstate.Config{})
	addEachDoesNotAllocate(t, b, []int64{7, -3, 7, 1 << 40, 9, 10, 11, 12, 13, 14})
	addEachDoesNotAllocate(t, b, []int32{7, -3, 7, 1 << 20, 9, 10, 11, 12, 13, 14})
}

func addEachDoesNotAllocate[K comparable](t *testing.T, b *cowstate.Backend, keys []K) {
	t.Helper()
	sum := must(cowstate.Reducing[K, int64](b, fmt.Sprintf("sum-%T", keys[0]), func(acc, v int64) int64 { return acc + v }))(t)
	one := func(int) int64 { return 1 }
	if err := sum.AddEach(keys, one); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := sum.AddEach(keys, one); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AddEach of present %T keys allocates %v times", keys[0], n)
	}
	if n, _, _ := sum.Get(keys[0]); n != 2*102 { // keys[0] is twice in keys
		t.Errorf("%T keys: keys[0] sums to %d after 102 batches, want %d", keys[0], n, 2*102)
	}
}

func updateDoesNotAllocate[K comparable](t *testing.T, b *cowstate.Backend, key K) {
	t.Helper()
	v := must(cowstate.Value[K, int64](b, fmt.Sprintf("count-%T", key)))(t)
	if err := v.Put(key, 1); err != nil {
		t.Fatal(err)
	}
	inc := func(n int64) int64 { return n + 1 }
	if n := testing.AllocsPerRun(100, func() {
		if err := v.Update(key, inc); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Update of a present %T key allocates %v times", key, n)
	}
	if n := must(v.Get(key))(t); n != 102 {
		t.Errorf("%T key: %d after 101 updates of 1, want 102", key, n)
	}
}
