package cowstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

type void = statetable.VoidNamespace

var ns0 = void{}

func newBackend(t testing.TB) *Backend {
	b, err := New(Config{MaxParallelism: 32, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Check(); err != nil {
			t.Errorf("backend left broken: %v", err)
		}
	})
	return b
}

// TestBackend_SlowCheckpointScenario is the second question of the "Slow
// flink checkpoint" thread: timers 1..5 registered; 1 and 2 fire and change
// state; capture; then timer 3 fires and changes state. The capture must
// hold timers 3, 4, 5 and the state as of before timer 3.
func TestBackend_SlowCheckpointScenario(t *testing.T) {
	b := newBackend(t)
	state, err := NamespacedValue(b, "last-fired", statetable.String, statetable.Void, statetable.Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	timers, err := NamespacedTimers(b, "t", statetable.String, statetable.Void)
	if err != nil {
		t.Fatal(err)
	}
	for ts := int64(1); ts <= 5; ts++ {
		if _, err := timers.RegisterEventTime("k", ns0, ts); err != nil {
			t.Fatal(err)
		}
	}
	fire := func(key string, _ void, ts int64) error { return state.Put(key, ns0, ts) }
	if n, err := timers.AdvanceWatermark(2, fire); n != 2 || err != nil {
		t.Fatalf("fired %d, %v; want 2", n, err)
	}
	snap := b.Snapshot()
	defer snap.Release()
	if n, err := timers.AdvanceWatermark(3, fire); n != 1 || err != nil {
		t.Fatalf("fired %d, %v; want 1", n, err)
	}
	var got []int64
	at, err := timers.EventTimersAt(snap)
	if err != nil {
		t.Fatal(err)
	}
	for tm := range at {
		got = append(got, tm.Timestamp)
	}
	if !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("captured timers %v, want [3 4 5]", got)
	}
	if v, _ := state.GetAt(snap.State(), "k", ns0); v != 2 {
		t.Fatalf("captured state %d, want 2 (before timer 3 fired)", v)
	}
	if v, _ := state.Get("k", ns0); v != 3 {
		t.Fatalf("live state %d, want 3", v)
	}
}

func TestBackend_TimerOrderAndOnce(t *testing.T) {
	b := newBackend(t)
	timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.String)
	for _, k := range []string{"b", "a", "c"} {
		for _, w := range []string{"w2", "w1"} {
			timers.RegisterEventTime(k, w, 10)
			timers.RegisterEventTime(k, w, 10) // twice: kept once
		}
	}
	timers.DeleteEventTime("c", "w1", 10)
	if ok, _ := timers.DeleteEventTime("c", "w1", 10); ok {
		t.Fatal("deleting an absent timer reported a delete")
	}
	var got []string
	timers.AdvanceWatermark(10, func(k, w string, ts int64) error {
		got = append(got, k+"/"+w)
		return nil
	})
	want := []string{"a/w1", "a/w2", "b/w1", "b/w2", "c/w2"}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if n, _ := timers.AdvanceWatermark(100, func(string, string, int64) error { return nil }); n != 0 {
		t.Fatalf("%d timers fired twice", n)
	}
}

// TestTimerService_TimersOfOneNamespaceShareItsString: timers made one
// after another for the same namespace hold one string, so that the
// queue's compares of them read no bytes; a namespace made in between
// gets its own.
func TestTimerService_TimersOfOneNamespaceShareItsString(t *testing.T) {
	b := newBackend(t)
	timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.String)
	made := func(key, ns string) string {
		t.Helper()
		tm, _, err := timers.timer(key, ns, 10)
		if err != nil {
			t.Fatal(err)
		}
		if tm.Key != key || tm.Namespace != ns {
			t.Fatalf("timer for %q/%q holds %q/%q", key, ns, tm.Key, tm.Namespace)
		}
		return tm.Namespace
	}
	w1 := made("a", "w1")
	if again := made("b", "w1"); unsafe.StringData(again) != unsafe.StringData(w1) {
		t.Fatal("two timers of namespace w1 in a row hold two strings")
	}
	made("c", "w2")
	made("d", "w1")
}

