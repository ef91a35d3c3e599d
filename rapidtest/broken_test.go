package rapidtest

import (
	"context"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// The deliberately broken backends below each wrap a correct one (cowstate's
// Backend) and break one rule of the contract. TestSuite_CatchesBrokenBackends
// runs the suite against each with a recording testing.TB and asserts that
// it fails; run it with -v to see how soon. Over ten runs (median and range
// of the steps until the first failure; length of the shrunk sequence):
// aliasing-snapshot 12 (7-50), 2; lost-delete 145 (30-340), 3;
// timer-tie-order-flipped 60 (27-374), 2-3;
// timer-registered-while-firing-not-fired 27 (9-63), 2;
// random-hash-key-groups 33 (1-213), 1-2;
// restore-drops-last-key-group 28 (6-126), 2-3.

func newCow(cfg Config) Backend {
	b, err := contract.New(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// aliasing returns views that read the live state: a snapshot that aliases
// what the writer goes on changing.
type aliasing struct{ contract.Backend }

type aliasView struct {
	contract.View
	live contract.Backend
}

func (a aliasing) Capture() contract.View { return aliasView{a.Backend.Capture(), a.Backend} }
func (v aliasView) StateEntries(s string) ([]contract.Entry, error) {
	return v.live.StateEntries(s)
}

// lostDelete loses ClearState while a view is live, the way a
// copy-on-write bug would.
type lostDelete struct {
	contract.Backend
	live *int
}

type countedView struct {
	contract.View
	once sync.Once
	live *int
}

func (l lostDelete) Capture() contract.View {
	*l.live++
	return &countedView{View: l.Backend.Capture(), live: l.live}
}

func (v *countedView) Release() {
	v.once.Do(func() { *v.live-- }) // the suite releases on the writer goroutine
	v.View.Release()
}

func (l lostDelete) ClearState(state, key, ns string) error {
	if *l.live > 0 && l.KeyGroups().Contains(KeyGroupOf(key, l.MaxParallelism())) {
		return nil
	}
	return l.Backend.ClearState(state, key, ns)
}

// advanceByHand fires event-time timers one at a time through the
// contract's own methods; pick chooses among the due timers, in firing
// order. lateTimers false fires only those due when it starts.
func advanceByHand(c contract.Backend, service string, wm int64, fire contract.FireFunc, pick func([]timer) timer, lateTimers bool) (int, error) {
	all, err := c.TimerEntries(service, timerqueue.EventTime)
	if err != nil {
		return 0, err
	}
	var atStart []timer
	for _, t := range all {
		if t.Timestamp <= wm {
			atStart = append(atStart, t)
		}
	}
	fired := 0
	for {
		var due []timer
		if lateTimers {
			all, _ = c.TimerEntries(service, timerqueue.EventTime)
			for _, t := range all {
				if t.Timestamp <= wm && (len(due) == 0 || t.Timestamp == due[0].Timestamp) {
					due = append(due, t)
				}
			}
		} else {
			due, atStart = atStart, nil
			for len(due) > 0 {
				if ok, _ := c.DeleteTimer(service, timerqueue.EventTime, due[0].Key, due[0].Namespace, due[0].Timestamp); ok {
					break
				}
				due = due[1:] // deleted by a callback: it does not fire
			}
			if len(due) > 0 {
				atStart = due[1:]
				due = due[:1]
				c.RegisterTimer(service, timerqueue.EventTime, due[0].Key, due[0].Namespace, due[0].Timestamp)
			}
		}
		if len(due) == 0 {
			return fired, nil
		}
		t := pick(due)
		c.DeleteTimer(service, timerqueue.EventTime, t.Key, t.Namespace, t.Timestamp)
		if err := fire(t.Key, t.Namespace, t.Timestamp); err != nil {
			c.RegisterTimer(service, timerqueue.EventTime, t.Key, t.Namespace, t.Timestamp)
			return fired, err
		}
		fired++
	}
}

// tieFlipped fires event-time timers of equal timestamp in reverse order.
type tieFlipped struct{ contract.Backend }

func (f tieFlipped) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return advanceByHand(f.Backend, service, wm, fire, func(due []timer) timer { return due[len(due)-1] }, true)
}

// lateNotFired does not fire a timer that a callback registers, even when
// it is due.
type lateNotFired struct{ contract.Backend }

func (f lateNotFired) AdvanceWatermark(service string, wm int64, fire contract.FireFunc) (int, error) {
	return advanceByHand(f.Backend, service, wm, fire, func(due []timer) timer { return due[0] }, false)
}

// randomHash owns keys by a key group computed with a per-process random
// hash (hash/maphash) rather than the stable one: it keeps all key groups
// in the wrapped backend and checks ownership itself.
type randomHash struct {
	contract.Backend
	owned  statetable.KeyGroupRange
	maxPar int
}

var processSeed = maphash.MakeSeed()

func newRandomHash(cfg Config) Backend {
	owned := statetable.AllKeyGroups(cfg.MaxParallelism)
	if cfg.KeyGroups != nil {
		owned = *cfg.KeyGroups
	}
	cfg.KeyGroups = nil
	return randomHash{newCow(cfg), owned, cfg.MaxParallelism}
}

func (r randomHash) own(key string) error {
	if g := int(maphash.String(processSeed, key) % uint64(r.maxPar)); !r.owned.Contains(g) {
		return fmt.Errorf("%w: key %q", statetable.ErrKeyGroupNotOwned, key)
	}
	return nil
}

func (r randomHash) KeyGroups() statetable.KeyGroupRange { return r.owned }
func (r randomHash) Put(s, k, ns, v string) error {
	if err := r.own(k); err != nil {
		return err
	}
	return r.Backend.Put(s, k, ns, v)
}
func (r randomHash) Add(s, k, ns, v string) error {
	if err := r.own(k); err != nil {
		return err
	}
	return r.Backend.Add(s, k, ns, v)
}
func (r randomHash) RegisterTimer(s string, d timerqueue.Domain, k, ns string, ts int64) (bool, error) {
	if err := r.own(k); err != nil {
		return false, err
	}
	return r.Backend.RegisterTimer(s, d, k, ns, ts)
}
func (r randomHash) RestoreSnapshot(ctx context.Context, rd io.ReaderAt, size int64) error {
	if err := r.Backend.RestoreSnapshot(ctx, rd, size); err != nil {
		return err
	}
	return dropKeys(r.Backend, func(key string) bool { return r.own(key) != nil })
}

// dropKeys clears every entry and timer of the keys drop selects.
func dropKeys(c contract.Backend, drop func(key string) bool) error {
	for _, s := range stateNames {
		es, err := c.StateEntries(s)
		if err != nil {
			return err
		}
		for _, e := range es {
			if drop(e.Key) {
				c.ClearState(s, e.Key, e.Namespace)
			}
		}
	}
	for _, s := range services {
		for _, d := range domains {
			ts, _ := c.TimerEntries(s, d) // no such service: nothing to drop
			for _, t := range ts {
				if drop(t.Key) {
					c.DeleteTimer(s, d, t.Key, t.Namespace, t.Timestamp)
				}
			}
		}
	}
	return nil
}

// dropsLastGroup loses the last key group it owns when it restores.
type dropsLastGroup struct{ contract.Backend }

func (d dropsLastGroup) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	if err := d.Backend.RestoreSnapshot(ctx, r, size); err != nil {
		return err
	}
	last := d.KeyGroups().Last
	return dropKeys(d.Backend, func(key string) bool { return KeyGroupOf(key, d.MaxParallelism()) == last })
}

// recorder is a rapid.TB that records instead of failing the test; run it
// on its own goroutine (FailNow exits the goroutine, as in testing).
type recorder struct {
	name   string
	mu     sync.Mutex
	failed bool
	out    strings.Builder
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}
func (r *recorder) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.Logf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.Log(args...); runtime.Goexit() }
func (r *recorder) SkipNow()                          { runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// withFlag sets a flag for the duration of a test.
func withFlag(t *testing.T, name, value string) {
	old := flag.Lookup(name).Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(name, old) })
}

