package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

func TestUsage(t *testing.T) {
	nonEmpty := t.TempDir()
	os.WriteFile(filepath.Join(nonEmpty, "notes.txt"), []byte("not a store"), 0o644)
	if _, stdout, _ := runCLI("help"); strings.Contains(stdout, "demo-instance") {
		t.Errorf("cowstate help lists the internal command demo-instance:\n%s", stdout)
	}
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string // substrings of stdout and stderr
	}{
		{nil, 2, "", "Usage:\n\n\tcowstate <command> [arguments]"},
		{[]string{"-h"}, 0, "The commands are:", ""},
		{[]string{"help"}, 0, "\tverify    check that every checkpoint of a store restores", ""},
		{[]string{"help", "demo"}, 0, "usage: cowstate demo", ""},
		{[]string{"help", "demo"}, 0, "-checkpoint-every n", ""},
		{[]string{"help", "inspect"}, 0, "-v\tlist the segments", ""},
		{[]string{"help", "nope"}, 2, "", "cowstate help nope: unknown help topic. Run 'cowstate help'."},
		{[]string{"nope"}, 2, "", "cowstate nope: unknown command\nRun 'cowstate help' for usage."},
		{[]string{"demo", "-h"}, 0, "", "usage: cowstate demo"},
		{[]string{"demo", "-keys", "x"}, 2, "", "invalid value \"x\" for flag -keys"},
		{[]string{"demo", "extra"}, 2, "", "cowstate demo: unexpected arguments: extra"},
		{[]string{"demo", "-events", "10", "-checkpoint-every", "10"}, 2, "", "need at least two checkpoint intervals"},
		{[]string{"demo", "-dir", "a", "-store", "b"}, 2, "", "-dir a and -store b: give one"},
		{[]string{"demo", "-instances", "0"}, 2, "", "-instances 0: need 1 to 64"},
		{[]string{"demo", "-instances", "4", "-rescale-to", "3", "-max-parallelism", "3"}, 2, "", "-max-parallelism 3: need at least as many key groups as instances"},
		{[]string{"demo", "-instances", "2", "-store", "mem://"}, 1, "", "a store in memory cannot be shared by -instances 2 processes"},
		{[]string{"demo", "-store", nonEmpty}, 1, "", nonEmpty + " is not empty"},
		{[]string{"help", "demo"}, 0, "-rescale-to m", ""},
		{[]string{"help", "demo-instance"}, 0, "Demo-instance is internal to cowstate demo", ""},
		{[]string{"demo-instance"}, 2, "", "need -store"},
		{[]string{"inspect"}, 2, "", "need the checkpoint directory as the argument, or -store URL"},
		{[]string{"inspect", "a", "b"}, 2, "", "need one checkpoint directory, got 2 arguments: a b"},
		{[]string{"inspect", "a", "-json", "b"}, 2, "", "need one checkpoint directory, got 2 arguments: a b"},
		{[]string{"inspect", "--", "-json"}, 1, "", "no checkpoint store at -json"},
		{[]string{"verify", "-store", "x", "y"}, 2, "", "give the store as -store URL or as a directory argument, not both"},
		{[]string{"verify", filepath.Join(t.TempDir(), "missing")}, 1, "", "no checkpoint store at "},
		{[]string{"verify", "-store", filepath.Join(t.TempDir(), "missing")}, 1, "", "no checkpoint store at "},
		{[]string{"inspect", "-store", "file://" + filepath.Join(t.TempDir(), "missing")}, 1, "", "no checkpoint store at /"},
		{[]string{"help", "verify"}, 0, "-store URL", ""},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.err) {
			t.Errorf("cowstate %s: status %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
		}
	}
}

