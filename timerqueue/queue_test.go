package timerqueue

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

// fired records what an Advance fires.
type fired []entry

func (f *fired) fire(t Timer, kg int) { *f = append(*f, entry{t, kg}) }

func (f fired) timers() []Timer {
	out := make([]Timer, len(f))
	for i, e := range f {
		out[i] = e.t
	}
	return out
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want one containing %q", msg, want)
		}
		if strings.Contains(want, "released") {
			if err, ok := r.(error); !ok || !errors.Is(err, cow.ErrReleased) {
				t.Fatalf("panic %#v does not match cow.ErrReleased", r)
			}
		}
	}()
	f()
}

// TestCompare checks Compare is a total order that agrees with ==, with
// ties broken by key bytes, then namespace bytes.
func TestCompare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := drawTimer(t, "a"), drawTimer(t, "b"), drawTimer(t, "c")
		if (Compare(a, b) == 0) != (a == b) {
			t.Fatalf("Compare(%+v, %+v) = %d", a, b, Compare(a, b))
		}
		if Compare(a, b) != -Compare(b, a) {
			t.Fatalf("Compare not antisymmetric on %+v, %+v", a, b)
		}
		if Compare(a, b) <= 0 && Compare(b, c) <= 0 && Compare(a, c) > 0 {
			t.Fatalf("Compare not transitive on %+v, %+v, %+v", a, b, c)
		}
	})
	ordered := []Timer{
		{math.MinInt64, "\xff", "\xff"},
		{-1, "", ""},
		{0, "", ""},
		{0, "", "\x00"},
		{0, "", "w"},
		{0, "\x00", ""},
		{0, "a", "z"},
		{0, "a\x00", ""},
		{0, "b", ""},
		{1, "", ""},
		{math.MaxInt64, "", ""},
	}
	for i := 1; i < len(ordered); i++ {
		if Compare(ordered[i-1], ordered[i]) >= 0 {
			t.Fatalf("Compare(%+v, %+v) >= 0", ordered[i-1], ordered[i])
		}
	}
}

// TestQueue_FireOncePerKeyAndNamespace registers timers for several keys
// and namespaces, each several times and some at several timestamps, and
// checks each fires exactly once, in timestamp, key, namespace order.
func TestQueue_FireOncePerKeyAndNamespace(t *testing.T) {
	q := New(cow.NewOwner())
	keys := []string{"k2", "k1", "", "k1\x00", "\x00"}
	nss := []string{"w2", "w1", ""}
	want := map[Timer]int{}
	for round := range 3 {
		for _, ts := range []int64{30, 10, 20, 10} {
			for _, k := range keys {
				for _, ns := range nss {
					tm := Timer{ts, k, ns}
					_, dup := want[tm]
					if added := q.Register(tm, keyGroupOf(k)); added == dup {
						t.Fatalf("round %d: Register(%+v) = %v, want %v", round, tm, added, !dup)
					}
					want[tm] = keyGroupOf(k)
				}
			}
		}
	}
	if q.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", q.Len(), len(want))
	}
	var got fired
	for _, upTo := range []int64{5, 10, 10, 15, 25, 30, 100} {
		q.Advance(upTo, got.fire)
		for _, e := range got {
			if e.t.Timestamp > upTo {
				t.Fatalf("Advance(%d) fired %+v", upTo, e.t)
			}
		}
	}
	equalEntries(t, "fired", got, sortedModel(want))
	// Spelled out for one instant: key bytes first, then namespace bytes.
	var at10 []Timer
	for _, e := range got[:len(keys)*len(nss)] {
		at10 = append(at10, e.t)
	}
	wantAt10 := []Timer{
		{10, "", ""}, {10, "", "w1"}, {10, "", "w2"},
		{10, "\x00", ""}, {10, "\x00", "w1"}, {10, "\x00", "w2"},
		{10, "k1", ""}, {10, "k1", "w1"}, {10, "k1", "w2"},
		{10, "k1\x00", ""}, {10, "k1\x00", "w1"}, {10, "k1\x00", "w2"},
		{10, "k2", ""}, {10, "k2", "w1"}, {10, "k2", "w2"},
	}
	if !slices.Equal(at10, wantAt10) {
		t.Fatalf("timers at 10 fired in order\n%+v\nwant\n%+v", at10, wantAt10)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after firing everything", q.Len())
	}
}

