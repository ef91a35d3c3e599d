package rapidtest

import (
	"errors"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/timerqueue"
)

// This file holds the timer operations: registering and deleting timers,
// and firing them with callbacks that write state, register and delete
// timers, capture views and fail.

// timerArgs draws a timer to register or delete: one the model holds, or
// a key, a namespace and a timestamp.
func (m *machine) timerArgs(t *rapid.T, s string, d int) (key, ns string, ts int64) {
	if tm, ok := m.heldTimer(t, s, d); ok {
		return tm.Key, tm.Namespace, tm.Timestamp
	}
	return m.key(t), m.ns(t, "ns"), m.timestamp(t, s, d, "ts")
}

func (m *machine) registerTimer(t *rapid.T) {
	s, d := service(t), domainIndex(t)
	k, ns, ts := m.timerArgs(t, s, d)
	ga, gerr := m.b.RegisterTimer(s, domains[d], k, ns, ts)
	wa, werr := m.m.RegisterTimer(s, domains[d], k, ns, ts)
	m.same(t, fmt.Sprintf("RegisterTimer(%q, %d, %q, %q, %d)", s, domains[d], k, ns, ts), []any{ga}, []any{wa}, gerr, werr)
}

// registerWindowTimers registers timers with one timestamp for several
// keys, as window operators do for a window's end: ties to order.
func (m *machine) registerWindowTimers(t *rapid.T) {
	s, d := service(t), domainIndex(t)
	ns, ts := m.ns(t, "ns"), m.timestamp(t, s, d, "ts")
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(m.keys), 1, len(m.keys), rapid.ID).Draw(t, "keys") {
		ga, gerr := m.b.RegisterTimer(s, domains[d], k, ns, ts)
		wa, werr := m.m.RegisterTimer(s, domains[d], k, ns, ts)
		m.same(t, fmt.Sprintf("RegisterTimer(%q, %d, %q, %q, %d)", s, domains[d], k, ns, ts), []any{ga}, []any{wa}, gerr, werr)
	}
}

// deleteArgs draws a timer to delete: as timerArgs, or, on purpose, one
// that does not exist but is next to one that does: the (key, namespace,
// timestamp) of a timer of the other time domain, or a timer of this
// domain under another namespace or another key. A backend that deletes
// the timer next to it then differs from the model; drawn by chance, such
// arguments would come up too rarely to catch it.
func (m *machine) deleteArgs(t *rapid.T, s string, d int) (key, ns string, ts int64) {
	near := func(d int) (timer, bool) {
		ts, err := m.m.TimerEntries(s, domains[d])
		if err != nil || len(ts) == 0 {
			return timer{}, false
		}
		return ts[rapid.IntRange(0, len(ts)-1).Draw(t, "nearTimer")], true
	}
	switch rapid.IntRange(0, 5).Draw(t, "deleteNear") {
	case 1:
		if tm, ok := near(1 - d); ok {
			return tm.Key, tm.Namespace, tm.Timestamp
		}
	case 2:
		if tm, ok := near(d); ok {
			return tm.Key, otherOf(t, m.nss, tm.Namespace, "otherNS"), tm.Timestamp
		}
	case 3:
		if tm, ok := near(d); ok {
			return otherOf(t, m.keys, tm.Key, "otherKey"), tm.Namespace, tm.Timestamp
		}
	}
	return m.timerArgs(t, s, d)
}

// otherOf draws a string of pool other than not, or one of no pool if
// pool holds only not.
func otherOf(t *rapid.T, pool []string, not, label string) string {
	rest := slices.DeleteFunc(slices.Clone(pool), func(s string) bool { return s == not })
	if len(rest) == 0 {
		return not + "'"
	}
	return rapid.SampledFrom(rest).Draw(t, label)
}

func (m *machine) deleteTimer(t *rapid.T) {
	s, d := service(t), domainIndex(t)
	k, ns, ts := m.deleteArgs(t, s, d)
	gd, gerr := m.b.DeleteTimer(s, domains[d], k, ns, ts)
	wd, werr := m.m.DeleteTimer(s, domains[d], k, ns, ts)
	m.same(t, fmt.Sprintf("DeleteTimer(%q, %d, %q, %q, %d)", s, domains[d], k, ns, ts), []any{gd}, []any{wd}, gerr, werr)
}

// firePlan is what the timer callbacks of one Advance do, drawn before it
// so that the backend's and the model's callbacks do the same.
type firePlan struct {
	Record     bool  // append "ts" to the list state of the timer's key and namespace
	Reduce     bool  // and fold it into the reducing state
	Again      int64 // > 0: the first maxAgain callbacks of timers with an even timestamp register one Again later
	Chain      int   // this many callbacks register a timer at their own timestamp for the next key
	DeleteNext bool  // callbacks delete the next key's timer one later
	FailAt     int   // the callback with this index fails (-1: none)
	CaptureAt  int   // the callback with this index captures a view (-1: none)
}

// maxAgain bounds the timers callbacks register one later: with the
// watermark at the end of int64, they would go on for ever.
const maxAgain = 8

var errFire = errors.New("rapidtest: a timer callback failed on purpose")

