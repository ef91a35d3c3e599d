package window_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/window"
	"pgregory.net/rapid"
)

// fixedModel is a non-merging window operator written the obvious way:
// per key and window the elements and whether its end-of-window timer is
// registered (every element registers it, as Flink's trigger does; a
// purge deletes it), a window late once its last timestamp is at or below
// the watermark, emitted then if its timer is registered.
type fixedModel struct {
	assign    window.Assigner
	watermark int64
	open      map[string]map[window.TimeWindow][]int64
	timer     map[string]map[window.TimeWindow]bool
}

func (m *fixedModel) add(key string, ts int64) (late bool) {
	ws, err := m.assign.AppendWindows(nil, ts)
	if err != nil {
		panic(err)
	}
	late = true
	for _, w := range ws {
		if window.Late(w, m.watermark) {
			continue
		}
		late = false
		if m.open[key] == nil {
			m.open[key] = map[window.TimeWindow][]int64{}
			m.timer[key] = map[window.TimeWindow]bool{}
		}
		m.open[key][w] = append(m.open[key][w], ts)
		m.timer[key][w] = true
	}
	return late
}

// purge deletes the end-of-window timer of key's window w.
func (m *fixedModel) purge(key string, w window.TimeWindow) {
	delete(m.timer[key], w)
}

func (m *fixedModel) fire(wm int64) []string {
	m.watermark = max(m.watermark, wm)
	var out []string
	for key, ws := range m.open {
		for w, elems := range ws {
			if window.Late(w, m.watermark) && m.timer[key][w] {
				out = append(out, countSum(key, w, elems))
				delete(ws, w)
				delete(m.timer[key], w)
			}
		}
	}
	slices.Sort(out)
	return out
}

func countSum(key string, w window.TimeWindow, elems []int64) string {
	var sum int64
	for _, e := range elems {
		sum += e
	}
	return fmt.Sprintf("%s %v n=%d sum=%d", key, w, len(elems), sum)
}

// stats is the operator's aggregation in the tests: count and sum.
type stats struct{}

func (stats) CreateAccumulator() [2]int64         { return [2]int64{} }
func (stats) Add(in int64, acc [2]int64) [2]int64 { return [2]int64{acc[0] + 1, acc[1] + in} }
func (stats) Result(acc [2]int64) [2]int64        { return acc }
func (stats) Merge(a, b [2]int64) [2]int64        { return [2]int64{a[0] + b[0], a[1] + b[1]} }

var statsCodec = statetable.FuncCodec("count-sum",
	func(dst []byte, a [2]int64) []byte {
		return statetable.Int64.Append(statetable.Int64.Append(dst, a[0]), a[1])
	},
	func(src []byte) (a [2]int64, err error) {
		if len(src) != 16 {
			return a, fmt.Errorf("%w: count-sum of %d bytes", statetable.ErrDecode, len(src))
		}
		if a[0], err = statetable.Int64.Decode(src[:8]); err == nil {
			a[1], err = statetable.Int64.Decode(src[8:])
		}
		return a, err
	})

// operatorJob is one process of a job: a backend, the operator, a
// checkpoint loop on a shared store.
type operatorJob struct {
	op   *window.Operator[string, int64, [2]int64]
	loop *checkpoint.Loop[int]
}