// TestQueue_DeletedNeverFire deletes timers before Advance and from inside
// callbacks (pending timers of the batch being fired, and later ones) and
// checks none of them fires.
func TestQueue_DeletedNeverFire(t *testing.T) {
	for _, batch := range []int{1, 3, defaultBatch} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			q := New(cow.NewOwner())
			q.batch = batch
			live := map[Timer]int{}
			for i := range 200 {
				tm := Timer{int64(i % 50), fmt.Sprintf("k%03d", i), "w"}
				q.Register(tm, keyGroupOf(tm.Key))
				live[tm] = keyGroupOf(tm.Key)
			}
			// Delete every fifth before firing, and absent ones.
			deleted := map[Timer]bool{}
			for i := 0; i < 200; i += 5 {
				tm := Timer{int64(i % 50), fmt.Sprintf("k%03d", i), "w"}
				if !q.Delete(tm) || q.Delete(tm) {
					t.Fatalf("Delete(%+v) twice: want true then false", tm)
				}
				deleted[tm] = true
				delete(live, tm)
			}
			if q.Delete(Timer{7, "nope", "w"}) {
				t.Fatal("Delete of an absent timer returned true")
			}
			// Each callback deletes the next two timers due and one far
			// away.
			var got fired
			q.Advance(60, func(tm Timer, kg int) {
				got.fire(tm, kg)
				delete(live, tm)
				n := 0
				for _, e := range sortedModel(live) {
					if n == 2 {
						break
					}
					if !q.Delete(e.t) {
						t.Fatalf("Delete(%+v) of a pending timer from a callback returned false", e.t)
					}
					deleted[e.t] = true
					delete(live, e.t)
					n++
				}
			})
			for _, e := range got {
				if deleted[e.t] {
					t.Fatalf("deleted timer %+v fired", e.t)
				}
			}
			if len(got) == 0 || len(live) != 0 || q.Len() != 0 {
				t.Fatalf("fired %d, %d left in the model, Len = %d", len(got), len(live), q.Len())
			}
		})
	}
}

// TestQueue_CallbackRegisters checks a callback's registrations: one due
// before the rest of the batch fires next, one due later in this Advance
// fires in its place, one after upTo waits, an existing one is not
// duplicated.
func TestQueue_CallbackRegisters(t *testing.T) {
	for _, batch := range []int{1, 2, defaultBatch} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			q := New(cow.NewOwner())
			q.batch = batch
			for _, k := range []string{"b", "d", "f"} {
				q.Register(Timer{5, k, ""}, 0)
			}
			var got fired
			q.Advance(10, func(tm Timer, kg int) {
				got.fire(tm, kg)
				if len(got) > 1 {
					return
				}
				for _, r := range []struct {
					t     Timer
					added bool
				}{
					{Timer{5, "c", ""}, true},  // before the rest of the batch
					{Timer{5, "a", ""}, true},  // before the one firing: fires next
					{Timer{5, "d", ""}, false}, // pending: not duplicated
					{Timer{9, "a", ""}, true},  // due, after the batch
					{Timer{11, "a", ""}, true}, // not due
					{Timer{5, "b", ""}, true},  // itself again: a new timer, due
				} {
					if added := q.Register(r.t, 1); added != r.added {
						t.Fatalf("Register(%+v) = %v, want %v", r.t, added, r.added)
					}
				}
			})
			want := []Timer{{5, "b", ""}, {5, "a", ""}, {5, "b", ""}, {5, "c", ""}, {5, "d", ""}, {5, "f", ""}, {9, "a", ""}}
			if !slices.Equal(got.timers(), want) {
				t.Fatalf("fired %v, want %v", got.timers(), want)
			}
			if next, ok := q.Next(); !ok || next != (Timer{11, "a", ""}) || q.Len() != 1 {
				t.Fatalf("Next = %+v, %v, Len %d; want the timer at 11 alone", next, ok, q.Len())
			}
		})
	}
}

