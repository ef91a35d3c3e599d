package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// writeObject writes a new object through write and commits it; it returns
// its size and xxhash64. A failed write leaves no object under name.
func writeObject(ctx context.Context, st Storage, name string, write func(io.Writer) error) (int64, uint64, error) {
	w, err := st.Create(ctx, name)
	if err != nil {
		return 0, 0, storageErr("create "+name, err)
	}
	h := xxhash.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	if err := write(cw); err != nil {
		w.Abort()
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		return 0, 0, storageErr("write "+name, err)
	}
	if err := w.Commit(); err != nil {
		w.Abort()
		return 0, 0, storageErr("commit "+name, err)
	}
	return cw.n, h.Sum64(), nil
}

// storageErr classifies an error of the storage (or of what writes to it):
// a context's error stays itself, an error already classified keeps its
// class, anything else is ErrStorage.
func storageErr(what string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case classified(err):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrStorage, what, err)
}

func classified(err error) bool {
	for _, s := range []error{ErrNoCheckpoint, ErrCorrupt, ErrMismatch, ErrFenced, ErrTooManyPending, ErrInvalid, ErrStorage} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// openErr classifies an error opening a referenced object: missing or not
// a regular file is damage, anything else a storage failure.
func openErr(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular) {
		return fmt.Errorf("%w: segment %s: %w", ErrCorrupt, name, err)
	}
	return storageErr("open segment "+name, err)
}

// readChunk is how much readSegment reads (and hashes) at a time.
const readChunk = 4 << 20

// readSegment reads a whole segment and checks its size and xxhash64
// against the manifest's reference as it reads, before anything uses the
// bytes: a segment of the right size with other content (another writer's,
// or rewritten) is an ErrCorrupt naming it. It allocates s.Size bytes, the
// size the manifest records and the object has.
func readSegment(ctx context.Context, st Storage, s Segment) ([]byte, error) {
	f, err := st.Open(ctx, s.Name)
	if err != nil {
		return nil, openErr(s.Name, err)
	}
	defer f.Close()
	if f.Size() != s.Size {
		return nil, fmt.Errorf("%w: segment %s has %d bytes, the manifest says %d", ErrCorrupt, s.Name, f.Size(), s.Size)
	}
	buf := make([]byte, s.Size)
	h := xxhash.New()
	for off := 0; off < len(buf); off += readChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := min(off+readChunk, len(buf))
		if n, err := f.ReadAt(buf[off:end], int64(off)); n < end-off {
			if err == nil || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: segment %s: ends at %d bytes, the manifest says %d", ErrCorrupt, s.Name, off+n, s.Size)
			}
			return nil, storageErr("read segment "+s.Name, err)
		}
		h.Write(buf[off:end])
	}
	if got := sumHex(h.Sum64()); got != s.Sum {
		return nil, fmt.Errorf("%w: segment %s: xxhash64 %s, the manifest says %s", ErrCorrupt, s.Name, got, s.Sum)
	}
	return buf, nil
}

// openFull reads and checks a checkpoint's full segment and opens it as a
// snapshot; its header must agree with the manifest.
func openFull(ctx context.Context, st Storage, m *Manifest) (*snapshot.Reader, error) {
	s := m.Segments[0]
	b, err := readSegment(ctx, st, s)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	meta := r.Meta()
	if meta.MaxParallelism != m.MaxParallelism || meta.KeyGroups != m.KeyGroups {
		return nil, fmt.Errorf("%w: segment %s holds key groups %v of %d, the manifest of %s %d says %v of %d",
			ErrCorrupt, s.Name, meta.KeyGroups, meta.MaxParallelism, m.Kind, m.ID, m.KeyGroups, m.MaxParallelism)
	}
	if meta.Savepoint != (m.Kind == KindSavepoint) {
		return nil, fmt.Errorf("%w: segment %s: savepoint flag %v in a %s", ErrCorrupt, s.Name, meta.Savepoint, m.Kind)
	}
	return r, nil
}

// readDelta reads and checks a delta segment and decodes the key groups kgs
// of it (nil: all of them).
func readDelta(ctx context.Context, st Storage, s Segment, kgs *statetable.KeyGroupRange) (*delta.Delta, error) {
	b, err := readSegment(ctx, st, s)
	if err != nil {
		return nil, err
	}
	r, err := delta.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	if r.Base() != s.Base || r.Target() != s.Target {
		return nil, fmt.Errorf("%w: segment %s holds delta %d->%d, the manifest says %d->%d", ErrCorrupt, s.Name, r.Base(), r.Target(), s.Base, s.Target)
	}
	if kgs == nil {
		all := r.Meta().KeyGroups
		kgs = &all
	}
	d, err := r.Read(ctx, *kgs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	return d, nil
}
