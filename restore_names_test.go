package cowstate_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/snapshot"
)

// renameJob is a job before an upgrade (old: "clicks", "sessions",
// "timeouts") or after it, where "clicks" is renamed "views", "sessions"
// is gone, "timeouts" is renamed "expiry" and "fresh" is new.
type renameJob struct {
	b              *cowstate.Backend
	count, renamed *cowstate.ValueState[string, int64]
	sessions       *cowstate.ListState[string, string]
	fresh          *cowstate.ValueState[string, int64]
	timers         *cowstate.TimerService[string]
}

func newRenameJob(t *testing.T, upgraded bool) *renameJob {
	t.Helper()
	j := &renameJob{b: newBackend(t, cowstate.Config{MaxParallelism: 16})}
	j.count = must(cowstate.Value[string, int64](j.b, "count"))(t)
	if !upgraded {
		j.renamed = must(cowstate.Value[string, int64](j.b, "clicks"))(t)
		j.sessions = must(cowstate.List[string, string](j.b, "sessions"))(t)
		j.timers = must(cowstate.Timers[string](j.b, "timeouts"))(t)
		return j
	}
	j.renamed = must(cowstate.Value[string, int64](j.b, "views"))(t)
	j.fresh = must(cowstate.Value[string, int64](j.b, "fresh"))(t)
	j.timers = must(cowstate.Timers[string](j.b, "expiry"))(t)
	return j
}