// TestQueue_AdvanceBounds covers the edges of the bound Advance pops up to:
// the first timer of the next instant ({upTo+1, "", ""}) stays, and the
// extreme timestamps fire when due.
func TestQueue_AdvanceBounds(t *testing.T) {
	q := New(cow.NewOwner())
	all := []Timer{
		{math.MinInt64, "", ""}, {math.MinInt64, "\xff", "\xff"},
		{4, "", ""}, {4, "\xff\xff", "\xff"}, {5, "", ""}, {5, "", "\x00"}, {6, "", ""},
		{math.MaxInt64, "", ""}, {math.MaxInt64, "\xff", "\xff\xff"},
	}
	for _, tm := range all {
		q.Register(tm, 3)
	}
	var got fired
	steps := []struct {
		upTo int64
		n    int
	}{{math.MinInt64, 2}, {3, 0}, {4, 2}, {4, 0}, {5, 2}, {math.MaxInt64 - 1, 1}, {math.MaxInt64, 2}, {math.MaxInt64, 0}}
	for _, s := range steps {
		if n := q.Advance(s.upTo, got.fire); n != s.n {
			t.Fatalf("Advance(%d) fired %d, want %d", s.upTo, n, s.n)
		}
		if err := q.Check(); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got.timers(), all) {
		t.Fatalf("fired %v, want %v", got.timers(), all)
	}
}

// TestQueue_AdvanceReentrantPanics checks Advance from a callback of the
// same queue panics, and leaves the queue usable.
func TestQueue_AdvanceReentrantPanics(t *testing.T) {
	q := New(cow.NewOwner())
	q.Register(Timer{1, "a", ""}, 0)
	q.Register(Timer{2, "a", ""}, 0)
	mustPanic(t, "timerqueue: Advance called from an Advance callback", func() {
		q.Advance(5, func(Timer, int) { q.Advance(5, nil) })
	})
	checkQueue(t, q, []entry{{Timer{2, "a", ""}, 0}})
	if n := q.Advance(5, nil); n != 1 {
		t.Fatalf("Advance after the panic fired %d, want 1", n)
	}
}

// TestQueue_CallbackPanicKeepsPending checks a panicking callback loses
// only its own timer: the rest of the batch stays registered.
func TestQueue_CallbackPanicKeepsPending(t *testing.T) {
	q := New(cow.NewOwner())
	var want []entry
	for i := range 100 {
		tm := Timer{int64(i), "k", ""}
		q.Register(tm, 1)
		if i != 10 {
			want = append(want, entry{tm, 1})
		}
	}
	boom := errors.New("boom")
	func() {
		defer func() {
			if r := recover(); r != boom {
				t.Fatalf("recovered %v, want the callback's panic", r)
			}
		}()
		q.Advance(50, func(tm Timer, _ int) {
			if tm.Timestamp == 10 {
				panic(boom)
			}
		})
	}()
	checkQueue(t, q, want[10:])
}

// TestQueue_RegisterNegativeKeyGroupPanics checks the one argument check.
func TestQueue_RegisterNegativeKeyGroupPanics(t *testing.T) {
	q := New(cow.NewOwner())
	mustPanic(t, "timerqueue: Register: negative key group -1", func() { q.Register(Timer{}, -1) })
}