// TestInspectAndVerifyTellTheTruth: a directory that is not a store, a
// store with no checkpoint, and a store whose newest manifest is damaged
// all exit non-zero with what is wrong.
func TestInspectAndVerifyTellTheTruth(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a store"), 0o644)
	for _, cmd := range []string{"inspect", "verify"} {
		code, stdout, stderr := runCLI(cmd, dir)
		if code != 1 || !strings.Contains(stderr, "no checkpoint store at "+dir) {
			t.Errorf("%s of a directory that is not a store: status %d\n%s%s", cmd, code, stdout, stderr)
		}
	}
	for _, cmd := range []string{"inspect", "verify"} {
		code, stdout, stderr := runCLI(cmd, "-store", "file://"+dir)
		if code != 1 || !strings.Contains(stderr, "no checkpoint store at "+dir) {
			t.Errorf("%s -store file://%s, not a store: status %d\n%s%s", cmd, dir, code, stdout, stderr)
		}
	}
	// A store with no checkpoint yet: inspect lists nothing, verify fails.
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := checkpoint.Dir(dir)
	s, err := checkpoint.Open(context.Background(), b, st, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI("inspect", dir)
	if code != 0 || !strings.Contains(stdout, "no checkpoint or savepoint yet") {
		t.Errorf("inspect of an empty store: status %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI("verify", dir)
	if code != 1 || !strings.Contains(stdout, "FAIL: the store holds no checkpoint or savepoint") {
		t.Errorf("verify of an empty store: status %d\n%s", code, stdout)
	}
	// One checkpoint: both succeed, and -json gives the same facts.
	cp, _ := s.Checkpoint(context.Background(), 1)
	if err := cp.Wait(); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI("verify", "-store", dir)
	if code != 0 || !strings.Contains(stdout, "ok: 1 checkpoints") {
		t.Errorf("verify -store: status %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI("verify", "-json", dir)
	var rep checkpoint.Report
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.Checkpoints) != 1 || !rep.Checkpoints[0].Restores {
		t.Errorf("verify -json: status %d, %v\n%s", code, err, stdout)
	}
	checkJSONKeys(t, "verify -json", stdout)
	code, stdout, _ = runCLI("inspect", "-json", dir)
	var l checkpoint.Listing
	if err := json.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || len(l.Checkpoints) != 1 || l.Checkpoints[0].Committed.IsZero() {
		t.Errorf("inspect -json: status %d, %v\n%s", code, err, stdout)
	}
	checkJSONKeys(t, "inspect -json", stdout)
	// Flags may follow the directory.
	if code, after, stderr := runCLI("inspect", dir, "-json"); code != 0 || after != stdout {
		t.Errorf("inspect DIR -json: status %d, want the output of inspect -json DIR\n%s%s", code, after, stderr)
	}
	if code, after, stderr := runCLI("verify", dir, "-json"); code != 0 || !strings.Contains(after, `"restores": true`) {
		t.Errorf("verify DIR -json: status %d\n%s%s", code, after, stderr)
	}
	// A damaged newest manifest: named, exit 1; the older one is listed.
	names, _ := filepath.Glob(filepath.Join(dir, "manifest-*"))
	newest := names[len(names)-1]
	if err := os.WriteFile(newest, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("inspect", dir)
	if code != 1 || !strings.Contains(stderr, filepath.Base(newest)) {
		t.Errorf("inspect with a damaged manifest: status %d\n%s", code, stderr)
	}
	code, stdout, _ = runCLI("verify", dir)
	if code != 1 || !strings.Contains(stdout, "damaged: ") || !strings.Contains(stdout, filepath.Base(newest)) {
		t.Errorf("verify with a damaged manifest: status %d\n%s", code, stdout)
	}
}

// TestInspectAndVerify_JobStore: a store of several instances
// (checkpoint.OpenInstance) has no store at its root; inspect and verify
// read each instance's and say which job checkpoints are complete and
// restore.
func TestInspectAndVerify_JobStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stores []*checkpoint.Store
	for i := range 2 {
		kgs := statetable.RangeForOperator(8, 2, i)
		b, err := cowstate.New(cowstate.Config{MaxParallelism: 8, KeyGroups: &kgs})
		if err != nil {
			t.Fatal(err)
		}
		s, err := checkpoint.OpenInstance(ctx, b, st, checkpoint.Options{Retention: checkpoint.Retention{KeepLast: 3}})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	// Checkpoint 1 by both instances, 2 by the first only.
	for i, s := range stores {
		for id := uint64(1); id <= uint64(2-i); id++ {
			cp, err := s.Checkpoint(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, stderr := runCLI("inspect", dir)
	for _, want := range []string{"job store " + dir + ": 2 instances, 2 job checkpoints and savepoints (1 complete)", "instance [4, 7]: store " + dir + " (kg-00004-00007.*)"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("inspect of a job store: status %d, want %q\n%s%s", code, want, stdout, stderr)
		}
	}
	for _, row := range []string{"1 checkpoint yes [0, 3] [4, 7]", "2 checkpoint no [0, 3]"} {
		if !hasRow(stdout, row) {
			t.Errorf("inspect of a job store lacks the row %q\n%s", row, stdout)
		}
	}
	code, stdout, _ = runCLI("verify", dir)
	for _, want := range []string{"job checkpoint 1: complete, restores\n", "job checkpoint 2: incomplete", "ok: 1 complete job checkpoints and savepoints, all restore (2 instances)"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("verify of a job store: status %d, want %q\n%s", code, want, stdout)
		}
	}
	code, stdout, _ = runCLI("verify", "-json", dir)
	var rep struct {
		Checkpoints []jobEntry           `json:"job_checkpoints"`
		Instances   []*checkpoint.Report `json:"instances"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.Checkpoints) != 2 || !*rep.Checkpoints[0].Restores || rep.Checkpoints[1].Complete || len(rep.Instances) != 2 {
		t.Errorf("verify -json of a job store: status %d, %v\n%s", code, err, stdout)
	}
	checkJSONKeys(t, "verify -json of a job store", stdout)
	code, stdout, _ = runCLI("inspect", "-json", dir)
	var l struct {
		Checkpoints []jobEntry            `json:"job_checkpoints"`
		Instances   []*checkpoint.Listing `json:"instances"`
	}
	if err := json.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || len(l.Checkpoints) != 2 || len(l.Instances) != 2 {
		t.Errorf("inspect -json of a job store: status %d, %v\n%s", code, err, stdout)
	}
	checkJSONKeys(t, "inspect -json of a job store", stdout)

	// Damage the second instance's segment of checkpoint 1: job checkpoint
	// 1 no longer restores, and verify names the segment.
	segs, _ := filepath.Glob(filepath.Join(dir, "kg-00004-00007.*.cws"))
	if len(segs) != 1 {
		t.Fatalf("segments of instance [4, 7]: %v", segs)
	}
	if err := os.WriteFile(segs[0], []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI("verify", dir)
	for _, want := range []string{"  damaged: " + strings.TrimPrefix(filepath.Base(segs[0]), "kg-00004-00007."), "job checkpoint 1: complete, DOES NOT RESTORE", "FAIL: "} {
		if code != 1 || !strings.Contains(stdout, want) {
			t.Errorf("verify of a damaged job store: status %d, want %q\n%s", code, want, stdout)
		}
	}
}

// checkJSONKeys fails t unless every key of the JSON out is snake_case
// ("max_parallelism"), but for the names of states, which are the user's.
func checkJSONKeys(t *testing.T, what, out string) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !snake.MatchString(k) {
					t.Errorf("%s: key %q at %s is not snake_case", what, k, path)
				}
				if k != "states" {
					walk(path+"."+k, e)
				}
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", v)
}

// hasRow reports whether a line of a table in out has the words of row.
func hasRow(out, row string) bool {
	for line := range strings.Lines(out) {
		if strings.Join(strings.Fields(line), " ") == row {
			return true
		}
	}
	return false
}
