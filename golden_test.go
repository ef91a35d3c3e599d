package cowstate_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Golden savepoints: testdata/savepoints/<release>/ holds the savepoint
// the golden job wrote with that release (job.savepoint) and its dump
// (job.jsonl). Every later release must restore each of them into the
// golden job, unchanged in content, and write it back byte for byte: the
// savepoint format, the cell encodings and the built-in codecs are a
// promise to every job that ever wrote one. -golden-release writes the
// current release's files, once: it refuses to replace a release's.
var goldenRelease = flag.String("golden-release", "", "write testdata/savepoints/`release`/ from the golden job (only if absent)")

// goldenNow is the golden job's processing-time clock, ms: its TTL
// states' values expire an hour after it.
const goldenNow = 1_790_000_000_000

type goldenProfile struct {
	Name   string
	Age    int32
	Joined time.Time
	Tags   []byte
}

// goldenJob registers every kind of state, with and without a TTL and a
// namespace, over the built-in codecs, a struct, and timers.
type goldenJob struct {
	b        *cowstate.Backend
	count    *cowstate.ValueState[string, int64]
	profile  *cowstate.ValueState[string, goldenProfile]
	events   *cowstate.ListState[string, string]
	pages    *cowstate.MapState[string, string, float64]
	sum      *cowstate.ReducingState[int64, int64]
	windowed *statetable.ValueState[string, int64, uint32]
	session  *cowstate.ValueState[string, bool]
	recent   *cowstate.ListState[string, int32]
	seen     *cowstate.MapState[string, uint16, string]
	timers   *cowstate.TimerService[string]
	nsTimers *cowstate.NamespacedTimerService[uint64, string]
}

func newGoldenJob(t *testing.T) *goldenJob {
	t.Helper()
	ttl := cowstate.TTL{Duration: time.Hour}
	j := &goldenJob{b: newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return goldenNow }})}
	j.count = must(cowstate.Value[string, int64](j.b, "count"))(t)
	j.profile = must(cowstate.Value[string, goldenProfile](j.b, "profile"))(t)
	j.events = must(cowstate.List[string, string](j.b, "events"))(t)
	j.pages = must(cowstate.Map[string, string, float64](j.b, "pages"))(t)
	j.sum = must(cowstate.Reducing[int64](j.b, "sum", func(a, b int64) int64 { return a + b }))(t)
	j.windowed = must(cowstate.NamespacedValue(j.b, "windowed", statetable.String, statetable.Signed[int64](), statetable.Unsigned[uint32](), 0))(t)
	j.session = must(cowstate.ValueWithTTL[string, bool](j.b, "session", ttl))(t)
	j.recent = must(cowstate.ListWithTTL[string, int32](j.b, "recent", ttl))(t)
	j.seen = must(cowstate.MapWithTTL[string, uint16, string](j.b, "seen", ttl))(t)
	j.timers = must(cowstate.Timers[string](j.b, "timeouts"))(t)
	j.nsTimers = must(cowstate.NamespacedTimers(j.b, "windows", statetable.Unsigned[uint64](), statetable.String))(t)
	return j
}

func (j *goldenJob) fill(t *testing.T) {
	t.Helper()
	for i := range 40 {
		u := fmt.Sprintf("u%02d", i)
		errs := []error{
			j.count.Put(u, int64(i*i-300)),
			j.events.Add(u, "login"),
			j.sum.Add(int64(i%7-3), int64(i)),
			j.windowed.Put(u, int64(i%3)*60_000, uint32(i)),
			j.session.Put(u, i%2 == 0),
			j.recent.Add(u, int32(-i)),
		}
		if i%3 == 0 {
			errs = append(errs, j.profile.Put(u, goldenProfile{Name: "ü" + u, Age: int32(i), Joined: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), Tags: []byte{byte(i), 0, 255}}),
				j.events.Add(u, "buy"), j.pages.Put(u, "/p/"+u, float64(i)/3), j.pages.Put(u, "/", -0.5),
				j.seen.Put(u, uint16(i*1000), "x"))
		}
		if _, err := j.timers.RegisterEventTime(u, int64(i)*1000-5000); err != nil {
			errs = append(errs, err)
		}
		if _, err := j.nsTimers.RegisterProcessingTime(uint64(i), "w"+u, goldenNow+int64(i)); err != nil {
			errs = append(errs, err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (j *goldenJob) savepoint(t *testing.T) []byte {
	t.Helper()
	snap := j.b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	if err := cowstate.WriteSavepoint(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dumpOf(t *testing.T, file []byte) []byte {
	t.Helper()
	f := must(savepoint.Open(bytes.NewReader(file), int64(len(file))))(t)
	var buf bytes.Buffer
	if err := f.Dump(context.Background(), &buf, savepoint.Select{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestGoldenSavepoints_EveryReleaseStillRestores(t *testing.T) {
	if *goldenRelease != "" {
		dir := filepath.Join("testdata", "savepoints", *goldenRelease)
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%s exists: a release's golden savepoints are never rewritten", dir)
		}
		j := newGoldenJob(t)
		j.fill(t)
		sp := j.savepoint(t)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "job.savepoint"), sp, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "job.jsonl"), dumpOf(t, sp), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	releases, err := filepath.Glob(filepath.Join("testdata", "savepoints", "*"))
	if err != nil || len(releases) == 0 {
		t.Fatalf("no golden savepoints in testdata/savepoints (%v)", err)
	}
	// What today's release writes of the golden job.
	j := newGoldenJob(t)
	j.fill(t)
	current := j.savepoint(t)
	for _, dir := range releases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			sp := must(os.ReadFile(filepath.Join(dir, "job.savepoint")))(t)
			dump := must(os.ReadFile(filepath.Join(dir, "job.jsonl")))(t)
			if got := dumpOf(t, sp); !bytes.Equal(got, dump) {
				t.Fatalf("the savepoint's dump differs from the one its release wrote:\n%s", got)
			}
			restored := newGoldenJob(t)
			r := must(snapshot.Open(bytes.NewReader(sp), int64(len(sp))))(t)
			if err := restored.b.RestoreSnapshot(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if err := restored.b.Check(); err != nil {
				t.Fatal(err)
			}
			if got := restored.savepoint(t); !bytes.Equal(got, sp) {
				t.Errorf("the restored job's savepoint differs from the golden one (%d bytes, golden %d)", len(got), len(sp))
			}
			if !bytes.Equal(current, sp) {
				t.Errorf("the golden job's savepoint today differs from %s's: the format or a codec changed", filepath.Base(dir))
			}
			// Reads through the API see the values, TTL states at the
			// golden clock included.
			if v, err := restored.profile.Get("u03"); err != nil || v.Name != "üu03" || v.Joined.UnixMilli() != 1_700_000_000_003 {
				t.Errorf("profile of u03: %+v, %v", v, err)
			}
			if n, ok, err := restored.seen.Get("u06", 6000); err != nil || !ok || n != "x" {
				t.Errorf("seen of u06: %q %v %v", n, ok, err)
			}
		})
	}
}
