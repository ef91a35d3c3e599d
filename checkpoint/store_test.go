package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// open opens a store for j, failing the test on error. When the test ends
// the store is verified (Verify): a test leaves every store it opens
// intact unless it says it damages them (damagesStores).
func open(t testing.TB, j *testjob.Job, st Storage, opts Options) *Store {
	t.Helper()
	s, err := Open(bg, j.B, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	verifyAtCleanup(t, st)
	return s
}

// damaging holds the names of the tests whose stores are damaged on
// purpose (corrupted, faulty, removed or unanswering objects), with their
// subtests.
var damaging sync.Map

// damagesStores says that t and its subtests damage the stores they open
// on purpose, so that those are not verified at their end.
func damagesStores(t testing.TB) { damaging.Store(t.Name(), true) }

func damagedOnPurpose(t testing.TB) bool {
	found := false
	damaging.Range(func(k, _ any) bool {
		name := k.(string)
		found = t.Name() == name || strings.HasPrefix(t.Name(), name+"/")
		return !found
	})
	return found
}

// verifyAtCleanup verifies st when t ends, unless t failed or damages its
// stores; the store's own goroutines have ended by then (the tests close
// their stores before they return).
func verifyAtCleanup(t testing.TB, st Storage) {
	t.Cleanup(func() {
		if damagedOnPurpose(t) || t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		r, err := Verify(ctx, st)
		switch {
		case errors.Is(err, ErrNoCheckpoint):
		case err != nil:
			t.Errorf("verify %s at the end of the test: %v", st, err)
		case !r.Intact():
			t.Errorf("the test left %s damaged: %v", st, r.Damage)
		}
	})
}

// checkpoint takes checkpoint id of j into s, waits for it and returns the
// dump frozen at its capture.
func checkpoint(t testing.TB, j *testjob.Job, s *Store, id uint64) (*Checkpoint, []string, error) {
	t.Helper()
	cp, err := s.Checkpoint(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	want := j.Dump(t, nil) // no write since the capture: the same version
	return cp, want, cp.Wait()
}

// restoreStore restores checkpoint id (0: newest) of st, read-only, into a
// fresh job owning kgs (nil: all) and returns it with the manifest.
func restoreStore(t testing.TB, st Storage, id uint64, kgs *statetable.KeyGroupRange) (*testjob.Job, *Manifest, error) {
	t.Helper()
	j := testjob.New(t, 16, kgs)
	ms, err := RestoreFrom(bg, j.B, Source{Storage: st, ID: id})
	if err != nil {
		return j, nil, err
	}
	return j, ms[0], nil
}

func TestStore_FullThenIncremental(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(400, 1)
	s := open(t, j, st, Options{Retention: Retention{KeepLast: 10}})
	var wants [][]string
	var sizes []int64
	for id := uint64(1); id <= 12; id++ {
		j.Value.Put(fmt.Sprint("key-", id), "w0", int64(id))
		j.List.Add("key-7", "w1", int64(id))
		j.Timers.RegisterEventTime(fmt.Sprint("new-", id), "w", int64(id))
		cp, want, err := checkpoint(t, j, s, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Confirm(id); err != nil {
			t.Fatal(err)
		}
		m := cp.Manifest()
		wantKind := KindIncremental
		if id == 1 {
			wantKind = KindFull
		}
		if m.Kind != wantKind {
			t.Fatalf("checkpoint %d is %s, want %s", id, m.Kind, wantKind)
		}
		if len(m.Segments) > 1+8 {
			t.Fatalf("checkpoint %d: chain of %d segments, policy says at most 8 deltas", id, len(m.Segments))
		}
		if m.Committed.IsZero() || m.Epoch != 1 {
			t.Fatalf("checkpoint %d: committed %v by epoch %d", id, m.Committed, m.Epoch)
		}
		wants = append(wants, want)
		sizes = append(sizes, m.Segments[len(m.Segments)-1].Size)
	}
	if sizes[1]*20 > sizes[0] {
		t.Fatalf("delta of 3 changes is %d bytes, the full %d", sizes[1], sizes[0])
	}
	for _, id := range []uint64{0, 3, 9, 12} {
		got, m, err := restoreStore(t, st, id, nil)
		if err != nil {
			t.Fatalf("restore %d: %v", id, err)
		}
		if !slices.Equal(got.Dump(t, nil), wants[m.ID-1]) {
			t.Fatalf("restore of checkpoint %d differs", m.ID)
		}
	}
	// Rescale: two backends splitting the key groups restore the union.
	var union []string
	for _, kgs := range []statetable.KeyGroupRange{{First: 0, Last: 4}, {First: 5, Last: 15}} {
		got, _, err := restoreStore(t, st, 12, &kgs)
		if err != nil {
			t.Fatal(err)
		}
		union = append(union, got.Dump(t, nil)...)
	}
	slices.Sort(union)
	if !slices.Equal(union, wants[11]) {
		t.Fatal("rescaled restore differs")
	}
	// Scale-in: the two halves' checkpoints, from two stores, into one.
	halves := []Source{}
	for i, kgs := range []statetable.KeyGroupRange{{First: 0, Last: 6}, {First: 7, Last: 15}} {
		h := testjob.New(t, 16, &kgs)
		hs := open(t, h, Memory(), Options{})
		if _, err := RestoreFrom(bg, h.B, Source{Storage: st, ID: 12}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := checkpoint(t, h, hs, uint64(20+i)); err != nil {
			t.Fatal(err)
		}
		halves = append(halves, Source{Storage: hs.Storage()})
	}
	one := testjob.New(t, 16, nil)
	if _, err := RestoreFrom(bg, one.B, halves...); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one.Dump(t, nil), wants[11]) {
		t.Fatal("scale-in restore differs")
	}
	// Overlapping ranges do not merge.
	overlap := testjob.New(t, 16, nil)
	if _, err := RestoreFrom(bg, overlap.B, Source{Storage: st}, Source{Storage: st}); !errors.Is(err, ErrMismatch) || !overlap.B.Empty() {
		t.Fatalf("restore of two overlapping checkpoints: %v", err)
	}
}

// TestStore_RestoredBaseContinuesChain: after a restore the next
// checkpoint is a delta from the restored one.
func TestStore_RestoredBaseContinuesChain(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(200, 1)
	s := open(t, j, st, Options{})
	checkpoint(t, j, s, 1)
	s.Confirm(1)
	j2 := testjob.New(t, 16, nil)
	s2 := open(t, j2, st, Options{})
	if _, err := s2.Restore(bg, 0); err != nil {
		t.Fatal(err)
	}
	j2.Value.Put("fresh", "w", 1)
	cp, want, err := checkpoint(t, j2, s2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if k := cp.Manifest().Kind; k != KindIncremental {
		t.Fatalf("checkpoint after restore is %s", k)
	}
	if cp.Manifest().Epoch != 2 {
		t.Fatalf("second owner committed with epoch %d", cp.Manifest().Epoch)
	}
	got, _, err := restoreStore(t, st, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Dump(t, nil), want) {
		t.Fatal("restore differs")
	}
}

// onlyReferenced checks that every object of st is a manifest or a segment
// the newest manifest references, and that every referenced segment exists.
func onlyReferenced(t testing.TB, st Storage) {
	t.Helper()
	names, _ := st.List(bg)
	l, err := Inspect(bg, st)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]bool{}
	for _, m := range append(l.Checkpoints, l.Savepoints...) {
		for _, s := range m.Segments {
			ref[s.Name] = true
			if !slices.Contains(names, s.Name) {
				t.Fatalf("%s %d lost its segment %s", m.Kind, m.ID, s.Name)
			}
		}
	}
	for _, n := range names {
		if _, ok := manifestSeq(n); !ok && !ref[n] {
			t.Fatalf("leftover %s after cleanup (objects %v)", n, names)
		}
	}
}

// TestStore_FaultInjection fails, or crashes, the storage at every
// operation of a checkpoint (a merge included) and of the cleanup after
// it. After a crash, a restore gives the last committed checkpoint
// exactly, and a new owner's cleanup leaves only referenced objects; after
// a plain failure, the store goes on working.
func TestStore_FaultInjection(t *testing.T) {
	for name, storage := range storages {
		t.Run(name, func(t *testing.T) { faultInjection(t, storage) })
	}
}

func faultInjection(t *testing.T, storage func(testing.TB) Storage) {
	damagesStores(t)
	scenario := func(t *testing.T, faultAt int, crash bool) (ops int) {
		st := faulty(storage(t))
		j := testjob.New(t, 16, nil)
		j.Load(100, 1)
		s := open(t, j, st, Options{Retention: Retention{KeepLast: 1},
			Policy: Policy{MaxChainLength: 1, MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1}}) // checkpoint 3 merges the chain
		wants := map[uint64][]string{}
		for id := uint64(1); id <= 2; id++ {
			_, want, err := checkpoint(t, j, s, id)
			if err != nil {
				t.Fatal(err)
			}
			wants[id] = want
			if err := s.Confirm(id); err != nil {
				t.Fatal(err)
			}
			j.Load(30+int(id), int(id)+1)
		}
		start := st.count()
		if faultAt > 0 {
			st.failAt(faultAt, crash)
		}
		_, want, err3 := checkpoint(t, j, s, 3)
		wants[3] = want
		committed := err3 == nil
		if committed {
			s.Confirm(3)
		}
		ops = st.count() - start
		if faultAt == 0 {
			return ops
		}
		st.disarm()
		if !crash {
			// The store goes on: a later checkpoint commits and restores.
			j.Value.Put("after", "w", 1)
			_, want4, err := checkpoint(t, j, s, 4)
			if err != nil {
				t.Fatalf("fault at %d, then checkpoint 4: %v", faultAt, err)
			}
			if err := s.Confirm(4); err != nil {
				t.Fatalf("fault at %d, then confirm 4: %v", faultAt, err)
			}
			got, m, err := restoreStore(t, st, 0, nil)
			if err != nil || m.ID != 4 || !slices.Equal(got.Dump(t, nil), want4) {
				t.Fatalf("fault at %d: restore after recovery: %v", faultAt, err)
			}
			return ops
		}
		image := st.afterCrash()
		got := testjob.New(t, 16, nil)
		s2 := open(t, got, image, Options{})
		m, err := s2.Restore(bg, 0)
		if err != nil {
			t.Fatalf("crash at %d: restore: %v", faultAt, err)
		}
		wantID := uint64(2)
		if committed {
			wantID = 3
		}
		if m.ID != wantID && !(m.ID == 3 && !committed) { // a commit that failed after its manifest was written
			t.Fatalf("crash at %d (checkpoint 3 err %v): restored checkpoint %d, want %d", faultAt, err3, m.ID, wantID)
		}
		if !slices.Equal(got.Dump(t, nil), wants[m.ID]) {
			t.Fatalf("crash at %d: checkpoint %d restores to another state", faultAt, m.ID)
		}
		// The new owner's next checkpoint cleans up the leftovers.
		if _, _, err := checkpoint(t, got, s2, 10); err != nil {
			t.Fatal(err)
		}
		onlyReferenced(t, image)
		return ops
	}
	total := scenario(t, 0, false)
	if total < 5 {
		t.Fatalf("checkpoint and confirm took only %d storage operations", total)
	}
	for _, crash := range []bool{false, true} {
		for at := 1; at <= total; at++ {
			scenario(t, at, crash)
		}
	}
}

// TestStore_TwoOwnersRacing: a second store opened on the same storage
// while the first is checkpointing fences the first: whatever the first
// commits before the takeover stays restorable, the first never commits
// after it (ErrFenced), and the second goes on from what was committed.
// Faults at every operation of the takeover do not change that.
func TestStore_TwoOwnersRacing(t *testing.T) {
	for name, storage := range storages {
		t.Run(name, func(t *testing.T) { twoOwnersRacing(t, storage) })
	}
}

func twoOwnersRacing(t *testing.T, storage func(testing.TB) Storage) {
	for at := 0; at <= 12; at++ {
		st := faulty(storage(t))
		a := testjob.New(t, 16, nil)
		a.Load(100, 1)
		sa := open(t, a, st, Options{Retention: Retention{KeepLast: 2}})
		frozen := map[uint64][]string{}
		for id := uint64(1); id <= 3; id++ {
			_, want, err := checkpoint(t, a, sa, id)
			if err != nil {
				t.Fatal(err)
			}
			frozen[id] = want
			sa.Confirm(id)
			a.Load(10, int(id)+1)
		}
		// A's checkpoint 4 is in flight while B takes over.
		cp4, err := sa.Checkpoint(bg, 4)
		if err != nil {
			t.Fatal(err)
		}
		frozen[4] = a.Dump(t, nil)
		b := testjob.New(t, 16, nil)
		if at > 0 {
			st.failAt(at, false)
		}
		sb, errOpen := Open(bg, b.B, st, Options{})
		st.disarm()
		err4 := cp4.Wait()
		if errOpen != nil {
			// The takeover failed: A is still the owner, or fenced by a
			// takeover whose answer was lost; B opens on a second try.
			sb = open(t, b, st, Options{})
		}
		// After B's takeover A can commit nothing, now or later.
		for id := uint64(5); id <= 6; id++ {
			cp, err := sa.Checkpoint(bg, id)
			if err == nil {
				err = cp.Wait()
			}
			if !errors.Is(err, ErrFenced) {
				t.Fatalf("fault at %d: checkpoint %d of the fenced owner: %v", at, id, err)
			}
		}
		if err := sa.Cleanup(bg); !errors.Is(err, ErrFenced) {
			t.Fatalf("fault at %d: cleanup of the fenced owner: %v", at, err)
		}
		// Nothing committed is lost: every checkpoint B sees restores to
		// the state A froze, and B sees 4 if A's commit succeeded.
		cps := sb.Checkpoints()
		if err4 == nil && cps[len(cps)-1].ID != 4 {
			t.Fatalf("fault at %d: A committed checkpoint 4, B's newest is %d", at, cps[len(cps)-1].ID)
		}
		for _, m := range cps {
			got, _, err := restoreStore(t, st, m.ID, nil)
			if err != nil || !slices.Equal(got.Dump(t, nil), frozen[m.ID]) {
				t.Fatalf("fault at %d: checkpoint %d after the takeover: %v", at, m.ID, err)
			}
		}
		// B goes on from the newest, with ids above A's.
		if _, err := sb.Restore(bg, 0); err != nil {
			t.Fatal(err)
		}
		if cp, err := sb.Checkpoint(bg, 4); err == nil {
			if err4 == nil {
				t.Fatalf("fault at %d: B reused checkpoint id 4", at)
			}
			cp.Wait()
		}
		if _, _, err := checkpoint(t, b, sb, 7); err != nil {
			t.Fatalf("fault at %d: B's first checkpoint: %v", at, err)
		}
		onlyReferenced(t, st)
		sa.Close()
		sb.Close()
	}
}

// TestStore_SameSizeOtherContent: a segment replaced by one of the same
// size (another writer's, or rewritten) or a manifest whose checksum of a
// segment was rewritten never restores silently.
func TestStore_SameSizeOtherContent(t *testing.T) {
	damagesStores(t)
	st := Memory()
	a := testjob.New(t, 16, nil)
	a.Load(200, 1)
	sa := open(t, a, st, Options{Retention: Retention{KeepLast: 5},
		Policy: Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}})
	for id := uint64(1); id <= 5; id++ {
		if id == 3 {
			a.Load(200, 7) // checkpoint 3 is full again, and kept as a base
			sa.SetPolicy(Policy{AlwaysFull: true, MaxChangeShare: 1})
		}
		if _, _, err := checkpoint(t, a, sa, id); err != nil {
			t.Fatal(err)
		}
		sa.Confirm(id)
		sa.SetPolicy(Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100})
		a.Value.Put(fmt.Sprint("k", id), "n", int64(id))
	}
	m5 := sa.Checkpoints()[4]
	if m5.Kind != KindIncremental || m5.Segments[0].Target != 3 {
		t.Fatalf("checkpoint 5 is %s on %v", m5.Kind, m5.Segments)
	}
	// Process B holds the same keys with other values and tries to write
	// checkpoint 3: refused, the id is not above 5.
	b := testjob.New(t, 16, nil)
	b.Load(200, 9)
	sb := open(t, b, st, Options{})
	if _, err := sb.Checkpoint(bg, 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("checkpoint 3 by a second owner: %v", err)
	}
	// B's full snapshot of the same keys with other values (fixed-width
	// codecs: the same size) put in place of 3's.
	b2 := testjob.New(t, 16, nil)
	b2.Load(200, 1)
	b2.Value.Put("k1", "n", 100)
	b2.Value.Put("k2", "n", 200)
	b2.Load(200, 8)
	snap := b2.B.Snapshot()
	var buf bytes.Buffer
	if err := cowstate.WriteSnapshot(bg, &buf, snap, nil); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	other := buf.Bytes()
	if int64(len(other)) != m5.Segments[0].Size {
		t.Fatalf("B's snapshot has %d bytes, 3's %d", len(other), m5.Segments[0].Size)
	}
	full := m5.Segments[0].Name
	orig := st.get(full)
	st.put(full, other)
	_, _, err := restoreStore(t, st, 5, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), full) || !strings.Contains(err.Error(), "xxhash64") {
		t.Fatalf("restore of 5 with a same-size full segment: %v", err)
	}
	half := statetable.KeyGroupRange{First: 0, Last: 7}
	if _, _, err := restoreStore(t, st, 5, &half); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "skeleton") {
		t.Fatalf("ranged restore of 5 with a same-size full segment: %v", err)
	}
	rep, err := Verify(bg, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{3, 4, 5} { // every checkpoint sharing it
		if rep.Checkpoints[id-1].Restores {
			t.Fatalf("verify says checkpoint %d restores: %+v", id, rep)
		}
	}
	if !rep.Checkpoints[0].Restores || !rep.Checkpoints[1].Restores {
		t.Fatalf("verify: %+v", rep.Checkpoints)
	}
	st.put(full, orig)
	if _, _, err := restoreStore(t, st, 5, nil); err != nil {
		t.Fatal(err)
	}
	// A manifest whose checksum of a segment was rewritten (and the
	// manifest's own checksum with it).
	l, _ := Inspect(bg, st)
	seq, _ := manifestSeq(l.Manifest)
	sm, err := readManifest(bg, st, l.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	sm.Checkpoints[4].Segments[2].Sum = "0123456789abcdef"
	sm.Seq = seq + 1
	st.put(manifestName(seq+1), sm.encode())
	if _, _, err := restoreStore(t, st, 5, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore with a rewritten checksum: %v", err)
	}
	if rep, _ := Verify(bg, st); rep.Intact() || rep.Checkpoints[4].Restores {
		t.Fatalf("verify of a rewritten checksum: %+v", rep)
	}
}

// TestStore_RandomHistories: random writes, checkpoints (confirmed, failed
// by the storage, aborted, left pending), retention changes, savepoints,
// restores and owner changes. Every restore equals the state frozen at
// that checkpoint, and no retained checkpoint or savepoint ever loses an
// object.
func TestStore_RandomHistories(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kind := rapid.SampledFrom([]string{"mem", "dir"}).Draw(rt, "storage")
		st := faulty(storages[kind](t))
		j := testjob.New(t, 16, nil)
		policy := Policy{MaxChainLength: rapid.IntRange(1, 4).Draw(rt, "max chain"),
			MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1} // small states: deltas must not turn full
		if rapid.Bool().Draw(rt, "default shares") {
			policy.MaxDeltaShare, policy.MaxChainShare, policy.MaxChangeShare = 0, 0, 0
		}
		auto := rapid.Bool().Draw(rt, "auto confirm")
		s := open(t, j, st, Options{Policy: policy, AutoConfirm: auto})
		frozen := map[uint64][]string{}     // checkpoints
		savepoints := map[uint64][]string{} // savepoints
		aborted := map[uint64]bool{}
		retention := Retention{KeepLast: 1}
		confirmedMax := uint64(0)
		id, spID := uint64(0), uint64(0)
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			switch rapid.IntRange(0, 10).Draw(rt, "action") {
			case 0, 1, 2:
				for range rapid.IntRange(1, 10).Draw(rt, "writes") {
					j.RandomStep(rt)
				}
			case 3, 4:
				id++
				fail := rapid.IntRange(0, 4).Draw(rt, "fail") == 0
				if fail {
					st.failAt(rapid.IntRange(1, 6).Draw(rt, "fault op"), false)
				}
				cp, err := s.Checkpoint(bg, id)
				if errors.Is(err, ErrTooManyPending) {
					st.disarm()
					continue
				}
				if err != nil {
					rt.Fatalf("checkpoint %d: %v", id, err)
				}
				// A checkpoint whose commit fails after its manifest was
				// written is committed though it reports an error (the
				// store learns so at its next commit): either way a
				// restore of it gives the state captured.
				frozen[id] = j.Dump(t, nil)
				err = cp.Wait()
				st.disarm()
				if err != nil {
					if !fail {
						rt.Fatalf("checkpoint %d: %v", id, err)
					}
					continue
				}
				if auto {
					s.Poll() // confirms it: durable, the newest
					confirmedMax = id
					continue
				}
				switch rapid.IntRange(0, 2).Draw(rt, "then") {
				case 0:
					if err := s.Confirm(id); err != nil {
						rt.Fatalf("confirm %d: %v", id, err)
					}
					confirmedMax = id
				case 1:
					if err := s.Abort(bg, id); err != nil {
						rt.Fatalf("abort %d: %v", id, err)
					}
					aborted[id] = true
				}
			case 5:
				spID++
				sp, err := s.Savepoint(bg, spID)
				if err != nil {
					rt.Fatal(err)
				}
				savepoints[spID] = j.Dump(t, nil)
				if err := sp.Wait(); err != nil {
					rt.Fatal(err)
				}
			case 6:
				retention = Retention{KeepLast: rapid.IntRange(1, 3).Draw(rt, "keep")}
				if cps := s.Checkpoints(); len(cps) > 0 && rapid.Bool().Draw(rt, "pin") {
					retention.Pinned = []uint64{rapid.SampledFrom(cps).Draw(rt, "pinned").ID}
				}
				if err := s.SetRetention(bg, retention); errors.Is(err, ErrNoCheckpoint) {
					retention.Pinned = nil // a commit the store had not heard of dropped it
				} else if err != nil {
					rt.Fatal(err)
				}
			case 7, 8:
				// Restore a retained checkpoint into a fresh backend.
				l, err := Inspect(bg, st)
				if err != nil {
					rt.Fatal(err)
				}
				all := append(slices.Clone(l.Checkpoints), l.Savepoints...)
				if len(all) == 0 {
					continue
				}
				m := rapid.SampledFrom(all).Draw(rt, "restore")
				j2 := testjob.New(t, 16, nil)
				want := frozen[m.ID]
				if m.Kind == KindSavepoint {
					want = savepoints[m.ID]
				} else if aborted[m.ID] {
					rt.Fatalf("aborted checkpoint %d is listed", m.ID)
				}
				if _, err := RestoreFrom(bg, j2.B, Source{Storage: st, ID: m.ID, Savepoint: m.Kind == KindSavepoint}); err != nil {
					rt.Fatalf("restore %s %d: %v", m.Kind, m.ID, err)
				}
				if got := j2.Dump(t, nil); !slices.Equal(got, want) {
					rt.Fatalf("restore of %s %d differs:\n got %q\nwant %q", m.Kind, m.ID, got, want)
				}
			case 9:
				if err := s.Cleanup(bg); err != nil {
					rt.Fatal(err)
				}
			case 10:
				// The job restarts: a new owner restores the newest
				// checkpoint (or starts fresh) and goes on.
				s.Close()
				j = testjob.New(t, 16, nil)
				s = open(t, j, st, Options{Policy: policy, AutoConfirm: auto, Retention: retention})
				if m, err := s.Restore(bg, 0); err == nil {
					if !slices.Equal(j.Dump(t, nil), frozen[m.ID]) {
						rt.Fatalf("restart: checkpoint %d differs", m.ID)
					}
					confirmedMax = m.ID
				} else if !errors.Is(err, ErrNoCheckpoint) {
					rt.Fatalf("restart: %v", err)
				}
			}
			// Retained checkpoints and every savepoint keep their objects.
			l, err := Inspect(bg, st)
			if err != nil {
				rt.Fatal(err)
			}
			listed := map[string]bool{}
			for _, m := range append(l.Checkpoints, l.Savepoints...) {
				listed[fmt.Sprint(m.Kind == KindSavepoint, m.ID)] = true
				for _, seg := range m.Segments {
					if _, err := st.Open(bg, seg.Name); err != nil {
						rt.Fatalf("%s %d lost %s", m.Kind, m.ID, seg.Name)
					}
				}
			}
			for sp := range savepoints {
				if !listed[fmt.Sprint(true, sp)] {
					rt.Fatalf("savepoint %d is gone", sp)
				}
			}
			for _, p := range retention.Pinned {
				if frozen[p] != nil && !aborted[p] && !listed[fmt.Sprint(false, p)] {
					rt.Fatalf("pinned checkpoint %d is gone", p)
				}
			}
			if confirmedMax > 0 && !aborted[confirmedMax] && !listed[fmt.Sprint(false, confirmedMax)] {
				rt.Fatalf("last confirmed checkpoint %d is gone", confirmedMax)
			}
		}
		s.Close()
		if n := j.B.LiveSnapshots(); n != 0 {
			rt.Fatalf("%d snapshots live after Close", n)
		}
	})
}

