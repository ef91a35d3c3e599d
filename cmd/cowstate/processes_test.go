package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
)

// TestMain lets the demo start its instances from the test binary: run
// with COWSTATE_TEST_MAIN=1 it is the cowstate command (see
// instanceCommand).
func TestMain(m *testing.M) {
	if os.Getenv("COWSTATE_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	instanceCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), "COWSTATE_TEST_MAIN=1")
		return cmd, nil
	}
	os.Exit(m.Run())
}

// processConfig is tinyConfig as a job of n processes rescaled to m.
func processConfig(t *testing.T, n, m int) *demoConfig {
	cfg := tinyConfig(t)
	cfg.instances, cfg.rescaleTo = n, m
	return cfg
}

// runProcessDemo runs the demo and checks that it passes, restoring the
// job checkpoint the crash point says.
func runProcessDemo(t *testing.T, cfg *demoConfig) string {
	t.Helper()
	var out, log bytes.Buffer
	if err := runDemo(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("demo: %v\n%s\nlog:\n%s", err, out.String(), log.String())
	}
	s := out.String()
	restored := cfg.crashAt / cfg.every * cfg.every
	for _, want := range []string{
		fmt.Sprintf("checkpointed (%d processes)", cfg.instances),
		fmt.Sprintf("restores of job checkpoint %d (the newest complete: %d instances", restored, cfg.instances),
		fmt.Sprintf("rescaled %d -> %d (%d processes)", cfg.instances, cfg.rescaleTo, cfg.rescaleTo),
		" full ", " incremental ",
		"ok: the rescaled run matches the uninterrupted run",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "DIFFERENT") || strings.Contains(s, "MISMATCH") {
		t.Errorf("summary reports a difference:\n%s", s)
	}
	if strings.Contains(log.String(), "DATA RACE") { // in an instance killed at the crash
		t.Errorf("an instance reports a data race:\n%s", log.String())
	}
	return s
}

func TestDemoProcesses_Dir(t *testing.T) {
	for _, tc := range []struct{ n, m int }{{2, 3}, {4, 3}} {
		t.Run(fmt.Sprintf("%d->%d", tc.n, tc.m), func(t *testing.T) {
			cfg := processConfig(t, tc.n, tc.m)
			runProcessDemo(t, cfg)
			// The job store it leaves: the restored job checkpoint (kept by
			// the crashed instances) and the rescaled job's last one.
			code, stdout, stderr := runCLI("verify", cfg.dir)
			for _, want := range []string{
				fmt.Sprintf("job store %s: %d instances", cfg.dir, tc.n+tc.m),
				fmt.Sprintf("job checkpoint %d: complete, restores\n", cfg.crashAt/cfg.every*cfg.every),
				fmt.Sprintf("job checkpoint %d: complete, restores\n", cfg.events),
				"\nok: ",
			} {
				if code != 0 || !strings.Contains(stdout, want) {
					t.Errorf("verify %s: status %d, want %q\n%s%s", cfg.dir, code, want, stdout, stderr)
				}
			}
		})
	}
}

