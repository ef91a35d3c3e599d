// Package storagetest checks an implementation of checkpoint.Storage: what
// the store's commit protocol needs of it, and a store working on it end
// to end. Run it from a test of the implementation:
//
//	func TestMyStorage(t *testing.T) {
//		storagetest.Run(t, func(t testing.TB) checkpoint.Storage { return openMine(t) })
//	}
//
// The checkpoint package runs it on DirStorage and MemStorage; module
// github.com/cowstate/cowstate/checkpoint/storeurl on its gocloud.dev
// bucket storage, in memory and on a real S3 server.
//
// # Caveats
//
//   - open is called once per sub-test and must return an empty storage
//     of its own (for example under a fresh prefix or directory); the
//     checks list every object.
//   - A failing check calls t.Fatal: call Run from the test's goroutine.
//   - Run takes about a second on memory; over a network storage it is
//     bounded by the round trips of a few hundred small objects.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/statetable"
)

// Run runs the checks on storages that open returns, each as a sub-test
// of t: "conformance" (objects, create-only commits, racing creators,
// aborts, invalid names) and "store" (checkpoints of a job of two
// instances, a rescale to three, a second owner fencing the first).
func Run(t *testing.T, open func(t testing.TB) checkpoint.Storage) {
	t.Run("conformance", func(t *testing.T) { conformance(t, open(t)) })
	t.Run("store", func(t *testing.T) { store(t, open(t)) })
}

var bg = context.Background()

// conformance: a committed object reads back whole; an uncommitted or
// aborted one does not exist; a create-only commit of a taken name fails
// with fs.ErrExist and leaves the object as it was, also when several
// writers race for one name; a missing object is fs.ErrNotExist; a name
// that would leave the namespace is ErrInvalid.
func conformance(t *testing.T, st checkpoint.Storage) {
	put := func(name, content string) error {
		w, err := st.Create(bg, name)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, content); err != nil {
			w.Abort()
			return err
		}
		return w.Commit()
	}
	read := func(name string) string {
		t.Helper()
		r, err := st.Open(bg, name)
		if err != nil {
			t.Fatalf("%s: open %s: %v", st, name, err)
		}
		defer r.Close()
		b := make([]byte, r.Size())
		if n, err := r.ReadAt(b, 0); n != len(b) {
			t.Fatalf("%s: read %s: %d of %d bytes: %v", st, name, n, len(b), err)
		}
		return string(b)
	}
	if err := put("a", "first"); err != nil {
		t.Fatal(err)
	}
	if err := put("a", "second"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("%s: second create of a: %v, want fs.ErrExist", st, err)
	}
	if got := read("a"); got != "first" {
		t.Fatalf("%s: a holds %q after a refused create", st, got)
	}
	r, err := st.Open(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 3)
	if n, err := r.ReadAt(part, 2); n != 3 || string(part) != "rst" || (err != nil && err != io.EOF) {
		t.Fatalf("%s: ranged read of a at 2: %q, %v", st, part[:n], err)
	}
	r.Close()
	w, err := st.Create(bg, "b")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "never")
	if names, _ := st.List(bg); slices.Contains(names, "b") {
		t.Fatalf("%s: an uncommitted object is listed: %v", st, names)
	}
	w.Abort()
	if _, err := st.Open(bg, "b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: open of an aborted object: %v, want fs.ErrNotExist", st, err)
	}
	if err := st.Remove(bg, "b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: remove of a missing object: %v, want fs.ErrNotExist", st, err)
	}
	for _, bad := range []string{"../escape", "a/b", "", ".."} {
		if _, err := st.Create(bg, bad); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Fatalf("%s: create of %q: %v, want checkpoint.ErrInvalid", st, bad, err)
		}
	}
	// Racing creators: exactly one wins, and the object is its.
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			if put("race", fmt.Sprint("writer ", i)) == nil {
				wins <- fmt.Sprint("writer ", i)
			}
		})
	}
	wg.Wait()
	close(wins)
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	if len(won) != 1 || read("race") != won[0] {
		t.Fatalf("%s: racing creates: winners %v, object holds %q", st, won, read("race"))
	}
	if err := put("c", "removed"); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(bg, "c"); err != nil {
		t.Fatalf("%s: remove of c: %v", st, err)
	}
	if names, err := st.List(bg); err != nil || !slices.Equal(names, []string{"a", "race"}) {
		t.Fatalf("%s: objects after the race, an abort and a remove: %v, %v; want [a race]", st, names, err)
	}
}