// TestQueue_SlowFlinkCheckpoint is the scenario of the "Slow flink
// checkpoint" thread: timers and keyed state captured at one logical point
// while the writer goes on. Timers 1..5 are registered for one key; 1 and 2
// fire and each adds to a counter in a state map under the same owner; one
// Owner.Capture with views of both; then timer 3 fires and changes the
// state. The capture holds timers 3, 4, 5 and the state as of before timer
// 3, and a reader on another goroutine sees exactly that.
func TestQueue_SlowFlinkCheckpoint(t *testing.T) {
	owner := cow.NewOwner()
	state := cow.NewMap(owner, func(k string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(k))
		return h.Sum64()
	}, cow.Equal[int64])
	events := New(owner)
	const key = "user-42"
	for ts := int64(1); ts <= 5; ts++ {
		events.Register(Timer{ts, key, "window"}, keyGroupOf(key))
	}
	onTimer := func(tm Timer, _ int) {
		sum, _ := state.Get(tm.Key)
		state.Set(tm.Key, sum+tm.Timestamp)
	}
	if n := events.Advance(2, onTimer); n != 2 {
		t.Fatalf("Advance(2) fired %d, want 2", n)
	}

	c := owner.Capture()
	stateSnap, timerSnap := state.View(c), events.View(c)

	if n := events.Advance(3, onTimer); n != 1 {
		t.Fatalf("Advance(3) fired %d, want 1", n)
	}
	if v, _ := state.Get(key); v != 1+2+3 {
		t.Fatalf("live state = %d, want 6", v)
	}

	// The asynchronous checkpoint writer reads the views, then releases the
	// capture, and only then reports: the checks after <-done must see the
	// release.
	writeCheckpoint := func() error {
		var got []int64
		for tm, kg := range timerSnap.All() {
			if tm.Key != key || tm.Namespace != "window" || kg != keyGroupOf(key) {
				return fmt.Errorf("snapshot holds %+v (key group %d)", tm, kg)
			}
			got = append(got, tm.Timestamp)
		}
		if !slices.Equal(got, []int64{3, 4, 5}) {
			return fmt.Errorf("snapshot timers %v, want [3 4 5]", got)
		}
		if v, ok := stateSnap.Get(key); !ok || v != 1+2 {
			return fmt.Errorf("snapshot state = %d, %v; want 3 (timers 1 and 2 only)", v, ok)
		}
		return nil
	}
	done := make(chan error)
	go func() {
		err := writeCheckpoint()
		c.Release()
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !timerSnap.Released() || !stateSnap.Released() {
		t.Fatal("releasing the capture did not release its views")
	}
	mustPanic(t, "timerqueue: read of a released snapshot", func() { timerSnap.Len() })
	checkQueue(t, events, []entry{{Timer{4, key, "window"}, keyGroupOf(key)}, {Timer{5, key, "window"}, keyGroupOf(key)}})
}

// TestQueue_ViewFromCallback takes a capture inside a callback, when part of
// a popped batch is pending outside the tree: the view still holds exactly
// the registered timers, and diffs against it are right.
func TestQueue_ViewFromCallback(t *testing.T) {
	owner := cow.NewOwner()
	q := New(owner)
	model := map[Timer]int{}
	for i := range 300 {
		tm := Timer{int64(i / 3), fmt.Sprintf("k%d", i%3), ""}
		q.Register(tm, keyGroupOf(tm.Key))
		model[tm] = keyGroupOf(tm.Key)
	}
	before := q.Snapshot()
	beforeEntries := sortedModel(model)
	var mid *Snapshot
	var midEntries []entry
	q.Advance(50, func(tm Timer, _ int) {
		delete(model, tm)
		if tm.Timestamp == 20 && tm.Key == "k1" {
			q.Register(Timer{20, "k1a", ""}, 2)
			model[Timer{20, "k1a", ""}] = 2
			mid = q.View(owner.Capture())
			midEntries = sortedModel(model)
			checkSnapshot(t, mid, midEntries, 0, 7)
		}
	})
	after := q.Snapshot()
	afterEntries := sortedModel(model)
	checkSnapshot(t, before, beforeEntries, 0, 7)
	checkSnapshot(t, mid, midEntries, 2, 5)
	checkSnapshot(t, after, afterEntries, 0, 3)
	if len(mid.extra) == 0 {
		t.Fatal("the view taken from a callback holds no pending timer: the test misses its point")
	}
	for _, p := range [][2]*Snapshot{{before, mid}, {mid, after}, {mid, before}, {after, mid}, {mid, mid}} {
		es := func(s *Snapshot) []entry {
			switch s {
			case before:
				return beforeEntries
			case mid:
				return midEntries
			}
			return afterEntries
		}
		checkDiff(t, p[0], p[1], es(p[0]), es(p[1]))
	}
	for _, s := range []*Snapshot{before, mid, after} {
		s.Release()
	}
}