func TestBackend_FireErrorLosesNothing(t *testing.T) {
	b := newBackend(t)
	timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.Void)
	for ts := int64(1); ts <= 4; ts++ {
		timers.RegisterEventTime("k", ns0, ts)
	}
	boom := errors.New("boom")
	n, err := timers.AdvanceWatermark(4, func(_ string, _ void, ts int64) error {
		if ts == 2 {
			return boom
		}
		return nil
	})
	if n != 1 || !errors.Is(err, boom) {
		t.Fatalf("fired %d, %v; want 1 and boom", n, err)
	}
	var left []int64
	for tm := range timers.EventTimers() {
		left = append(left, tm.Timestamp)
	}
	if !slices.Equal(left, []int64{2, 3, 4}) {
		t.Fatalf("after the error %v remain, want [2 3 4]", left)
	}
}

func TestBackend_KeyGroupsOwned(t *testing.T) {
	r := statetable.KeyGroupRange{First: 0, Last: 3}
	b, err := New(Config{MaxParallelism: 8, KeyGroups: &r})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NamespacedValue(b, "v", statetable.String, statetable.Void, statetable.Int64, 0)
	timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.Void)
	refused := 0
	for i := range 50 {
		k := fmt.Sprint("key", i)
		err1 := v.Put(k, ns0, 1)
		_, err2 := timers.RegisterEventTime(k, ns0, 1)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("state and timers disagree on key %q: %v, %v", k, err1, err2)
		}
		if err1 != nil {
			if !errors.Is(err1, statetable.ErrKeyGroupNotOwned) {
				t.Fatal(err1)
			}
			refused++
		}
	}
	if refused == 0 || refused == 50 {
		t.Fatalf("%d of 50 keys refused", refused)
	}
	if _, err := New(Config{MaxParallelism: 1 << 16}); !errors.Is(err, ErrConfig) {
		t.Fatalf("max parallelism 2^16: %v", err)
	}
}

// backendModel is the obviously correct backend: a map of values and a set
// of timers, deep-copied at each capture.
type backendModel struct {
	values map[string]int64
	timers map[timerKey]bool
}

type timerKey struct {
	ts  int64
	key string
}

func (m backendModel) clone() backendModel {
	return backendModel{maps.Clone(m.values), maps.Clone(m.timers)}
}

func (m backendModel) sortedTimers() []timerKey {
	ts := slices.Collect(maps.Keys(m.timers))
	slices.SortFunc(ts, func(a, b timerKey) int {
		if a.ts != b.ts {
			return int(a.ts - b.ts)
		}
		return strings.Compare(a.key, b.key)
	})
	return ts
}

type backendMachine struct {
	b      *Backend
	v      *statetable.ValueState[string, void, int64]
	timers *NamespacedTimerService[string, void]
	m      backendModel
	live   []frozenBackend
}

type frozenBackend struct {
	snap *Snapshot
	m    backendModel
}

func (bm *backendMachine) check(t *rapid.T, snap *Snapshot, m backendModel) {
	for k, want := range m.values {
		var got int64
		if snap == nil {
			got, _ = bm.v.Get(k, ns0)
		} else {
			got, _ = bm.v.GetAt(snap.State(), k, ns0)
		}
		if got != want {
			t.Fatalf("value %q = %d, want %d (snapshot %v)", k, got, want, snap != nil)
		}
	}
	if snap == nil && bm.v.Count() != len(m.values) {
		t.Fatalf("%d values, want %d", bm.v.Count(), len(m.values))
	}
	seq := bm.timers.EventTimers()
	if snap != nil {
		var err error
		if seq, err = bm.timers.EventTimersAt(snap); err != nil {
			t.Fatal(err)
		}
	}
	var got []timerKey
	for tm := range seq {
		got = append(got, timerKey{tm.Timestamp, tm.Key})
	}
	if want := m.sortedTimers(); !slices.Equal(got, want) {
		t.Fatalf("timers %v, want %v (snapshot %v)", got, want, snap != nil)
	}
}