// broken is one deliberately broken backend and the groups it is run with.
type broken struct {
	name   string
	new    func(Config) Backend
	groups Group
}

var brokenBackends = []broken{
	// Views are read on the writing goroutine in GroupWrites: reading the
	// live state there would be a data race, which -race reports on its own.
	{"aliasing-snapshot", func(cfg Config) Backend { return aliasing{newCow(cfg)} }, AllGroups &^ GroupWrites},
	{"lost-delete", func(cfg Config) Backend { return lostDelete{newCow(cfg), new(int)} }, AllGroups},
	{"timer-tie-order-flipped", func(cfg Config) Backend { return tieFlipped{newCow(cfg)} }, AllGroups},
	{"timer-registered-while-firing-not-fired", func(cfg Config) Backend { return lateNotFired{newCow(cfg)} }, AllGroups},
	{"random-hash-key-groups", newRandomHash, AllGroups},
	{"restore-drops-last-key-group", func(cfg Config) Backend { return dropsLastGroup{newCow(cfg)} }, AllGroups},
}

// TestSuite_CatchesBrokenBackends runs the suite's machines against
// each broken backend and asserts that it fails, logging the number of test
// cases and of steps it ran up to the first failure, and the failure.
func TestSuite_CatchesBrokenBackends(t *testing.T) {
	withFlag(t, "rapid.nofailfile", "true")
	// Shrinking is what takes time here (finding takes a few test cases):
	// bound it, more tightly under the race detector, which slows it
	// fourfold. Shrinks cut short show longer sequences.
	shrink := "10s"
	if raceEnabled || testing.Short() {
		shrink = "2s"
	}
	withFlag(t, "rapid.shrinktime", shrink)
	for _, bb := range brokenBackends {
		t.Run(bb.name, func(t *testing.T) {
			var cases, steps, failCases, failSteps int
			var firstFail string
			h := &hooks{
				testCase: func() { cases++ },
				step:     func() { steps++ },
				fail: func(msg string) {
					if firstFail == "" {
						firstFail, failCases, failSteps = msg, cases, steps
					}
				},
			}
			rec := &recorder{name: t.Name()}
			var machine Machine
			for _, machine = range Machines { // as Run does, up to the first failure
				if machine.core()&bb.groups == 0 {
					continue
				}
				cases, steps = 0, 0
				done := make(chan struct{})
				go func() {
					defer close(done)
					check(rec, machine, bb.new, Options{Groups: bb.groups, hooks: h})
				}()
				<-done
				if rec.Failed() {
					break
				}
			}
			if !rec.Failed() {
				t.Fatalf("the suite passed against a backend with the bug %q", bb.name)
			}
			out := rec.out.String()
			shrunk := out[strings.LastIndex(out, "[rapid] failed"):]
			t.Logf("machine %q found it in test case %d, after %d steps in all (%d in that test case): %s",
				machine, failCases, failSteps, stepOf(firstFail), firstFail)
			t.Logf("shrunk to %d steps: %s", stepOf(shrunk[strings.Index(shrunk, ": ")+2:]), shrunk[:strings.Index(shrunk, "\n")])
			if testing.Verbose() {
				t.Log(shrunk)
			}
		})
	}
}

// stepOf returns the step number a failure message starts with.
func stepOf(msg string) int {
	var n int
	fmt.Sscanf(msg, "step %d:", &n)
	return n
}