// TestDiff checks Diff between versions of a queue and between unrelated
// queues, including the empty one.
func TestDiff(t *testing.T) {
	owner := cow.NewOwner()
	q := New(owner)
	other := New(cow.NewOwner())
	model := map[Timer]int{}
	var snaps []*Snapshot
	var frozen [][]entry
	take := func() {
		snaps = append(snaps, q.Snapshot())
		frozen = append(frozen, sortedModel(model))
	}
	take() // empty
	for i := range 2000 {
		tm := Timer{int64(i * 7919 % 1000), fmt.Sprintf("k%d", i%13), ""}
		q.Register(tm, keyGroupOf(tm.Key))
		model[tm] = keyGroupOf(tm.Key)
		if i%2 == 0 {
			other.Register(tm, keyGroupOf(tm.Key))
		}
	}
	take()
	q.Advance(100, func(tm Timer, _ int) { delete(model, tm) })
	take()
	q.Register(Timer{5000, "z", ""}, 1)
	model[Timer{5000, "z", ""}] = 1
	last := frozen[2][len(frozen[2])-1].t
	if !q.Delete(last) {
		t.Fatalf("Delete(%+v) = false", last)
	}
	delete(model, last)
	take()
	for i := range snaps {
		for j := range snaps {
			checkDiff(t, snaps[i], snaps[j], frozen[i], frozen[j])
		}
	}
	o := other.Snapshot()
	oe := collectAll(o)
	checkDiff(t, snaps[1], o, frozen[1], oe)
	checkDiff(t, o, snaps[3], oe, frozen[3])
	// One write apart: the diff is the one change.
	n := 0
	for c := range Diff(snaps[2], snaps[3]) {
		n++
		_ = c
	}
	if n != 2 {
		t.Fatalf("Diff of two versions one Register and one Delete apart has %d changes, want 2", n)
	}
	for _, s := range append(snaps, o) {
		s.Release()
	}
}

func collectAll(s *Snapshot) []entry {
	var out []entry
	for tm, kg := range s.All() {
		out = append(out, entry{tm, kg})
	}
	return out
}

// TestSnapshot_Released checks reads of a released snapshot panic, and that
// a release during an iteration stops it with a panic.
func TestSnapshot_Released(t *testing.T) {
	q := New(cow.NewOwner())
	for i := range 10 {
		q.Register(Timer{int64(i), "k", ""}, 0)
	}
	s := q.Snapshot()
	mustPanic(t, "read of a released snapshot", func() {
		for range s.All() {
			s.Release()
		}
	})
	if !s.Released() {
		t.Fatal("Released = false after Release")
	}
	const msg = "read of a released snapshot"
	mustPanic(t, msg, func() { s.Len() })
	mustPanic(t, msg, func() { s.Contains(Timer{1, "k", ""}) })
	mustPanic(t, msg, func() {
		for range s.InKeyGroups(0, 0) {
		}
	})
	s.Release() // idempotent
}

// TestQueue_Check checks Check reports a broken queue.
func TestQueue_Check(t *testing.T) {
	q := New(cow.NewOwner())
	q.Register(Timer{1, "a", ""}, 0)
	if err := q.Check(); err != nil {
		t.Fatal(err)
	}
	q.pend = append(q.pend, cow.Entry[treeTimer, int]{Key: inTree(Timer{0, "a", ""})})
	if err := q.Check(); !errors.Is(err, ErrInvariant) {
		t.Fatalf("Check with a timer pending outside Advance = %v, want ErrInvariant", err)
	}
	q.firing = true
	if err := q.Check(); err != nil {
		t.Fatalf("Check inside Advance: %v", err)
	}
	q.pend[0].Key.Timestamp = 2 // after the tree's first timer
	if err := q.Check(); !errors.Is(err, ErrInvariant) {
		t.Fatalf("Check with a pending timer after the tree's = %v, want ErrInvariant", err)
	}
}

