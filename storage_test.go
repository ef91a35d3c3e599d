package cowstate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
)

// memStorage is an in-memory Storage that models durability the way a
// POSIX file system promises it: a file's data is durable once synced, and
// the names (creates, renames, removes) once the directory is synced. A
// crash keeps only what was durable. It can fail or crash at its n-th
// operation, for fault injection.
type memStorage struct {
	mu      sync.Mutex
	names   map[string]*memFile // what List and Open see
	durable map[string]*memFile // the names a crash keeps
	ops     int                 // operations so far
	faultAt int                 // the operation that fails (0: none)
	crash   bool                // the fault is a crash: every later operation fails too
	crashed bool
}

type memFile struct {
	data, synced []byte
}

var errInjected = errors.New("injected fault")

func newMemStorage() *memStorage {
	return &memStorage{names: map[string]*memFile{}, durable: map[string]*memFile{}}
}

// op counts an operation and says whether it must fail.
func (s *memStorage) op(what string) error {
	if s.crashed {
		return fmt.Errorf("%s after a crash: %w", what, errInjected)
	}
	s.ops++
	if s.ops == s.faultAt {
		s.crashed = s.crash
		return fmt.Errorf("%s (operation %d): %w", what, s.ops, errInjected)
	}
	return nil
}

// afterCrash returns the storage as a restart finds it: the durable names,
// each with its synced data.
func (s *memStorage) afterCrash() *memStorage {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := newMemStorage()
	for n, f := range s.durable {
		g := &memFile{data: bytes.Clone(f.synced), synced: bytes.Clone(f.synced)}
		r.names[n], r.durable[n] = g, g
	}
	return r
}

func (s *memStorage) Create(name string) (StorageFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op("create " + name); err != nil {
		return nil, err
	}
	f := &memFile{}
	s.names[name] = f
	return &memWriter{s: s, f: f, name: name}, nil
}

type memWriter struct {
	s    *memStorage
	f    *memFile
	name string
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if err := w.s.op("write " + w.name); err != nil {
		return 0, err
	}
	w.f.data = append(w.f.data, p...)
	return len(p), nil
}

func (w *memWriter) Sync() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if err := w.s.op("sync " + w.name); err != nil {
		return err
	}
	w.f.synced = bytes.Clone(w.f.data)
	return nil
}

func (w *memWriter) Close() error { return nil }

func (s *memStorage) Open(name string) (StorageReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.names[name]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	return memReader{bytes.NewReader(bytes.Clone(f.data))}, nil
}

type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

func (s *memStorage) Rename(from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op("rename " + from); err != nil {
		return err
	}
	f, ok := s.names[from]
	if !ok {
		return fmt.Errorf("rename %s: %w", from, fs.ErrNotExist)
	}
	delete(s.names, from)
	s.names[to] = f
	return nil
}

func (s *memStorage) Remove(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op("remove " + name); err != nil {
		return err
	}
	if _, ok := s.names[name]; !ok {
		return fmt.Errorf("remove %s: %w", name, fs.ErrNotExist)
	}
	delete(s.names, name)
	return nil
}

func (s *memStorage) List() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.names)), nil
}

func (s *memStorage) SyncDir() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op("sync directory"); err != nil {
		return err
	}
	s.durable = maps.Clone(s.names)
	return nil
}

// corrupt flips a byte of a file in place.
func (s *memStorage) corrupt(name string, at int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.names[name]
	f.data[at%len(f.data)] ^= 0x40
	f.synced = bytes.Clone(f.data)
}
