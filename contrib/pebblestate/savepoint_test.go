package pebblestate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/contrib/pebblestate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Profile is a struct state's value (codec statetable.Struct).
type Profile struct {
	Name  string
	Age   int32
	Score float64
	Since time.Time
}

const now = 1_000_000 // the processing-time clock of the test jobs, ms

// job is a cowstate job with a state of every kind, a struct state, a
// state of a non-string key and a timer service.
type job struct {
	b       *cowstate.Backend
	count   *cowstate.ValueState[string, int64]
	name    *cowstate.ValueState[int64, string]
	profile *cowstate.ValueState[string, Profile]
	tags    *cowstate.ListState[string, string]
	seen    *cowstate.MapState[string, string, int64]
	total   *cowstate.ReducingState[string, int64]
	avg     *cowstate.AggregatingState[string, int64, string, string]
	visits  *cowstate.ValueState[string, int64] // with a TTL, if asked for
	timers  *cowstate.TimerService[string]
}

// avgOf is the aggregating state's function: a count and sum as "n/sum".
type avgOf struct{}

func (avgOf) CreateAccumulator() string { return "0/0" }
func (avgOf) Add(v int64, acc string) string {
	var n, sum int64
	fmt.Sscanf(acc, "%d/%d", &n, &sum)
	return fmt.Sprintf("%d/%d", n+1, sum+v)
}
func (avgOf) Merge(a, b string) string {
	var n1, s1, n2, s2 int64
	fmt.Sscanf(a, "%d/%d", &n1, &s1)
	fmt.Sscanf(b, "%d/%d", &n2, &s2)
	return fmt.Sprintf("%d/%d", n1+n2, s1+s2)
}
func (avgOf) Result(acc string) string { return acc }

func newJob(t *testing.T, kgs *statetable.KeyGroupRange, ttl bool) *job {
	t.Helper()
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 128, KeyGroups: kgs, Clock: func() int64 { return now }})
	must(t, err)
	j := &job{b: b}
	errs := []error{}
	add := func(e error) { errs = append(errs, e) }
	var e error
	j.count, e = cowstate.Value[string, int64](b, "count")
	add(e)
	j.name, e = cowstate.Value[int64, string](b, "name")
	add(e)
	j.profile, e = cowstate.Value[string, Profile](b, "profile")
	add(e)
	j.tags, e = cowstate.List[string, string](b, "tags")
	add(e)
	j.seen, e = cowstate.Map[string, string, int64](b, "seen")
	add(e)
	j.total, e = cowstate.Reducing[string](b, "total", func(a, b int64) int64 { return a + b })
	add(e)
	j.avg, e = cowstate.Aggregating[string, int64, string, string](b, "avg", avgOf{})
	add(e)
	if ttl {
		j.visits, e = cowstate.ValueWithTTL[string, int64](b, "visits", cowstate.TTL{Duration: time.Hour})
		add(e)
	}
	j.timers, e = cowstate.Timers[string](b, "t")
	add(e)
	must(t, errors.Join(errs...))
	return j
}

func user(i int) string { return fmt.Sprintf("user-%03d", i) }

const users = 200

func (j *job) fill(t *testing.T) {
	t.Helper()
	for i := range users {
		u := user(i)
		if !j.b.KeyGroups().Contains(statetable.KeyGroupOfKey([]byte(u), 128)) {
			continue
		}
		must(t, j.count.Put(u, int64(i)))
		must(t, j.profile.Put(u, Profile{Name: u, Age: int32(20 + i%50), Score: float64(i) / 4, Since: time.Unix(1_700_000_000+int64(i), 5).UTC()}))
		must(t, j.total.Add(u, int64(i)))
		must(t, j.avg.Add(u, int64(i)))
		must(t, j.avg.Add(u, 3))
		if j.visits != nil {
			must(t, j.visits.Put(u, int64(i*2)))
		}
		_, err := j.timers.RegisterEventTime(u, int64(1000+i%7))
		must(t, err)
		if i%3 == 0 {
			must(t, j.tags.Add(u, "a"))
			must(t, j.tags.Add(u, "b-"+u))
			must(t, j.tags.Add(u, ""))
		}
		if i%5 == 0 {
			must(t, j.seen.Put(u, "/home", int64(i)))
			must(t, j.seen.Put(u, "/about", 1))
			_, err := j.timers.RegisterProcessingTime(u, int64(now+i))
			must(t, err)
		}
	}
	for i := range users {
		// A key of another codec: its key group is its encoding's.
		if k := int64(i - users/2); j.b.KeyGroups().Contains(statetable.KeyGroupOfKey(statetable.Int64.Append(nil, k), 128)) {
			must(t, j.name.Put(k, user(i)))
		}
	}
}

