package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// writeObject writes a new object through write and commits it; it returns
// its size and xxhash64, and adds to *sync (if not nil) the time the
// storage took to commit it (make it durable). A failed write leaves no
// object under name.
func writeObject(ctx context.Context, st Storage, name string, sync *time.Duration, write func(io.Writer) error) (int64, uint64, error) {
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
	start := time.Now()
	err = w.Commit()
	if sync != nil {
		*sync += time.Since(start)
	}
	if err != nil {
		w.Abort()
		return 0, 0, storageErr("commit "+name, err)
	}
	return cw.n, h.Sum64(), nil
}

// listWhat is what storageErr says of a failed List of st: "list" and the
// store, or nothing if the error names the store already (a
// BucketStorage's and an os error do), so that a message says where once.
func listWhat(st Storage, err error) string {
	if strings.Contains(err.Error(), st.String()) {
		return ""
	}
	return "list " + st.String()
}

// storageErr classifies an error of the storage (or of what writes to it):
// a context's error stays itself, an error already classified keeps its
// class, anything else is ErrStorage.
func storageErr(what string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case what == "" && classified(err):
		return err
	case what == "":
		return fmt.Errorf("%w: %w", ErrStorage, err)
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
// size the manifest records and the object has, once checkLarge found the
// segment to be what its manifest says.
func readSegment(ctx context.Context, st Storage, s Segment, fetched *atomic.Int64) ([]byte, error) {
	f, err := st.Open(ctx, s.Name)
	if err != nil {
		return nil, openErr(s.Name, err)
	}
	defer f.Close()
	if f.Size() != s.Size {
		return nil, fmt.Errorf("%w: segment %s has %d bytes, the manifest says %d", ErrCorrupt, s.Name, f.Size(), s.Size)
	}
	if err := checkLarge(s, f); err != nil {
		return nil, err
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
		if fetched != nil {
			fetched.Add(int64(end - off))
		}
	}
	if got := sumHex(h.Sum64()); got != s.Sum {
		return nil, fmt.Errorf("%w: segment %s: xxhash64 %s, the manifest says %s", ErrCorrupt, s.Name, got, s.Sum)
	}
	return buf, nil
}

// wholeReadMax is the size up to which a segment is read into memory
// without a look at its skeleton first: a few ranged reads cost more than
// they save below it.
const wholeReadMax = 64 << 20

// checkLarge checks, before a segment of more than wholeReadMax bytes is
// read into memory, that it can be what its manifest says: its skeleton
// (header, index and footer, a few small reads) against the manifest's
// skeleton xxhash64, and its size against the memory this process may
// use. A manifest that claims a segment of another size (edited, or an
// object grown by hand) then fails with an ErrCorrupt naming it instead
// of allocating that size; a real segment larger than the memory is an
// ErrMismatch, since a restore holds its segments in memory.
func checkLarge(s Segment, f ObjectReader) error {
	if s.Size <= wholeReadMax {
		return nil
	}
	if s.Skeleton != "" {
		rr := &recordingReader{r: storageReaderAt{f: f, name: s.Name}, h: xxhash.New()}
		var err error
		if s.Delta {
			_, err = delta.Open(rr, s.Size)
		} else {
			_, err = snapshot.Open(rr, s.Size)
		}
		if err == nil {
			err = checkSkeleton(s, rr)
		}
		if err != nil {
			if classified(err) {
				return err
			}
			return fmt.Errorf("%w: segment %s (%d bytes, as its manifest says): %w", ErrCorrupt, s.Name, s.Size, err)
		}
	}
	if limit := memoryLimit(); s.Size > limit {
		return fmt.Errorf("%w: segment %s has %d bytes, more than the %d this process may use (physical memory, GOMEMLIMIT): a restore holds its segments in memory",
			ErrMismatch, s.Name, s.Size, limit)
	}
	return nil
}

// memoryLimit is the memory this process may use: the least of the Go
// runtime's memory limit and the machine's physical memory, where known.
func memoryLimit() int64 {
	limit := debug.SetMemoryLimit(-1)
	if phys := physicalMemory(); phys > 0 {
		limit = min(limit, phys)
	}
	return limit
}

// openFull reads and checks a checkpoint's full segment and opens it as a
// snapshot; its header must agree with the manifest.
func openFull(ctx context.Context, st Storage, m *Manifest, fetched *atomic.Int64) (*snapshot.Reader, error) {
	s := m.Segments[0]
	b, err := readSegment(ctx, st, s, fetched)
	if err != nil {
		return nil, err
	}
	r, err := snapshot.OpenBytes(b)
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
func readDelta(ctx context.Context, st Storage, s Segment, kgs *statetable.KeyGroupRange, fetched *atomic.Int64) (*delta.Delta, error) {
	r, err := openDelta(ctx, st, s, fetched)
	if err != nil {
		return nil, err
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

// openDelta reads delta segment s whole, checked against its size and
// xxhash64, and opens it: its header, index and footer checked, and the
// versions it goes between those the manifest says.
func openDelta(ctx context.Context, st Storage, s Segment, fetched *atomic.Int64) (*delta.Reader, error) {
	b, err := readSegment(ctx, st, s, fetched)
	if err != nil {
		return nil, err
	}
	r, err := delta.OpenBytes(b)
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	if r.Base() != s.Base || r.Target() != s.Target {
		return nil, fmt.Errorf("%w: segment %s holds delta %d->%d, the manifest says %d->%d", ErrCorrupt, s.Name, r.Base(), r.Target(), s.Base, s.Target)
	}
	return r, nil
}

// A segment's skeleton is what a reader reads before any section: the
// header with the metadata, the index with every section's offset, length
// and xxhash64, and the footer. Its xxhash64 (of each read's offset, length
// and bytes, in the order the format's Open reads them, which depends only
// on the file) is recorded in the manifest, so a restore of some key
// groups can read only their sections by ranged reads: the skeleton is
// checked against the manifest, and each section against the skeleton's
// index, before it is used.

// recordingReader hashes every read through it until stopped.
type recordingReader struct {
	r       io.ReaderAt
	h       *xxhash.Digest
	stopped bool
}

func (rr *recordingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	if rr.stopped {
		return n, err
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], uint64(off))
	binary.BigEndian.PutUint64(b[8:], uint64(n))
	rr.h.Write(b[:])
	rr.h.Write(p[:n])
	return n, err
}

// storageReaderAt turns the read errors of an object into ErrStorage ones
// (a section read fails in the middle of a restore as a storage failure,
// not as damage), and counts the bytes read.
type storageReaderAt struct {
	f       ObjectReader
	name    string
	fetched *atomic.Int64
}

func (s storageReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.f.ReadAt(p, off)
	if s.fetched != nil {
		s.fetched.Add(int64(n))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = storageErr("read segment "+s.name, err)
	}
	return n, err
}

// skeletonSum opens a segment through a recording reader and returns the
// xxhash64 of its skeleton. It reads the object back (the skeleton, not
// the sections), or takes its bytes if the caller has them.
func skeletonSum(ctx context.Context, st Storage, s Segment, content []byte) (string, error) {
	var r io.ReaderAt = bytes.NewReader(content)
	size := int64(len(content))
	if content == nil {
		f, err := st.Open(ctx, s.Name)
		if err != nil {
			return "", openErr(s.Name, err)
		}
		defer f.Close()
		r, size = storageReaderAt{f: f, name: s.Name}, f.Size()
	}
	rr := &recordingReader{r: r, h: xxhash.New()}
	var err error
	if s.Delta {
		_, err = delta.Open(rr, size)
	} else {
		_, err = snapshot.Open(rr, size)
	}
	if err != nil {
		return "", storageErr("read back "+s.Name, err)
	}
	return sumHex(rr.h.Sum64()), nil
}

// openRanged opens a segment for reading some of its sections: the
// object's size and its skeleton are checked against the manifest; the
// sections are read, and checked against the skeleton's index, when the
// restore asks for them. Only the skeleton is read here. The object stays
// open until closer is called.
func openRanged(ctx context.Context, st Storage, s Segment, fetched *atomic.Int64) (io.ReaderAt, int64, func(), error) {
	f, err := st.Open(ctx, s.Name)
	if err != nil {
		return nil, 0, nil, openErr(s.Name, err)
	}
	if f.Size() != s.Size {
		f.Close()
		return nil, 0, nil, fmt.Errorf("%w: segment %s has %d bytes, the manifest says %d", ErrCorrupt, s.Name, f.Size(), s.Size)
	}
	return storageReaderAt{f: f, name: s.Name, fetched: fetched}, f.Size(), func() { f.Close() }, nil
}

// checkSkeleton compares the skeleton read through rr with the manifest.
func checkSkeleton(s Segment, rr *recordingReader) error {
	rr.stopped = true // what is read from here on is sections, checked by the index
	if got := sumHex(rr.h.Sum64()); got != s.Skeleton {
		return fmt.Errorf("%w: segment %s: skeleton xxhash64 %s, the manifest says %s", ErrCorrupt, s.Name, got, s.Skeleton)
	}
	return nil
}

// openFullRange opens a checkpoint's full segment for a restore of the
// key groups kgs only.
func openFullRange(ctx context.Context, st Storage, m *Manifest, fetched *atomic.Int64) (*snapshot.Reader, func(), error) {
	s := m.Segments[0]
	r, size, closer, err := openRanged(ctx, st, s, fetched)
	if err != nil {
		return nil, nil, err
	}
	rr := &recordingReader{r: r, h: xxhash.New()}
	sr, err := snapshot.Open(rr, size)
	if err == nil {
		err = checkSkeleton(s, rr)
	}
	if err != nil {
		closer()
		if classified(err) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	return sr, closer, nil
}

// readDeltaRange reads the sections of key groups kgs of a delta segment
// by ranged reads, checked against the manifest's skeleton.
func readDeltaRange(ctx context.Context, st Storage, s Segment, kgs statetable.KeyGroupRange, fetched *atomic.Int64) (*delta.Delta, error) {
	r, size, closer, err := openRanged(ctx, st, s, fetched)
	if err != nil {
		return nil, err
	}
	defer closer()
	rr := &recordingReader{r: r, h: xxhash.New()}
	dr, err := delta.Open(rr, size)
	if err == nil {
		err = checkSkeleton(s, rr)
	}
	if err != nil {
		if classified(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	if dr.Base() != s.Base || dr.Target() != s.Target {
		return nil, fmt.Errorf("%w: segment %s holds delta %d->%d, the manifest says %d->%d", ErrCorrupt, s.Name, dr.Base(), dr.Target(), s.Base, s.Target)
	}
	d, err := dr.Read(ctx, kgs)
	if err != nil {
		if ctx.Err() != nil || classified(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, s.Name, err)
	}
	return d, nil
}