// plan is the upgrade's restore plan.
func (j *renameJob) plan(t *testing.T) {
	t.Helper()
	for _, err := range []error{
		j.b.RestoreAs("clicks", "views"),
		j.b.RestoreAs("timeouts", "expiry"),
		j.b.DropOnRestore("sessions"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (j *renameJob) write(t *testing.T, round int) {
	t.Helper()
	for i, u := range []string{"ann", "bob", "cy", "dee"} {
		if err := j.count.Put(u, int64(round*10+i)); err != nil {
			t.Fatal(err)
		}
		if err := j.renamed.Put(u, int64(round*100+i)); err != nil {
			t.Fatal(err)
		}
		if err := j.sessions.Add(u, u+"-session"); err != nil {
			t.Fatal(err)
		}
		if _, err := j.timers.RegisterEventTime(u, int64(round*1000+i)); err != nil {
			t.Fatal(err)
		}
	}
}

// check says the upgraded job holds what the old one held under the old
// names, round being the old job's last.
func (j *renameJob) check(t *testing.T, round int) {
	t.Helper()
	for i, u := range []string{"ann", "bob", "cy", "dee"} {
		if v := must(j.count.Get(u))(t); v != int64(round*10+i) {
			t.Errorf("count[%s] = %d, want %d", u, v, round*10+i)
		}
		if v := must(j.renamed.Get(u))(t); v != int64(round*100+i) {
			t.Errorf("views[%s] = %d, want clicks' %d", u, v, round*100+i)
		}
	}
	if n := j.fresh.Count(); n != 0 {
		t.Errorf("the new state holds %d values, want none", n)
	}
	var ts []int64
	for tm := range j.timers.EventTimers() {
		ts = append(ts, tm.Timestamp)
	}
	if len(ts) != 4*(round+1) || ts[len(ts)-1] != int64(round*1000+3) {
		t.Errorf("expiry holds timers %v, want the 4 of each of %d rounds", ts, round+1)
	}
}

// A state renamed, a state dropped and a state added across an upgrade:
// without a plan the restore names every state it cannot place; with
// one, the renamed states keep their data, from a savepoint as from an
// incremental chain, and the dropped one is skipped.
func TestRestore_RenamedDroppedAdded(t *testing.T) {
	ctx := context.Background()
	old := newRenameJob(t, false)
	old.write(t, 0)
	var savepoint bytes.Buffer
	if err := old.b.View(func(snap *cowstate.Snapshot) error {
		return cowstate.WriteSavepoint(ctx, &savepoint, snap, nil)
	}); err != nil {
		t.Fatal(err)
	}
	restore := func(j *renameJob) error {
		r, err := snapshot.Open(bytes.NewReader(savepoint.Bytes()), int64(savepoint.Len()))
		if err != nil {
			t.Fatal(err)
		}
		return j.b.RestoreSnapshot(ctx, r)
	}

	unplanned := newRenameJob(t, true)
	err := restore(unplanned)
	if !errors.Is(err, snapshot.ErrMismatch) {
		t.Fatalf("restore with no plan: %v, want ErrMismatch", err)
	}
	for _, name := range []string{`"clicks"`, `"sessions"`, `"timeouts"`, "RestoreAs, DropOnRestore"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("restore with no plan: %v does not name %s", err, name)
		}
	}
	if !unplanned.b.Empty() {
		t.Fatal("a refused restore left state behind")
	}

	upgraded := newRenameJob(t, true)
	upgraded.plan(t)
	r := must(snapshot.Open(bytes.NewReader(savepoint.Bytes()), int64(savepoint.Len())))(t)
	checks := must(upgraded.b.CheckRestore(r.Meta()))(t)
	got := map[string]string{}
	for _, c := range checks {
		got[c.Name] = c.Verdict.String() + " " + c.As
	}
	want := map[string]string{"count": "restores count", "clicks": "restores views", "sessions": "dropped ", "timeouts": "restores expiry"}
	if !maps.Equal(got, want) {
		t.Fatalf("CheckRestore: %v, want %v", got, want)
	}
	if err := restore(upgraded); err != nil {
		t.Fatal(err)
	}
	upgraded.check(t, 0)

	// An incremental chain: a full checkpoint, then deltas that write
	// the renamed and the dropped states.
	st := checkpoint.Memory()
	store := must(checkpoint.Open(ctx, old.b, st, checkpoint.Options{Policy: checkpoint.Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}}))(t)
	for id := uint64(1); id <= 3; id++ {
		old.write(t, int(id))
		cp := must(store.Checkpoint(ctx, id))(t)
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := store.Confirm(id); err != nil {
			t.Fatal(err)
		}
	}
	m := store.Checkpoints()[len(store.Checkpoints())-1]
	if len(m.Segments) < 2 {
		t.Fatalf("checkpoint 3 has %d segments, want a chain", len(m.Segments))
	}
	store.Close()
	chained := newRenameJob(t, true)
	chained.plan(t)
	if _, err := checkpoint.RestoreFrom(ctx, chained.b, checkpoint.Source{Storage: st, ID: 3}); err != nil {
		t.Fatal(err)
	}
	chained.check(t, 3)
	// A Loop's checkpoint keeps the watermarks by the old names too.
	if err := chained.b.RestoreWatermarks(map[string]int64{"timeouts": 500, "sessions": 7}); err != nil {
		t.Fatal(err)
	}
	if wm := chained.timers.CurrentWatermark(); wm != 500 {
		t.Errorf("expiry's watermark %d, want timeouts' 500", wm)
	}
}

// The plan is checked when it is made: into a name nothing registers, from
// a name the job registers, twice for one name, and two names into one.
func TestRestoreAs_Errors(t *testing.T) {
	j := newRenameJob(t, true)
	for name, err := range map[string]error{
		"into nothing":      j.b.RestoreAs("clicks", "nothing"),
		"from a registered": j.b.RestoreAs("count", "views"),
		"drop a registered": j.b.DropOnRestore("views"),
	} {
		if !errors.Is(err, cowstate.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if err := j.b.RestoreAs("clicks", "views"); err != nil {
		t.Fatal(err)
	}
	if err := j.b.DropOnRestore("clicks"); !errors.Is(err, cowstate.ErrConfig) {
		t.Errorf("a second plan for clicks: %v, want ErrConfig", err)
	}
	if err := j.b.RestoreAs("taps", "views"); !errors.Is(err, cowstate.ErrConfig) {
		t.Errorf("a second name into views: %v, want ErrConfig", err)
	}
}

// A file that holds both a state and the name it is renamed to cannot be
// restored by that plan.
func TestRestoreAs_FileHoldsBothNames(t *testing.T) {
	ctx := context.Background()
	src := newBackend(t, cowstate.Config{MaxParallelism: 16})
	must(cowstate.Value[string, int64](src, "clicks"))(t).Put("ann", 1)
	must(cowstate.Value[string, int64](src, "views"))(t).Put("ann", 2)
	var buf bytes.Buffer
	if err := src.View(func(snap *cowstate.Snapshot) error { return cowstate.WriteSnapshot(ctx, &buf, snap, nil) }); err != nil {
		t.Fatal(err)
	}
	dst := newBackend(t, cowstate.Config{MaxParallelism: 16})
	must(cowstate.Value[string, int64](dst, "views"))(t)
	if err := dst.RestoreAs("clicks", "views"); err != nil {
		t.Fatal(err)
	}
	r := must(snapshot.Open(bytes.NewReader(buf.Bytes()), int64(buf.Len())))(t)
	if err := dst.RestoreSnapshot(ctx, r); !errors.Is(err, snapshot.ErrMismatch) || !strings.Contains(err.Error(), "both restore into") {
		t.Fatalf("restore: %v, want ErrMismatch naming both", err)
	}
}
