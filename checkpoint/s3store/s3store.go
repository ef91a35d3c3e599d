// Package s3store is a checkpoint store's Storage in Amazon S3 or an
// S3-compatible server, on the AWS SDK for Go v2 and nothing else: a
// program that keeps its checkpoints in S3 links the S3 client, the SDK's
// configuration and credential chain, and no other cloud's code.
//
//	st, err := s3store.Open(ctx, "s3://bucket?prefix=jobs/a/&region=eu-west-1")
//	loop, start, err := checkpoint.Resume[Offsets](ctx, b, st, opts)
//
// Credentials and the rest of the client's configuration come from the
// SDK's standard chain (environment, shared files, web identity, the
// instance's role), never from the URL. New makes a Storage of a client a
// program configured itself.
//
// Every write is create-only (If-None-Match: *, on PutObject or on
// CompleteMultipartUpload), which is what the store's commits rest on; S3
// has offered it since August 2024, as have most S3-compatible servers.
// Package s3test starts a real server (the Versity S3 Gateway) for tests.
//
// This package is a module of its own,
// github.com/cowstate/cowstate/checkpoint/s3store, so that the library
// module, and a program that keeps checkpoints on a local disk, does not
// depend on the SDK.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/cowstate/cowstate/checkpoint"
)

// Storage is a checkpoint.Storage under a prefix of an S3 bucket. An
// object is written with one PutObject when it is smaller than PartSize,
// else as a multipart upload of PartSize parts (so a writer holds one part
// in memory, whatever the object's size); either way it appears whole
// when Commit returns. Reads are ranged GetObjects. Safe for concurrent
// use.
//
// Every request is bounded by the caller's context and by the request
// timeout (DefaultRequestTimeout, see SetRequestTimeout): an endpoint that
// accepts connections and never answers fails the call with an error
// matching os.ErrDeadlineExceeded after it.
type Storage struct {
	c       *s3.Client
	bucket  string
	prefix  string
	name    string
	timeout time.Duration
}

// DefaultRequestTimeout is a Storage's request timeout until
// SetRequestTimeout changes it: long enough for a part of PartSize at well
// under 1 MB/s.
const DefaultRequestTimeout = time.Minute

// PartSize is the size of a multipart upload's parts, and the size from
// which an object is uploaded in parts.
const PartSize = 16 << 20

// New returns the storage of the objects of bucket whose keys start with
// prefix (a store's objects are prefix+name), through c. The caller keeps
// ownership of c.
func New(c *s3.Client, bucket, prefix string) *Storage {
	name := "s3://" + bucket
	if prefix != "" {
		name += "?prefix=" + url.QueryEscape(prefix)
	}
	return &Storage{c: c, bucket: bucket, prefix: prefix, name: name, timeout: DefaultRequestTimeout}
}

// Open opens the storage an s3:// URL names:
//
//	s3://bucket?prefix=jobs/a/&region=eu-west-1
//
// Query parameters, all optional: prefix (the keys' prefix), region,
// endpoint (an S3-compatible server, "http://127.0.0.1:9000"),
// use_path_style (true for most S3-compatible servers), and
// request_timeout (a Go duration; "0" for none). Anything else is an
// error matching checkpoint.ErrInvalid, as is a URL that is not s3://.
// The client's credentials and other settings come from the SDK's
// default chain (config.LoadDefaultConfig).
func Open(ctx context.Context, rawURL string) (*Storage, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: %s is not an s3://bucket URL", checkpoint.ErrInvalid, redact(rawURL))
	}
	q := u.Query()
	var optFns []func(*config.LoadOptions) error
	var s3Fns []func(*s3.Options)
	timeout := DefaultRequestTimeout
	for k := range q {
		v := q.Get(k)
		switch k {
		case "prefix":
		case "region":
			optFns = append(optFns, config.WithRegion(v))
		case "endpoint":
			if e, err := url.Parse(v); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return nil, fmt.Errorf("%w: %s: endpoint %q is not an http(s) URL", checkpoint.ErrInvalid, redact(rawURL), v)
			}
			s3Fns = append(s3Fns, func(o *s3.Options) { o.BaseEndpoint = aws.String(v) })
		case "use_path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: use_path_style %q is not a bool", checkpoint.ErrInvalid, redact(rawURL), v)
			}
			s3Fns = append(s3Fns, func(o *s3.Options) { o.UsePathStyle = b })
		case "request_timeout":
			if timeout, err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("%w: %s: request_timeout: %v", checkpoint.ErrInvalid, redact(rawURL), err)
			}
		default:
			return nil, fmt.Errorf("%w: %s: unknown parameter %q (known: prefix, region, endpoint, use_path_style, request_timeout)", checkpoint.ErrInvalid, redact(rawURL), k)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: loading the AWS configuration: %v", checkpoint.ErrStorage, redact(rawURL), err)
	}
	// Checksums only where S3 requires them: S3-compatible servers do not
	// all accept the SDK's default trailing checksums.
	cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	s := New(s3.NewFromConfig(cfg, s3Fns...), u.Host, q.Get("prefix"))
	return s.SetRequestTimeout(timeout), nil
}