func startOperatorJob(t *rapid.T, store checkpoint.Storage, assign window.Assigner) (*operatorJob, int) {
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	op, err := window.Aggregate[string](b, "stats", assign, stats{}, cowstate.WithValueCodec(statsCodec))
	if err != nil {
		t.Fatal(err)
	}
	loop, start, err := checkpoint.Resume[int](context.Background(), b, store, checkpoint.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &operatorJob{op, loop}, start.Meta
}

func (j *operatorJob) fire(wm int64) ([]string, error) {
	var out []string
	last := int64(math.MinInt64)
	_, err := j.op.AdvanceWatermark(wm, func(key string, w window.TimeWindow, a [2]int64) error {
		if w.MaxTimestamp() < last {
			return fmt.Errorf("window %v emitted after one ending at %d", w, last)
		}
		last = w.MaxTimestamp()
		out = append(out, fmt.Sprintf("%s %v n=%d sum=%d", key, w, a[0], a[1]))
		return nil
	})
	slices.Sort(out)
	return out, err
}

// The operator emits what the model emits, for tumbling, sliding and
// session windows, across watermarks that sometimes go back and across
// purges of end-of-window timers (DeleteEnd: the window then emits only if
// a later element registers its timer again, as in Flink) and across
// crashes that resume from the last checkpoint and replay the input after
// it (what a job with a replayable source does).
func TestOperator_AgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var assign window.Assigner
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			assign = window.Tumbling{Size: rapid.Int64Range(1, 30).Draw(t, "size")}
		case 1:
			slide := rapid.Int64Range(1, 15).Draw(t, "slide")
			assign = window.Sliding{Size: rapid.Int64Range(1, 45).Draw(t, "size"), Slide: slide}
		default:
			assign = window.Session{Gap: rapid.Int64Range(1, 20).Draw(t, "gap")}
		}
		type input struct {
			advance bool
			purge   bool // delete the end timer of window pick of ts's windows
			pick    int
			key     string
			ts      int64
		}
		_, isSession := assign.(window.Session)
		var inputs []input
		wm := int64(-50)
		for range rapid.IntRange(1, 150).Draw(t, "inputs") {
			if rapid.IntRange(0, 4).Draw(t, "op") == 0 {
				wm += rapid.Int64Range(-5, 15).Draw(t, "advance")
				inputs = append(inputs, input{advance: true, ts: wm})
				continue
			}
			in := input{key: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key"), ts: wm + rapid.Int64Range(-10, 40).Draw(t, "ahead")}
			if !isSession && rapid.IntRange(0, 9).Draw(t, "purge") == 0 {
				in.purge, in.pick = true, rapid.IntRange(0, 2).Draw(t, "pick")
			}
			inputs = append(inputs, in)
		}
		purged := func(in input) (window.TimeWindow, bool) {
			ws, err := assign.AppendWindows(nil, in.ts)
			if err != nil || len(ws) == 0 {
				return window.TimeWindow{}, false
			}
			return ws[in.pick%len(ws)], true
		}
		inputs = append(inputs, input{advance: true, ts: math.MaxInt64}) // the end of the input

		// The model runs once through the input.
		var want []string
		fixed := &fixedModel{assign: assign, watermark: math.MinInt64, open: map[string]map[window.TimeWindow][]int64{}, timer: map[string]map[window.TimeWindow]bool{}}
		var sessions *sessionModel
		if s, ok := assign.(window.Session); ok {
			sessions = &sessionModel{gap: s.Gap, watermark: math.MinInt64, open: map[string][]modelSession{}}
		}
		wantLate := make([]bool, len(inputs))
		for i, in := range inputs {
			switch {
			case in.advance && sessions != nil:
				want = append(want, sessions.fire(in.ts)...)
			case in.advance:
				want = append(want, fixed.fire(in.ts)...)
			case in.purge:
				if w, ok := purged(in); ok {
					fixed.purge(in.key, w)
				}
			case sessions != nil:
				_, wantLate[i] = sessions.add(in.key, in.ts)
			default:
				wantLate[i] = fixed.add(in.key, in.ts)
			}
		}
		if sessions != nil { // the session model's results list the elements
			for i, r := range want {
				want[i] = sessionCountSum(r)
			}
		}

		// The job runs with crashes: what it emitted after its last
		// checkpoint is emitted again after the restart, so the test
		// keeps the output up to each checkpoint.
		store := checkpoint.Memory()
		j, next := startOperatorJob(t, store, assign)
		var got, sinceCheckpoint []string
		for next < len(inputs) {
			in := inputs[next]
			if in.advance {
				out, err := j.fire(in.ts)
				if err != nil {
					t.Fatalf("input %d: advance to %d: %v", next, in.ts, err)
				}
				sinceCheckpoint = append(sinceCheckpoint, out...)
			} else if in.purge {
				if w, ok := purged(in); ok {
					if err := window.DeleteEnd(j.op.Timers(), in.key, w); err != nil {
						t.Fatalf("input %d: purge %s %v: %v", next, in.key, w, err)
					}
				}
			} else if n := rapid.IntRange(0, 20).Draw(t, "batch"); n > 0 {
				// AddEach of this input and the adds after it, up to n.
				var keys []string
				wantDropped := 0
				for next+len(keys) < len(inputs) && !inputs[next+len(keys)].advance && !inputs[next+len(keys)].purge && len(keys) < n {
					if wantLate[next+len(keys)] {
						wantDropped++
					}
					keys = append(keys, inputs[next+len(keys)].key)
				}
				from := next
				dropped, err := j.op.AddEach(keys, func(i int) (int64, int64) { return inputs[from+i].ts, inputs[from+i].ts })
				if err != nil {
					t.Fatalf("inputs %d-%d: AddEach: %v", from, from+len(keys)-1, err)
				}
				if dropped != wantDropped {
					t.Fatalf("inputs %d-%d: AddEach dropped %d, want %d", from, from+len(keys)-1, dropped, wantDropped)
				}
				next += len(keys) - 1
			} else {
				late, err := j.op.Add(in.key, in.ts, in.ts)
				if err != nil {
					t.Fatalf("input %d: add %s %d: %v", next, in.key, in.ts, err)
				}
				if late != wantLate[next] {
					t.Fatalf("input %d: add %s %d late %v, want %v", next, in.key, in.ts, late, wantLate[next])
				}
			}
			next++
			switch rapid.IntRange(0, 9).Draw(t, "then") {
			case 0: // checkpoint
				if _, err := j.loop.Sync(context.Background(), next); err != nil {
					t.Fatal(err)
				}
				got, sinceCheckpoint = append(got, sinceCheckpoint...), nil
			case 1: // crash, and resume from the last checkpoint
				sinceCheckpoint = nil
				if err := j.loop.Close(); err != nil {
					t.Fatal(err)
				}
				j, next = startOperatorJob(t, store, assign)
			}
		}
		got = append(got, sinceCheckpoint...)
		if err := j.loop.Close(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("emitted\n%q\nwant\n%q", got, want)
		}
	})
}

