package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Storage is where a store keeps its objects: a flat namespace of names,
// each object written once and never modified. It is what an object store
// offers (no rename, no append): an object appears whole or not at all, and
// a create-only write fails if the name exists. The store's commit protocol
// needs nothing more (see the package documentation). Implementations must
// be safe for concurrent use by several goroutines.
type Storage interface {
	// Create starts writing a new object; a name CheckName refuses is an
	// error matching ErrInvalid. The object becomes visible,
	// whole and durable, when the writer's Commit returns nil; Commit
	// fails with an error matching fs.ErrExist if the name already exists
	// (no object is ever overwritten). A writer that is not committed
	// leaves nothing behind that List reports under name.
	Create(ctx context.Context, name string) (ObjectWriter, error)
	// Open opens an object for reading; a missing object is an error
	// matching fs.ErrNotExist.
	Open(ctx context.Context, name string) (ObjectReader, error)
	// Remove deletes an object; a missing object is an error matching
	// fs.ErrNotExist. A remove need not be durable: the store only removes
	// what no committed manifest needs.
	Remove(ctx context.Context, name string) error
	// List returns the names of every object, sorted.
	List(ctx context.Context) ([]string, error)
	// String names the storage in messages (a directory, a URL without
	// credentials).
	String() string
}

// ObjectWriter is an object being written.
type ObjectWriter interface {
	io.Writer
	// Commit makes the object visible and durable, or fails (fs.ErrExist
	// if the name was taken meanwhile; ErrWriteConflict if a concurrent
	// write of the name left the outcome unknown). Call it once.
	Commit() error
	// Abort discards the object. Safe after Commit (then a no-op).
	Abort()
}

// ObjectReader is an object open for reading.
type ObjectReader interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// errNotRegular: a directory storage name that is not a regular file (a
// FIFO, a device, a directory): never opened, since reading one can block.
var errNotRegular = errors.New("not a regular file")

// DirStorage is a Storage in a local directory. An object is written to a
// uniquely named temporary file, synced, and linked to its name (link
// fails if the name exists, so a create-only write is atomic even between
// processes), then the directory is synced: after a crash a name holds all
// of its object or does not exist. Needs a file system with hard links
// (every local Linux and macOS file system has them).
type DirStorage struct{ dir string }

// Dir returns the storage of a local directory, creating it if needed.
func Dir(dir string) (*DirStorage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: directory %s: %w", ErrStorage, dir, err)
	}
	return &DirStorage{dir: dir}, nil
}

func (d *DirStorage) String() string { return d.dir }

func (d *DirStorage) path(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	return filepath.Join(d.dir, name), nil
}

// CheckName returns nil if name is an object name a Storage must accept,
// else an error matching ErrInvalid that quotes it. A valid name is flat:
// 1 to 255 printable ASCII characters, no space, no '/' or '\\', not "."
// or "..". Every name the store writes is valid; implementations of
// Storage call it in Create so that a name never escapes their namespace.
func CheckName(name string) error {
	if !validName(name) {
		return fmt.Errorf("%w: object name %q", ErrInvalid, name)
	}
	return nil
}

// validName: a flat name of printable characters, no path separators.
func validName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == '/' || r == '\\' || r > '~' {
			return false
		}
	}
	return true
}

func (d *DirStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	var nonce [6]byte
	rand.Read(nonce[:])
	tmp := p + tmpMarker + hex.EncodeToString(nonce[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &dirWriter{d: d, f: f, tmp: tmp, final: p}, nil
}

// tmpMarker separates an object's name from the suffix of its temporary
// file.
const tmpMarker = ".tmp-"

type dirWriter struct {
	d          *DirStorage
	f          *os.File
	tmp, final string
	done       bool
}

func (w *dirWriter) Write(p []byte) (int, error) { return w.f.Write(p) }

func (w *dirWriter) Commit() error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	w.done = true
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(w.tmp, w.final) // fails if final exists: create-only
	}
	os.Remove(w.tmp)
	if err != nil {
		return err
	}
	return syncDir(w.d.dir)
}

func (w *dirWriter) Abort() {
	if !w.done {
		w.done = true
		w.f.Close()
		os.Remove(w.tmp)
	}
}

func (d *DirStorage) Open(ctx context.Context, name string) (ObjectReader, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer forever; a regular file ignores the flag.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: errNotRegular}
	}
	return osReader{f, st.Size()}, nil
}

type osReader struct {
	*os.File
	size int64
}

func (r osReader) Size() int64 { return r.size }

func (d *DirStorage) Remove(ctx context.Context, name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

// List returns the names of the directory's entries that are not
// directories, sorted; a FIFO or device is listed (so that verification
// names it) but never opened.
func (d *DirStorage) List(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}

// MemStorage is a Storage in memory, for tests and for jobs that need no
// durability. Committed objects live until removed; the zero value is not
// usable: call Memory.
type MemStorage struct {
	mu      sync.Mutex
	objects map[string][]byte
}

// Memory returns an empty in-memory storage.
func Memory() *MemStorage { return &MemStorage{objects: map[string][]byte{}} }

func (m *MemStorage) String() string { return "mem://" }

func (m *MemStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return &memWriter{m: m, name: name}, nil
}

type memWriter struct {
	m    *MemStorage
	name string
	buf  bytes.Buffer
	done bool
}

func (w *memWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *memWriter) Commit() error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	w.done = true
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if _, ok := w.m.objects[w.name]; ok {
		return &fs.PathError{Op: "create", Path: w.name, Err: fs.ErrExist}
	}
	w.m.objects[w.name] = bytes.Clone(w.buf.Bytes())
	return nil
}

func (w *memWriter) Abort() { w.done = true }

func (m *MemStorage) Open(ctx context.Context, name string) (ObjectReader, error) {
	m.mu.Lock()
	b, ok := m.objects[name]
	m.mu.Unlock()
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memReader{bytes.NewReader(b)}, nil
}

type memReader struct{ *bytes.Reader }

func (memReader) Close() error { return nil }

func (m *MemStorage) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.objects, name)
	return nil
}

func (m *MemStorage) List(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.objects))
	for n := range m.objects {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// baseName returns the object name a temporary file of DirStorage is
// written for (name itself if it is not a temporary).
func baseName(name string) string {
	if i := strings.Index(name, tmpMarker); i >= 0 {
		return name[:i]
	}
	return name
}