// TestQueue_ViewAfterPendingWritePanics checks View rejects a capture taken
// before a change to the pending timers of an Advance, which the tree (and
// so cow) does not see: a registration, a deletion, or a timer fired.
func TestQueue_ViewAfterPendingWritePanics(t *testing.T) {
	for _, write := range []string{"register", "delete", "fire"} {
		t.Run(write, func(t *testing.T) {
			owner := cow.NewOwner()
			q := New(owner)
			for _, k := range []string{"a", "b", "c", "d"} {
				q.Register(Timer{1, k, ""}, 0)
			}
			var c *cow.Capture
			q.Advance(1, func(tm Timer, _ int) {
				switch {
				case tm.Key == "a":
					c = owner.Capture()
					switch write {
					case "register":
						q.Register(Timer{1, "bb", ""}, 0)
					case "delete":
						q.Delete(Timer{1, "c", ""})
					case "fire":
						return // the view is taken in the next callback
					}
					mustPanic(t, "timerqueue: View after a write", func() { q.View(c) })
				case tm.Key == "b" && write == "fire":
					mustPanic(t, "timerqueue: View after a write", func() { q.View(c) })
				}
			})
			c.Release()
		})
	}
}

// TestQueue_CallbackGrowsBatch has the first callback register many timers
// that sort before the rest of the popped batch, more than the pending
// buffer keeps: the buffer goes back to the tree and everything still fires
// once, in order.
func TestQueue_CallbackGrowsBatch(t *testing.T) {
	for _, batch := range []int{2, 16, defaultBatch} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			q := New(cow.NewOwner())
			q.batch = batch
			var want []entry
			for i := range 1000 {
				tm := Timer{1, fmt.Sprintf("k1%03d", i), ""}
				q.Register(tm, 0)
				want = append(want, entry{tm, 0})
			}
			// k1000 fires first, then what its callback registers, then the
			// rest.
			var early []entry
			for i := range 1000 {
				early = append(early, entry{Timer{1, fmt.Sprintf("k0%03d", i), ""}, 1})
			}
			want = slices.Concat(want[:1], early, want[1:])
			var got fired
			q.Advance(1, func(tm Timer, kg int) {
				got.fire(tm, kg)
				if len(got) > 1 {
					return
				}
				for i, e := range early {
					if !q.Register(e.t, e.kg) {
						t.Fatalf("Register(%+v) from a callback returned false", e.t)
					}
					if i%97 == 0 {
						if err := q.Check(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if q.Len() != 1999 {
					t.Fatalf("Len = %d in the callback, want 1999", q.Len())
				}
				if p := len(q.pending()); p > 2*batch {
					t.Fatalf("%d timers pending, more than twice the batch", p)
				}
			})
			equalEntries(t, "fired", got, want)
		})
	}
}

// TestQueue_AdvanceAhead: AdvanceAhead fires what Advance fires, and
// calls ahead with each timer of a batch aheadOfFire places before it
// fires (the first aheadOfFire of each batch are not announced).
func TestQueue_AdvanceAhead(t *testing.T) {
	for _, batch := range []int{2, 16, defaultBatch} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			build := func() *Queue {
				q := New(cow.NewOwner())
				q.batch = batch
				for i := range 100 {
					q.Register(Timer{int64(i % 7), fmt.Sprintf("k%03d", i), ""}, 0)
				}
				return q
			}
			var want fired
			build().Advance(5, want.fire)

			q := build()
			var got fired
			var announced []Timer
			announcedAt := map[Timer]int{} // timer -> how many had fired when it was announced
			q.AdvanceAhead(5, func(tm Timer) {
				announced = append(announced, tm)
				announcedAt[tm] = len(got)
			}, got.fire)
			if !slices.Equal(got, want) {
				t.Fatalf("AdvanceAhead fired %v, Advance %v", got.timers(), want.timers())
			}
			if batch > aheadOfFire && len(announced) == 0 {
				t.Fatalf("batches of %d: nothing announced", batch)
			}
			for i, tm := range got.timers() {
				if at, ok := announcedAt[tm]; ok && at != i-aheadOfFire {
					t.Fatalf("%+v fired %d-th, announced when %d had fired; want %d ahead", tm, i, at, aheadOfFire)
				}
			}
			for _, tm := range announced {
				if !slices.Contains(got.timers(), tm) {
					t.Fatalf("announced %+v, which did not fire", tm)
				}
			}
		})
	}
}