// sessionCountSum turns a session model result ("key window [elems]") into
// the operator's ("key window n= sum=").
func sessionCountSum(r string) string {
	var key string
	var start, end int64
	var rest string
	if _, err := fmt.Sscanf(r, "%s [%d, %d) %s", &key, &start, &end, &rest); err != nil {
		panic(err)
	}
	var elems []int64
	i := len(fmt.Sprintf("%s [%d, %d) ", key, start, end))
	for _, f := range splitInts(r[i:]) {
		elems = append(elems, f)
	}
	return countSum(key, window.TimeWindow{Start: start, End: end}, elems)
}

func splitInts(s string) []int64 {
	var out []int64
	var n int64
	in, neg := false, false
	for _, c := range s {
		switch {
		case c == '-':
			neg = true
		case c >= '0' && c <= '9':
			n, in = n*10+int64(c-'0'), true
		default:
			if in {
				if neg {
					n = -n
				}
				out = append(out, n)
			}
			n, in, neg = 0, false, false
		}
	}
	return out
}

// A per-user count in one-minute tumbling windows: late elements are
// dropped, the end of the input flushes what is open, and a lower
// watermark does not reopen anything.
func TestOperator_CountTumbling(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	views, err := window.Count[string](b, "views", window.Tumbling{Size: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	emit := func(user string, w window.TimeWindow, n int64) error {
		got[fmt.Sprint(user, " ", w)] = n
		return nil
	}
	for _, e := range []struct {
		user string
		ts   int64
	}{{"ann", 5_000}, {"bob", 20_000}, {"ann", 40_000}, {"ann", 70_000}} {
		if late, err := views.Add(e.user, e.ts, 1); late || err != nil {
			t.Fatalf("Add(%s, %d) = %v, %v", e.user, e.ts, late, err)
		}
	}
	if n, err := views.AdvanceWatermark(59_999, emit); n != 2 || err != nil {
		t.Fatalf("AdvanceWatermark(59999) = %d, %v; want 2 windows", n, err)
	}
	if late, err := views.Add("ann", 59_000, 1); !late || err != nil {
		t.Errorf("an element of a fired window: late %v, %v; want late", late, err)
	}
	if n, err := views.AdvanceWatermark(10, emit); n != 0 || err != nil || views.Watermark() != 59_999 {
		t.Errorf("a lower watermark: fired %d, %v, watermark %d; want nothing, 59999", n, err, views.Watermark())
	}
	if n, err := views.Flush(emit); n != 1 || err != nil {
		t.Fatalf("Flush = %d, %v; want 1 window", n, err)
	}
	want := map[string]int64{"ann [0, 60000)": 2, "bob [0, 60000)": 1, "ann [60000, 120000)": 1}
	if !maps.Equal(got, want) {
		t.Errorf("emitted %v, want %v", got, want)
	}
}

// An emit that fails stops the advance; the window keeps its state and
// fires on the next one.
func TestOperator_EmitErrorKeepsWindow(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	views, err := window.Count[string](b, "views", window.Tumbling{Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{1, 2, 15} {
		if _, err := views.Add("ann", ts, 1); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("sink down")
	if _, err := views.AdvanceWatermark(100, func(string, window.TimeWindow, int64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("AdvanceWatermark with a failing emit: %v, want %v", err, boom)
	}
	var got []string
	n, err := views.AdvanceWatermark(100, func(u string, w window.TimeWindow, c int64) error {
		got = append(got, fmt.Sprint(u, " ", w, " ", c))
		return nil
	})
	if n != 2 || err != nil || !slices.Equal(got, []string{"ann [0, 10) 2", "ann [10, 20) 1"}) {
		t.Errorf("next advance fired %d %q, %v; want both windows", n, got, err)
	}
}

// Misconfiguration is an error naming the operator.
// AddEach stops at the first element whose key is in a key group the
// backend does not own: the elements before it are in their windows, the
// rest are not, and the error matches ErrKeyGroupNotOwned and names the
// index.
func TestOperator_AddEachStopsAtAKeyGroupNotOwned(t *testing.T) {
	const maxPar = 16
	owned := statetable.KeyGroupRange{First: 0, Last: 7}
	b, err := cowstate.New(cowstate.Config{MaxParallelism: maxPar, KeyGroups: &owned})
	if err != nil {
		t.Fatal(err)
	}
	op, err := window.Count[string](b, "c", window.Sliding{Size: 20, Slide: 10})
	if err != nil {
		t.Fatal(err)
	}
	owns := func(key string) bool {
		return owned.Contains(statetable.KeyGroupOfKey(statetable.String.Append(nil, key), maxPar))
	}
	// Four owned keys, one not owned, then four of either.
	var keys, notOwned []string
	for i := 0; len(keys) < 4 || len(notOwned) < 5; i++ {
		if key := fmt.Sprint("k", i); owns(key) && len(keys) < 4 {
			keys = append(keys, key)
		} else if !owns(key) {
			notOwned = append(notOwned, key)
		}
	}
	stop := len(keys)
	keys = append(append(keys, notOwned[0]), "k0", notOwned[1], "k1", "k2")
	_, err = op.AddEach(keys, func(i int) (int64, int64) { return 25, 1 })
	if !errors.Is(err, statetable.ErrKeyGroupNotOwned) || !strings.Contains(err.Error(), fmt.Sprintf("keys[%d]", stop)) {
		t.Fatalf("AddEach = %v; want ErrKeyGroupNotOwned naming keys[%d]", err, stop)
	}
	got := map[string]int64{}
	if _, err := op.Flush(func(key string, w window.TimeWindow, n int64) error {
		got[fmt.Sprint(key, " ", w)] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, key := range keys[:stop] {
		if owns(key) {
			want[key+" [10, 30)"], want[key+" [20, 40)"] = 1, 1
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("emitted %v\nwant %v (the owned keys before keys[%d])", got, want, stop)
	}
}

func TestOperator_Errors(t *testing.T) {
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := window.Count[string](b, "c", nil); !errors.Is(err, window.ErrInvalid) {
		t.Errorf("nil assigner: %v, want ErrInvalid", err)
	}
	type opaque struct{ p *int }
	if _, err := window.Count[opaque](b, "c", window.Tumbling{Size: 1}); !errors.Is(err, cowstate.ErrNoCodec) {
		t.Errorf("key type with no codec: %v, want ErrNoCodec", err)
	}
	views, err := window.Count[string](b, "c", window.Tumbling{Size: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := window.Count[string](b, "c", window.Tumbling{Size: 1}); !errors.Is(err, window.ErrExists) {
		t.Errorf("a second operator named %q: %v, want ErrExists", "c", err)
	}
	if _, err := views.Add("a", 1, 1); !errors.Is(err, window.ErrInvalid) {
		t.Errorf("Add with a zero-size assigner: %v, want ErrInvalid", err)
	}
}

// An element of a window whose end-of-window timer was deleted registers
// it again, as Flink's trigger does at every element, and the window
// emits: in the process that deleted it, and after a restore of a
// snapshot taken between the delete and the element. A window whose timer
// stays deleted does not emit.
func TestOperator_ElementRegistersADeletedEndTimerAgain(t *testing.T) {
	newCount := func() (*cowstate.Backend, *window.Operator[string, int64, int64]) {
		b, err := cowstate.New(cowstate.Config{})
		if err != nil {
			t.Fatal(err)
		}
		op, err := window.Count[string](b, "n", window.Tumbling{Size: 10})
		if err != nil {
			t.Fatal(err)
		}
		return b, op
	}
	add := func(op *window.Operator[string, int64, int64], key string, ts int64) {
		t.Helper()
		if _, err := op.Add(key, ts, 1); err != nil {
			t.Fatal(err)
		}
	}
	purge := func(op *window.Operator[string, int64, int64], key string, ts int64) {
		t.Helper()
		if err := window.DeleteEnd(op.Timers(), key, window.TimeWindow{Start: ts - ts%10, End: ts - ts%10 + 10}); err != nil {
			t.Fatal(err)
		}
	}
	emitted := func(op *window.Operator[string, int64, int64]) []string {
		t.Helper()
		var out []string
		if _, err := op.Flush(func(key string, w window.TimeWindow, n int64) error {
			out = append(out, fmt.Sprintf("%s %v %d", key, w, n))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}

	b, op := newCount()
	add(op, "a", 1) // [0, 10): its timer, then deleted, then registered again
	purge(op, "a", 1)
	add(op, "a", 2)
	add(op, "b", 11) // [10, 20): deleted before the snapshot, registered again after the restore
	add(op, "b", 12)
	purge(op, "b", 11)
	add(op, "c", 21) // [20, 30): deleted, and nothing registers it again
	purge(op, "c", 21)
	var buf bytes.Buffer
	snap := b.Snapshot()
	if err := cowstate.WriteSnapshot(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if got, want := emitted(op), []string{"a [0, 10) 2"}; !slices.Equal(got, want) {
		t.Errorf("before the restore: emitted %q, want %q", got, want)
	}

	restored, op := newCount()
	r, err := snapshot.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	add(op, "b", 13) // the snapshot holds [0, 10) of "a" with its timer, and the rest as it was
	if got, want := emitted(op), []string{"a [0, 10) 2", "b [10, 20) 3"}; !slices.Equal(got, want) {
		t.Errorf("after the restore: emitted %q, want %q", got, want)
	}
}

// AddEach of batches large enough that the timer tree and the state
// outgrow the core's cache (where the state's entries are prefetched a
// group at a time, and ahead of the timers that fire) leaves the same end
// timers registered and emits the same counts as Add of each element,
// with some keys' timers deleted between batches.
func TestOperator_AddEachOfManyKeysMatchesAdd(t *testing.T) {
	const keys, batch = 40_000, 1024
	type run struct {
		b  *cowstate.Backend
		op *window.Operator[int64, int64, int64]
	}
	newRun := func() run {
		b, err := cowstate.New(cowstate.Config{})
		if err != nil {
			t.Fatal(err)
		}
		op, err := window.Count[int64](b, "c", window.Sliding{Size: 20, Slide: 10})
		if err != nil {
			t.Fatal(err)
		}
		return run{b, op}
	}
	one, each := newRun(), newRun()
	key := func(i int) int64 { return int64(i*7919) % keys }
	at := func(i int) (int64, int64) { return int64(i / (2 * keys) * 5), 1 }
	const events = 3 * keys
	for from := 0; from < events; from += batch {
		to := min(from+batch, events)
		ks := make([]int64, 0, batch)
		for i := from; i < to; i++ {
			ts, n := at(i)
			if _, err := one.op.Add(key(i), ts, n); err != nil {
				t.Fatal(err)
			}
			ks = append(ks, key(i))
		}
		if _, err := each.op.AddEach(ks, func(j int) (int64, int64) { return at(from + j) }); err != nil {
			t.Fatal(err)
		}
		if from%(16*batch) == 0 { // purge a key's windows: later elements register them again
			for _, r := range []run{one, each} {
				window.DeleteEnd(r.op.Timers(), key(from), window.TimeWindow{Start: 0, End: 20})
				window.DeleteEnd(r.op.Timers(), key(from), window.TimeWindow{Start: -10, End: 10})
			}
		}
	}
	timers := func(r run) []cowstate.Timer[int64, window.TimeWindow] {
		snap := r.b.Snapshot()
		defer snap.Release()
		all, err := r.op.Timers().EventTimersAt(snap)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Collect(all)
	}
	if got, want := timers(each), timers(one); !slices.Equal(got, want) {
		t.Fatalf("AddEach registered %d end timers, Add %d", len(got), len(want))
	} else if len(want) < 2*keys-100 {
		t.Fatalf("%d end timers registered, want about %d: the tree is not large", len(want), 2*keys)
	}
	emitted := func(r run) map[string]int64 {
		out := map[string]int64{}
		if _, err := r.op.Flush(func(k int64, w window.TimeWindow, n int64) error {
			out[fmt.Sprint(k, w)] = n
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := emitted(each), emitted(one); !maps.Equal(got, want) {
		t.Fatalf("AddEach emitted %d windows, Add %d", len(got), len(want))
	}
}
