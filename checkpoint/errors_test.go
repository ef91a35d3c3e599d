package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// storeOf returns a store holding checkpoints 1 (full) to n (deltas) of a
// loaded job, confirmed, and savepoint 1.
func storeOf(t *testing.T, st Storage, n uint64) (*testjob.Job, *Store) {
	t.Helper()
	j := testjob.New(t, 16, nil)
	j.Load(100, 1)
	s := open(t, j, st, Options{Retention: Retention{KeepLast: int(n)}})
	for id := uint64(1); id <= n; id++ {
		if _, _, err := checkpoint(t, j, s, id); err != nil {
			t.Fatal(err)
		}
		if err := s.Confirm(id); err != nil {
			t.Fatal(err)
		}
		j.Load(5, int(id)+1)
	}
	sp, err := s.Savepoint(bg, 1)
	if err != nil || sp.Wait() != nil {
		t.Fatal(err, sp.Wait())
	}
	return j, s
}

// newestSegment returns the last segment of checkpoint id.
func newestSegment(s *Store, id uint64) string {
	for _, m := range s.Checkpoints() {
		if m.ID == id {
			return m.Segments[len(m.Segments)-1].Name
		}
	}
	return ""
}

// TestErrors drives every failure the store reports through errors.Is:
// each matches its class, and the cause it wraps where there is one. A
// failed restore leaves the backend empty.
func TestErrors(t *testing.T) {
	damagesStores(t)
	type result struct {
		err error
		b   *cowstate.Backend // restored into: must be empty after a failure
	}
	restoreFresh := func(st Storage, id uint64, register func(*cowstate.Backend)) result {
		b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
		if register != nil {
			register(b)
		} else {
			j := testjob.New(t, 16, nil)
			b = j.B
		}
		_, err := RestoreFrom(bg, b, Source{Storage: st, ID: id})
		return result{err, b}
	}
	for _, tc := range []struct {
		name  string
		run   func(t *testing.T) result
		class error
		cause error  // also matched, if set
		text  string // in the message, if set
	}{
		{"empty store", func(t *testing.T) result {
			j := testjob.New(t, 16, nil)
			s := open(t, j, Memory(), Options{})
			_, err := s.Restore(bg, 0)
			return result{err, j.B}
		}, ErrNoCheckpoint, nil, "holds no checkpoint"},
		{"no store at all", func(t *testing.T) result {
			return restoreFresh(Memory(), 0, nil)
		}, ErrNoCheckpoint, nil, "no checkpoint store"},
		{"unknown id", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 2)
			return restoreFresh(st, 9, nil)
		}, ErrNoCheckpoint, nil, "checkpoint 9"},
		{"flipped bit", func(t *testing.T) result {
			st := Memory()
			_, s := storeOf(t, st, 3)
			name := newestSegment(s, 3)
			b := st.get(name)
			b[len(b)/2] ^= 1
			st.put(name, b)
			return restoreFresh(st, 3, nil)
		}, ErrCorrupt, nil, "xxhash64"},
		{"missing segment", func(t *testing.T) result {
			st := Memory()
			_, s := storeOf(t, st, 3)
			st.Remove(bg, newestSegment(s, 3))
			return restoreFresh(st, 3, nil)
		}, ErrCorrupt, fs.ErrNotExist, "segment e0000000001-delta-"},
		{"FIFO in place of a segment", func(t *testing.T) result {
			dir := t.TempDir()
			st, _ := Dir(dir)
			_, s := storeOf(t, st, 2)
			name := newestSegment(s, 2)
			st.Remove(bg, name)
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan result, 1)
			go func() { done <- restoreFresh(st, 2, nil) }()
			select {
			case r := <-done:
				if rep, err := Verify(bg, st); err != nil || rep.Intact() || rep.Checkpoints[1].Restores {
					t.Errorf("verify with a FIFO: %+v %v", rep, err)
				}
				return r
			case <-time.After(10 * time.Second):
				t.Fatal("restore blocks on a FIFO")
				return result{}
			}
		}, ErrCorrupt, nil, "not a regular file"},
		{"max parallelism", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 1)
			j := testjob.New(t, 32, nil)
			_, err := RestoreFrom(bg, j.B, Source{Storage: st})
			return result{err, j.B}
		}, ErrMismatch, snapshot.ErrMismatch, "max parallelism 16"},
		{"state codec", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 1)
			return restoreFresh(st, 0, func(b *cowstate.Backend) {
				cowstate.NamespacedValue(b, "value", statetable.String, statetable.String, statetable.Int32, 0)
				cowstate.NamespacedList(b, "list", statetable.String, statetable.String, statetable.Int64)
				cowstate.NamespacedMap(b, "map", statetable.String, statetable.String, statetable.String, statetable.Int64)
				cowstate.NamespacedReducing(b, "reduce", statetable.String, statetable.String, statetable.Int64, func(a, b int64) int64 { return a + b })
				cowstate.NamespacedTimers(b, "timers", statetable.String, statetable.String)
			})
		}, ErrMismatch, statetable.ErrStateMismatch, "value"},
		{"state of another kind, only in a delta", func(t *testing.T) result {
			st := Memory()
			j, s := storeOf(t, st, 1)
			late, _ := cowstate.NamespacedValue(j.B, "late", statetable.String, statetable.Void, statetable.Int64, 0)
			late.Put("x", statetable.VoidNamespace{}, 1)
			if _, _, err := checkpoint(t, j, s, 2); err != nil {
				t.Fatal(err)
			}
			if s.Checkpoints()[1].Kind != KindIncremental {
				t.Fatal("checkpoint 2 is not a delta")
			}
			b := testjob.New(t, 16, nil).B
			cowstate.NamespacedList(b, "late", statetable.String, statetable.Void, statetable.Int64)
			_, err := RestoreFrom(bg, b, Source{Storage: st, ID: 2})
			return result{err, b}
		}, ErrMismatch, statetable.ErrStateMismatch, "late"},
		{"timer service codecs, only in a delta", func(t *testing.T) result {
			st := Memory()
			j, s := storeOf(t, st, 1)
			ts, _ := cowstate.NamespacedTimers(j.B, "late-timers", statetable.Int64, statetable.Void)
			ts.RegisterEventTime(7, statetable.VoidNamespace{}, 1)
			if _, _, err := checkpoint(t, j, s, 2); err != nil {
				t.Fatal(err)
			}
			b := testjob.New(t, 16, nil).B
			cowstate.NamespacedTimers(b, "late-timers", statetable.String, statetable.Void)
			_, err := RestoreFrom(bg, b, Source{Storage: st, ID: 2})
			return result{err, b}
		}, ErrMismatch, snapshot.ErrMismatch, "late-timers"},
		{"restore into a backend that holds state", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 1)
			j := testjob.New(t, 16, nil)
			j.Value.Put("already", "here", 1)
			_, err := RestoreFrom(bg, j.B, Source{Storage: st})
			if !slices.Equal(j.Dump(t, nil), []string{fmt.Sprintf("value %d %x %x", keyGroup("already"), "\x07alreadyhere", []byte{0x80, 0, 0, 0, 0, 0, 0, 1})}) {
				t.Errorf("the refused restore changed the backend: %q", j.Dump(t, nil))
			}
			return result{err, nil}
		}, ErrInvalid, cowstate.ErrNotEmpty, "holds state"},
		{"checkpoint id reused after a restart", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 5)
			j := testjob.New(t, 16, nil)
			s := open(t, j, st, Options{})
			_, err := s.Checkpoint(bg, 3)
			if _, err2 := s.Checkpoint(bg, 5); !errors.Is(err2, ErrInvalid) {
				t.Errorf("checkpoint 5 again: %v", err2)
			}
			return result{err, nil}
		}, ErrInvalid, nil, "checkpoint id 3 is not above 5"},
		{"savepoint id reused", func(t *testing.T) result {
			st := Memory()
			j, s := storeOf(t, st, 1)
			want := j.Dump(t, nil)
			j.Value.Put("later", "w", 1)
			_, err := s.Savepoint(bg, 1)
			s2 := open(t, testjob.New(t, 16, nil), st, Options{}) // and after a restart
			if _, err2 := s2.Savepoint(bg, 1); !errors.Is(err2, ErrInvalid) {
				t.Errorf("savepoint 1 after a restart: %v", err2)
			}
			j2 := testjob.New(t, 16, nil)
			if _, rerr := RestoreFrom(bg, j2.B, Source{Storage: st, ID: 1, Savepoint: true}); rerr != nil || !slices.Equal(j2.Dump(t, nil), want) {
				t.Errorf("savepoint 1 after a refused rewrite: %v", rerr)
			}
			return result{err, nil}
		}, ErrInvalid, nil, "savepoint id 1 is not above 1"},
		{"fenced", func(t *testing.T) result {
			st := Memory()
			j, s := storeOf(t, st, 1)
			open(t, testjob.New(t, 16, nil), st, Options{})
			cp, err := s.Checkpoint(bg, 2)
			if err != nil {
				t.Fatal(err)
			}
			err = cp.Wait()
			if _, err2 := s.Checkpoint(bg, 3); !errors.Is(err2, ErrFenced) {
				t.Errorf("checkpoint after being fenced: %v", err2)
			}
			_ = j
			return result{err, nil}
		}, ErrFenced, nil, "epoch 2"},
		{"too many pending", func(t *testing.T) result {
			j := testjob.New(t, 16, nil)
			s := open(t, j, Memory(), Options{MaxPending: 3})
			var err error
			for id := uint64(1); id <= 4 && err == nil; id++ {
				var cp *Checkpoint
				if cp, err = s.Checkpoint(bg, id); err == nil {
					cp.Wait()
				}
			}
			if n := j.B.LiveSnapshots(); n != 3 {
				t.Errorf("%d live snapshots for 3 pending checkpoints", n)
			}
			return result{err, nil}
		}, ErrTooManyPending, nil, "3 checkpoints taken"},
		{"confirm of a checkpoint still being written", func(t *testing.T) result {
			j := testjob.New(t, 16, nil)
			j.Load(2000, 1)
			gate := make(chan struct{})
			s := open(t, j, gatedStorage{Memory(), gate}, Options{})
			cp, _ := s.Checkpoint(bg, 1)
			err := s.Confirm(1)
			close(gate)
			cp.Wait()
			if cerr := s.Confirm(1); cerr != nil {
				t.Errorf("confirm once durable: %v", cerr)
			}
			return result{err, nil}
		}, ErrInvalid, nil, "still being written"},
		{"confirm of an unknown checkpoint", func(t *testing.T) result {
			j := testjob.New(t, 16, nil)
			s := open(t, j, Memory(), Options{})
			return result{s.Confirm(4), nil}
		}, ErrInvalid, nil, "not pending"},
		{"damaged newest manifest", func(t *testing.T) result {
			st := Memory()
			storeOf(t, st, 2)
			names, _ := st.List(bg)
			var newest string
			for _, n := range names {
				if _, ok := manifestSeq(n); ok {
					newest = n
				}
			}
			b := st.get(newest)
			b[10] ^= 1
			st.put(newest, b)
			j := testjob.New(t, 16, nil)
			_, err := Open(bg, j.B, st, Options{})
			s, serr := Open(bg, j.B, st, Options{SkipDamaged: true})
			if serr != nil || !slices.Equal(s.Skipped(), []string{newest}) {
				t.Errorf("open skipping the damaged manifest: %v %v", serr, s.Skipped())
			}
			return result{fmt.Errorf("%w (%s)", err, newest), nil}
		}, ErrCorrupt, nil, "checksum does not match"},
		{"storage fails", func(t *testing.T) result {
			st := newFaultStorage()
			st.failAt(1, false)
			_, err := Open(bg, testjob.New(t, 16, nil).B, st, Options{})
			return result{err, nil}
		}, ErrStorage, errInjected, "list mem://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run(t)
			if !errors.Is(r.err, tc.class) {
				t.Fatalf("error %v does not match %v", r.err, tc.class)
			}
			for _, other := range []error{ErrNoCheckpoint, ErrCorrupt, ErrMismatch, ErrFenced, ErrTooManyPending, ErrInvalid, ErrStorage} {
				if other != tc.class && errors.Is(r.err, other) {
					t.Errorf("error %v matches %v too", r.err, other)
				}
			}
			if tc.cause != nil && !errors.Is(r.err, tc.cause) {
				t.Errorf("error %v does not wrap %v", r.err, tc.cause)
			}
			if !strings.Contains(r.err.Error(), tc.text) {
				t.Errorf("error %q does not say %q", r.err, tc.text)
			}
			if r.b != nil && !r.b.Empty() {
				t.Errorf("a failed restore left state in the backend")
			}
		})
	}
}

