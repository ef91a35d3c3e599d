package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
)

// TestJob_StateTTL runs the job's per-user state on a clock the test
// moves: a user idle for the TTL counts from zero again, and the cleanup
// removes idle users without a read.
func TestJob_StateTTL(t *testing.T) {
	now := int64(0)
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 8, Clock: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	j, err := newSessionJob(b, 1000, time.Minute, func(SessionResult) {})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		if err := j.Process(Event{User: "u", Time: i, Amount: 1}); err != nil {
			t.Fatal(err)
		}
		if err := j.Process(Event{User: "idle", Time: i, Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	now = 59_999
	if err := j.Process(Event{User: "u", Time: 10, Amount: 1}); err != nil {
		t.Fatal(err)
	}
	now = 60_000 // "idle" was last written at 0
	if n, _ := j.count.Get("u"); n != 4 {
		t.Fatalf("count of a user active within the TTL: %d, want 4", n)
	}
	b.CleanupExpired(100)
	if j.count.Count() != 1 {
		t.Fatalf("%d users counted after the cleanup, want the active one", j.count.Count())
	}
	if err := j.Process(Event{User: "idle", Time: 20, Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.count.Get("idle"); n != 1 {
		t.Fatalf("count of a user back after the TTL: %d, want 1", n)
	}
}

func TestDemo_StateTTLFlag(t *testing.T) {
	code, _, stderr := runCLI("demo", "-state-ttl", "-1s")
	if code == 0 || !strings.Contains(stderr, "-state-ttl") {
		t.Fatalf("negative -state-ttl: exit %d, %q", code, stderr)
	}
}