// savepointOf writes the cowstate backend's savepoint.
func savepointOf(t *testing.T, b *cowstate.Backend) []byte {
	t.Helper()
	snap := b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	must(t, cowstate.WriteSavepoint(context.Background(), &buf, snap, nil))
	return buf.Bytes()
}

// restoreCow restores a savepoint into the cowstate backend.
func restoreCow(t *testing.T, b *cowstate.Backend, file []byte) {
	t.Helper()
	r, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	must(t, err)
	must(t, b.RestoreSnapshot(context.Background(), r))
}

// pebbleSavepoint writes the pebblestate backend's savepoint.
func pebbleSavepoint(t *testing.T, b *pebblestate.Backend) []byte {
	t.Helper()
	v := b.Capture()
	defer v.Release()
	var buf bytes.Buffer
	must(t, b.WriteSavepoint(context.Background(), &buf, v))
	return buf.Bytes()
}

func openMem(t *testing.T, kgs *statetable.KeyGroupRange) *pebblestate.Backend {
	t.Helper()
	return open(t, cowstate.Config{MaxParallelism: 128, KeyGroups: kgs, Clock: func() int64 { return now }}, vfs.NewMem(), "db")
}

func restorePebble(b *pebblestate.Backend, file []byte) error {
	return b.RestoreSavepoint(context.Background(), bytes.NewReader(file), int64(len(file)))
}

// A cowstate savepoint restored into pebblestate is written back byte for
// byte, and cowstate restores that to the same content.
func TestSavepoint_RoundTrip(t *testing.T) {
	j := newJob(t, nil, false)
	j.fill(t)
	file := savepointOf(t, j.b)

	b := openMem(t, nil)
	must(t, restorePebble(b, file))
	got := pebbleSavepoint(t, b)
	if !bytes.Equal(got, file) {
		t.Fatalf("pebblestate's savepoint (%d bytes) differs from the cowstate savepoint it restored (%d bytes)", len(got), len(file))
	}
	j2 := newJob(t, nil, false)
	restoreCow(t, j2.b, got)
	if again := savepointOf(t, j2.b); !bytes.Equal(again, file) {
		t.Errorf("cowstate restored from pebblestate's savepoint writes another savepoint")
	}
	if v, err := j2.profile.Get(user(7)); err != nil || v.Name != user(7) || v.Age != 27 {
		t.Errorf("profile of %s: %+v, %v", user(7), v, err)
	}

	// The codec IDs are kept in the database: opened again, with the
	// states registered through the contract API, it writes the same.
	fs := vfs.NewMem()
	b2 := open(t, cowstate.Config{MaxParallelism: 128}, fs, "db")
	must(t, restorePebble(b2, file))
	must(t, b2.Close())
	b3 := open(t, cowstate.Config{MaxParallelism: 128}, fs, "db")
	f, err := snapshot.Open(bytes.NewReader(file), int64(len(file)))
	must(t, err)
	for _, s := range f.Meta().States {
		must(t, b3.RegisterState(s.Name, s.Kind))
	}
	must(t, b3.RegisterTimerService("t"))
	if got := pebbleSavepoint(t, b3); !bytes.Equal(got, file) {
		t.Errorf("a database opened again writes another savepoint")
	}
}

// A share of a rescaled job restores only its key groups: its savepoint
// is cowstate's share's.
func TestSavepoint_KeyGroupRange(t *testing.T) {
	j := newJob(t, nil, false)
	j.fill(t)
	file := savepointOf(t, j.b)
	kgs := statetable.KeyGroupRange{First: 0, Last: 63}
	share := newJob(t, &kgs, false)
	restoreCow(t, share.b, file)
	want := savepointOf(t, share.b)

	b := openMem(t, &kgs)
	must(t, restorePebble(b, file))
	if got := pebbleSavepoint(t, b); !bytes.Equal(got, want) {
		t.Errorf("the share's savepoint (%d bytes) differs from cowstate's share's (%d bytes)", len(got), len(want))
	}
	// And a savepoint of that share restores into a share of another
	// range only what both hold.
	other := statetable.KeyGroupRange{First: 32, Last: 127}
	b2 := openMem(t, &other)
	must(t, restorePebble(b2, want))
	both := statetable.KeyGroupRange{First: 32, Last: 63}
	j3 := newJob(t, &both, false)
	restoreCow(t, j3.b, file)
	j4 := newJob(t, &both, false)
	restoreCow(t, j4.b, pebbleSavepoint(t, b2))
	if !bytes.Equal(savepointOf(t, j4.b), savepointOf(t, j3.b)) {
		t.Errorf("key groups %v of a share of %v restored into %v differ", both, kgs, other)
	}
}