func keyGroup(key string) int {
	return statetable.KeyGroupOf(statetable.HashKey(statetable.String.Append(nil, key)), 16)
}

// gatedStorage holds every segment write until gate is closed; manifests
// pass.
type gatedStorage struct {
	Storage
	gate chan struct{}
}

func (s gatedStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if _, ok := manifestSeq(name); !ok {
		<-s.gate
	}
	return s.Storage.Create(ctx, name)
}

// TestStore_NewestDamaged: Restore of the newest checkpoint does not hide
// damage; RestoreNewestIntact falls back and says what it skipped; the
// store then goes on checkpointing, confirming and applying its retention.
func TestStore_NewestDamaged(t *testing.T) {
	st := Memory()
	j, s := storeOf(t, st, 4)
	s.SetPolicy(Policy{AlwaysFull: true})
	// Checkpoint 5, full, then damaged.
	if _, _, err := checkpoint(t, j, s, 5); err != nil {
		t.Fatal(err)
	}
	s.Confirm(5)
	name := newestSegment(s, 5)
	b := st.get(name)
	b[len(b)-3] ^= 0x10
	st.put(name, b)

	j2 := testjob.New(t, 16, nil)
	s2 := open(t, j2, st, Options{Retention: Retention{KeepLast: 2}})
	if _, err := s2.Restore(bg, 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Fatalf("restore of the damaged newest: %v", err)
	}
	if !j2.B.Empty() {
		t.Fatal("a failed restore left state")
	}
	m, skipped, err := s2.RestoreNewestIntact(bg)
	if err != nil || m.ID != 4 || len(skipped) != 1 || skipped[0].ID != 5 || !errors.Is(skipped[0].Err, ErrCorrupt) {
		t.Fatalf("restore of the newest intact: %v, %v, %v", m, skipped, err)
	}
	got, _, err := restoreStore(t, st, 4, nil)
	if err != nil || !slices.Equal(j2.Dump(t, nil), got.Dump(t, nil)) {
		t.Fatalf("checkpoint 4 restores differently: %v", err)
	}
	// The store goes on: checkpoints confirm, retention keeps it small.
	for id := uint64(6); id <= 16; id++ {
		j2.Load(3, int(id))
		if _, _, err := checkpoint(t, j2, s2, id); err != nil {
			t.Fatal(err)
		}
		if err := s2.Confirm(id); err != nil {
			t.Fatalf("confirm %d: %v", id, err)
		}
	}
	names, _ := st.List(bg)
	// KeepLast 2: two chains at most, the savepoint, and the few
	// manifests kept beside the newest.
	if len(names) > 2*(1+8)+1+1+keptManifests {
		t.Fatalf("%d objects after 11 checkpoints at KeepLast 2: %v", len(names), names)
	}
	if cps := s2.Checkpoints(); len(cps) != 2 || cps[1].ID != 16 {
		t.Fatalf("retained %v", cps)
	}
	onlyReferenced(t, st)
}