// TestStore_WhileMutating takes checkpoints without waiting for them while
// the writer goes on (run with -race): diffs and writes run on their own
// goroutines against live captures; each checkpoint restores to the state
// frozen at its capture.
func TestStore_WhileMutating(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(300, 1)
	s := open(t, j, st, Options{Retention: Retention{KeepLast: 100},
		Policy: Policy{MaxChainLength: 3, MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1}})
	wants := map[uint64][]string{}
	var inflight []*Checkpoint
	for id := uint64(1); id <= 12; id++ {
		cp, err := s.Checkpoint(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		wants[id] = j.Dump(t, nil)
		inflight = append(inflight, cp)
		for i := range 200 {
			k := fmt.Sprint("key-", (int(id)*37+i)%400)
			j.Value.Put(k, "w0", int64(i))
			j.List.Add(k, "w1", int64(i))
			j.Map.Put(k, "w2", fmt.Sprint(i%9), int64(id))
			j.Timers.RegisterEventTime(k, "w", int64(i))
		}
		// Confirm the oldest finished ones as they complete.
		for len(inflight) > 2 {
			if err := inflight[0].Wait(); err != nil {
				t.Fatal(err)
			}
			if err := s.Confirm(inflight[0].ID()); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatal(err)
			}
			inflight = inflight[1:]
		}
	}
	for _, cp := range inflight {
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	incremental := 0
	for _, m := range s.Checkpoints() {
		if m.Kind == KindIncremental {
			incremental++
		}
		got, _, err := restoreStore(t, st, m.ID, nil)
		if err != nil {
			t.Fatalf("restore %d: %v", m.ID, err)
		}
		if !slices.Equal(got.Dump(t, nil), wants[m.ID]) {
			t.Fatalf("checkpoint %d (%s) restores to another state", m.ID, m.Kind)
		}
	}
	if incremental == 0 {
		t.Fatal("no incremental checkpoint was taken")
	}
}

// TestMergeCount: the chain never exceeds the length limit, its deltas
// stay ordered big to small, and merges rewrite each byte a few times, not
// once per checkpoint.
func TestMergeCount(t *testing.T) {
	var chain []Segment
	var rewritten int64
	for i := range 200 {
		k := mergeCount(chain, 10, 5)
		var merged int64 = 10
		for _, s := range chain[len(chain)-k:] {
			merged += s.Size
		}
		if k > 0 {
			rewritten += merged
		}
		chain = append(chain[:len(chain)-k], Segment{Size: merged})
		if len(chain) > 5 {
			t.Fatalf("checkpoint %d: chain of %d deltas", i, len(chain))
		}
		for j := 1; j < len(chain)-1; j++ {
			if chain[j-1].Size < chain[j].Size {
				t.Fatalf("checkpoint %d: sizes %v are not ordered", i, chain)
			}
		}
	}
	if rewritten > 6*200*10 {
		t.Fatalf("merges rewrote %d bytes for 2000 written", rewritten)
	}
}

// TestStore_PolicyChangeShare: many changes make a full checkpoint, few an
// incremental one.
// TestStore_PolicyChangeShare: a checkpoint changing more than
// MaxChangeShare (10%) of the entries is full, and so is the one after it,
// whose base was not kept; then checkpoints are incremental again.
func TestStore_PolicyChangeShare(t *testing.T) {
	j := testjob.New(t, 16, nil)
	for i := range 2000 {
		j.Value.Put(fmt.Sprint("k", i), "n", 1)
	}
	s := open(t, j, Memory(), Options{})
	kinds := ""
	// 15%, 0.1%, 0.1%, 12.5%, 0.05%, 0.05% of 2000
	for id, changes := range []int{0, 300, 2, 2, 250, 1, 1} {
		for i := range changes {
			j.Value.Put(fmt.Sprint("k", i), "n", int64(id+10))
		}
		cp, _, err := checkpoint(t, j, s, uint64(id+1))
		if err != nil {
			t.Fatal(err)
		}
		s.Confirm(cp.ID())
		kinds += string(cp.Manifest().Kind)[:1]
	}
	if kinds != "fffiffi" {
		t.Fatalf("kinds %s, want fffiffi", kinds)
	}
}

// TestStore_NoBaseWhileChangesStayHigh: a checkpoint after an interval
// that changed more than MaxChangeShare (by the backend's count of
// distinct writes) is full and its snapshot is not kept, so the writer
// runs with no capture live until the next one; after a calm interval
// the checkpoint is kept, and the next ones are incremental. Every
// checkpoint restores to what was captured.
func TestStore_NoBaseWhileChangesStayHigh(t *testing.T) {
	st, j, s := thousandKeys(t)
	kinds, kept, written := "", "", ""
	dumps := map[uint64][]string{}
	for id := uint64(1); id <= 17; id++ {
		changes := 500 // 50% of the entries
		if id >= 12 && id != 15 {
			changes = 3
		}
		for i := range changes {
			j.Value.Put(fmt.Sprint("k", (int(id)*37+i)%1000), "n", int64(id))
		}
		cp, want, err := checkpoint(t, j, s, id)
		if err != nil {
			t.Fatal(err)
		}
		dumps[id] = want
		written += fmt.Sprint(j.B.LiveSnapshots())
		s.Confirm(id)
		kinds += string(cp.Manifest().Kind)[:1]
		switch n := j.B.LiveSnapshots(); n {
		case 0:
			kept += "-"
		case 1:
			kept += "k"
		default:
			t.Fatalf("checkpoint %d: %d snapshots live after its confirm", id, n)
		}
	}
	// Changes high up to 11 and at 15: full, not kept (15's base released
	// as it is taken); 12 and 16 follow calm intervals: full with no base,
	// and kept.
	if wantKinds, wantKept := "ffffffffffffiiffi", "-----------kkk-kk"; kinds != wantKinds || kept != wantKept {
		t.Fatalf("kinds %s kept %s, want %s and %s", kinds, kept, wantKinds, wantKept)
	}
	// Snapshots live once each checkpoint is written, before its confirm:
	// its own and its base's; none when it is not to be kept, released as
	// its write read it.
	if want := "00000000000122012"; written != want {
		t.Fatalf("snapshots live after each write: %s, want %s", written, want)
	}
	restoresAsCaptured(t, st, dumps, 3, 12, 14, 15, 17)
}

// thousandKeys returns a store, keeping 40 checkpoints, of a job with
// 1000 value entries.
func thousandKeys(t *testing.T) (Storage, *testjob.Job, *Store) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	for i := range 1000 {
		j.Value.Put(fmt.Sprint("k", i), "n", 0)
	}
	return st, j, open(t, j, st, Options{Retention: Retention{KeepLast: 40}})
}

