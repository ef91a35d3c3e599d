package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
)

// account is the state's value in release 1; accountV2 adds a field and
// widens one, accountV3 changes a field's type.
type (
	account struct {
		Owner   string
		Balance int32
	}
	accountV2 struct {
		Owner   string
		Balance int64
		Country string
	}
	accountV3 struct {
		Owner   int64
		Balance int64
	}
)

// release registers a release's states: accounts of type A, a list of
// events, and timers; it returns the backend and the accounts state.
func release[A any](t *testing.T, maxPar int) (*cowstate.Backend, *cowstate.ValueState[string, A], *cowstate.ListState[string, string], *cowstate.TimerService[string]) {
	t.Helper()
	b, err := cowstate.New(cowstate.Config{MaxParallelism: maxPar})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := cowstate.Value[string, A](b, "accounts")
	if err != nil {
		t.Fatal(err)
	}
	events, err := cowstate.List[string, string](b, "events")
	if err != nil {
		t.Fatal(err)
	}
	timers, err := cowstate.Timers[string](b, "timers")
	if err != nil {
		t.Fatal(err)
	}
	return b, acc, events, timers
}

// writeSavepoint writes b's savepoint to a file of dir and returns its path.
func writeSavepoint(t *testing.T, b *cowstate.Backend, path string) string {
	t.Helper()
	snap := b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	if err := cowstate.WriteSavepoint(context.Background(), &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeSchema writes b's job schema, as a job does at build time.
func writeSchema(t *testing.T, b *cowstate.Backend, path string) string {
	t.Helper()
	snap := b.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	if err := savepoint.WriteSchema(&buf, savepoint.HeaderOf(cowstate.SavepointMeta(snap))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The savepoint commands on a job's savepoint: list and dump show it,
// check tells a deploy of each next release what its restore would say
// (exit 1 when something is refused), rewrite and bootstrap write
// savepoints the next job restores.
func TestSavepointCommands(t *testing.T) {
	dir := t.TempDir()
	b, acc, events, timers := release[account](t, 64)
	for i, owner := range []string{"ann", "bob", "cy"} {
		if err := acc.Put(owner, account{Owner: owner, Balance: int32(100 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
		if err := events.Add(owner, "opened"); err != nil {
			t.Fatal(err)
		}
		if _, err := timers.RegisterEventTime(owner, int64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	sp := writeSavepoint(t, b, filepath.Join(dir, "sp1"))

	expect := func(code int, out string, args ...string) string {
		t.Helper()
		c, stdout, stderr := runCLI(args...)
		if c != code || !strings.Contains(stdout+stderr, out) {
			t.Fatalf("cowstate %s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), c, code, out, stdout, stderr)
		}
		return stdout
	}
	list := expect(0, "accounts  value  -    3        string void struct{Owner string;Balance int32}", "savepoint", "list", sp)
	for _, want := range []string{"savepoint: max parallelism 64", "events    list   -    3", "timers  3      0"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	expect(0, `"key":"bob","ns":null,"value":{"Owner":"bob","Balance":200}}`, "savepoint", "dump", "-states", "accounts", sp)
	dump := expect(0, `"key":"ann"`, "savepoint", "dump", "-states", "events", "-key-from", "ann", "-key-to", "b", sp)
	if strings.Contains(dump, `"bob"`) {
		t.Errorf("dump of keys ann to b holds bob:\n%s", dump)
	}

	b2, _, _, _ := release[accountV2](t, 64)
	schema2 := writeSchema(t, b2, filepath.Join(dir, "v2.schema"))
	expect(0, "ok: the job restores all 3", "savepoint", "check", "-job", schema2, sp)
	expect(0, "state   accounts  migrates", "savepoint", "check", "-job", schema2, sp)
	b3, _, _, _ := release[accountV3](t, 64)
	expect(1, "field Owner: int64 cannot hold its old string values", "savepoint", "check", "-job", writeSchema(t, b3, filepath.Join(dir, "v3.schema")), sp)
	// A job that no longer has a list of events must drop it.
	b4, err := cowstate.New(cowstate.Config{MaxParallelism: 64})
	if err != nil {
		t.Fatal(err)
	}
	must(cowstate.Value[string, accountV2](b4, "accounts"))(t)
	must(cowstate.Timers[string](b4, "alarms"))(t)
	schema4 := writeSchema(t, b4, filepath.Join(dir, "v4.schema"))
	expect(1, "refused: 2 of 3", "savepoint", "check", "-job", schema4, sp)
	expect(0, "timers  timers    restores as alarms", "savepoint", "check", "-job", schema4, "-drop", "events", "-rename", "timers=alarms", sp)
	// The schema can be a savepoint of the new job.
	expect(0, "ok", "savepoint", "check", "-job", writeSavepoint(t, b2, filepath.Join(dir, "v2.savepoint")), sp)

	// Rewrite to the fourth release's names and another max parallelism.
	rewritten := filepath.Join(dir, "sp4")
	expect(0, "wrote "+rewritten, "savepoint", "rewrite", "-o", rewritten, "-drop", "events", "-rename", "timers=alarms", "-max-parallelism", "32", sp)
	expect(1, "exists", "savepoint", "rewrite", "-o", rewritten, sp)
	b5, err := cowstate.New(cowstate.Config{MaxParallelism: 32})
	if err != nil {
		t.Fatal(err)
	}
	acc5 := must(cowstate.Value[string, accountV2](b5, "accounts"))(t)
	alarms := must(cowstate.Timers[string](b5, "alarms"))(t)
	restoreFile(t, b5, rewritten)
	if v, err := acc5.Get("cy"); err != nil || v != (accountV2{Owner: "cy", Balance: 300}) {
		t.Errorf("cy after the rewrite: %+v, %v", v, err)
	}
	if n := len(slices.Collect(alarms.EventTimers())); n != 3 {
		t.Errorf("%d alarms after the rewrite, want 3", n)
	}

	// A dump bootstraps the same savepoint back; bad lines name their number.
	lines := filepath.Join(dir, "all.jsonl")
	if err := os.WriteFile(lines, []byte(expect(0, "", "savepoint", "dump", sp)), 0o644); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(dir, "back")
	expect(0, "wrote", "savepoint", "bootstrap", "-o", back, lines)
	if x, y := must(os.ReadFile(sp))(t), must(os.ReadFile(back))(t); !bytes.Equal(x, y) {
		t.Errorf("the bootstrap of a dump differs from the savepoint")
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(strings.SplitN(string(must(os.ReadFile(lines))(t)), "\n", 2)[0]+"\n"+`{"state":"nope","key":"x","ns":null,"value":1}`+"\n"), 0o644)
	expect(1, "line 2", "savepoint", "bootstrap", "-o", filepath.Join(dir, "bad"), bad)
	if _, err := os.Stat(filepath.Join(dir, "bad")); !os.IsNotExist(err) {
		t.Errorf("a failed bootstrap left its output: %v", err)
	}

	// Mistakes on the command line.
	expect(2, "need a subcommand", "savepoint")
	expect(2, "unknown subcommand \"nope\"", "savepoint", "nope")
	expect(2, "need one savepoint file", "savepoint", "list")
	expect(2, "need -job", "savepoint", "check", sp)
	expect(2, "need -o", "savepoint", "rewrite", sp)
	expect(2, "-key-groups \"9-1\"", "savepoint", "dump", "-key-groups", "9-1", sp)
	expect(1, "corrupt", "savepoint", "list", lines)
	expect(0, "usage: cowstate savepoint rewrite", "help", "savepoint", "rewrite")
}

func restoreFile(t *testing.T, b *cowstate.Backend, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	r, err := snapshot.Open(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreSnapshot(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