// TestStore_AutoConfirm: a job that never calls Confirm keeps at most the
// base and the checkpoint in flight live, and its checkpoints go
// incremental and are retained as configured.
func TestStore_AutoConfirm(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(300, 1)
	s := open(t, j, st, Options{AutoConfirm: true, Retention: Retention{KeepLast: 2}})
	kinds := ""
	for id := uint64(1); id <= 20; id++ {
		j.Value.Put(fmt.Sprint("key-", id), "w0", int64(id))
		cp, err := s.Checkpoint(bg, id)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", id, err)
		}
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
		kinds += string(cp.Manifest().Kind[0])
		if n := j.B.LiveSnapshots(); n > 2 {
			t.Fatalf("after checkpoint %d: %d live snapshots", id, n)
		}
	}
	s.Poll()
	if n := j.B.LiveSnapshots(); n != 1 {
		t.Fatalf("after the last checkpoint is confirmed: %d live snapshots, want the base only", n)
	}
	if kinds != "f"+strings.Repeat("i", 19) {
		t.Fatalf("kinds %s", kinds)
	}
	if cps := s.Checkpoints(); len(cps) != 2 {
		t.Fatalf("retained %d checkpoints, want 2", len(cps))
	}
	s.Close()
	if n := j.B.LiveSnapshots(); n != 0 {
		t.Fatalf("%d live snapshots after Close", n)
	}
}

// TestStore_CancelledRestoreLeavesBackendEmpty: a restore cancelled part
// way (here: its context times out while a big chain restores) gives the
// backend back empty.
func TestStore_CancelledRestoreLeavesBackendEmpty(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(20000, 1)
	s := open(t, j, st, Options{})
	if _, _, err := checkpoint(t, j, s, 1); err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for _, after := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		j2 := testjob.New(t, 16, nil)
		ctx, cancel := context.WithTimeout(bg, after)
		_, err := RestoreFrom(ctx, j2.B, Source{Storage: st})
		cancel()
		if err == nil {
			continue // finished first
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled restore: %v", err)
		}
		if !j2.B.Empty() {
			t.Fatalf("a restore cancelled after %v left state", after)
		}
		cancelled++
	}
	if cancelled == 0 {
		t.Fatal("no restore was cancelled")
	}
}
