package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string // substrings of stdout and stderr
	}{
		{nil, 2, "", "Usage:\n\n\tcowstate <command> [arguments]"},
		{[]string{"-h"}, 0, "The commands are:", ""},
		{[]string{"help"}, 0, "\tverify   check every file of a checkpoint store", ""},
		{[]string{"help", "demo"}, 0, "usage: cowstate demo", ""},
		{[]string{"help", "demo"}, 0, "-checkpoint-every n", ""},
		{[]string{"help", "inspect"}, 0, "-v\tlist the segment files", ""},
		{[]string{"help", "nope"}, 2, "", "cowstate help nope: unknown help topic. Run 'cowstate help'."},
		{[]string{"nope"}, 2, "", "cowstate nope: unknown command\nRun 'cowstate help' for usage."},
		{[]string{"demo", "-h"}, 0, "", "usage: cowstate demo"},
		{[]string{"demo", "-keys", "x"}, 2, "", "invalid value \"x\" for flag -keys"},
		{[]string{"demo", "extra"}, 2, "", "cowstate demo: unexpected arguments: extra"},
		{[]string{"demo", "-events", "10", "-checkpoint-every", "10"}, 2, "", "need at least two checkpoint intervals"},
		{[]string{"inspect"}, 2, "", "need exactly one argument, the checkpoint directory"},
		{[]string{"verify", filepath.Join(t.TempDir(), "missing")}, 1, "", "no such file or directory (give the -dir of a cowstate demo run with -keep"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.err) {
			t.Errorf("cowstate %s: status %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
		}
	}
}

func TestInspectEmptyAndBadManifest(t *testing.T) {
	dir := t.TempDir()
	code, stdout, _ := runCLI("inspect", dir)
	if code != 0 || !strings.Contains(stdout, "holds no committed checkpoint") {
		t.Errorf("inspect of an empty store: status %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI("verify", dir)
	if code != 0 || stdout != "ok: 0 checkpoints, 0 savepoints, 0 files verified\n" {
		t.Errorf("verify of an empty store: status %d\n%s", code, stdout)
	}
	bad := "checkpoint-00000000000000000001.manifest"
	if err := os.WriteFile(filepath.Join(dir, bad), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("inspect", dir)
	if code != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("inspect with a bad manifest: status %d\n%s", code, stderr)
	}
	code, stdout, _ = runCLI("verify", dir)
	if code != 1 || !strings.Contains(stdout, "damaged: "+bad) {
		t.Errorf("verify with a bad manifest: status %d\n%s", code, stdout)
	}
}
