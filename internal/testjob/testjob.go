// Package testjob is a test fixture: a backend with one state of every
// kind and a timer service, a deterministic workload, random steps for
// property tests, and a dump of everything it holds, which a restore must
// reproduce exactly. Tests of the packages built on the backend use it.
package testjob

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// Job is a backend with one state of every kind and a timer service, all
// keyed by string with string namespaces.
type Job struct {
	B      *cowstate.Backend
	Value  *statetable.ValueState[string, string, int64]
	List   *statetable.ListState[string, string, int64]
	Map    *statetable.MapState[string, string, string, int64]
	Reduce *statetable.ReducingState[string, string, int64]
	Timers *cowstate.NamespacedTimerService[string, string]
}

// New returns an empty job of maxPar key groups owning kgs (nil: all).
func New(t testing.TB, maxPar int, kgs *statetable.KeyGroupRange) *Job {
	t.Helper()
	b, err := cowstate.New(cowstate.Config{MaxParallelism: maxPar, KeyGroups: kgs, Clock: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{B: b}
	j.Value, _ = cowstate.NamespacedValue(b, "value", statetable.String, statetable.String, statetable.Int64, 0)
	j.List, _ = cowstate.NamespacedList(b, "list", statetable.String, statetable.String, statetable.Int64)
	j.Map, _ = cowstate.NamespacedMap(b, "map", statetable.String, statetable.String, statetable.String, statetable.Int64)
	j.Reduce, _ = cowstate.NamespacedReducing(b, "reduce", statetable.String, statetable.String, statetable.Int64, func(a, b int64) int64 { return a + b })
	j.Timers, _ = cowstate.NamespacedTimers(b, "timers", statetable.String, statetable.String)
	return j
}

// Dump renders everything the job holds (live, or in snap) as sorted
// lines.
func (j *Job) Dump(t testing.TB, snap *cowstate.Snapshot) []string {
	t.Helper()
	var out []string
	if snap == nil {
		snap = j.B.Snapshot()
		defer snap.Release()
	}
	st := snap.State()
	for g := range j.B.MaxParallelism() {
		for _, name := range []string{"value", "list", "map", "reduce"} {
			st.KeyGroupEntries(name, g, func(key, cell []byte) bool {
				out = append(out, fmt.Sprintf("%s %d %x %x", name, g, key, cell))
				return true
			})
		}
	}
	eventTimers, err := j.Timers.EventTimersAt(snap)
	if err != nil {
		t.Fatal(err)
	}
	for tm := range eventTimers {
		out = append(out, fmt.Sprintf("event %d %s %s", tm.Timestamp, tm.Key, tm.Namespace))
	}
	procTimers, err := j.Timers.ProcessingTimersAt(snap)
	if err != nil {
		t.Fatal(err)
	}
	for tm := range procTimers {
		out = append(out, fmt.Sprintf("proc %d %s %s", tm.Timestamp, tm.Key, tm.Namespace))
	}
	slices.Sort(out)
	return out
}

// Load writes a deterministic workload of n keys (keys the job does not
// own are skipped).
func (j *Job) Load(n int, salt int) {
	for i := range n {
		k := fmt.Sprint("key-", i)
		w := fmt.Sprint("w", i%3)
		if j.Value.Put(k, w, int64(i*salt)) != nil {
			continue
		}
		j.List.AddAll(k, w, slices.Values([]int64{int64(i), int64(salt)}))
		j.Map.Put(k, w, fmt.Sprint("u", i%5), int64(i))
		j.Reduce.Add(k, w, int64(salt))
		j.Timers.RegisterEventTime(k, w, int64(i%17))
		j.Timers.RegisterProcessingTime(k, w, int64(i%5))
	}
}

// RandomStep applies one random write: a put, clear, list or map change,
// reduce, namespace merge, timer registration or deletion, or a watermark
// advance whose timers write state.
func (j *Job) RandomStep(rt *rapid.T) {
	k := fmt.Sprint("k", rapid.IntRange(0, 15).Draw(rt, "key"))
	ns := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "ns")
	v := rapid.Int64Range(0, 20).Draw(rt, "v")
	switch rapid.IntRange(0, 11).Draw(rt, "op") {
	case 0:
		j.Value.Put(k, ns, v)
	case 1:
		j.Value.Clear(k, ns)
	case 2, 3:
		j.List.AddAll(k, ns, slices.Values([]int64{v, v + 1, v + 2}))
	case 4:
		j.List.Update(k, ns, slices.Values(make([]int64, v)))
	case 5:
		j.Map.Put(k, ns, fmt.Sprint(v%7), v)
	case 6:
		j.Map.Remove(k, ns, fmt.Sprint(v%7))
	case 7:
		j.Reduce.Add(k, ns, v)
	case 8:
		j.List.MergeNamespaces(k, "a", "b")
	case 9:
		j.Timers.RegisterEventTime(k, ns, v)
		j.Timers.RegisterProcessingTime(k, ns, v)
	case 10:
		j.Timers.DeleteEventTime(k, ns, v)
	case 11:
		j.Timers.AdvanceWatermark(j.Timers.CurrentWatermark()+v/4, func(key, ns string, ts int64) error {
			j.Value.Put(key, ns, ts)
			_, err := j.Timers.RegisterEventTime(key, ns, ts+3)
			return err
		})
	}
}

// Encode writes snap in the snapshot format (a savepoint if savepoint) and
// returns the file's bytes.
func Encode(t testing.TB, snap *cowstate.Snapshot, savepoint bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	write := cowstate.WriteSnapshot
	if savepoint {
		write = cowstate.WriteSavepoint
	}
	if err := write(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Restore restores the snapshot file into j's backend.
func (j *Job) Restore(t testing.TB, file []byte) {
	t.Helper()
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.B.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}
