package checkpoint

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
)

// events collects what a store reports through Options.OnCheckpoint.
type events struct {
	mu  sync.Mutex
	all []CheckpointEvent
}

func (e *events) on(ev CheckpointEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) last(t *testing.T) CheckpointEvent {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.all) == 0 {
		t.Fatal("no event reported")
	}
	return e.all[len(e.all)-1]
}

// objectSize is the size of an object as the storage holds it.
func objectSize(t *testing.T, st Storage, name string) int64 {
	t.Helper()
	r, err := st.Open(bg, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Size()
}

// Each checkpoint and savepoint is reported once, when its handle is Done,
// with its kind, the bytes of the segment it wrote as the storage holds
// them, the entries written, and durations that add up.
func TestStore_OnCheckpoint(t *testing.T) {
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(300, 1)
	var got events
	var logged bytes.Buffer
	s := open(t, j, st, Options{AutoConfirm: true, OnCheckpoint: got.on,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer s.Close()

	steps := []struct {
		savepoint bool
		id        uint64
		kind      Kind
	}{
		{false, 1, KindFull},
		{false, 2, KindIncremental},
		{true, 1, KindSavepoint},
	}
	for i, step := range steps {
		j.Load(10, i+2) // a few changes: the policy takes a delta
		take := s.Checkpoint
		if step.savepoint {
			take = s.Savepoint
		}
		cp, err := take(bg, step.id)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
		s.Poll() // confirm: the next checkpoint diffs against this one
		ev := got.last(t)
		m := cp.Manifest()
		seg := m.Segments[len(m.Segments)-1]
		_, entries := cp.Progress()
		if ev.ID != step.id || ev.Kind != step.kind || m.Kind != step.kind || ev.Err != nil {
			t.Fatalf("step %d: event %+v, manifest kind %s; want id %d, kind %s, no error", i, ev, m.Kind, step.id, step.kind)
		}
		if size := objectSize(t, st, seg.Name); ev.Bytes <= 0 || ev.Bytes != size || ev.Bytes != seg.Size {
			t.Errorf("step %d (%s): Bytes %d; the segment %s holds %d (manifest: %d)", i, step.kind, ev.Bytes, seg.Name, size, seg.Size)
		}
		if ev.Entries <= 0 || ev.Entries != entries {
			t.Errorf("step %d (%s): Entries %d, progress %d", i, step.kind, ev.Entries, entries)
		}
		if step.kind == KindIncremental && ev.Entries != int64(m.Changed) {
			t.Errorf("incremental: Entries %d, manifest Changed %d", ev.Entries, m.Changed)
		}
		if ev.Capture != cp.CaptureTime() || ev.Write != cp.WriteTime() || ev.Write <= 0 ||
			ev.Sync < 0 || ev.Commit <= 0 || ev.Sync+ev.Commit > ev.Write {
			t.Errorf("step %d (%s): durations capture %v write %v sync %v commit %v; handle: capture %v write %v",
				i, step.kind, ev.Capture, ev.Write, ev.Sync, ev.Commit, cp.CaptureTime(), cp.WriteTime())
		}
	}
	if n := len(got.all); n != len(steps) {
		t.Fatalf("%d events for %d checkpoints", n, len(steps))
	}
	log := logged.String()
	for _, want := range []string{"kind=full", "kind=incremental", "kind=savepoint"} {
		if !strings.Contains(log, "checkpoint committed") || !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// A checkpoint that fails on the storage is reported with the error, at
// Warn, and no bytes.
func TestStore_OnCheckpointFailure(t *testing.T) {
	for _, c := range []struct {
		name    string
		faultAt int // storage operations from now: 1 creates the segment, 2 commits it
	}{{"create", 1}, {"commit", 2}} {
		t.Run(c.name, func(t *testing.T) {
			st := newFaultStorage()
			j := testjob.New(t, 16, nil)
			j.Load(100, 1)
			var got events
			var logged bytes.Buffer
			s := open(t, j, st, Options{OnCheckpoint: got.on, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			defer s.Close()
			st.failAt(c.faultAt, false)
			cp, err := s.Checkpoint(bg, 1)
			if err != nil {
				t.Fatal(err)
			}
			werr := cp.Wait()
			if !errors.Is(werr, ErrStorage) || !errors.Is(werr, errInjected) {
				t.Fatalf("Wait: %v; want ErrStorage wrapping the injected fault", werr)
			}
			ev := got.last(t)
			if ev.ID != 1 || ev.Kind != KindFull || ev.Err != werr || ev.Bytes != 0 || ev.Commit != 0 {
				t.Fatalf("event %+v; want checkpoint 1, full, Wait's error, no bytes, no commit", ev)
			}
			if !strings.Contains(logged.String(), "level=WARN msg=\"checkpoint failed\"") || !strings.Contains(logged.String(), "injected fault") {
				t.Fatalf("log:\n%s", logged.String())
			}
		})
	}
}

// Pending counts the checkpoints taken and not yet confirmed or aborted.
func TestStore_Pending(t *testing.T) {
	j := testjob.New(t, 16, nil)
	j.Load(50, 1)
	s := open(t, j, Memory(), Options{})
	defer s.Close()
	for id := uint64(1); id <= 2; id++ {
		if _, _, err := checkpoint(t, j, s, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Pending(); n != 2 {
		t.Fatalf("Pending after two checkpoints: %d", n)
	}
	if err := s.Confirm(2); err != nil {
		t.Fatal(err)
	}
	if n := s.Pending(); n != 0 {
		t.Fatalf("Pending after confirming the newer: %d", n)
	}
}
