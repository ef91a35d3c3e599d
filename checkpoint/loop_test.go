package checkpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/statetable"
)

// offsets is the job metadata of the loop tests: how many records of the
// stream the state holds.
type offsets struct{ Next int }

// record applies record i of a deterministic stream: a few writes of every
// kind, and every 7th a watermark advance whose timers write state.
func record(t testing.TB, j *testjob.Job, i int) {
	t.Helper()
	k, ns := fmt.Sprint("k", i%13), []string{"a", "b"}[i%2]
	var err error
	switch i % 7 {
	case 0:
		_, err = j.Timers.AdvanceWatermark(int64(i/3), func(key, ns string, ts int64) error {
			return j.Value.Put(key, ns, ts)
		})
	case 1:
		err = j.List.Add(k, ns, int64(i))
	case 2:
		err = j.Map.Put(k, ns, fmt.Sprint(i%5), int64(i))
	case 3:
		err = j.Reduce.Add(k, ns, int64(i))
	case 4:
		_, err = j.Timers.RegisterEventTime(k, ns, int64(i/3+i%11))
	case 5:
		err = j.Value.Put(k, ns, int64(i))
	case 6:
		err = j.List.MergeNamespaces(k, "a", "b")
	}
	if err != nil {
		t.Fatalf("record %d: %v", i, err)
	}
}

// model returns the dump and watermark of a job that processed records
// [0, n) and never crashed.
func model(t testing.TB, n int) ([]string, int64) {
	j := testjob.New(t, 16, nil)
	for i := range n {
		record(t, j, i)
	}
	return j.Dump(t, nil), j.Timers.CurrentWatermark()
}

// check compares a job with the model at n records.
func check(t testing.TB, what string, j *testjob.Job, n int) {
	t.Helper()
	want, wm := model(t, n)
	if got := j.Dump(t, nil); !slices.Equal(got, want) {
		t.Fatalf("%s: state at %d records differs from the model:\n%q\nwant\n%q", what, n, got, want)
	}
	if got := j.Timers.CurrentWatermark(); got != wm {
		t.Fatalf("%s: watermark %d, want %d", what, got, wm)
	}
}

// durable returns the offset of the loop's newest durable checkpoint.
func durable(t testing.TB, l *Loop[offsets]) int {
	if l.Last() == nil {
		return 0
	}
	meta, _, err := decodeLoopMeta[offsets](l.Last())
	if err != nil {
		t.Fatal(err)
	}
	return meta.Next
}

// A job crashes at random points and resumes: each time the state, the
// watermark and the offset are those of a checkpoint at least as new as
// the last one the crashed loop saw durable, and the job ends with the
// state of a run that never crashed.
func TestLoop_CrashResume(t *testing.T) {
	const total = 400
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			st := Memory()
			opts := LoopOptions{Records: 1 + rng.IntN(40), Store: Options{Retention: Retention{KeepLast: 1 + rng.IntN(3)}}}
			next, seen := 0, 0
			for crash := 0; ; crash++ {
				j := testjob.New(t, 16, nil)
				l, start, err := Resume[offsets](bg, j.B, st, opts)
				if err != nil {
					t.Fatalf("resume %d: %v", crash, err)
				}
				if start.Restored != (start.Manifest != nil) || crash == 0 && start.Restored {
					t.Fatalf("resume %d: restored %v", crash, start.Restored)
				}
				if start.Meta.Next < seen {
					t.Fatalf("resume %d: restored offset %d, older than the durable %d", crash, start.Meta.Next, seen)
				}
				next = start.Meta.Next
				check(t, fmt.Sprintf("resume %d (checkpoint %v)", crash, start.Manifest != nil), j, next)
				if crash == 4 {
					for ; next < total; next++ {
						record(t, j, next)
						if err := l.Processed(bg, 1, offsets{next + 1}); err != nil {
							t.Fatal(err)
						}
					}
					m, err := l.Sync(bg, offsets{next})
					if err != nil {
						t.Fatal(err)
					}
					check(t, "end", j, total)
					if durable(t, l) != total || m != l.Last() {
						t.Fatalf("Sync: last durable %d, want %d", durable(t, l), total)
					}
					l.Close()
					break
				}
				stop := next + rng.IntN(total-next+1)
				for ; next < stop; next++ {
					record(t, j, next)
					if err := l.Processed(bg, 1, offsets{next + 1}); err != nil {
						t.Fatal(err)
					}
				}
				if rng.IntN(3) == 0 {
					time.Sleep(time.Millisecond) // let the checkpoint in flight commit, sometimes
				}
				seen = durable(t, l)
				// Crash: the loop is abandoned with its checkpoint in
				// flight, which may commit before the next owner opens
				// the store or be fenced.
			}
			j := testjob.New(t, 16, nil)
			l, start, err := Resume[offsets](bg, j.B, st, opts)
			if err != nil || !start.Restored || start.Meta.Next != total {
				t.Fatalf("final resume: %+v, %v", start, err)
			}
			check(t, "final resume", j, total)
			l.Close()
		})
	}
}

