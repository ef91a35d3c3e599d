package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// BucketStorage is a checkpoint.Storage in a gocloud.dev/blob bucket: S3
// and S3-compatible servers, Google Cloud Storage, Azure Blob Storage, or
// memory (Open opens one from a URL). An object is written
// with one upload and appears whole when it completes; every write is
// create-only (blob.WriterOptions.IfNotExist: If-None-Match on S3 and
// Azure, a generation precondition on GCS), which is what the store's
// commits rest on. Reads are ranged reads. Safe for concurrent use.
//
// Every request is bounded by the caller's context and by the request
// timeout (DefaultRequestTimeout, see SetRequestTimeout): an endpoint that
// accepts connections and never answers (a stalled proxy) fails the call
// with an error matching os.ErrDeadlineExceeded after it, where the SDK's
// own timeouts might wait for ever. A read is one request per ReadAt, a
// remove one, a listing one per page; an upload is bounded per Write and
// per Commit, each of which must see the upload progress within the
// timeout (the time between them, spent encoding, does not count).
//
// Do not use it over gocloud.dev's fileblob: its create-only write is a
// check followed by a rename, not atomic; use Dir for a local directory.
type BucketStorage struct {
	b       *blob.Bucket
	name    string
	timeout time.Duration
}

// DefaultRequestTimeout is a BucketStorage's request timeout until
// SetRequestTimeout changes it: long enough for a 4 MiB ranged read or a
// few parts of an upload at well under 1 MB/s.
const DefaultRequestTimeout = time.Minute

// Bucket returns the storage of bucket b (wrap it with blob.PrefixedBucket
// to keep the store under a prefix). name says where it is in messages:
// a URL without credentials. The caller keeps ownership of b.
func Bucket(b *blob.Bucket, name string) *BucketStorage {
	return &BucketStorage{b: b, name: name, timeout: DefaultRequestTimeout}
}

// SetRequestTimeout sets the bound of each request (0 or less: none, only
// the caller's context) and returns s. Set it before the storage is used.
func (s *BucketStorage) SetRequestTimeout(d time.Duration) *BucketStorage {
	s.timeout = d
	return s
}

// RequestTimeout returns the bound of each request (0: none).
func (s *BucketStorage) RequestTimeout() time.Duration { return max(s.timeout, 0) }

// requestTimedOut is the cause of a request's context that ran out of its
// request timeout.
type requestTimedOut struct{ d time.Duration }

func (e *requestTimedOut) Error() string {
	return fmt.Sprintf("no answer within the request timeout (%v)", e.d)
}
func (e *requestTimedOut) Unwrap() error { return os.ErrDeadlineExceeded }

// request returns the context of one request: ctx bounded by the request
// timeout.
func (s *BucketStorage) request(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, s.timeout, &requestTimedOut{s.timeout})
}

// timedOut replaces the error of a request whose context ran out of the
// request timeout (the SDK reports a cancellation) by the timeout.
func timedOut(rctx context.Context, err error) error {
	var to *requestTimedOut
	if cause := context.Cause(rctx); err != nil && errors.As(cause, &to) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

func (s *BucketStorage) String() string { return s.name }

// bucketErr gives an error of the bucket the meaning the store needs.
func (s *BucketStorage) bucketErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	where := s.name
	if name != "" {
		where += " object " + name
	}
	switch code := gcerrors.Code(err); {
	case code == gcerrors.NotFound && name == "":
		return fmt.Errorf("%s %s: no such bucket: %w", op, where, err)
	case code == gcerrors.NotFound:
		return &fs.PathError{Op: op, Path: where, Err: fs.ErrNotExist}
	case code == gcerrors.FailedPrecondition:
		return &fs.PathError{Op: op, Path: where, Err: fs.ErrExist}
	case strings.Contains(err.Error(), "ConditionalRequestConflict"):
		return fmt.Errorf("%s %s: %w: %w", op, where, checkpoint.ErrWriteConflict, err)
	}
	return fmt.Errorf("%s %s: %w", op, where, err)
}

