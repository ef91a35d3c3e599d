package window_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/window"
	"pgregory.net/rapid"
)

// sessionModel is Flink's session windows written the obvious way: per key
// a list of open sessions with their elements; a new element's window
// absorbs every open session it intersects until none is left.
type sessionModel struct {
	gap       int64
	watermark int64
	open      map[string][]modelSession
}

type modelSession struct {
	w     window.TimeWindow
	elems []int64
}

func (m *sessionModel) add(key string, ts int64) (window.TimeWindow, bool) {
	cover := window.TimeWindow{Start: ts, End: ts + m.gap}
	elems := []int64{ts}
	rest := slices.Clone(m.open[key])
	for changed := true; changed; {
		changed = false
		for i, s := range rest {
			if s.w.Intersects(cover) {
				cover = cover.Cover(s.w)
				elems = append(elems, s.elems...)
				rest = slices.Delete(rest, i, i+1)
				changed = true
				break
			}
		}
	}
	if cover.End-1 <= m.watermark {
		return cover, true // late: nothing changes
	}
	m.open[key] = append(rest, modelSession{cover, elems})
	return cover, false
}

// fire closes the sessions ended at wm and returns them as strings.
func (m *sessionModel) fire(wm int64) []string {
	m.watermark = max(m.watermark, wm)
	var out []string
	for key, ss := range m.open {
		kept := ss[:0]
		for _, s := range ss {
			if s.w.End-1 <= m.watermark {
				out = append(out, result(key, s.w, s.elems))
			} else {
				kept = append(kept, s)
			}
		}
		m.open[key] = kept
	}
	slices.Sort(out)
	return out
}

func result(key string, w window.TimeWindow, elems []int64) string {
	elems = slices.Clone(elems)
	slices.Sort(elems)
	return fmt.Sprintf("%s %v %v", key, w, elems)
}

// sessionJob is the same on the backend: a list state of the elements per
// session, the session set and its timers.
type sessionJob struct {
	b        *cowstate.Backend
	elems    *statetable.ListState[string, window.TimeWindow, int64]
	timers   *cowstate.NamespacedTimerService[string, window.TimeWindow]
	sessions *window.Sessions[string]
}

func newSessionJob(t interface{ Fatal(...any) }, gap int64) *sessionJob {
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	j := &sessionJob{b: b}
	if j.elems, err = cowstate.NamespacedList(b, "elems", statetable.String, window.Codec, statetable.Int64); err != nil {
		t.Fatal(err)
	}
	if j.timers, err = cowstate.NamespacedTimers(b, "sessions", statetable.String, window.Codec); err != nil {
		t.Fatal(err)
	}
	if j.sessions, err = window.NewSessions(b, "session-set", statetable.String, gap, j.timers, j.elems); err != nil {
		t.Fatal(err)
	}
	return j
}

func (j *sessionJob) add(key string, ts int64) (window.Assigned, error) {
	a, err := j.sessions.Add(key, ts)
	if err != nil || a.Late {
		return a, err
	}
	return a, j.elems.Add(key, a.State, ts)
}

func (j *sessionJob) fire(wm int64) ([]string, error) {
	var out []string
	_, err := j.timers.AdvanceWatermark(wm, func(key string, w window.TimeWindow, ts int64) error {
		if ts != w.MaxTimestamp() {
			return fmt.Errorf("timer of %v at %d", w, ts)
		}
		st, ok, err := j.sessions.Remove(key, w)
		if err != nil || !ok {
			return fmt.Errorf("fired window %v of %s not open: %v", w, key, err)
		}
		seq, err := j.elems.Get(key, st)
		if err != nil {
			return err
		}
		out = append(out, result(key, w, slices.Collect(seq)))
		return j.elems.Clear(key, st)
	})
	slices.Sort(out)
	return out, err
}