// store: a job of two instances checkpoints into st (a full checkpoint,
// then deltas) and restores into three, exactly; then a second owner of
// one instance's store fences the first, which can commit nothing more,
// and goes on from what was committed.
func store(t *testing.T, st checkpoint.Storage) {
	const maxPar = 16
	ref := testjob.New(t, maxPar, nil)
	opts := checkpoint.Options{AutoConfirm: true, Retention: checkpoint.Retention{KeepLast: 2},
		// Every key changes each round: let deltas stay deltas.
		Policy: checkpoint.Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}}
	ranges := func(n int) []statetable.KeyGroupRange {
		var rs []statetable.KeyGroupRange
		for i := range n {
			rs = append(rs, statetable.KeyGroupRange{First: i * maxPar / n, Last: (i+1)*maxPar/n - 1})
		}
		return rs
	}
	var jobs []*testjob.Job
	var stores []*checkpoint.Store
	for _, kgs := range ranges(2) {
		j := testjob.New(t, maxPar, &kgs)
		s, err := checkpoint.OpenInstance(bg, j.B, st, opts)
		if err != nil {
			t.Fatalf("%s: open instance %v: %v", st, kgs, err)
		}
		jobs, stores = append(jobs, j), append(stores, s)
	}
	for id := uint64(1); id <= 3; id++ {
		ref.Load(60, int(id))
		for i, j := range jobs {
			j.Load(60, int(id))
			cp, err := stores[i].Checkpoint(bg, id)
			if err == nil {
				err = cp.Wait()
			}
			if err != nil {
				t.Fatalf("%s: instance %d checkpoint %d: %v", st, i, id, err)
			}
		}
	}
	for i, s := range stores {
		cps := s.Checkpoints()
		if len(cps) == 0 {
			t.Fatalf("%s: instance %d lists no checkpoint after three", st, i)
		}
		if newest := cps[len(cps)-1]; newest.ID != 3 || newest.Kind != checkpoint.KindIncremental {
			t.Fatalf("%s: instance %d: newest checkpoint is %d, %s; want 3, incremental", st, i, newest.ID, newest.Kind)
		}
	}
	want := ref.Dump(t, nil)
	var got []string
	for _, kgs := range ranges(3) {
		j := testjob.New(t, maxPar, &kgs)
		if _, err := checkpoint.RestoreInstances(bg, j.B, st, 0, false); err != nil {
			t.Fatalf("%s: restore of key groups %v: %v", st, kgs, err)
		}
		got = append(got, j.Dump(t, nil)...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: 2 -> 3 instances restored %d lines, want %d", st, len(got), len(want))
	}

	// A second owner takes instance 0's store over.
	kgs := ranges(2)[0]
	b := testjob.New(t, maxPar, &kgs)
	sb, err := checkpoint.OpenInstance(bg, b.B, st, opts)
	if err != nil {
		t.Fatalf("%s: second owner: %v", st, err)
	}
	if cp, err := stores[0].Checkpoint(bg, 4); err == nil {
		err = cp.Wait()
		if !errors.Is(err, checkpoint.ErrFenced) {
			t.Fatalf("%s: checkpoint of the fenced owner: %v, want checkpoint.ErrFenced", st, err)
		}
	} else if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("%s: checkpoint of the fenced owner: %v, want checkpoint.ErrFenced", st, err)
	}
	if _, err := sb.Restore(bg, 0); err != nil {
		t.Fatalf("%s: second owner's restore: %v", st, err)
	}
	if !slices.Equal(b.Dump(t, nil), jobs[0].Dump(t, nil)) {
		t.Fatalf("%s: the second owner restored another state than the first committed", st)
	}
	b.Load(10, 99)
	cp, err := sb.Checkpoint(bg, 5)
	if err == nil {
		err = cp.Wait()
	}
	if err != nil {
		t.Fatalf("%s: second owner's checkpoint 5: %v", st, err)
	}
	for _, s := range stores {
		s.Close()
	}
	sb.Close()
}
