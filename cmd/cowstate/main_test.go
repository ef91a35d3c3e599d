package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string // substrings of stdout and stderr
	}{
		{nil, 2, "", "Usage:\n\n\tcowstate <command> [arguments]"},
		{[]string{"-h"}, 0, "The commands are:", ""},
		{[]string{"help"}, 0, "\tverify   check that every checkpoint of a store restores", ""},
		{[]string{"help", "demo"}, 0, "usage: cowstate demo", ""},
		{[]string{"help", "demo"}, 0, "-checkpoint-every n", ""},
		{[]string{"help", "inspect"}, 0, "-v\tlist the segments", ""},
		{[]string{"help", "nope"}, 2, "", "cowstate help nope: unknown help topic. Run 'cowstate help'."},
		{[]string{"nope"}, 2, "", "cowstate nope: unknown command\nRun 'cowstate help' for usage."},
		{[]string{"demo", "-h"}, 0, "", "usage: cowstate demo"},
		{[]string{"demo", "-keys", "x"}, 2, "", "invalid value \"x\" for flag -keys"},
		{[]string{"demo", "extra"}, 2, "", "cowstate demo: unexpected arguments: extra"},
		{[]string{"demo", "-events", "10", "-checkpoint-every", "10"}, 2, "", "need at least two checkpoint intervals"},
		{[]string{"inspect"}, 2, "", "need exactly one argument, the checkpoint directory"},
		{[]string{"verify", filepath.Join(t.TempDir(), "missing")}, 1, "", "no checkpoint store at "},
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
	code, stdout, _ = runCLI("verify", "-json", dir)
	var rep checkpoint.Report
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.Checkpoints) != 1 || !rep.Checkpoints[0].Restores {
		t.Errorf("verify -json: status %d, %v\n%s", code, err, stdout)
	}
	code, stdout, _ = runCLI("inspect", "-json", dir)
	var l checkpoint.Listing
	if err := json.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || len(l.Checkpoints) != 1 || l.Checkpoints[0].Committed.IsZero() {
		t.Errorf("inspect -json: status %d, %v\n%s", code, err, stdout)
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