// redact returns rawURL with only its bucket and prefix, for messages.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if p := u.Query().Get("prefix"); p != "" {
		r.RawQuery = "prefix=" + url.QueryEscape(p)
	}
	return r.String()
}

// SetRequestTimeout sets the bound of each request (0 or less: none, only
// the caller's context) and returns s. Set it before the storage is used.
func (s *Storage) SetRequestTimeout(d time.Duration) *Storage {
	s.timeout = d
	return s
}

// RequestTimeout returns the bound of each request (0: none).
func (s *Storage) RequestTimeout() time.Duration { return max(s.timeout, 0) }

// String names the storage: s3://bucket?prefix=...
func (s *Storage) String() string { return s.name }

// requestTimedOut is the cause of a request's context that ran out of its
// request timeout.
type requestTimedOut struct{ d time.Duration }

func (e *requestTimedOut) Error() string {
	return fmt.Sprintf("no answer within the request timeout (%v)", e.d)
}
func (e *requestTimedOut) Unwrap() error { return os.ErrDeadlineExceeded }

// request runs one request under ctx bounded by the request timeout, and
// gives its error the meaning the store needs.
func (s *Storage) request(ctx context.Context, op, name string, f func(ctx context.Context) error) error {
	var cancel context.CancelFunc
	if s.timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, s.timeout, &requestTimedOut{s.timeout})
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	err := f(ctx)
	if err == nil {
		return nil
	}
	var to *requestTimedOut
	if cause := context.Cause(ctx); errors.As(cause, &to) {
		err = fmt.Errorf("%w (%v)", cause, err)
	}
	return s.s3Err(op, name, err)
}

// s3Err maps an S3 error: a missing object to fs.ErrNotExist, a failed
// create-only condition to fs.ErrExist, a conflicting conditional write in
// flight to checkpoint.ErrWriteConflict. The message names the object once.
func (s *Storage) s3Err(op, name string, err error) error {
	where := s.name
	if name != "" {
		where += " object " + name
	}
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case code == "NoSuchKey" || code == "NotFound" && name != "":
		return &fs.PathError{Op: op, Path: where, Err: fs.ErrNotExist}
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		return &fs.PathError{Op: op, Path: where, Err: fs.ErrExist}
	case code == "ConditionalRequestConflict":
		return fmt.Errorf("%s %s: %w: %w", op, where, checkpoint.ErrWriteConflict, err)
	}
	return fmt.Errorf("%s %s: %w", op, where, err)
}

// Create starts writing an object; see Storage for how it is uploaded.
func (s *Storage) Create(ctx context.Context, name string) (checkpoint.ObjectWriter, error) {
	if err := checkpoint.CheckName(name); err != nil {
		return nil, err
	}
	return &writer{s: s, ctx: ctx, name: name, key: s.prefix + name}, nil
}

