package cowstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

var bg = context.Background()

// checkpoint takes checkpoint id of j into c, waits for it and returns the
// dump frozen at its capture.
func checkpoint(t testing.TB, j *job, c *Checkpoints, id uint64) (*Checkpoint, []string, error) {
	t.Helper()
	cp, err := c.Checkpoint(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	want := j.dump(t, nil) // no write since the capture: the same version
	return cp, want, cp.Wait()
}

// restoreStore restores checkpoint id (0: newest) of st into a fresh job
// owning kgs (nil: all) and returns it with the manifest.
func restoreStore(t testing.TB, st Storage, id uint64, kgs *statetable.KeyGroupRange) (*job, *Manifest, error) {
	j := newJob(t, 16, kgs)
	m, err := NewCheckpoints(j.b, st, CheckpointOptions{}).Restore(bg, id)
	return j, m, err
}

func TestCheckpoints_FullThenIncremental(t *testing.T) {
	st := newMemStorage()
	j := newJob(t, 16, nil)
	j.load(400, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{Retention: Retention{KeepLast: 10}})
	var wants [][]string
	var sizes []int64
	for id := uint64(1); id <= 12; id++ {
		j.value.Put(fmt.Sprint("key-", id), "w0", int64(id))
		j.list.Add("key-7", "w1", int64(id))
		j.timers.RegisterEventTime(fmt.Sprint("new-", id), "w", int64(id))
		cp, want, err := checkpoint(t, j, c, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Confirm(id); err != nil {
			t.Fatal(err)
		}
		m := cp.Manifest()
		wantKind := Incremental
		if id == 1 {
			wantKind = Full
		}
		if m.Kind != wantKind {
			t.Fatalf("checkpoint %d is %s, want %s", id, m.Kind, wantKind)
		}
		if len(m.Segments) > 1+8 {
			t.Fatalf("checkpoint %d: chain of %d segments, policy says at most 8 deltas", id, len(m.Segments))
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
		if !slices.Equal(got.dump(t, nil), wants[m.ID-1]) {
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
		union = append(union, got.dump(t, nil)...)
	}
	slices.Sort(union)
	if !slices.Equal(union, wants[11]) {
		t.Fatal("rescaled restore differs")
	}
}

// TestCheckpoints_RestoredBaseContinuesChain: after a restore the next
// checkpoint is a delta from the restored one.
func TestCheckpoints_RestoredBaseContinuesChain(t *testing.T) {
	st := newMemStorage()
	j := newJob(t, 16, nil)
	j.load(200, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{})
	checkpoint(t, j, c, 1)
	c.Confirm(1)
	j2 := newJob(t, 16, nil)
	c2 := NewCheckpoints(j2.b, st, CheckpointOptions{})
	if _, err := c2.Restore(bg, 0); err != nil {
		t.Fatal(err)
	}
	j2.value.Put("fresh", "w", 1)
	cp, want, err := checkpoint(t, j2, c2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if k := cp.Manifest().Kind; k != Incremental {
		t.Fatalf("checkpoint after restore is %s", k)
	}
	c2.Confirm(2)
	got, _, err := restoreStore(t, st, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.dump(t, nil), want) {
		t.Fatal("restore differs")
	}
}

// TestCheckpoints_FaultInjection fails, or crashes, the storage at every
// operation of a checkpoint and of the cleanup its confirmation runs. After
// a crash, restore gives the last committed checkpoint exactly, and a
// cleanup leaves only referenced files; after a plain failure, the store
// goes on working.
func TestCheckpoints_FaultInjection(t *testing.T) {
	scenario := func(t *testing.T, faultAt int, crash bool) (ops int) {
		st := newMemStorage()
		j := newJob(t, 16, nil)
		j.load(100, 1)
		c := NewCheckpoints(j.b, st, CheckpointOptions{Retention: Retention{KeepLast: 1},
			Policy: CheckpointPolicy{MaxChainLength: 1, MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1}}) // checkpoint 3 merges the chain
		wants := map[uint64][]string{}
		for id := uint64(1); id <= 2; id++ {
			_, want, err := checkpoint(t, j, c, id)
			if err != nil {
				t.Fatal(err)
			}
			wants[id] = want
			if err := c.Confirm(id); err != nil {
				t.Fatal(err)
			}
			j.load(30+int(id), int(id)+1)
		}
		st.mu.Lock()
		start := st.ops
		st.faultAt, st.crash = start+faultAt, crash
		st.mu.Unlock()
		_, want, err3 := checkpoint(t, j, c, 3)
		wants[3] = want
		committed := err3 == nil
		if committed {
			c.Confirm(3) // may fail in its cleanup
		}
		st.mu.Lock()
		ops = st.ops - start
		st.mu.Unlock()
		if faultAt == 0 {
			return ops
		}
		if !crash {
			// The store goes on: a later checkpoint commits and restores.
			j.value.Put("after", "w", 1)
			_, want4, err := checkpoint(t, j, c, 4)
			if err != nil {
				t.Fatalf("fault at %d, then checkpoint 4: %v", faultAt, err)
			}
			if err := c.Confirm(4); err != nil {
				t.Fatalf("fault at %d, then confirm 4: %v", faultAt, err)
			}
			got, m, err := restoreStore(t, st, 0, nil)
			if err != nil || m.ID != 4 || !slices.Equal(got.dump(t, nil), want4) {
				t.Fatalf("fault at %d: restore after recovery: %v", faultAt, err)
			}
			return ops
		}
		image := st.afterCrash()
		got, m, err := restoreStore(t, image, 0, nil)
		if err != nil {
			t.Fatalf("crash at %d: restore: %v", faultAt, err)
		}
		wantID := uint64(2)
		if committed {
			wantID = 3
		}
		if m.ID != wantID || !slices.Equal(got.dump(t, nil), wants[wantID]) {
			t.Fatalf("crash at %d (checkpoint 3 err %v): restored checkpoint %d, want %d", faultAt, err3, m.ID, wantID)
		}
		// A cleanup after the restart removes the leftovers.
		if err := NewCheckpoints(got.b, image, CheckpointOptions{}).Cleanup(); err != nil {
			t.Fatalf("crash at %d: cleanup: %v", faultAt, err)
		}
		assertOnlyReferenced(t, image)
		return ops
	}
	total := scenario(t, 0, false)
	if total < 8 {
		t.Fatalf("checkpoint and confirm took only %d storage operations", total)
	}
	for _, crash := range []bool{false, true} {
		for at := 1; at <= total; at++ {
			scenario(t, at, crash)
		}
	}
}

// assertOnlyReferenced checks that every store file is a manifest or a
// segment a manifest references, and that every referenced segment exists.
func assertOnlyReferenced(t *testing.T, st Storage) {
	t.Helper()
	names, _ := st.List()
	ms, err := ListCheckpoints(st)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]bool{}
	for _, m := range ms {
		ref[manifestName(m.ID, m.Kind == SavepointKind)] = true
		for _, s := range m.Segments {
			ref[s.Name] = true
			if !slices.Contains(names, s.Name) {
				t.Fatalf("checkpoint %d lost its segment %s", m.ID, s.Name)
			}
		}
	}
	for _, n := range names {
		if !ref[n] {
			t.Fatalf("leftover %s after cleanup (files %v)", n, names)
		}
	}
}

func TestCheckpoints_CorruptSegmentNamed(t *testing.T) {
	st := newMemStorage()
	j := newJob(t, 16, nil)
	j.load(100, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{Retention: Retention{KeepLast: 5}})
	var wants [][]string
	for id := uint64(1); id <= 3; id++ {
		_, want, err := checkpoint(t, j, c, id)
		if err != nil {
			t.Fatal(err)
		}
		c.Confirm(id)
		wants = append(wants, want)
		j.load(10, int(id)+5)
	}
	m3, _ := readManifest(st, manifestName(3, false))
	last := m3.Segments[len(m3.Segments)-1].Name
	st.corrupt(last, 40)
	if _, _, err := restoreStore(t, st, 3, nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), last) {
		t.Fatalf("restore with a damaged %s: %v", last, err)
	}
	st.mu.Lock()
	delete(st.names, last)
	st.mu.Unlock()
	if _, _, err := restoreStore(t, st, 3, nil); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), last) {
		t.Fatalf("restore with %s missing: %v", last, err)
	}
	got, _, err := restoreStore(t, st, 1, nil)
	if err != nil || !slices.Equal(got.dump(t, nil), wants[0]) {
		t.Fatalf("restore of intact checkpoint 1: %v", err)
	}
}

func TestCheckpoints_DirStorage(t *testing.T) {
	st, err := DirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(t, 16, nil)
	j.load(100, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{})
	for id := uint64(1); id <= 3; id++ {
		if _, _, err := checkpoint(t, j, c, id); err != nil {
			t.Fatal(err)
		}
		if err := c.Confirm(id); err != nil {
			t.Fatal(err)
		}
		j.load(5, int(id)+1)
	}
	cp4, err := c.CheckpointWith(bg, 4, []byte("offset=42"))
	if err != nil || cp4.Wait() != nil {
		t.Fatal(err, cp4.Wait())
	}
	if m, _ := readManifest(st, manifestName(4, false)); string(m.UserMeta) != "offset=42" {
		t.Fatalf("user metadata %q", m.UserMeta)
	}
	sp, err := c.Savepoint(bg, 1)
	if err != nil || sp.Wait() != nil {
		t.Fatal(err, sp.Wait())
	}
	want := j.dump(t, nil)
	got, m, err := restoreStore(t, st, 0, nil)
	if err != nil || m.ID != 4 || string(m.UserMeta) != "offset=42" {
		t.Fatal(err, m)
	}
	_ = got
	j2 := newJob(t, 16, nil)
	if _, err := NewCheckpoints(j2.b, st, CheckpointOptions{}).RestoreSavepoint(bg, 1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j2.dump(t, nil), want) {
		t.Fatal("savepoint restore differs")
	}
	assertOnlyReferenced(t, st)
}

// TestCheckpoints_RandomHistories: random writes, checkpoints (confirmed,
// failed by the storage, aborted, left pending), retention changes,
// savepoints and restores. Every restore equals the state frozen at that
// checkpoint, and no retained checkpoint or savepoint ever loses a file.
func TestCheckpoints_RandomHistories(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := newMemStorage()
		j := newJob(t, 16, nil)
		policy := CheckpointPolicy{MaxChainLength: rapid.IntRange(1, 4).Draw(rt, "max chain"),
			MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1} // small states: deltas must not turn full
		if rapid.Bool().Draw(rt, "default shares") {
			policy.MaxDeltaShare, policy.MaxChainShare, policy.MaxChangeShare = 0, 0, 0
		}
		c := NewCheckpoints(j.b, st, CheckpointOptions{Policy: policy})
		frozen := map[uint64][]string{}     // checkpoints
		savepoints := map[uint64][]string{} // savepoints
		committed := map[uint64]bool{}
		aborted := map[uint64]bool{}
		retention := Retention{KeepLast: 1}
		confirmedMax := uint64(0)
		id, spID := uint64(0), uint64(0)
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2:
				for range rapid.IntRange(1, 10).Draw(rt, "writes") {
					randomStep(rt, j)
				}
			case 3, 4:
				id++
				fail := rapid.IntRange(0, 4).Draw(rt, "fail") == 0
				if fail {
					st.mu.Lock()
					st.faultAt = st.ops + rapid.IntRange(1, 6).Draw(rt, "fault op")
					st.mu.Unlock()
				}
				cp, want, err := checkpoint(t, j, c, id)
				st.mu.Lock()
				st.faultAt = 0
				st.mu.Unlock()
				if err != nil {
					if !fail {
						rt.Fatalf("checkpoint %d: %v", id, err)
					}
					continue
				}
				frozen[id], committed[id] = want, true
				switch rapid.IntRange(0, 2).Draw(rt, "then") {
				case 0:
					if err := c.Confirm(id); err != nil {
						rt.Fatalf("confirm %d: %v", id, err)
					}
					confirmedMax = id
				case 1:
					if err := c.Abort(id); err != nil {
						rt.Fatalf("abort %d: %v", id, err)
					}
					aborted[id] = true
				}
				_ = cp
			case 5:
				spID++
				sp, err := c.Savepoint(bg, spID)
				if err != nil {
					rt.Fatal(err)
				}
				savepoints[spID] = j.dump(t, nil)
				if err := sp.Wait(); err != nil {
					rt.Fatal(err)
				}
			case 6:
				retention = Retention{KeepLast: rapid.IntRange(1, 3).Draw(rt, "keep")}
				ms, _ := ListCheckpoints(st)
				var ids []uint64
				for _, m := range ms {
					if m.Kind != SavepointKind {
						ids = append(ids, m.ID)
					}
				}
				if len(ids) > 0 && rapid.Bool().Draw(rt, "pin") {
					retention.Pinned = []uint64{rapid.SampledFrom(ids).Draw(rt, "pinned")}
				}
				if err := c.SetRetention(retention); err != nil {
					rt.Fatal(err)
				}
			case 7, 8:
				// Restore a retained checkpoint into a fresh backend.
				ms, err := ListCheckpoints(st)
				if err != nil {
					rt.Fatal(err)
				}
				if len(ms) == 0 {
					continue
				}
				m := rapid.SampledFrom(ms).Draw(rt, "restore")
				j2 := newJob(t, 16, nil)
				c2 := NewCheckpoints(j2.b, st, CheckpointOptions{})
				want := frozen[m.ID]
				if m.Kind == SavepointKind {
					_, err = c2.RestoreSavepoint(bg, m.ID)
					want = savepoints[m.ID]
				} else {
					_, err = c2.Restore(bg, m.ID)
					if aborted[m.ID] {
						rt.Fatalf("aborted checkpoint %d is listed", m.ID)
					}
				}
				if err != nil {
					rt.Fatalf("restore %s %d: %v", m.Kind, m.ID, err)
				}
				if got := j2.dump(t, nil); !slices.Equal(got, want) {
					rt.Fatalf("restore of %s %d differs:\n got %q\nwant %q", m.Kind, m.ID, got, want)
				}
			case 9:
				if err := c.Cleanup(); err != nil {
					rt.Fatal(err)
				}
			}
			// Retained checkpoints and every savepoint keep their files.
			ms, err := ListCheckpoints(st)
			if err != nil {
				rt.Fatal(err)
			}
			listed := map[string]bool{}
			for _, m := range ms {
				listed[fmt.Sprint(m.Kind == SavepointKind, m.ID)] = true
				for _, s := range m.Segments {
					if _, err := st.Open(s.Name); err != nil {
						rt.Fatalf("%s %d lost %s", m.Kind, m.ID, s.Name)
					}
				}
			}
			for sp := range savepoints {
				if !listed[fmt.Sprint(true, sp)] {
					rt.Fatalf("savepoint %d is gone", sp)
				}
			}
			for _, p := range retention.Pinned {
				if committed[p] && !aborted[p] && !listed[fmt.Sprint(false, p)] {
					rt.Fatalf("pinned checkpoint %d is gone", p)
				}
			}
			if confirmedMax > 0 && !aborted[confirmedMax] && !listed[fmt.Sprint(false, confirmedMax)] {
				rt.Fatalf("last confirmed checkpoint %d is gone", confirmedMax)
			}
		}
	})
}