// restoresAsCaptured checks that each checkpoint of ids in st restores to
// the dump taken at its capture.
func restoresAsCaptured(t *testing.T, st Storage, dumps map[uint64][]string, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		r, _, err := restoreStore(t, st, id, nil)
		if err != nil {
			t.Fatalf("restore of %d: %v", id, err)
		}
		if got := r.Dump(t, nil); !slices.Equal(got, dumps[id]) {
			t.Fatalf("checkpoint %d restored %d entries, differing from the %d captured", id, len(got), len(dumps[id]))
		}
	}
}

func FuzzManifest(f *testing.F) {
	sm := &storeManifest{Format: manifestFormat, Seq: 3, Epoch: 2, Writer: "w", LastCheckpoint: 7, LastSavepoint: 1,
		Checkpoints: []*Manifest{{ID: 7, Kind: KindIncremental, MaxParallelism: 128,
			KeyGroups: statetable.KeyGroupRange{First: 0, Last: 127},
			Segments:  []Segment{{Name: fullName(1, 5), Target: 5, Size: 10, Sum: "0123456789abcdef"}, {Name: deltaName(2, 5, 7), Delta: true, Base: 5, Target: 7, Size: 3, Sum: "0123456789abcdef"}},
			States:    map[string]int{"count": 3}, UserMeta: []byte("offset")}},
		Savepoints: []*Manifest{{ID: 1, Kind: KindSavepoint, MaxParallelism: 4, KeyGroups: statetable.KeyGroupRange{First: 0, Last: 3},
			Segments: []Segment{{Name: savepointName(1, 1), Target: 1, Size: 10, Sum: "0123456789abcdef"}}}},
	}
	f.Add(sm.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(manifestName(3), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not matching ErrCorrupt: %v", err)
			}
			return
		}
		again, err := decodeManifest(manifestName(3), m.encode())
		if err != nil || again.Seq != m.Seq || len(again.Checkpoints) != len(m.Checkpoints) {
			t.Fatalf("re-encoded manifest: %v", err)
		}
	})
}