func TestBackend_StateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, _ := New(Config{MaxParallelism: 16})
		v, _ := NamespacedValue(b, "v", statetable.String, statetable.Void, statetable.Int64, 0)
		timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.Void)
		bm := &backendMachine{b: b, v: v, timers: timers, m: backendModel{map[string]int64{}, map[timerKey]bool{}}}
		key := rapid.SampledFrom([]string{"a", "b", "c", "d"})
		ts := rapid.Int64Range(0, 30)
		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) {
				bm.check(t, nil, bm.m)
				for _, f := range bm.live {
					bm.check(t, f.snap, f.m)
				}
			},
			"Put": func(t *rapid.T) {
				k, x := key.Draw(t, "k"), rapid.Int64Range(0, 9).Draw(t, "x")
				bm.v.Put(k, ns0, x)
				bm.m.values[k] = x
			},
			"Register": func(t *rapid.T) {
				k, at := key.Draw(t, "k"), ts.Draw(t, "ts")
				added, _ := bm.timers.RegisterEventTime(k, ns0, at)
				tk := timerKey{at, k}
				if added == bm.m.timers[tk] {
					t.Fatalf("Register %v added=%v, model had it=%v", tk, added, bm.m.timers[tk])
				}
				bm.m.timers[tk] = true
			},
			"Delete": func(t *rapid.T) {
				k, at := key.Draw(t, "k"), ts.Draw(t, "ts")
				deleted, _ := bm.timers.DeleteEventTime(k, ns0, at)
				tk := timerKey{at, k}
				if deleted != bm.m.timers[tk] {
					t.Fatalf("Delete %v = %v, model %v", tk, deleted, bm.m.timers[tk])
				}
				delete(bm.m.timers, tk)
			},
			"Advance": func(t *rapid.T) {
				wm := ts.Draw(t, "wm")
				again := rapid.Int64Range(0, 5).Draw(t, "again")
				// The model fires the smallest due timer, one at a time; the
				// callback adds the timestamp to the key's value and, for
				// some timers, registers another one `again` later.
				var want []timerKey
				for {
					next := bm.m.sortedTimers()
					if len(next) == 0 || next[0].ts > wm {
						break
					}
					tk := next[0]
					delete(bm.m.timers, tk)
					want = append(want, tk)
					bm.m.values[tk.key] += tk.ts
					if tk.ts%3 == 0 && again > 0 {
						bm.m.timers[timerKey{tk.ts + again, tk.key}] = true
					}
				}
				var got []timerKey
				_, err := bm.timers.AdvanceWatermark(wm, func(k string, _ void, at int64) error {
					got = append(got, timerKey{at, k})
					old, _ := bm.v.Get(k, ns0)
					if err := bm.v.Put(k, ns0, old+at); err != nil {
						return err
					}
					if at%3 == 0 && again > 0 {
						_, err := bm.timers.RegisterEventTime(k, ns0, at+again)
						return err
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("fired %v, model fired %v", got, want)
				}
			},
			"Snapshot": func(t *rapid.T) {
				if len(bm.live) < 4 {
					bm.live = append(bm.live, frozenBackend{bm.b.Snapshot(), bm.m.clone()})
				}
			},
			"Release": func(t *rapid.T) {
				if len(bm.live) == 0 {
					return
				}
				i := rapid.IntRange(0, len(bm.live)-1).Draw(t, "i")
				bm.live[i].snap.Release()
				bm.live = slices.Delete(bm.live, i, i+1)
			},
		})
	})
}

