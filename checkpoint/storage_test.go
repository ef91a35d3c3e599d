package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cowstate/cowstate/internal/testjob"
)

var bg = context.Background()

// faultStorage wraps a Storage and fails, or crashes at, its n-th
// operation (Create, Commit, Open, Remove, List each count one). After a
// crash every operation through it fails; afterCrash gives what a
// restarted process finds: the same storage, through a new wrapper, with
// what was committed before the crash (every storage here makes an object
// durable when its commit returns).
type faultStorage struct {
	Storage
	mu      sync.Mutex
	ops     int
	faultAt int // 0: none
	crash   bool
	crashed bool
}

var errInjected = errors.New("injected fault")

func newFaultStorage() *faultStorage { return &faultStorage{Storage: Memory()} }

func faulty(st Storage) *faultStorage { return &faultStorage{Storage: st} }

func (s *faultStorage) op(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return fmt.Errorf("%s after the crash: %w", what, errInjected)
	}
	s.ops++
	if s.faultAt != 0 && s.ops == s.faultAt {
		s.crashed = s.crash
		return fmt.Errorf("%s (op %d): %w", what, s.ops, errInjected)
	}
	return nil
}

// failAt arms a fault n operations from now.
func (s *faultStorage) failAt(n int, crash bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultAt, s.crash = s.ops+n, crash
}

func (s *faultStorage) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultAt = 0
}

func (s *faultStorage) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops
}

func (s *faultStorage) afterCrash() *faultStorage { return faulty(s.Storage) }

func (s *faultStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := s.op("create " + name); err != nil {
		return nil, err
	}
	w, err := s.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return faultWriter{w, s, name}, nil
}

type faultWriter struct {
	ObjectWriter
	s    *faultStorage
	name string
}

func (w faultWriter) Commit() error {
	if err := w.s.op("commit " + w.name); err != nil {
		w.ObjectWriter.Abort()
		return err
	}
	return w.ObjectWriter.Commit()
}

func (s *faultStorage) Open(ctx context.Context, name string) (ObjectReader, error) {
	if err := s.op("open " + name); err != nil {
		return nil, err
	}
	return s.Storage.Open(ctx, name)
}

func (s *faultStorage) Remove(ctx context.Context, name string) error {
	if err := s.op("remove " + name); err != nil {
		return err
	}
	return s.Storage.Remove(ctx, name)
}

func (s *faultStorage) List(ctx context.Context) ([]string, error) {
	if err := s.op("list"); err != nil {
		return nil, err
	}
	return s.Storage.List(ctx)
}

// put replaces an object's bytes, as damage or another writer would.
func (m *MemStorage) put(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[name] = b
}

func (m *MemStorage) get(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.objects[name])
}

// storages are the storages every store-level test runs on: a directory
// and memory. Module checkpoint/storeurl runs package storagetest's checks
// on its bucket storage (in memory and on a real S3 server).
var storages = map[string]func(t testing.TB) Storage{
	"dir": func(t testing.TB) Storage {
		d, err := Dir(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	},
	"mem": func(testing.TB) Storage { return Memory() },
}

// TestDirStorage_FIFO: a FIFO in place of an object is refused at once,
// not waited on.
func TestDirStorage_FIFO(t *testing.T) {
	dir := t.TempDir()
	st, _ := Dir(dir)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := st.Open(bg, "fifo")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errNotRegular) {
			t.Fatalf("open of a FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		os.WriteFile(filepath.Join(dir, "fifo"), nil, 0) // unblock the reader
		t.Fatal("open of a FIFO blocks")
	}
}

// conflictStorage answers the first create-only commit of each manifest as
// S3 does when two conditional writes of one name meet (409
// ConditionalRequestConflict), after writing it or not, as it chooses.
type conflictStorage struct {
	Storage
	mu     sync.Mutex
	seen   map[string]bool
	writes bool // whether the conflicting commit wrote the object
}

type conflictWriter struct {
	ObjectWriter
	s    *conflictStorage
	name string
}

func (s *conflictStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	w, err := s.Storage.Create(ctx, name)
	return conflictWriter{w, s, name}, err
}

func (w conflictWriter) Commit() error {
	w.s.mu.Lock()
	first := !w.s.seen[w.name]
	w.s.seen[w.name] = true
	w.s.mu.Unlock()
	if _, isManifest := manifestSeq(w.name); !isManifest || !first {
		return w.ObjectWriter.Commit()
	}
	if w.s.writes {
		w.ObjectWriter.Commit()
	} else {
		w.ObjectWriter.Abort()
	}
	return fmt.Errorf("commit %s: %w: api error ConditionalRequestConflict", w.name, ErrWriteConflict)
}

// TestStore_ConditionalRequestConflict: a manifest commit answered with a
// conflict is written again, and the store learns whether the first one
// took (then it is its own, and adopted) or not.
func TestStore_ConditionalRequestConflict(t *testing.T) {
	for _, writes := range []bool{false, true} {
		st := &conflictStorage{Storage: Memory(), seen: map[string]bool{}, writes: writes}
		j := testjob.New(t, 16, nil)
		j.Load(50, 1)
		s, err := Open(bg, j.B, st, Options{AutoConfirm: true})
		if err != nil {
			t.Fatalf("writes %v: open: %v", writes, err)
		}
		for id := uint64(1); id <= 3; id++ {
			j.Load(5, int(id))
			if _, _, err := checkpoint(t, j, s, id); err != nil {
				t.Fatalf("writes %v: checkpoint %d: %v", writes, id, err)
			}
		}
		got, m, err := restoreStore(t, st, 0, nil)
		if err != nil || m.ID != 3 || !slices.Equal(got.Dump(t, nil), j.Dump(t, nil)) {
			t.Fatalf("writes %v: restore: %v", writes, err)
		}
	}
}