func TestVerifyStore(t *testing.T) {
	st := newMemStorage()
	j := newJob(t, 16, nil)
	j.load(100, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{Retention: Retention{KeepLast: 3}})
	for id := uint64(1); id <= 3; id++ {
		if _, _, err := checkpoint(t, j, c, id); err != nil {
			t.Fatal(err)
		}
		c.Confirm(id)
		j.load(3, int(id)+1)
	}
	if d, err := VerifyStore(st); err != nil || len(d) != 0 {
		t.Fatalf("intact store: %v %v", d, err)
	}
	m, _ := readManifest(st, manifestName(3, false))
	last := m.Segments[len(m.Segments)-1].Name
	st.corrupt(last, 7)
	st.corrupt(manifestName(1, false), 3)
	d, err := VerifyStore(st)
	if err != nil || len(d) != 2 || d[0].File != manifestName(1, false) || d[1].File != last {
		t.Fatalf("damaged store: %v %v", d, err)
	}
}

// TestCheckpoints_WhileMutating takes checkpoints without waiting for them
// while the writer goes on (run with -race): diffs and writes run on their
// own goroutines against live captures; each checkpoint restores to the
// state frozen at its capture.
func TestCheckpoints_WhileMutating(t *testing.T) {
	st := newMemStorage()
	j := newJob(t, 16, nil)
	j.load(300, 1)
	c := NewCheckpoints(j.b, st, CheckpointOptions{Retention: Retention{KeepLast: 100},
		Policy: CheckpointPolicy{MaxChainLength: 3, MaxDeltaShare: 10, MaxChainShare: 100, MaxChangeShare: 1}})
	wants := map[uint64][]string{}
	var inflight []*Checkpoint
	for id := uint64(1); id <= 12; id++ {
		cp, err := c.Checkpoint(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		wants[id] = j.dump(t, nil)
		inflight = append(inflight, cp)
		for i := range 200 {
			k := fmt.Sprint("key-", (int(id)*37+i)%400)
			j.value.Put(k, "w0", int64(i))
			j.list.Add(k, "w1", int64(i))
			j.mp.Put(k, "w2", fmt.Sprint(i%9), int64(id))
			j.timers.RegisterEventTime(k, "w", int64(i))
		}
		// Confirm the oldest finished ones as they complete.
		for len(inflight) > 2 {
			if err := inflight[0].Wait(); err != nil {
				t.Fatal(err)
			}
			if err := c.Confirm(inflight[0].ID()); err != nil && !errors.Is(err, ErrCheckpoint) {
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
	ms, err := ListCheckpoints(st)
	if err != nil {
		t.Fatal(err)
	}
	incremental := 0
	for _, m := range ms {
		if m.Kind == Incremental {
			incremental++
		}
		got, _, err := restoreStore(t, st, m.ID, nil)
		if err != nil {
			t.Fatalf("restore %d: %v", m.ID, err)
		}
		if !slices.Equal(got.dump(t, nil), wants[m.ID]) {
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

// TestCheckpoints_PolicyChangeShare: many changes make a full checkpoint,
// few an incremental one.
func TestCheckpoints_PolicyChangeShare(t *testing.T) {
	j := newJob(t, 16, nil)
	for i := range 2000 {
		j.value.Put(fmt.Sprint("k", i), "n", 1)
	}
	c := NewCheckpoints(j.b, newMemStorage(), CheckpointOptions{})
	kinds := ""
	for id, changes := range []int{0, 300, 2, 250, 1} { // 15%, 0.1%, 12.5%, 0.05% of 2000
		for i := range changes {
			j.value.Put(fmt.Sprint("k", i), "n", int64(id+10))
		}
		cp, _, err := checkpoint(t, j, c, uint64(id+1))
		if err != nil {
			t.Fatal(err)
		}
		c.Confirm(cp.ID())
		kinds += string(cp.Manifest().Kind)[:1]
	}
	if kinds != "ffifi" {
		t.Fatalf("kinds %s, want ffifi", kinds)
	}
}

func FuzzManifest(f *testing.F) {
	f.Add(encodeManifest(&Manifest{ID: 7, Kind: Incremental, MaxParallelism: 128,
		KeyGroups: statetable.KeyGroupRange{First: 0, Last: 127},
		Segments:  []Segment{{Name: fullName(5, false), Target: 5, Size: 10, Sum: "0123456789abcdef"}, {Name: deltaName(5, 7), Delta: true, Base: 5, Target: 7, Size: 3, Sum: "0123456789abcdef"}},
		States:    map[string]int{"count": 3}, UserMeta: []byte("offset")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("error not matching ErrCheckpoint: %v", err)
			}
			return
		}
		again, err := decodeManifest("fuzz", encodeManifest(m))
		if err != nil || again.ID != m.ID || len(again.Segments) != len(m.Segments) {
			t.Fatalf("re-encoded manifest: %v", err)
		}
	})
}