// TestBackend_ConcurrentSnapshotReaders reads every snapshot on its own
// goroutine while the writer goes on, against the model frozen at capture.
func TestBackend_ConcurrentSnapshotReaders(t *testing.T) {
	b := newBackend(t)
	v, _ := NamespacedValue(b, "v", statetable.String, statetable.Void, statetable.Int64, 0)
	timers, _ := NamespacedTimers(b, "t", statetable.String, statetable.Void)
	values := map[string]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for round := range 30 {
		for i := range 200 {
			k := fmt.Sprint("k", (round*7+i)%150)
			values[k] += int64(i)
			v.Put(k, ns0, values[k])
			timers.RegisterEventTime(k, ns0, int64(round*10+i%10))
		}
		timers.AdvanceWatermark(int64(round*10), func(string, void, int64) error { return nil })
		snap, want := b.Snapshot(), maps.Clone(values)
		var wantTimers int
		for range timers.EventTimers() {
			wantTimers++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer snap.Release()
			for k, x := range want {
				if got, err := v.GetAt(snap.State(), k, ns0); err != nil || got != x {
					errs <- fmt.Errorf("snapshot %d: %s = %d, %v; want %d", snap.Version(), k, got, err, x)
					return
				}
			}
			at, err := timers.EventTimersAt(snap)
			if err != nil {
				errs <- err
				return
			}
			n := 0
			for range at {
				n++
			}
			if n != wantTimers {
				errs <- fmt.Errorf("snapshot %d: %d timers, want %d", snap.Version(), n, wantTimers)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Reading one backend's snapshot through another backend's state or timer
// service (even one of the same name and types) is an error, not a read of
// the other backend's entries, and not a panic.
func TestBackend_ForeignSnapshot(t *testing.T) {
	a, b := newBackend(t), newBackend(t)
	var counts [2]*statetable.ValueState[string, void, int64]
	var timers [2]*NamespacedTimerService[string, void]
	for i, be := range []*Backend{a, b} {
		var err error
		if counts[i], err = NamespacedValue(be, "count", statetable.String, statetable.Void, statetable.Int64, 0); err != nil {
			t.Fatal(err)
		}
		if timers[i], err = NamespacedTimers(be, "t", statetable.String, statetable.Void); err != nil {
			t.Fatal(err)
		}
	}
	if err := counts[1].Put("k", ns0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := timers[1].RegisterEventTime("k", ns0, 100); err != nil {
		t.Fatal(err)
	}
	snapB := b.Snapshot()
	defer snapB.Release()

	if _, ok, err := counts[0].LookupAt(snapB.State(), "k", ns0); !errors.Is(err, ErrForeignSnapshot) || ok {
		t.Fatalf("LookupAt of b's snapshot through a's state: %v, %v; want ErrForeignSnapshot", ok, err)
	}
	for name, seq := range map[string]func() (Timer[string, void], error){
		"EventTimersAt":      func() (Timer[string, void], error) { return first(timers[0].EventTimersAt(snapB)) },
		"ProcessingTimersAt": func() (Timer[string, void], error) { return first(timers[0].ProcessingTimersAt(snapB)) },
		"EventTimersAt(nil)": func() (Timer[string, void], error) { return first(timers[0].EventTimersAt(nil)) },
	} {
		if tm, err := seq(); !errors.Is(err, ErrForeignSnapshot) {
			t.Errorf("%s of b's snapshot through a's service: %v, %v; want ErrForeignSnapshot", name, tm, err)
		}
	}
	snapA := a.Snapshot()
	defer snapA.Release()
	if _, err := Diff(snapA, snapB); !errors.Is(err, ErrForeignSnapshot) || !errors.Is(err, delta.ErrMismatch) {
		t.Errorf("Diff of a's and b's snapshots: %v; want ErrForeignSnapshot and delta.ErrMismatch", err)
	}
	if _, _, err := WriteDiff(context.Background(), io.Discard, snapA, nil, 1, 2, -1); !errors.Is(err, ErrForeignSnapshot) {
		t.Errorf("WriteDiff with a nil snapshot: %v; want ErrForeignSnapshot", err)
	}
	if tm, err := first(timers[1].EventTimersAt(snapB)); err != nil || tm.Timestamp != 100 {
		t.Fatalf("own snapshot: %v, %v", tm, err)
	}
}

// first returns the first element of seq, or an error if it yields none.
func first[T any](seq iter.Seq[T], err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	for v := range seq {
		return v, nil
	}
	return zero, errors.New("no element")
}

// TestBackend_UpdateEachWithSnapshotReaders applies batches with
// UpdateEach (int64 keys: prefetched, and written in place or copied
// depending on which snapshots are live) while every snapshot is read on
// its own goroutine, against the model frozen at capture; run under -race
// it also shows the prefetch reads nothing a reader could see written.
func TestBackend_UpdateEachWithSnapshotReaders(t *testing.T) {
	b := newBackend(t)
	v, err := Value[int64, int64](b, "v")
	if err != nil {
		t.Fatal(err)
	}
	const keys = 5000 // a tree of branches over leaves
	values := map[int64]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	batch := make([]int64, 700)
	for round := range 20 {
		for i := range batch {
			batch[i] = int64((round*7919 + i*31) % keys)
		}
		err := v.UpdateEach(batch, func(i int, old int64) int64 { return old*3 + int64(i) })
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range batch {
			values[k] = values[k]*3 + int64(i)
		}
		snap, want := b.Snapshot(), maps.Clone(values)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer snap.Release()
			for k, x := range want {
				if got, err := v.GetAt(snap, k); err != nil || got != x {
					errs <- fmt.Errorf("snapshot %d: key %d = %d, %v; want %d", snap.Version(), k, got, err, x)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k, x := range values {
		if got, err := v.Get(k); err != nil || got != x {
			t.Fatalf("key %d = %d, %v; want %d", k, got, err, x)
		}
	}
}
