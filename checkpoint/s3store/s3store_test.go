package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
	"github.com/cowstate/cowstate/checkpoint/storagetest"
	"github.com/cowstate/cowstate/internal/testjob"
)

var bg = context.Background()

// TestStorage_Conformance runs package storagetest's checks on a real S3
// server (versitygw, one per run, a fresh prefix per check).
func TestStorage_Conformance(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	n := 0
	storagetest.Run(t, func(t testing.TB) checkpoint.Storage {
		n++
		st, err := s3store.Open(bg, srv.StoreURL(fmt.Sprintf("store%d/", n)))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// An object of several parts is uploaded in parts, appears whole, reads
// back by ranges, and is create-only like a small one; an aborted one
// leaves nothing.
func TestStorage_MultipartObjects(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	st, err := s3store.Open(bg, srv.StoreURL("big/"))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2*s3store.PartSize+12345)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	put := func(name string) error {
		w, err := st.Create(bg, name)
		if err != nil {
			return err
		}
		for rest := data; len(rest) > 0; { // in uneven writes
			k := min(len(rest), 3<<20+17)
			if _, err := w.Write(rest[:k]); err != nil {
				w.Abort()
				return err
			}
			rest = rest[k:]
		}
		return w.Commit()
	}
	if err := put("a"); err != nil {
		t.Fatal(err)
	}
	if err := put("a"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second multipart create of a: %v, want fs.ErrExist", err)
	}
	r, err := st.Open(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != int64(len(data)) {
		t.Fatalf("size %d, want %d", r.Size(), len(data))
	}
	got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), equal %v", len(got), err, bytes.Equal(got, data))
	}
	tail := make([]byte, 100)
	if n, err := r.ReadAt(tail, r.Size()-40); n != 40 || err != io.EOF || !bytes.Equal(tail[:40], data[len(data)-40:]) {
		t.Fatalf("a read past the end: %d, %v", n, err)
	}
	w, _ := st.Create(bg, "b")
	w.Write(data)
	w.Abort()
	if _, err := st.Open(bg, "b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of an aborted multipart object: %v, want fs.ErrNotExist", err)
	}
	if names, _ := st.List(bg); !slices.Equal(names, []string{"a"}) {
		t.Fatalf("list: %q, want [a]", names)
	}
}

// A job's checkpoint loop on S3 resumes, after its process is gone, from
// its newest checkpoint.
func TestStorage_LoopResumes(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	url := srv.StoreURL("job/")
	run := func(from, to int) (resumedAt int) {
		st, err := s3store.Open(bg, url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
		counts, _ := cowstate.Value[int64, int64](b, "counts")
		loop, start, err := checkpoint.Resume[int](bg, b, st, checkpoint.LoopOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer loop.Close()
		for i := max(from, start.Meta); i < to; i++ {
			counts.Update(int64(i%100), func(n int64) int64 { return n + 1 })
		}
		if _, err := loop.Sync(bg, to); err != nil {
			t.Fatal(err)
		}
		if n, _ := counts.Get(7); n != int64(to/100) {
			t.Fatalf("count of 7 after %d events: %d", to, n)
		}
		return start.Meta
	}
	if at := run(0, 5000); at != 0 {
		t.Fatalf("a fresh store resumed at %d", at)
	}
	if at := run(0, 9000); at != 5000 {
		t.Fatalf("resumed at %d, want 5000", at)
	}
}

// Bad URLs are ErrInvalid naming what is wrong, without the query's
// other parameters; a missing bucket and wrong credentials are
// ErrStorage naming the store once and never the secret.
func TestOpen_Errors(t *testing.T) {
	for u, want := range map[string]string{
		"gs://bucket":                             "not an s3://bucket URL",
		"s3:///nobucket":                          "not an s3://bucket URL",
		"s3://b?prefix=a/&colour=blue":            `unknown parameter "colour"`,
		"s3://b?request_timeout=soon":             "request_timeout",
		"s3://b?use_path_style=perhaps":           "use_path_style",
		"s3://b?endpoint=ftp://x&secret=s3cr3t00": "endpoint",
	} {
		_, err := s3store.Open(bg, u)
		if !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t00") {
			t.Errorf("Open(%s): %v, want ErrInvalid saying %s", u, err, want)
		}
	}

	srv := s3test.Start(t)
	srv.SetEnv(t)
	j := testjob.New(t, 16, nil)
	missing := strings.Replace(srv.StoreURL("x/"), "s3://"+srv.Bucket, "s3://no-such-bucket", 1)
	st, err := s3store.Open(bg, missing)
	if err == nil {
		_, err = checkpoint.Open(bg, j.B, st, checkpoint.Options{})
	}
	if !errors.Is(err, checkpoint.ErrStorage) || strings.Count(err.Error(), st.String()) != 1 || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("missing bucket: %v, want ErrStorage naming %s once and NoSuchBucket", err, st)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-0123456789")
	st, err = s3store.Open(bg, srv.StoreURL("x/"))
	if err == nil {
		_, err = checkpoint.Open(bg, j.B, st, checkpoint.Options{})
	}
	if !errors.Is(err, checkpoint.ErrStorage) || strings.Count(err.Error(), st.String()) != 1 ||
		strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("wrong credentials: %v", err)
	}
}

// A server that is gone fails a call (a connection refused, or the
// request timeout), never hangs.
func TestStorage_ServerGone(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	st, err := s3store.Open(bg, srv.StoreURL("gone/")+"&request_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if st.RequestTimeout() != 2*time.Second {
		t.Fatalf("request timeout %v, want 2s", st.RequestTimeout())
	}
	srv.Stop()
	start := time.Now()
	_, err = st.List(bg)
	if err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("list with the server gone: %v after %v", err, time.Since(start))
	}
}

// An endpoint that accepts connections and never answers (a stalled
// proxy) fails each call at the request timeout with an error matching
// os.ErrDeadlineExceeded, and the store's Open with ErrStorage.
func TestStorage_SilentEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }() // read nothing, answer nothing
		}
	}()
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	st, err := s3store.Open(bg, "s3://b?region=us-east-1&use_path_style=true&request_timeout=500ms&endpoint=http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.Open(bg, "x")
	if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("open on a silent endpoint: %v after %v, want os.ErrDeadlineExceeded", err, time.Since(start))
	}
	j := testjob.New(t, 16, nil)
	if _, err := checkpoint.Open(bg, j.B, st, checkpoint.Options{}); !errors.Is(err, checkpoint.ErrStorage) {
		t.Fatalf("a store on a silent endpoint: %v, want ErrStorage", err)
	}
}
