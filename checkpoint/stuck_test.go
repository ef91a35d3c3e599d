package checkpoint

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cowstate/cowstate/internal/testjob"
)

// stuckStorage is a Storage that, once stuck, stops answering: each call
// waits for its context to end (or, with ignoreCtx, until released) and
// then fails, as a storage behind a stalled proxy would.
type stuckStorage struct {
	Storage
	stuck     atomic.Bool
	ignoreCtx bool
	release   chan struct{}
}

func newStuckStorage(t *testing.T, ignoreCtx bool) *stuckStorage {
	damagesStores(t) // a storage that stops answering cannot be verified
	s := &stuckStorage{Storage: Memory(), ignoreCtx: ignoreCtx, release: make(chan struct{})}
	t.Cleanup(func() { close(s.release) })
	return s
}

func (s *stuckStorage) wait(ctx context.Context) error {
	if !s.stuck.Load() {
		return nil
	}
	if s.ignoreCtx {
		<-s.release
		return errors.New("released")
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *stuckStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	w, err := s.Storage.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &stuckWriter{w, s, ctx}, nil
}

func (s *stuckStorage) Open(ctx context.Context, name string) (ObjectReader, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Storage.Open(ctx, name)
}

func (s *stuckStorage) Remove(ctx context.Context, name string) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Storage.Remove(ctx, name)
}

func (s *stuckStorage) List(ctx context.Context) ([]string, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Storage.List(ctx)
}

type stuckWriter struct {
	ObjectWriter
	s   *stuckStorage
	ctx context.Context
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	if err := w.s.wait(w.ctx); err != nil {
		return 0, err
	}
	return w.ObjectWriter.Write(p)
}

func (w *stuckWriter) Commit() error {
	if err := w.s.wait(w.ctx); err != nil {
		w.ObjectWriter.Abort()
		return err
	}
	return w.ObjectWriter.Commit()
}

// doneWithin waits for cp at most d and returns its error.
func doneWithin(t *testing.T, cp *Checkpoint, d time.Duration) error {
	t.Helper()
	select {
	case <-cp.Done():
		return cp.Wait()
	case <-time.After(d):
		t.Fatalf("checkpoint %d not done %v after its deadline", cp.ID(), d)
		return nil
	}
}

// TestStore_StuckStorage: a storage that stops answering holds a
// checkpoint no longer than its deadline, or the store's checkpoint
// timeout, and Close returns in bounded time, whether the storage honours
// the cancellation of its calls or not.
func TestStore_StuckStorage(t *testing.T) {
	st := newStuckStorage(t, false)
	j := testjob.New(t, 16, nil)
	j.Load(50, 1)
	s := open(t, j, st, Options{CheckpointTimeout: 300 * time.Millisecond, CloseTimeout: 200 * time.Millisecond})
	if _, _, err := checkpoint(t, j, s, 1); err != nil {
		t.Fatal(err)
	}
	st.stuck.Store(true)

	// The caller's deadline.
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	cp, err := s.Checkpoint(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := doneWithin(t, cp, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("checkpoint 2 under a deadline: %v", err)
	}
	// No deadline: the store's checkpoint timeout.
	cp, err = s.Checkpoint(bg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := doneWithin(t, cp, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("checkpoint 3 under the store's timeout: %v", err)
	}
	// Close with a checkpoint in flight.
	if _, err := s.Checkpoint(bg, 4); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close hangs")
	}
	// Open and Restore under a deadline.
	ctx, cancel = context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, testjob.New(t, 16, nil).B, st, Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open: %v", err)
	}
}

// TestStore_CloseOfStorageIgnoringCancellation: a storage call that does
// not return when cancelled leaves Close waiting Options.CloseTimeout, no
// longer; the error names the checkpoint.
func TestStore_CloseOfStorageIgnoringCancellation(t *testing.T) {
	st := newStuckStorage(t, true)
	j := testjob.New(t, 16, nil)
	j.Load(50, 1)
	s := open(t, j, st, Options{CloseTimeout: 200 * time.Millisecond})
	st.stuck.Store(true)
	if _, err := s.Checkpoint(bg, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrStorage) {
			t.Fatalf("close: %v, want an ErrStorage naming checkpoint 1", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close hangs")
	}
}