// With a storage that fails, Processed reports the failed checkpoints
// (ErrStorage), the job goes on, the next checkpoints succeed, and a resume
// finds the newest durable one. With TolerableFailures the failures are
// counted, not returned.
func TestLoop_FailingStorage(t *testing.T) {
	for _, tolerate := range []int{0, 1000} {
		t.Run(fmt.Sprint("tolerate=", tolerate), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tolerate), 2))
			fs := newFaultStorage()
			j := testjob.New(t, 16, nil)
			l, _, err := Resume[offsets](bg, j.B, fs, LoopOptions{Records: 10, TolerableFailures: tolerate})
			if err != nil {
				t.Fatal(err)
			}
			if st := l.Stats(); st != (LoopStats{}) {
				t.Fatalf("stats of a new loop: %+v", st)
			}
			failed, maxFailures := 0, 0
			const total = 600
			for i := range total {
				record(t, j, i)
				if i%25 == 0 {
					fs.failAt(1+rng.IntN(6), false)
				}
				err := l.Processed(bg, 1, offsets{i + 1})
				maxFailures = max(maxFailures, l.Failures())
				if err != nil {
					if !errors.Is(err, ErrStorage) || !errors.Is(err, errInjected) {
						t.Fatalf("record %d: %v, want an ErrStorage wrapping the fault", i, err)
					}
					failed++
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			fs.disarm()
			if _, err := l.Sync(bg, offsets{total}); err != nil {
				t.Fatal(err)
			}
			if tolerate == 0 && failed == 0 || tolerate > 0 && (failed > 0 || maxFailures == 0) {
				t.Fatalf("%d failures returned, %d in a row counted", failed, maxFailures)
			}
			// Every checkpoint taken is counted as completed or failed once
			// settled; a Sync settles them all.
			st := l.Stats()
			if st.InFlight || st.Taken != st.Completed+st.Failed || st.Completed == 0 || st.Failed < maxFailures ||
				st.Bytes <= 0 || st.FailuresInARow != 0 || l.Last().ID != uint64(st.Taken) {
				t.Fatalf("stats after Sync: %+v (%d in a row at most, last %d)", st, maxFailures, l.Last().ID)
			}
			if err := l.Wait(bg); err != nil {
				t.Fatalf("Wait with nothing in flight: %v", err)
			}
			l.Close()
			j2 := testjob.New(t, 16, nil)
			l2, start, err := Resume[offsets](bg, j2.B, fs.afterCrash(), LoopOptions{})
			if err != nil || start.Meta.Next != total {
				t.Fatalf("resume: %+v, %v", start, err)
			}
			check(t, "resume", j2, total)
			l2.Close()
		})
	}
}

// The storage dies (a crash in the middle of a checkpoint): the restarted
// job resumes from a checkpoint at least as new as the last durable one.
func TestLoop_StorageCrash(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 3))
		fs := newFaultStorage()
		j := testjob.New(t, 16, nil)
		l, _, err := Resume[offsets](bg, j.B, fs, LoopOptions{Records: 5})
		if err != nil {
			t.Fatal(err)
		}
		crashAt := 20 + rng.IntN(200)
		for i := range 300 {
			record(t, j, i)
			if i == crashAt {
				fs.failAt(1+rng.IntN(4), true)
			}
			if err := l.Processed(bg, 1, offsets{i + 1}); err != nil {
				if !errors.Is(err, ErrStorage) {
					t.Fatalf("record %d: %v", i, err)
				}
				break
			}
		}
		seen := durable(t, l)
		j2 := testjob.New(t, 16, nil)
		l2, start, err := Resume[offsets](bg, j2.B, fs.afterCrash(), LoopOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if start.Meta.Next < seen || seen > 0 && !start.Restored {
			t.Fatalf("seed %d: resumed at %d (%v), the crashed loop had %d durable", seed, start.Meta.Next, start.Restored, seen)
		}
		check(t, "resume", j2, start.Meta.Next)
		l2.Close()
	}
}

