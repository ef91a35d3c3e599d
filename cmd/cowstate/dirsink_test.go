package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cowstate/cowstate/statetable"
)

// TestDirSink_RecoverSettlesEarlierAttempts: after a crash, the instances
// of the next attempt (any key groups) commit what the earlier attempt
// prepared up to the restored checkpoint and abort the rest, each of them
// alike, never touching the new attempt's transactions; what was open at
// the crash is lost.
func TestDirSink_RecoverSettlesEarlierAttempts(t *testing.T) {
	dir := t.TempDir()
	open := func(attempt, first, last int) *dirSink {
		s, err := openDirSink(dir, attempt, statetable.KeyGroupRange{First: first, Last: last})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rec := func(user string) SessionResult { return SessionResult{User: user, Start: 1, End: 2, Count: 1, Sum: 1} }
	want := func(users ...string) digest {
		var d digest
		for _, u := range users {
			d.add(appendSession(nil, rec(u)))
		}
		return d
	}
	committed := func() digest {
		t.Helper()
		d, err := committedRecords(dir)
		must(err)
		return d
	}

	// Attempt 1: a prepares 10 and 20 and commits 10; b prepares 10 and 20
	// and commits nothing; both have an open transaction at the crash.
	a, b := open(1, 0, 3), open(1, 4, 7)
	a.Emit(rec("a1"))
	must(a.Prepare(10))
	a.Emit(rec("a2"))
	must(a.Prepare(20))
	must(a.Commit(10))
	a.Emit(rec("a-open"))
	b.Emit(rec("b1"))
	must(b.Prepare(10))
	b.Emit(rec("b2"))
	must(b.Prepare(20))
	b.Emit(rec("b-open"))
	if got := committed(); got != want("a1") {
		t.Fatalf("committed before the crash: %v, want %v", got, want("a1"))
	}

	// Attempt 2 restores checkpoint 10 into three instances. The first
	// recovers, prepares a transaction of its own; the others recover
	// after it, which must neither settle twice nor touch attempt 2's.
	c, d, e := open(2, 0, 2), open(2, 3, 5), open(2, 6, 7)
	must(c.Recover(10))
	c.Emit(rec("c1"))
	must(c.Prepare(20))
	must(d.Recover(10))
	must(e.Recover(10))
	if got := committed(); got != want("a1", "b1") {
		t.Fatalf("committed after the recovery: %v, want %v", got, want("a1", "b1"))
	}
	left, _ := filepath.Glob(filepath.Join(dir, preparedDir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != c.name(20) {
		t.Fatalf("prepared after the recovery: %v, want only %s", left, c.name(20))
	}
	d.Emit(rec("d1"))
	must(c.Finish())
	must(d.Finish())
	must(e.Finish())
	if got := committed(); got != want("a1", "b1", "c1", "d1") {
		t.Fatalf("committed at the end: %v, want %v", got, want("a1", "b1", "c1", "d1"))
	}
	if left, _ := os.ReadDir(filepath.Join(dir, preparedDir)); len(left) != 0 {
		t.Fatalf("prepared at the end: %v", left)
	}
}