func TestSessions_AgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gap := rapid.Int64Range(1, 20).Draw(t, "gap")
		m := &sessionModel{gap: gap, watermark: -1 << 63, open: map[string][]modelSession{}}
		j := newSessionJob(t, gap)
		wm := int64(-50)
		for i := range rapid.IntRange(1, 200).Draw(t, "ops") {
			if rapid.IntRange(0, 4).Draw(t, "op") == 0 {
				wm += rapid.Int64Range(0, 15).Draw(t, "advance")
				want := m.fire(wm)
				got, err := j.fire(wm)
				if err != nil {
					t.Fatalf("op %d: fire %d: %v", i, wm, err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("op %d: watermark %d fired\n%q\nwant\n%q", i, wm, got, want)
				}
				continue
			}
			key := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key")
			ts := wm + rapid.Int64Range(-10, 40).Draw(t, "ahead")
			wantW, wantLate := m.add(key, ts)
			a, err := j.add(key, ts)
			if err != nil {
				t.Fatalf("op %d: add %s %d: %v", i, key, ts, err)
			}
			if a.Window != wantW || a.Late != wantLate {
				t.Fatalf("op %d: add %s %d = %+v; want window %v late %v", i, key, ts, a, wantW, wantLate)
			}
			// The open windows are the model's, each with one timer.
			var open []window.TimeWindow
			seq, err := j.sessions.Windows(key)
			if err != nil {
				t.Fatal(err)
			}
			for w := range seq {
				open = append(open, w)
			}
			var wantOpen []window.TimeWindow
			for _, s := range m.open[key] {
				wantOpen = append(wantOpen, s.w)
			}
			sortWindows(open)
			sortWindows(wantOpen)
			if !slices.Equal(open, wantOpen) {
				t.Fatalf("op %d: open windows of %s %v, want %v", i, key, open, wantOpen)
			}
		}
		var timers []string
		for tm := range j.timers.EventTimers() {
			timers = append(timers, fmt.Sprint(tm.Key, tm.Namespace, tm.Timestamp))
		}
		var want []string
		for key, ss := range m.open {
			for _, s := range ss {
				want = append(want, fmt.Sprint(key, s.w, s.w.MaxTimestamp()))
			}
		}
		slices.Sort(timers)
		slices.Sort(want)
		if !slices.Equal(timers, want) {
			t.Fatalf("timers %q, want one per open window %q", timers, want)
		}
		// Everything open fires at the end, as in the model.
		got, err := j.fire(1 << 40)
		if wantAll := m.fire(1 << 40); err != nil || !slices.Equal(got, wantAll) {
			t.Fatalf("final fire: %q, %v; want %q", got, err, wantAll)
		}
		if n := j.sessions.Count(); n != 0 {
			t.Fatalf("%d keys with open windows after every session fired", n)
		}
	})
}

func sortWindows(ws []window.TimeWindow) {
	slices.SortFunc(ws, func(a, b window.TimeWindow) int { return int(a.Start - b.Start) })
}

// A merge keeps the state where the earliest window had it, merging the
// others into it, and replaces the timers.
func TestSessions_MergeKeepsStateWindow(t *testing.T) {
	j := newSessionJob(t, 10)
	for _, ts := range []int64{100, 120, 110} { // [110,120) touches [100,110) and [120,130)
		if _, err := j.add("k", ts); err != nil {
			t.Fatal(err)
		}
	}
	st, ok, err := j.sessions.StateWindow("k", window.TimeWindow{Start: 100, End: 130})
	if err != nil || !ok || st != (window.TimeWindow{Start: 100, End: 110}) {
		t.Fatalf("state window of the merged session: %v %v %v", st, ok, err)
	}
	n, err := j.elems.Len("k", st)
	if err != nil || n != 3 {
		t.Fatalf("merged session holds %d elements (%v), want 3", n, err)
	}
	var timers []int64
	for tm := range j.timers.EventTimers() {
		timers = append(timers, tm.Timestamp)
	}
	if !slices.Equal(timers, []int64{129}) {
		t.Fatalf("timers %v, want the merged session's only", timers)
	}
	// A late element that intersects no open session is dropped.
	if _, err := j.fire(200); err != nil {
		t.Fatal(err)
	}
	a, err := j.add("k", 150)
	if err != nil || !a.Late {
		t.Fatalf("late element: %+v, %v", a, err)
	}
	seq, err := j.sessions.Windows("k")
	if err != nil {
		t.Fatal(err)
	}
	for w := range seq {
		t.Fatalf("a late element opened window %v", w)
	}
}

func TestSessions_BadGap(t *testing.T) {
	b, _ := cowstate.New(cowstate.Config{})
	timers, _ := cowstate.NamespacedTimers(b, "s", statetable.String, window.Codec)
	if _, err := window.NewSessions(b, "set", statetable.String, 0, timers); err == nil {
		t.Fatal("gap 0 accepted")
	}
}