// At most one checkpoint is in flight: while one is held, records pile up
// and none is taken; once it lands, the next is taken at the next call.
// Interval triggers on the loop's clock.
func TestLoop_OneInFlightAndInterval(t *testing.T) {
	gate := make(chan struct{})
	st := gatedStorage{Memory(), gate}
	now := time.Unix(0, 0)
	j := testjob.New(t, 16, nil)
	l, start, err := Resume[offsets](bg, j.B, st, LoopOptions{Interval: time.Minute, Now: func() time.Time { return now }})
	if err != nil || start.Restored {
		t.Fatal(start, err)
	}
	for i := range 10 {
		record(t, j, i)
		if err := l.Processed(bg, 1, offsets{i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	if l.inFlight != nil {
		t.Fatal("a checkpoint was taken before the interval passed")
	}
	now = now.Add(time.Minute)
	for i := 10; i < 100; i++ {
		record(t, j, i)
		if err := l.Processed(bg, 1, offsets{i + 1}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	l.store.mu.Lock()
	pending := len(l.store.pending)
	l.store.mu.Unlock()
	if pending != 1 || l.inFlight == nil || l.inFlight.ID() != 1 {
		t.Fatalf("%d checkpoints pending, want 1 in flight", pending)
	}
	close(gate)
	if err := l.inFlight.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := l.Processed(bg, 0, offsets{100}); err != nil {
		t.Fatal(err)
	}
	if durable(t, l) != 11 || l.inFlight == nil || l.inFlight.ID() != 2 {
		t.Fatalf("after the first landed: durable %d, in flight %v", durable(t, l), l.inFlight)
	}
	if _, err := l.Sync(bg, offsets{100}); err != nil || durable(t, l) != 100 {
		t.Fatal(err, durable(t, l))
	}
	l.Close()

	// Every 10 records, each landing before the next is due: 3 in 35.
	j = testjob.New(t, 16, nil)
	l, _, err = Resume[offsets](bg, j.B, Memory(), LoopOptions{Records: 10})
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for i := range 35 {
		record(t, j, i)
		if err := l.Processed(bg, 1, offsets{i + 1}); err != nil {
			t.Fatal(err)
		}
		if cp := l.inFlight; cp != nil && cp.Wait() == nil && cp.ID() > uint64(taken) {
			taken++
		}
	}
	if taken != 3 {
		t.Fatalf("%d checkpoints in 35 records, every 10: want 3", taken)
	}
	l.Close()
}

// Resume refuses what it cannot resume from, before it touches the
// backend: a checkpoint not taken by a loop, metadata of another type, a
// watermark of an unknown timer service. It falls back past damaged
// checkpoints, and never starts fresh over a store whose checkpoints are
// all damaged.
func TestLoop_ResumeRefuses(t *testing.T) {
	empty := func(j *testjob.Job) bool { return len(j.Dump(t, nil)) == 0 }
	for _, o := range []LoopOptions{{Records: -1}, {Interval: -time.Second}, {TolerableFailures: -1}} {
		if _, _, err := Resume[offsets](bg, testjob.New(t, 16, nil).B, Memory(), o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	// A plain checkpoint.
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(20, 1)
	s := open(t, j, st, Options{})
	if cp, err := s.Checkpoint(bg, 1); err != nil || cp.Wait() != nil {
		t.Fatal(err)
	}
	s.Close()
	j2 := testjob.New(t, 16, nil)
	if _, _, err := Resume[offsets](bg, j2.B, st, LoopOptions{}); !errors.Is(err, ErrMismatch) || !empty(j2) {
		t.Fatalf("plain checkpoint: %v", err)
	}

	// Loop checkpoints 1..3, then metadata of another type.
	st = Memory()
	j = testjob.New(t, 16, nil)
	l, _, err := Resume[offsets](bg, j.B, st, LoopOptions{Store: Options{Retention: Retention{KeepLast: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		record(t, j, i)
		if _, err := l.Sync(bg, offsets{i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	cps := l.Store().Checkpoints()
	l.Close()
	j2 = testjob.New(t, 16, nil)
	if _, _, err := Resume[struct{ Next string }](bg, j2.B, st, LoopOptions{}); !errors.Is(err, ErrMismatch) || !empty(j2) {
		t.Fatalf("metadata of another type: %v", err)
	}
	// A backend without the timer service the watermarks name.
	b3, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	cowstate.NamespacedValue(b3, "value", statetable.String, statetable.String, statetable.Int64, 0)
	if _, _, err := Resume[offsets](bg, b3, st, LoopOptions{}); !errors.Is(err, ErrMismatch) || func() bool { n, _ := b3.Table().Entries("value"); return n != 0 }() {
		t.Fatalf("no timer service: %v", err)
	}
	// Damage the newest: resume falls back to checkpoint 2 and says so.
	seg := cps[len(cps)-1].Segments[0].Name
	st.put(seg, append(st.get(seg), 0))
	j2 = testjob.New(t, 16, nil)
	l2, start, err := Resume[offsets](bg, j2.B, st, LoopOptions{})
	if err != nil || !start.Restored || start.Manifest.ID != 2 || len(start.Skipped) != 1 || start.Skipped[0].ID != 3 {
		t.Fatalf("newest damaged: %+v, %v", start, err)
	}
	check(t, "fallback", j2, 2)
	l2.Close()
	// All damaged: an error, not a fresh start.
	for _, m := range cps {
		for _, sg := range m.Segments {
			st.put(sg.Name, []byte("damaged"))
		}
	}
	j2 = testjob.New(t, 16, nil)
	if _, _, err := Resume[offsets](bg, j2.B, st, LoopOptions{}); !errors.Is(err, ErrCorrupt) || !empty(j2) {
		t.Fatalf("all damaged: %v", err)
	}
}

// Wait settles the checkpoint in flight without taking another: a
// graceful stop keeps it.
func TestLoop_WaitSettlesInFlight(t *testing.T) {
	j := testjob.New(t, 16, nil)
	st := Memory()
	l, _, err := Resume[offsets](bg, j.B, st, LoopOptions{Records: 1})
	if err != nil {
		t.Fatal(err)
	}
	record(t, j, 0)
	if err := l.Processed(bg, 1, offsets{1}); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Taken != 1 || !s.InFlight || s.Completed != 0 {
		t.Fatalf("after the first record: %+v, want one checkpoint in flight", s)
	}
	if err := l.Wait(bg); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Taken != 1 || s.InFlight || s.Completed != 1 || s.Bytes <= 0 {
		t.Fatalf("after Wait: %+v, want it completed and no other taken", s)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := testjob.New(t, 16, nil)
	l2, start, err := Resume[offsets](bg, j2.B, st, LoopOptions{})
	if err != nil || !start.Restored || start.Meta.Next != 1 {
		t.Fatalf("resume after Wait and Close: %+v, %v", start, err)
	}
	check(t, "resume", j2, 1)
	l2.Close()
}

// Resuming into a backend that lacks several registrations names every
// state and timer service missing, not only the first, and restores
// nothing.
func TestResume_NamesEverythingUnregistered(t *testing.T) {
	st := Memory()
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	a, _ := cowstate.Value[string, int64](b, "clicks")
	c, _ := cowstate.Value[string, int64](b, "views")
	tm, _ := cowstate.Timers[string](b, "timeouts")
	a.Put("x", 1)
	c.Put("y", 2)
	tm.RegisterEventTime("x", 5)
	loop, _, err := Resume[int](bg, b, st, LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Sync(bg, 1); err != nil {
		t.Fatal(err)
	}
	loop.Close()

	fresh, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	_, _, err = Resume[int](bg, fresh, st, LoopOptions{})
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("resuming with nothing registered: %v, want ErrMismatch", err)
	}
	for _, name := range []string{`"clicks"`, `"views"`, `"timeouts"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

// Peek and ReadMeta read what a job would resume from (state, metadata,
// watermarks) while its owner runs on, unfenced.
func TestPeek_ReadsWithoutTakingOver(t *testing.T) {
	st := Memory()
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	count, _ := cowstate.Value[string, int64](b, "count")
	tm, _ := cowstate.Timers[string](b, "timeouts")
	count.Put("ann", 3)
	tm.AdvanceWatermark(40, func(string, int64) error { return nil })
	loop, _, err := Resume[string](bg, b, st, LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	if _, err := loop.Sync(bg, "offset-7"); err != nil {
		t.Fatal(err)
	}

	l, err := Inspect(bg, st)
	if err != nil {
		t.Fatal(err)
	}
	meta, wms, err := ReadMeta[string](l.Checkpoints[len(l.Checkpoints)-1])
	if err != nil || meta != "offset-7" || wms["timeouts"] != 40 {
		t.Fatalf("ReadMeta: %q %v %v; want offset-7 and watermark 40", meta, wms, err)
	}
	if _, _, err := ReadMeta[int](l.Checkpoints[0]); !errors.Is(err, ErrMismatch) {
		t.Fatalf("ReadMeta as another type: %v, want ErrMismatch", err)
	}

	peek, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	pc, _ := cowstate.Value[string, int64](peek, "count")
	ptm, _ := cowstate.Timers[string](peek, "timeouts")
	start, err := Peek[string](bg, peek, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := pc.Get("ann"); !start.Restored || start.Meta != "offset-7" || n != 3 || ptm.CurrentWatermark() != 40 {
		t.Fatalf("Peek: %+v, ann %d, watermark %d", start, n, ptm.CurrentWatermark())
	}
	if _, err := Peek[string](bg, peek, st, 99); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Peek of checkpoint 99: %v, want ErrNoCheckpoint", err)
	}
	count.Put("ann", 4)
	if _, err := loop.Sync(bg, "offset-8"); err != nil {
		t.Fatalf("the owner after a Peek: %v", err)
	}
}
