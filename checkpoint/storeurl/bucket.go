package storeurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

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
// Do not use it over gocloud.dev's fileblob: its create-only write is a
// check followed by a rename, not atomic; use Dir for a local directory.
type BucketStorage struct {
	b    *blob.Bucket
	name string
}

// Bucket returns the storage of bucket b (wrap it with blob.PrefixedBucket
// to keep the store under a prefix). name says where it is in messages:
// a URL without credentials. The caller keeps ownership of b.
func Bucket(b *blob.Bucket, name string) *BucketStorage {
	return &BucketStorage{b: b, name: name}
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
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.b.NewWriter(wctx, name, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
	if err != nil {
		cancel()
		return nil, s.bucketErr("create", name, err)
	}
	return &bucketWriter{s: s, w: w, name: name, cancel: cancel}, nil
}

type bucketWriter struct {
	s      *BucketStorage
	w      *blob.Writer
	name   string
	cancel context.CancelFunc
	done   bool
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.s.bucketErr("write", w.name, err)
}

func (w *bucketWriter) Commit() error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	w.done = true
	defer w.cancel()
	return w.s.bucketErr("commit", w.name, w.w.Close())
}

// Abort cancels the upload: the object is not created.
func (w *bucketWriter) Abort() {
	if !w.done {
		w.done = true
		w.cancel()
		w.w.Close()
	}
}

func (s *BucketStorage) Open(ctx context.Context, name string) (checkpoint.ObjectReader, error) {
	attrs, err := s.b.Attributes(ctx, name)
	if err != nil {
		return nil, s.bucketErr("open", name, err)
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
	rd, err := r.s.b.NewRangeReader(r.ctx, r.name, off, int64(len(p)), nil)
	if err != nil {
		return 0, r.s.bucketErr("read", r.name, err)
	}
	defer rd.Close()
	n, err := io.ReadFull(rd, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.s.bucketErr("read", r.name, err)
	}
	return n, err
}

func (s *BucketStorage) Remove(ctx context.Context, name string) error {
	return s.bucketErr("remove", name, s.b.Delete(ctx, name))
}

// List lists every object of the bucket (under its prefix), page by page.
func (s *BucketStorage) List(ctx context.Context) ([]string, error) {
	var names []string
	it := s.b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.bucketErr("list", "", err)
		}
		if !obj.IsDir {
			names = append(names, obj.Key)
		}
	}
	slices.Sort(names)
	return names, nil
}