// TestStore_RestoreSavepoint: a new owner restores a savepoint; the next
// checkpoint is full (a savepoint is never a base) and ids go on above the
// store's.
func TestStore_RestoreSavepoint(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(100, 1)
	s := open(t, j, st, Options{AutoConfirm: true})
	checkpoint(t, j, s, 1)
	sp, _ := s.Savepoint(bg, 7)
	want := j.Dump(t, nil)
	if err := sp.Wait(); err != nil {
		t.Fatal(err)
	}
	j2 := testjob.New(t, 16, nil)
	s2 := open(t, j2, st, Options{AutoConfirm: true})
	m, err := s2.RestoreSavepoint(bg, 0)
	if err != nil || m.ID != 7 || !slices.Equal(j2.Dump(t, nil), want) {
		t.Fatalf("restore of the newest savepoint: %v %v", m, err)
	}
	cp, _, err := checkpoint(t, j2, s2, 2)
	if err != nil || cp.Manifest().Kind != KindFull {
		t.Fatalf("checkpoint after a savepoint restore: %v %v", cp.Manifest(), err)
	}
	if _, err := s2.RestoreSavepoint(bg, 8); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("restore of a missing savepoint: %v", err)
	}
}

// TestStore_FullReleasedAsWrittenRestoresItsCapture: checkpoints taken
// while changes stay high are full and not kept, and their snapshot is
// released as the write goes (the writer then updates in place what the
// write has passed). The job keeps writing during every write, and each
// checkpoint restores to exactly what its capture froze. Run with -race.
func TestStore_FullReleasedAsWrittenRestoresItsCapture(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	const n = 20000
	counts, err := cowstate.Value[int64, int64](j.B, "counts")
	if err != nil {
		t.Fatal(err)
	}
	model := map[int64]int64{}
	for k := range int64(n) {
		counts.Put(k, 0)
		model[k] = 0
	}
	j.Load(1000, 1)
	s := open(t, j, st, Options{Retention: Retention{KeepLast: 30}})
	frozen := map[uint64]map[int64]int64{}
	dumps := map[uint64][]string{}
	keys := make([]int64, 512)
	round := 0
	write := func() {
		round++
		for i := range keys {
			keys[i] = int64((round*7919 + i*104729) % n)
		}
		if err := counts.UpdateEach(keys, func(i int, old int64) int64 { return old + int64(i) + 1 }); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			model[k] += int64(i) + 1
		}
		j.Load(100, round)
	}
	released := 0
	for id := uint64(1); id <= 12; id++ {
		for range 30 { // more than half the entries change: no base kept
			write()
		}
		// What the checkpoint captures: nothing is written in between.
		dumps[id], frozen[id] = j.Dump(t, nil), maps.Clone(model)
		cp, err := s.Checkpoint(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			select {
			case <-cp.Done():
				done = true
			default:
				write() // while the checkpoint is written
			}
		}
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
		if cp.releaseWhenRead {
			released++
		}
		s.Confirm(id)
	}
	if released < 5 {
		t.Fatalf("%d of 12 checkpoints released their snapshot as written, want most", released)
	}
	for id := uint64(1); id <= 12; id++ {
		r := testjob.New(t, 16, nil)
		rc, err := cowstate.Value[int64, int64](r.B, "counts")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RestoreFrom(bg, r.B, Source{Storage: st, ID: id}); err != nil {
			t.Fatalf("restore of %d: %v", id, err)
		}
		if got := r.Dump(t, nil); !slices.Equal(got, dumps[id]) {
			t.Fatalf("checkpoint %d restored %d lines, differing from the %d captured", id, len(got), len(dumps[id]))
		}
		if rc.Count() != n {
			t.Fatalf("checkpoint %d restored %d counts, want %d", id, rc.Count(), n)
		}
		for k, x := range frozen[id] {
			if got, _ := rc.Get(k); got != x {
				t.Fatalf("checkpoint %d restored key %d = %d, captured %d", id, k, got, x)
			}
		}
	}
	for k, x := range model {
		if got, _ := counts.Get(k); got != x {
			t.Fatalf("live key %d = %d, want %d", k, got, x)
		}
	}
}