func (m *machine) drawPlan(t *rapid.T) firePlan {
	return firePlan{
		Record:     rapid.Bool().Draw(t, "record"),
		Reduce:     rapid.Bool().Draw(t, "reduce"),
		Again:      rapid.Int64Range(0, 3).Draw(t, "again"),
		Chain:      rapid.IntRange(0, 3).Draw(t, "chain"),
		DeleteNext: rapid.Bool().Draw(t, "deleteNext"),
		FailAt:     rapid.IntRange(-1, 6).Draw(t, "failAt"),
		CaptureAt:  rapid.IntRange(-1, 4).Draw(t, "captureAt"),
	}
}

// firing is one side's record of an Advance.
type firing struct {
	fired []timer
	log   []string // results of what the callbacks did
	views []contract.View
}

// callback returns the fire function of plan for backend x.
func (m *machine) callback(x Backend, service string, d timerqueue.Domain, plan firePlan, f *firing) contract.FireFunc {
	chain := plan.Chain
	return func(key, ns string, ts int64) error {
		i := len(f.fired)
		f.fired = append(f.fired, timer{Timestamp: ts, Key: key, Namespace: ns})
		if i == plan.FailAt {
			return errFire
		}
		logf := func(format string, args ...any) { f.log = append(f.log, fmt.Sprintf(format, args...)) }
		if plan.Record {
			logf("Add list: %v", x.Add("list", key, ns, fmt.Sprint(ts)) == nil)
		}
		if plan.Reduce {
			logf("Add reducing: %v", x.Add("reducing", key, ns, fmt.Sprint(ts, ",")) == nil)
		}
		next := m.keys[(slices.Index(m.keys, key)+1)%len(m.keys)]
		if plan.Again > 0 && ts%2 == 0 && i < maxAgain && ts+plan.Again > ts {
			added, err := x.RegisterTimer(service, d, key, ns, ts+plan.Again)
			logf("RegisterTimer again: %v %v", added, err == nil)
		}
		if chain > 0 {
			chain--
			added, err := x.RegisterTimer(service, d, next, ns, ts)
			logf("RegisterTimer chain: %v %v", added, err == nil)
		}
		if plan.DeleteNext {
			deleted, err := x.DeleteTimer(service, d, next, ns, addSat(ts, 1))
			logf("DeleteTimer next: %v %v", deleted, err == nil)
		}
		if i == plan.CaptureAt {
			f.views = append(f.views, x.Capture())
		}
		return nil
	}
}

func (m *machine) advanceWatermark(t *rapid.T) {
	s := service(t)
	wm := m.timestamp(t, s, 0, "watermark")
	plan := m.drawPlan(t)
	var gf, wf firing
	gn, gerr := m.b.AdvanceWatermark(s, wm, m.callback(m.b, s, timerqueue.EventTime, plan, &gf))
	wn, werr := m.m.AdvanceWatermark(s, wm, m.callback(m.m, s, timerqueue.EventTime, plan, &wf))
	m.afterFiring(t, fmt.Sprintf("AdvanceWatermark(%q, %d) with %+v", s, wm, plan), gn, wn, gerr, werr, &gf, &wf)
}

// advanceProcessingTime moves the clock forward, a little or up to a
// timer's timestamp, and fires.
func (m *machine) advanceProcessingTime(t *rapid.T) {
	s := service(t)
	if rapid.Bool().Draw(t, "clockJump") {
		m.now = max(m.now, m.timestamp(t, s, 1, "clock"))
	} else {
		m.now = addSat(m.now, rapid.Int64Range(0, 8).Draw(t, "clockAdvance"))
	}
	plan := m.drawPlan(t)
	var gf, wf firing
	gn, gerr := m.b.AdvanceProcessingTime(s, m.callback(m.b, s, timerqueue.ProcessingTime, plan, &gf))
	wn, werr := m.m.AdvanceProcessingTime(s, m.callback(m.m, s, timerqueue.ProcessingTime, plan, &wf))
	m.afterFiring(t, fmt.Sprintf("AdvanceProcessingTime(%q) at %d with %+v", s, m.now, plan), gn, wn, gerr, werr, &gf, &wf)
}

func (m *machine) afterFiring(t *rapid.T, op string, gn, wn int, gerr, werr error, gf, wf *firing) {
	t.Helper()
	// Pair the views the callbacks captured first, so that they are
	// released whatever happens next.
	for i := range min(len(gf.views), len(wf.views)) {
		m.live = append(m.live, pair{gf.views[i], wf.views[i], m.step})
	}
	for _, v := range gf.views[min(len(gf.views), len(wf.views)):] {
		v.Release()
	}
	if !slices.Equal(gf.fired, wf.fired) {
		m.fatalf(t, "%s fired %s, model fired %s", op, showTimers(gf.fired), showTimers(wf.fired))
	}
	if len(gf.views) != len(wf.views) {
		m.fatalf(t, "%s: callbacks captured %d views, model %d", op, len(gf.views), len(wf.views))
	}
	m.same(t, op, []any{gn, gf.log}, []any{wn, wf.log}, gerr, werr)
	if gn != wn {
		m.fatalf(t, "%s: fired %d, model %d (error %v)", op, gn, wn, werr)
	}
}
