package storeurl_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"github.com/cowstate/cowstate/internal/testjob"
	_ "gocloud.dev/blob/s3blob" // s3://; the other drivers stay out
)

var bg = context.Background()

// TestOpen_Schemes: a path, a file URL and mem:// open stores that work.
func TestOpen_Schemes(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{filepath.Join(dir, "a"), "file://" + filepath.Join(dir, "b"), "mem://"} {
		st, err := storeurl.Open(bg, u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		j := testjob.New(t, 16, nil)
		j.Load(50, 1)
		s, err := checkpoint.Open(bg, j.B, st, checkpoint.Options{})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		cp, _ := s.Checkpoint(bg, 1)
		if err := cp.Wait(); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if _, err := storeurl.Open(bg, "file://otherhost/x"); !errors.Is(err, checkpoint.ErrStorage) {
		t.Fatalf("file URL with a host: %v", err)
	}
}

// TestOpen_NoDriver: a URL whose driver the program does not link (this
// test links only s3blob) is ErrNoDriver, naming the import to add.
func TestOpen_NoDriver(t *testing.T) {
	for u, want := range map[string]string{
		"gs://bucket?prefix=a/":    `import _ "gocloud.dev/blob/gcsblob"`,
		"azblob://container":       `import _ "gocloud.dev/blob/azureblob"`,
		"ftp://host/x?secret=hush": "a scheme storeurl does not know",
	} {
		_, err := storeurl.Open(bg, u)
		if !errors.Is(err, storeurl.ErrNoDriver) || !errors.Is(err, checkpoint.ErrStorage) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hush") {
			t.Errorf("Open(%s): %v, want ErrNoDriver and ErrStorage saying %s, without the query", u, err, want)
		}
	}
}

// TestS3_ServerKilledDuringCheckpoint: the S3 server dies while a
// checkpoint is being written: the checkpoint fails with a storage error
// naming the store, nothing committed is lost, and once the server is back
// the next checkpoint commits and restores.
func TestS3_ServerKilledDuringCheckpoint(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	url := srv.URL("job/")
	st, err := storeurl.Open(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	j := testjob.New(t, 16, nil)
	j.Load(20000, 1)
	s, err := checkpoint.Open(bg, j.B, st, checkpoint.Options{AutoConfirm: true})
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := s.Checkpoint(bg, 1)
	if err := cp.Wait(); err != nil {
		t.Fatal(err)
	}
	want1 := j.Dump(t, nil)
	j.Load(20000, 2)
	cp2, err := s.Checkpoint(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop() // while checkpoint 2 uploads (or right after)
	err = cp2.Wait()
	if err == nil {
		t.Log("checkpoint 2 committed before the server died")
	} else if !errors.Is(err, checkpoint.ErrStorage) || !strings.Contains(err.Error(), srv.Endpoint) || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("checkpoint 2 with the server dead: %v", err)
	}
	srv.Restart(t)
	want3 := j.Dump(t, nil)
	cp3, err := s.Checkpoint(bg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp3.Wait(); err != nil {
		t.Fatalf("checkpoint 3 after the restart: %v", err)
	}
	for id, want := range map[uint64][]string{1: want1, 3: want3} {
		got := testjob.New(t, 16, nil)
		if _, err := checkpoint.RestoreFrom(bg, got.B, checkpoint.Source{Storage: st, ID: id}); err != nil {
			t.Fatalf("restore %d: %v", id, err)
		}
		if !slices.Equal(got.Dump(t, nil), want) {
			t.Fatalf("checkpoint %d restores differently", id)
		}
	}
	rep, err := checkpoint.Verify(bg, st)
	if err != nil || !rep.Intact() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestS3_BadBucketAndCredentials: a missing bucket and wrong credentials
// give clear errors that name the store, once, and never the secret.
func TestS3_BadBucketAndCredentials(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	j := testjob.New(t, 16, nil)
	missing := strings.Replace(srv.URL("x/"), "s3://"+srv.Bucket, "s3://no-such-bucket", 1)
	st, err := storeurl.Open(bg, missing)
	if err == nil {
		_, err = checkpoint.Open(bg, j.B, st, checkpoint.Options{})
	}
	if !errors.Is(err, checkpoint.ErrStorage) || strings.Count(err.Error(), st.String()) != 1 || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Fatalf("missing bucket: %v, want ErrStorage naming %s once and NoSuchBucket", err, st)
	}
	if _, err := checkpoint.Inspect(bg, st); !errors.Is(err, checkpoint.ErrStorage) || strings.Count(err.Error(), st.String()) != 1 {
		t.Fatalf("Inspect of a missing bucket: %v, want ErrStorage naming %s once", err, st)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-0123456789")
	st, err = storeurl.Open(bg, srv.URL("x/"))
	if err == nil {
		_, err = checkpoint.Open(bg, j.B, st, checkpoint.Options{})
	}
	if !errors.Is(err, checkpoint.ErrStorage) || strings.Count(err.Error(), st.String()) != 1 ||
		strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), srv.SecretKey) {
		t.Fatalf("wrong credentials: %v", err)
	}
	t.Log(err)
}