// TestStore_LearnsWhatShareOfWritesChanges: a job whose writes are mostly
// no change by the next checkpoint (entries written and deleted within
// the interval) counts many distinct writes. Its checkpoints are full
// and not kept until a probe keeps one (after probeEvery without a
// diff); the diff against it measures how few writes were changes, and
// from then on checkpoints are incremental. Every checkpoint restores to
// what was captured.
func TestStore_LearnsWhatShareOfWritesChanges(t *testing.T) {
	st, j, s := thousandKeys(t)
	kinds := ""
	dumps := map[uint64][]string{}
	last := uint64(probeEvery + 4)
	for id := uint64(1); id <= last; id++ {
		for i := range 600 { // written and gone by the checkpoint
			j.Value.Put(fmt.Sprint("tmp", i), "n", int64(id))
			j.Value.Clear(fmt.Sprint("tmp", i), "n")
		}
		for i := range 20 { // 2% of the entries changed
			j.Value.Put(fmt.Sprint("k", (int(id)*37+i)%1000), "n", int64(id))
		}
		cp, want, err := checkpoint(t, j, s, id)
		if err != nil {
			t.Fatal(err)
		}
		dumps[id] = want
		s.Confirm(id)
		kinds += string(cp.Manifest().Kind)[:1]
	}
	want := strings.Repeat("f", probeEvery) + strings.Repeat("i", int(last)-probeEvery)
	if kinds != want {
		t.Fatalf("kinds %s, want %s", kinds, want)
	}
	restoresAsCaptured(t, st, dumps, 1, probeEvery, last)
}