func (s *BucketStorage) Create(ctx context.Context, name string) (checkpoint.ObjectWriter, error) {
	if err := checkpoint.CheckName(name); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w, err := s.b.NewWriter(wctx, name, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
	if err != nil {
		cancel(nil)
		return nil, s.bucketErr("create", name, err)
	}
	bw := &bucketWriter{s: s, w: w, name: name, ctx: wctx, cancel: cancel}
	if s.timeout > 0 {
		// Armed only during Write and Commit: a call that sees no
		// progress within the timeout cancels the upload.
		bw.watchdog = time.AfterFunc(time.Hour, func() { cancel(&requestTimedOut{s.timeout}) })
		bw.watchdog.Stop()
	}
	return bw, nil
}

type bucketWriter struct {
	s        *BucketStorage
	w        *blob.Writer
	name     string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	watchdog *time.Timer // nil: no request timeout
	done     bool
}

// call runs one Write or Commit under the request timeout.
func (w *bucketWriter) call(f func() error) error {
	if w.watchdog != nil {
		w.watchdog.Reset(w.s.timeout)
		defer w.watchdog.Stop()
	}
	return timedOut(w.ctx, f())
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	var n int
	err := w.call(func() (err error) {
		n, err = w.w.Write(p)
		return err
	})
	return n, w.s.bucketErr("write", w.name, err)
}

func (w *bucketWriter) Commit() error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	w.done = true
	defer w.cancel(nil)
	return w.s.bucketErr("commit", w.name, w.call(w.w.Close))
}

// Abort cancels the upload: the object is not created.
func (w *bucketWriter) Abort() {
	if !w.done {
		w.done = true
		if w.watchdog != nil {
			w.watchdog.Stop()
		}
		w.cancel(nil)
		w.w.Close()
	}
}

func (s *BucketStorage) Open(ctx context.Context, name string) (checkpoint.ObjectReader, error) {
	rctx, cancel := s.request(ctx)
	defer cancel()
	attrs, err := s.b.Attributes(rctx, name)
	if err != nil {
		return nil, s.bucketErr("open", name, timedOut(rctx, err))
	}
	return &bucketReader{s: s, ctx: ctx, name: name, size: attrs.Size}, nil
}

// bucketReader reads an object with one ranged read per ReadAt.
type bucketReader struct {
	s    *BucketStorage
	ctx  context.Context
	name string
	size int64
}

func (r *bucketReader) Size() int64  { return r.size }
func (r *bucketReader) Close() error { return nil }

func (r *bucketReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	rctx, cancel := r.s.request(r.ctx)
	defer cancel()
	rd, err := r.s.b.NewRangeReader(rctx, r.name, off, int64(len(p)), nil)
	if err != nil {
		return 0, r.s.bucketErr("read", r.name, timedOut(rctx, err))
	}
	defer rd.Close()
	n, err := io.ReadFull(rd, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.s.bucketErr("read", r.name, timedOut(rctx, err))
	}
	return n, err
}

func (s *BucketStorage) Remove(ctx context.Context, name string) error {
	rctx, cancel := s.request(ctx)
	defer cancel()
	return s.bucketErr("remove", name, timedOut(rctx, s.b.Delete(rctx, name)))
}

// List lists every object of the bucket (under its prefix), page by page.
func (s *BucketStorage) List(ctx context.Context) ([]string, error) {
	var names []string
	it := s.b.List(nil)
	for {
		// Next makes a request only at the start of a page; bounding
		// each call bounds each page.
		rctx, cancel := s.request(ctx)
		obj, err := it.Next(rctx)
		cancel()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.bucketErr("list", "", timedOut(rctx, err))
		}
		if !obj.IsDir {
			names = append(names, obj.Key)
		}
	}
	slices.Sort(names)
	return names, nil
}
