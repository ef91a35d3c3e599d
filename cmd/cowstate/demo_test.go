package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tinyConfig is a demo small enough for go test -race, with a state large
// enough against the checkpoint interval for the policy to choose both
// full and incremental checkpoints.
func tinyConfig(t *testing.T) *demoConfig {
	return &demoConfig{
		keys: 20_000, events: 40_000, every: 1_000,
		gap: 100 * time.Millisecond, outOfOrder: 100 * time.Millisecond,
		stateTTL: 24 * time.Hour, maxParallelism: 128, seed: 7, dir: t.TempDir(),
		instances: 1, rescaleTo: 2,
		waitCheckpoints: true,
	}
}

// runCLI runs the command line and returns its exit status and output.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestDemoRecoversExactly(t *testing.T) {
	cfg := tinyConfig(t)
	var out, log bytes.Buffer
	if err := runDemo(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{" full ", " incremental ", "restores of checkpoint", "rescaled (2 backends)", "ok: the restored and the rescaled runs match"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "DIFFERENT") || strings.Contains(s, "MISMATCH") {
		t.Errorf("summary reports a difference:\n%s", s)
	}
	if t.Failed() {
		return
	}

	// The store it leaves: inspect lists it, verify passes.
	code, stdout, stderr := runCLI("inspect", "-v", cfg.dir)
	if code != 0 || !strings.Contains(stdout, "count=") || !strings.Contains(stdout, "[0, 127]") {
		t.Errorf("inspect: status %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("verify", cfg.dir)
	if code != 0 || !strings.Contains(stdout, "\nok: ") || !strings.Contains(stdout, ": restores\n") {
		t.Errorf("verify: status %d\n%s%s", code, stdout, stderr)
	}

	// Damage one byte of a segment: verify names the file and fails.
	segs, _ := filepath.Glob(filepath.Join(cfg.dir, "*.cw[sd]"))
	if len(segs) == 0 {
		t.Fatalf("no segment files in %s", cfg.dir)
	}
	victim := segs[len(segs)-1]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI("verify", cfg.dir)
	if code != 1 || !strings.Contains(stdout, "damaged: "+filepath.Base(victim)) || !strings.Contains(stdout, "xxhash64") || !strings.Contains(stdout, "DOES NOT RESTORE") {
		t.Errorf("verify of a damaged store: status %d\n%s", code, stdout)
	}
}

// TestDemoDetectsBrokenRestore shows that verification can fail: the
// restored runs skip the events of one checkpoint interval, as if the
// restore had not applied that checkpoint.
func TestDemoDetectsBrokenRestore(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.skipOnRestore = cfg.every
	var out, log bytes.Buffer
	err := runDemo(context.Background(), cfg, &out, &log)
	if !errors.Is(err, errVerify) {
		t.Fatalf("demo with a broken restore: %v, want %v\n%s", err, errVerify, out.String())
	}
	s := out.String()
	for _, want := range []string{"MISMATCH: restored: session results, per-user counts differ", "MISMATCH: rescaled (2 backends)", "DIFFERENT"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