func TestDemoProcesses_DetectsBrokenRestore(t *testing.T) {
	cfg := processConfig(t, 2, 3)
	cfg.skipOnRestore = cfg.every
	var out, log bytes.Buffer
	err := runDemo(context.Background(), cfg, &out, &log)
	if !errors.Is(err, errVerify) {
		t.Fatalf("demo with a broken restore: %v, want %v\n%s", err, errVerify, out.String())
	}
	s := out.String()
	for _, want := range []string{"MISMATCH: rescaled 2 -> 3 (3 processes): session results, per-user counts differ", "DIFFERENT"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestDemoProcesses_InstanceFails: an instance that fails stops the demo,
// which kills the others and names the one that failed with its last
// words.
func TestDemoProcesses_InstanceFails(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := instanceCommand
	t.Cleanup(func() { instanceCommand = start })
	instanceCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		if i := slices.Index(args, "-instance"); args[i+1] == "1" {
			args = slices.Clone(args)
			args[slices.Index(args, "-sink")+1] = notDir // its sink cannot be created
		}
		return start(ctx, args)
	}
	cfg := processConfig(t, 2, 3)
	var out, log bytes.Buffer
	err := runDemo(context.Background(), cfg, &out, &log)
	if err == nil || !strings.Contains(err.Error(), "instance 1 of 2 (key groups [64, 127]): exit status 1; its last words:") || !strings.Contains(err.Error(), "cowstate demo-instance: sink: mkdir "+notDir) {
		t.Fatalf("demo with an instance that fails: %v", err)
	}
	t.Log(err)
}

// TestDemoProcesses_S3: the job's processes checkpoint into an S3 bucket
// (a local versitygw) with the credentials they inherit, and restore from
// it rescaled; inspect and verify read the store by its URL, which
// messages name without its query.
func TestDemoProcesses_S3(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	ctx := context.Background()
	cfg := processConfig(t, 3, 2)
	cfg.dir, cfg.store = "", srv.URL("demo/")
	out := runProcessDemo(t, cfg)
	name := "s3://" + srv.Bucket + "?prefix=demo%2F"
	if !strings.Contains(out, "checkpoints in "+name+"\n") {
		t.Errorf("summary does not name the store %s:\n%s", name, out)
	}

	// The instances wrote the checkpoints (the demo process only reads
	// the store): they had the credentials srv.SetEnv put in the
	// environment.
	res, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket), Prefix: aws.String("demo/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(splitKeyGroups(cfg.maxParallelism, 3), splitKeyGroups(cfg.maxParallelism, 2)...) {
		prefix := fmt.Sprintf("demo/kg-%05d-%05d.manifest-", r.First, r.Last)
		if !slices.ContainsFunc(res.Contents, func(o types.Object) bool { return strings.HasPrefix(*o.Key, prefix) }) {
			t.Errorf("no manifest of instance %v in the bucket (%d objects)", r, len(res.Contents))
		}
	}

	code, stdout, stderr := runCLI("verify", "-store", cfg.store)
	if code != 0 || !strings.Contains(stdout, "job store "+name+": 5 instances") || !strings.Contains(stdout, "\nok: ") {
		t.Errorf("verify -store %s: status %d\n%s%s", cfg.store, code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("inspect", "-json", "-store", cfg.store)
	var l struct {
		Storage   string                `json:"storage"`
		Instances []*checkpoint.Listing `json:"instances"`
	}
	if err := json.Unmarshal([]byte(stdout), &l); code != 0 || err != nil || l.Storage != name || len(l.Instances) != 5 {
		t.Errorf("inspect -json -store %s: status %d, %v\n%s%s", cfg.store, code, err, stdout, stderr)
	}

	// A store that holds something is refused; one that holds nothing is
	// no checkpoint store. Both are named without the query.
	again := processConfig(t, 3, 2)
	again.dir, again.store = "", cfg.store
	err = runDemo(ctx, again, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), name+" is not empty") {
		t.Errorf("demo into a store that holds a job: %v", err)
	}
	empty := srv.URL("nothing/")
	for _, cmd := range []string{"inspect", "verify"} {
		code, stdout, stderr := runCLI(cmd, "-store", empty)
		if code != 1 || !strings.Contains(stderr, "no checkpoint store at s3://"+srv.Bucket+"?prefix=nothing%2F") || strings.Contains(stderr, "endpoint") {
			t.Errorf("%s -store %s: status %d\n%s%s", cmd, empty, code, stdout, stderr)
		}
	}

	// Damage a segment of the restored job checkpoint: verify names it.
	var victim string
	for _, o := range res.Contents {
		if strings.HasPrefix(*o.Key, "demo/kg-00000-00042.") && strings.HasSuffix(*o.Key, ".cws") {
			victim = *o.Key
		}
	}
	if victim == "" {
		t.Fatal("no full snapshot of instance [0, 42] in the bucket")
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(victim), Body: strings.NewReader("damaged")}); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCLI("verify", "-store", cfg.store)
	if code != 1 || !strings.Contains(stdout, "damaged: "+strings.TrimPrefix(victim, "demo/kg-00000-00042.")) || !strings.Contains(stdout, "DOES NOT RESTORE") {
		t.Errorf("verify -store of a damaged store: status %d\n%s", code, stdout)
	}
}

// TestDemoProcesses_S3WrongSecret: the instances read the credentials
// from their environment; with a wrong secret they fail, and what they
// say names the store, never the secret.
func TestDemoProcesses_S3WrongSecret(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	const wrong = "not-the-secret-4a6f"
	start := instanceCommand
	t.Cleanup(func() { instanceCommand = start })
	instanceCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		cmd, err := start(ctx, args)
		if err == nil {
			cmd.Env = append(cmd.Environ(), "AWS_SECRET_ACCESS_KEY="+wrong)
		}
		return cmd, err
	}
	cfg := processConfig(t, 2, 3)
	cfg.dir, cfg.store = "", srv.URL("demo/")
	err := runDemo(context.Background(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "s3://"+srv.Bucket+"?prefix=demo%2F") || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("demo whose instances have a wrong secret: %v", err)
	}
	t.Log(err)
}