// A damaged savepoint is an ErrCorrupt and leaves the backend empty, even
// after batches were committed; a state registered with another kind is
// refused naming it.
func TestSavepoint_Errors(t *testing.T) {
	j := newJob(t, nil, false)
	j.fill(t)
	file := savepointOf(t, j.b)
	defer pebblestate.SetRestoreBatchBytes(1)()

	for _, off := range []int{20, len(file) / 3, len(file) / 2, len(file) - 30} {
		bad := bytes.Clone(file)
		bad[off] ^= 0x40
		b := openMem(t, nil)
		err := restorePebble(b, bad)
		if !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("byte %d flipped: %v, want snapshot.ErrCorrupt", off, err)
			continue
		}
		if _, err := b.StateEntries("count"); !errors.Is(err, statetable.ErrUnknownState) {
			t.Errorf("byte %d flipped: state count after the failed restore: %v", off, err)
		}
		// Left empty: the good savepoint restores, and is written back.
		must(t, restorePebble(b, file))
		if got := pebbleSavepoint(t, b); !bytes.Equal(got, file) {
			t.Errorf("byte %d flipped: the backend was not left empty", off)
		}
	}

	b := openMem(t, nil)
	must(t, b.RegisterState("tags", statetable.KindValue))
	err := restorePebble(b, file)
	if !errors.Is(err, pebblestate.ErrMismatch) || !errors.Is(err, statetable.ErrStateMismatch) || !strings.Contains(err.Error(), `"tags"`) {
		t.Errorf("tags registered as a value state: %v", err)
	}
	full := openMem(t, nil)
	must(t, restorePebble(full, file))
	if err := restorePebble(full, file); !errors.Is(err, cowstate.ErrNotEmpty) {
		t.Errorf("restore into a backend holding data: %v", err)
	}

	b2 := open(t, cowstate.Config{MaxParallelism: 64}, vfs.NewMem(), "db")
	if err := restorePebble(b2, file); !errors.Is(err, pebblestate.ErrMismatch) {
		t.Errorf("max parallelism 64: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b3 := openMem(t, nil)
	if err := b3.RestoreSavepoint(ctx, bytes.NewReader(file), int64(len(file))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	must(t, restorePebble(b3, file))

	other := openMem(t, nil)
	v := other.Capture()
	defer v.Release()
	if err := b3.WriteSavepoint(context.Background(), new(bytes.Buffer), v); !errors.Is(err, pebblestate.ErrMismatch) {
		t.Errorf("WriteSavepoint of another backend's view: %v", err)
	}
}

// A pebblestate job written through the contract API has a savepoint the
// cowstate contract adapter restores with the same content, and back.
func TestSavepoint_ContractAdapter(t *testing.T) {
	cfg := cowstate.Config{MaxParallelism: 128, Clock: func() int64 { return now }}
	b := open(t, cfg, vfs.NewMem(), "db")
	register(t, b)
	fill(t, b, 200)
	file := pebbleSavepoint(t, b)

	c, err := contract.New(cfg)
	must(t, err)
	register(t, c)
	must(t, c.RestoreSnapshot(context.Background(), bytes.NewReader(file), int64(len(file))))
	same(t, c, b)

	// The adapter's snapshot restores into pebblestate, registering
	// nothing first, and is the same savepoint again.
	v := c.Capture()
	defer v.Release()
	var buf bytes.Buffer
	must(t, v.WriteSnapshot(context.Background(), &buf))
	b2 := open(t, cfg, vfs.NewMem(), "db")
	must(t, b2.RestoreSavepoint(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len())))
	same(t, b2, b)
	if got := pebbleSavepoint(t, b2); !bytes.Equal(got, file) {
		t.Errorf("the savepoint of the adapter's snapshot restored differs")
	}
}

// A savepoint with a TTL state round-trips byte for byte, its expiration
// stamps kept; what expires afterwards is left out of the next savepoint
// and removed by CleanupExpired.
func TestSavepoint_TTL(t *testing.T) {
	j := newJob(t, nil, true)
	j.fill(t)
	file := savepointOf(t, j.b)
	ttl := statetable.TTL{Duration: time.Hour}

	// The TTL's duration is not in the file: the state must be
	// registered with it first.
	b0 := openMem(t, nil)
	if err := restorePebble(b0, file); !errors.Is(err, pebblestate.ErrMismatch) || !strings.Contains(err.Error(), `"visits"`) {
		t.Errorf("TTL state not registered: %v", err)
	}

	clock := int64(now)
	b := open(t, cowstate.Config{MaxParallelism: 128, Clock: func() int64 { return clock }}, vfs.NewMem(), "db")
	must(t, b.RegisterStateTTL("visits", statetable.KindValue, ttl))
	must(t, restorePebble(b, file))
	got := pebbleSavepoint(t, b)
	if !bytes.Equal(got, file) {
		t.Fatalf("pebblestate's savepoint (%d bytes) differs from the cowstate savepoint with a TTL it restored (%d bytes)", len(got), len(file))
	}
	f, err := savepoint.Open(bytes.NewReader(got), int64(len(got)))
	must(t, err)
	n := 0
	for e, err := range f.Entries(context.Background(), savepoint.Select{States: []string{"visits"}}) {
		must(t, err)
		if e.Value.Expires != now+3600_000 {
			t.Fatalf("visits of %s expires at %d, want %d", e.Key, e.Value.Expires, now+3600_000)
		}
		n++
	}
	if n != users {
		t.Errorf("%d visits entries, want %d", n, users)
	}
	j2 := newJob(t, nil, true)
	restoreCow(t, j2.b, got)
	if !bytes.Equal(savepointOf(t, j2.b), file) {
		t.Errorf("cowstate restored from pebblestate's savepoint with a TTL writes another savepoint")
	}
	if v, ok, err := b.Get("visits", user(7), ""); err != nil || !ok || v != string(statetable.Int64.Append(nil, 14)) {
		t.Errorf("visits of %s: %x, %v, %v", user(7), v, ok, err)
	}

	// An hour later every visit has expired.
	clock = now + 3600_000
	if v, ok, err := b.Get("visits", user(7), ""); err != nil || ok {
		t.Errorf("expired visits of %s: %x, %v, %v", user(7), v, ok, err)
	}
	if es, err := b.StateEntries("visits"); err != nil || len(es) != 0 {
		t.Errorf("expired visits: %d entries, %v", len(es), err)
	}
	later := pebbleSavepoint(t, b)
	f, err = savepoint.Open(bytes.NewReader(later), int64(len(later)))
	must(t, err)
	l, err := f.List(context.Background())
	must(t, err)
	for _, s := range l.States {
		if s.Name == "visits" && s.Entries != 0 {
			t.Errorf("state %q: %d entries in the later savepoint, want 0", s.Name, s.Entries)
		}
	}
	removed := 0
	for range 100 {
		_, r := b.CleanupExpired(1000)
		removed += r
	}
	if removed != users {
		t.Errorf("CleanupExpired removed %d, want %d", removed, users)
	}
	if !bytes.Equal(pebbleSavepoint(t, b), later) {
		t.Errorf("the cleanup changed what a savepoint holds")
	}
}

// A state the savepoint has without a TTL, registered with one, is
// restored as if written at the restore, and its next savepoint has the
// TTL.
func TestSavepoint_TTLAdded(t *testing.T) {
	j := newJob(t, nil, false)
	j.fill(t)
	file := savepointOf(t, j.b)
	b := openMem(t, nil)
	must(t, b.RegisterStateTTL("tags", statetable.KindList, statetable.TTL{Duration: time.Minute}))
	must(t, restorePebble(b, file))
	got := pebbleSavepoint(t, b)
	f, err := savepoint.Open(bytes.NewReader(got), int64(len(got)))
	must(t, err)
	for _, s := range f.Meta().States {
		if (s.Name == "tags") != s.TTL {
			t.Errorf("state %q: TTL %v in the savepoint", s.Name, s.TTL)
		}
	}
	n := 0
	for e, err := range f.Entries(context.Background(), savepoint.Select{States: []string{"tags"}}) {
		must(t, err)
		for _, v := range e.List {
			if v.Expires != now+60_000 {
				t.Fatalf("tags of %s: element expires at %d, want %d", e.Key, v.Expires, now+60_000)
			}
		}
		n++
	}
	if want := (users + 2) / 3; n != want {
		t.Errorf("%d tags entries, want %d", n, want)
	}
	if l, err := b.GetList("tags", user(3), ""); err != nil || len(l) != 3 || l[1] != string(statetable.String.Append(nil, "b-"+user(3))) {
		t.Errorf("tags of %s: %q, %v", user(3), l, err)
	}
}
