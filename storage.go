package cowstate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Storage is where a checkpoint store keeps its files: a flat namespace of
// names (no directories). The checkpoint store needs nothing else, so any
// blob store with an atomic rename can back it; DirStorage, a local
// directory, is the default. Implementations must be safe for concurrent
// use by several goroutines (writes of different checkpoints overlap).
type Storage interface {
	// Create creates (or truncates) the named file for writing.
	Create(name string) (StorageFile, error)
	// Open opens the named file for reading; a missing file is an error
	// matching fs.ErrNotExist.
	Open(name string) (StorageReader, error)
	// Rename atomically replaces to with from.
	Rename(from, to string) error
	// Remove deletes the named file; a missing file is an error matching
	// fs.ErrNotExist.
	Remove(name string) error
	// List returns every name, sorted.
	List() ([]string, error)
	// SyncDir makes the creates, renames and removes done so far durable.
	SyncDir() error
}

// StorageFile is a file being written. Its data is durable once Sync
// returns.
type StorageFile interface {
	io.Writer
	Sync() error
	Close() error
}

// StorageReader is a file open for reading.
type StorageReader interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// DirStorage returns the Storage of a local directory, creating it if
// needed. Files are written with the usual crash-safe sequence (temporary
// name, fsync, rename, fsync of the directory), driven by the checkpoint
// store.
func DirStorage(dir string) (Storage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cowstate: checkpoint directory: %w", err)
	}
	return dirStorage(dir), nil
}

type dirStorage string

func (d dirStorage) path(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", fmt.Errorf("%w: storage name %q", ErrConfig, name)
	}
	return filepath.Join(string(d), name), nil
}

func (d dirStorage) Create(name string) (StorageFile, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	return os.Create(p)
}

func (d dirStorage) Open(name string) (StorageReader, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return osReader{f, st.Size()}, nil
}

type osReader struct {
	*os.File
	size int64
}

func (r osReader) Size() int64 { return r.size }

func (d dirStorage) Rename(from, to string) error {
	pf, err := d.path(from)
	if err != nil {
		return err
	}
	pt, err := d.path(to)
	if err != nil {
		return err
	}
	return os.Rename(pf, pt)
}

func (d dirStorage) Remove(name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

func (d dirStorage) List() ([]string, error) {
	ents, err := os.ReadDir(string(d))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func (d dirStorage) SyncDir() error {
	f, err := os.Open(string(d))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}
