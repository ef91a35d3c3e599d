package cowstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// The value type of a state, release by release: v2 widens Visits, drops
// Admin and adds Plan; v3 changes Name's type, which nothing can read.
type (
	userV1 struct {
		Name   string
		Visits int32
		Admin  bool
	}
	userV2 struct {
		Name   string
		Plan   string
		Visits int64
	}
	userV3 struct {
		Name   int64
		Visits int64
	}
)

func registerUsers[V any](t *testing.T, b *cowstate.Backend) *cowstate.ValueState[string, V] {
	t.Helper()
	c := must(statetable.Struct[V]())(t)
	return must(cowstate.Value[string, V](b, "users", cowstate.WithValueCodec[V](c)))(t)
}

var userNames = []string{"ann", "bob", "cy", "dee", "eve"}

// A state's value type changes across an upgrade: the new job restores the
// old job's incremental chain with every value migrated (fields matched by
// name), its first checkpoint after the restore is full, and what it
// writes restores in the next release; a change nothing can read fails
// the restore naming the field, before anything is restored.
func TestMigration_AcrossAnIncrementalChain(t *testing.T) {
	ctx := context.Background()
	st := checkpoint.Memory()
	opts := checkpoint.Options{Policy: checkpoint.Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}}
	checkpointAll := func(store *checkpoint.Store, ids ...uint64) {
		t.Helper()
		for _, id := range ids {
			cp := must(store.Checkpoint(ctx, id))(t)
			if err := cp.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := store.Confirm(id); err != nil {
				t.Fatal(err)
			}
		}
	}

	old := newBackend(t, cowstate.Config{MaxParallelism: 16})
	v1 := registerUsers[userV1](t, old)
	store := must(checkpoint.Open(ctx, old, st, opts))(t)
	for round := range 3 {
		for i, u := range userNames[:3+round] {
			if err := v1.Put(u, userV1{Name: u, Visits: int32(round*10 + i), Admin: i == 0}); err != nil {
				t.Fatal(err)
			}
		}
		checkpointAll(store, uint64(round+1))
	}
	if m := store.Checkpoints()[len(store.Checkpoints())-1]; len(m.Segments) != 3 {
		t.Fatalf("checkpoint 3 has %d segments, want a full and two deltas", len(m.Segments))
	}
	store.Close()

	// Release 3 first: incompatible, refused before anything is restored,
	// as a check before the deploy says.
	bad := newBackend(t, cowstate.Config{MaxParallelism: 16})
	registerUsers[userV3](t, bad)
	checks := must(checkpoint.CheckRestore(ctx, bad, checkpoint.Source{Storage: st}))(t)
	if len(checks) != 1 || checks[0].Name != "users" || checks[0].Verdict != cowstate.Refused || !errors.Is(checks[0].Err, statetable.ErrIncompatible) {
		t.Fatalf("CheckRestore into release 3: %+v, want users refused as incompatible", checks)
	}
	badStore := must(checkpoint.Open(ctx, bad, st, opts))(t)
	_, err := badStore.Restore(ctx, 0)
	if !errors.Is(err, statetable.ErrIncompatible) || !errors.Is(err, snapshot.ErrMismatch) || !strings.Contains(err.Error(), "field Name: int64 cannot hold its old string values") {
		t.Fatalf("restore into an incompatible type: %v, want ErrIncompatible naming the field", err)
	}
	if !bad.Empty() {
		t.Fatal("a refused migration left state behind")
	}
	badStore.Close()

	upgraded := newBackend(t, cowstate.Config{MaxParallelism: 16})
	v2 := registerUsers[userV2](t, upgraded)
	checks = must(checkpoint.CheckRestore(ctx, upgraded, checkpoint.Source{Storage: st}))(t)
	if len(checks) != 1 || checks[0].Verdict != cowstate.Migrates || checks[0].As != "users" || checks[0].Err != nil {
		t.Fatalf("CheckRestore into release 2: %+v, want users migrating", checks)
	}
	if !upgraded.Empty() {
		t.Fatal("CheckRestore restored something")
	}
	store = must(checkpoint.Open(ctx, upgraded, st, opts))(t)
	if _, err := store.Restore(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !upgraded.Translated() {
		t.Error("Translated() is false after a migration")
	}
	for i, u := range userNames {
		want := userV2{Name: u, Visits: int64(20 + i)}
		if got := must(v2.Get(u))(t); got != want {
			t.Errorf("%s: %+v, want %+v", u, got, want)
		}
	}
	if err := v2.Put("ann", userV2{Name: "ann", Plan: "pro", Visits: 99}); err != nil {
		t.Fatal(err)
	}
	checkpointAll(store, 4, 5)
	cps := store.Checkpoints()
	if m := cps[len(cps)-2]; m.ID != 4 || len(m.Segments) != 1 {
		t.Fatalf("checkpoint %d has %d segments, want 4, full after the migration", m.ID, len(m.Segments))
	}
	store.Close()

	next := newBackend(t, cowstate.Config{MaxParallelism: 16})
	v2again := registerUsers[userV2](t, next)
	if _, err := checkpoint.RestoreFrom(ctx, next, checkpoint.Source{Storage: st}); err != nil {
		t.Fatal(err)
	}
	if next.Translated() {
		t.Error("Translated() after a restore that read the registered codecs")
	}
	if got := must(v2again.Get("ann"))(t); got.Plan != "pro" || got.Visits != 99 {
		t.Errorf("ann after the upgrade's own checkpoints: %+v", got)
	}
}

// Keys never migrate: a state registered with another key codec is
// refused, naming the state, even when its value codec could migrate.
func TestMigration_KeysNeverMigrate(t *testing.T) {
	ctx := context.Background()
	st := checkpoint.Memory()
	old := newBackend(t, cowstate.Config{MaxParallelism: 16})
	must(registerUsers[userV1](t, old).Put("ann", userV1{Name: "ann"}), nil)
	store := must(checkpoint.Open(ctx, old, st, checkpoint.Options{}))(t)
	cp := must(store.Savepoint(ctx, 1))(t)
	if err := cp.Wait(); err != nil {
		t.Fatal(err)
	}
	store.Close()
	dst := newBackend(t, cowstate.Config{MaxParallelism: 16})
	c := must(statetable.Struct[userV2]())(t)
	must(cowstate.Value[int64, userV2](dst, "users", cowstate.WithValueCodec[userV2](c)))(t)
	_, err := checkpoint.RestoreFrom(ctx, dst, checkpoint.Source{Storage: st, ID: 1, Savepoint: true})
	if !errors.Is(err, statetable.ErrStateMismatch) || errors.Is(err, statetable.ErrIncompatible) || !strings.Contains(err.Error(), "keys and namespaces never migrate") {
		t.Fatalf("restore with another key codec: %v, want ErrStateMismatch saying keys never migrate", err)
	}
}
