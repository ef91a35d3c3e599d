// Package storeurl opens a checkpoint store's Storage from a URL:
//
//	/path/to/dir or file:///path/to/dir   a local directory (checkpoint.Dir)
//	mem://                                memory (gocloud.dev memblob)
//	s3://bucket?prefix=jobs/a/&region=... S3 or an S3-compatible server
//	gs://bucket?prefix=...                Google Cloud Storage
//	azblob://container?prefix=...         Azure Blob Storage
//
// Object storage goes through gocloud.dev/blob, and as there a program
// links the SDK of a service only if it imports that service's driver for
// its side effect:
//
//	import _ "gocloud.dev/blob/s3blob"    // s3://
//	import _ "gocloud.dev/blob/gcsblob"   // gs://
//	import _ "gocloud.dev/blob/azureblob" // azblob://
//
// A program that keeps its checkpoints in S3 then builds without the GCS
// and Azure SDKs or gRPC. Open of a scheme whose driver is not linked is
// an error matching ErrNoDriver that names the import.
//
// The query parameters are the drivers' (for an S3-compatible server on
// loopback:
// endpoint=http://127.0.0.1:PORT&use_path_style=true&disable_https=true&
// region=us-east-1&request_checksum_calculation=when_required, besides
// prefix). Credentials come from each service's standard environment (for
// S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), never from the URL.
// A file:// URL opens checkpoint.Dir, not gocloud.dev's fileblob, whose
// create-only write is not atomic.
//
// One query parameter is this package's: request_timeout (a Go duration,
// "30s"; "0" for none) sets the bound of each request of the bucket
// storage (BucketStorage.SetRequestTimeout; default
// DefaultRequestTimeout), so that a silent endpoint fails the store's
// calls instead of holding them.
//
// Bucket makes a storage of a gocloud.dev/blob bucket a program opened
// itself (another driver, its own credentials). Package s3test starts a
// real S3-compatible server for tests.
//
// This package is a module of its own, github.com/cowstate/cowstate/checkpoint/storeurl,
// because it depends on gocloud.dev: the library module (and a program
// that needs only a directory, checkpoint.Dir) does not.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/memblob" // mem://
)

// ErrNoDriver: a URL of object storage whose gocloud.dev/blob driver the
// program does not link (see the package documentation). It also
// matches checkpoint.ErrStorage.
var ErrNoDriver = errors.New("storeurl: no driver for the URL's scheme")

// drivers are the gocloud.dev/blob drivers of the schemes storeurl
// documents, for the message of ErrNoDriver.
var drivers = map[string]string{
	"s3":     "gocloud.dev/blob/s3blob",
	"gs":     "gocloud.dev/blob/gcsblob",
	"azblob": "gocloud.dev/blob/azureblob",
}

// Open opens the storage at rawURL (see the package documentation). For
// object storage the bucket stays open for the life of the program. The
// errors match checkpoint.ErrStorage (checkpoint.ErrInvalid for a
// request_timeout that is not a duration) and name the URL without its
// query.
func Open(ctx context.Context, rawURL string) (checkpoint.Storage, error) {
	if dir, ok := LocalDir(rawURL); ok {
		return checkpoint.Dir(dir)
	}
	if u, err := url.Parse(rawURL); err == nil && u.Scheme == "file" {
		return nil, fmt.Errorf("%w: %s: a file URL names a local path (file:///path)", checkpoint.ErrStorage, Redact(rawURL))
	}
	if u, err := url.Parse(rawURL); err == nil && !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		hint := "a scheme storeurl does not know"
		if d, ok := drivers[u.Scheme]; ok {
			hint = fmt.Sprintf("import _ %q in the program", d)
		}
		return nil, fmt.Errorf("%w: %w: open %s: %s:// (%s)", checkpoint.ErrStorage, ErrNoDriver, Redact(rawURL), u.Scheme, hint)
	}
	timeout := DefaultRequestTimeout
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("request_timeout") {
		q := u.Query()
		if timeout, err = time.ParseDuration(q.Get("request_timeout")); err != nil {
			return nil, fmt.Errorf("%w: %s: request_timeout: %v", checkpoint.ErrInvalid, Redact(rawURL), err)
		}
		q.Del("request_timeout") // the drivers reject parameters they do not know
		u.RawQuery = q.Encode()
		rawURL = u.String()
	}
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", checkpoint.ErrStorage, Redact(rawURL), redactErr(err, rawURL))
	}
	return Bucket(b, Redact(rawURL)).SetRequestTimeout(timeout), nil
}

// LocalDir returns the directory rawURL names, if it names one: a path
// (C:\ on Windows too), or a file URL with no host but localhost.
func LocalDir(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || u.Scheme == "" || len(u.Scheme) == 1:
		return rawURL, true
	case u.Scheme == "file" && (u.Host == "" || u.Host == "localhost"):
		return u.Path, true
	}
	return "", false
}

// Redact returns rawURL without user information, and with only the prefix
// of its query, for messages: scheme, host, path, prefix.
func Redact(rawURL string) string {
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

// redactErr keeps a driver's error from repeating the full URL.
func redactErr(err error, rawURL string) string {
	return strings.ReplaceAll(err.Error(), rawURL, Redact(rawURL))
}