// writer buffers up to PartSize bytes; a full buffer starts (or goes on
// with) a multipart upload, Commit puts a small object whole or completes
// the upload, both create-only.
type writer struct {
	s        *Storage
	ctx      context.Context
	name     string
	key      string
	buf      bytes.Buffer
	uploadID *string
	parts    []types.CompletedPart
	err      error
	done     bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("object already committed or aborted")
	}
	n := len(p)
	for len(p) > 0 {
		room := PartSize - w.buf.Len()
		k := min(room, len(p))
		w.buf.Write(p[:k])
		p = p[k:]
		if w.buf.Len() == PartSize {
			if err := w.uploadPart(); err != nil {
				w.err = err
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *writer) uploadPart() error {
	s := w.s
	if w.uploadID == nil {
		err := s.request(w.ctx, "create", w.name, func(ctx context.Context) error {
			out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
				Bucket: &s.bucket, Key: &w.key, ContentType: aws.String("application/octet-stream"),
			})
			if err == nil {
				w.uploadID = out.UploadId
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	num := int32(len(w.parts) + 1)
	body := w.buf.Bytes()
	err := s.request(w.ctx, "write", w.name, func(ctx context.Context) error {
		out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.bucket, Key: &w.key, UploadId: w.uploadID, PartNumber: &num,
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		})
		if err == nil {
			w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
		}
		return err
	})
	w.buf.Reset()
	return err
}

// Commit makes the object visible, or fails with fs.ErrExist if the name
// exists.
func (w *writer) Commit() error {
	if w.done {
		return errors.New("object already committed or aborted")
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	s := w.s
	if w.uploadID == nil {
		w.done = true
		body := w.buf.Bytes()
		return s.request(w.ctx, "commit", w.name, func(ctx context.Context) error {
			_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &s.bucket, Key: &w.key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
				IfNoneMatch: aws.String("*"), ContentType: aws.String("application/octet-stream"),
			})
			return err
		})
	}
	if w.buf.Len() > 0 {
		if err := w.uploadPart(); err != nil {
			w.Abort()
			return err
		}
	}
	w.done = true
	err := s.request(w.ctx, "commit", w.name, func(ctx context.Context) error {
		_, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &s.bucket, Key: &w.key, UploadId: w.uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
			IfNoneMatch:     aws.String("*"),
		})
		return err
	})
	if err != nil {
		w.abortUpload()
	}
	return err
}

// Abort discards the object. Safe after Commit (then a no-op).
func (w *writer) Abort() {
	if w.done && w.uploadID == nil {
		return
	}
	w.done = true
	w.buf.Reset()
	w.abortUpload()
}

func (w *writer) abortUpload() {
	if w.uploadID == nil {
		return
	}
	s, id := w.s, w.uploadID
	w.uploadID = nil
	// Best effort, under a context of its own: an upload left behind
	// costs storage until the bucket's lifecycle rule removes it, never
	// correctness (it is no object).
	ctx := context.WithoutCancel(w.ctx)
	s.request(ctx, "abort", w.name, func(ctx context.Context) error {
		_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &w.key, UploadId: id})
		return err
	})
}

// Open opens an object: a HeadObject for its size, then a ranged
// GetObject per ReadAt.
func (s *Storage) Open(ctx context.Context, name string) (checkpoint.ObjectReader, error) {
	key := s.prefix + name
	var size int64
	err := s.request(ctx, "open", name, func(ctx context.Context) error {
		out, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		if err == nil {
			size = aws.ToInt64(out.ContentLength)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &reader{s: s, ctx: ctx, name: name, key: key, size: size}, nil
}

type reader struct {
	s         *Storage
	ctx       context.Context
	name, key string
	size      int64
}

func (r *reader) Size() int64  { return r.size }
func (r *reader) Close() error { return nil }

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), r.size) - 1
	var n int
	err := r.s.request(r.ctx, "read", r.name, func(ctx context.Context) error {
		out, err := r.s.c.GetObject(ctx, &s3.GetObjectInput{
			Bucket: &r.s.bucket, Key: &r.key, Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
		})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n, err = io.ReadFull(out.Body, p[:end-off+1])
		return err
	})
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// Remove deletes an object: a HeadObject first, since S3's DeleteObject
// succeeds on a missing key and the Storage contract says fs.ErrNotExist.
func (s *Storage) Remove(ctx context.Context, name string) error {
	key := s.prefix + name
	err := s.request(ctx, "remove", name, func(ctx context.Context) error {
		_, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		return err
	})
	if err != nil {
		return err
	}
	return s.request(ctx, "remove", name, func(ctx context.Context) error {
		_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
		return err
	})
}

// List lists every object under the prefix, a request per page of 1000.
func (s *Storage) List(ctx context.Context) ([]string, error) {
	var names []string
	var token *string
	for {
		var out *s3.ListObjectsV2Output
		err := s.request(ctx, "list", "", func(ctx context.Context) (err error) {
			out, err = s.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &s.prefix, ContinuationToken: token})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, o := range out.Contents {
			if name, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix); ok && !strings.Contains(name, "/") {
				names = append(names, name)
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		token = out.NextContinuationToken
	}
	slices.Sort(names)
	return names, nil
}
