// Package s3test starts a real S3-compatible server for tests of code that
// keeps checkpoints in S3: the Versity S3 Gateway (versitygw v1.8.0) over
// its posix backend, one process per Start, on a free loopback port, with
// its data in the test's temporary directory and one empty bucket. Tests
// reach it through s3store.Open of Server.StoreURL, through storeurl.Open
// or gocloud.dev/blob (blank-import gocloud.dev/blob/s3blob and open
// Server.URL), or through the raw S3 client of Server.Client. It is in the
// s3store module, which needs only the AWS SDK, so that the tests of
// s3store, storeurl and any module that depends on them need no other.
//
// The binary is built once by the repository's scripts/install-s3-server
// into ${COWSTATE_TOOLS:-$HOME/.cache/cowstate-tools}/bin/versitygw (or by
// go install github.com/versity/versitygw/cmd/versitygw@v1.8.0), and
// scripts/test exports its path as COWSTATE_VERSITYGW. A test that cannot
// find it fails; it does not skip, so a missing server never passes
// silently.
//
// Stop kills the server (SIGKILL, as a crash would) and keeps its
// directories; Restart starts it again on the same port and directories,
// so a test can take the store away in the middle of a checkpoint and
// bring it back.
//
// # What the server does (measured by the tests of storeurl, s3server_test.go)
//
// A create-only write (blob.WriterOptions{IfNotExist: true}, S3
// If-None-Match: *) of a name that exists fails with S3 412
// PreconditionFailed, which s3blob reports as gcerrors.FailedPrecondition;
// so does one of 16 MiB or more, a multipart upload whose condition is on
// CompleteMultipartUpload. The posix backend evaluates the condition under
// a per-key publish lock (a lock file under DATA/.vgwlocks), so of
// concurrent create-only writes of one name exactly one wins and every
// other gets the same 412. It never answers 409
// ConditionalRequestConflict, which AWS S3 may answer while a conflicting
// conditional write is in flight (retry: the outcome is then 412 or
// success). s3blob v0.47.0 reports that 409 as gcerrors.Unknown, so code
// that must be correct on AWS recognises it by its S3 code, and these
// tests cannot exercise that path.
//
// A missing bucket is S3 404 NoSuchBucket, gcerrors.NotFound (on reads
// and writes alike). A wrong secret is S3 403 SignatureDoesNotMatch and an
// unknown access key versitygw's own 404 XAdminUserNotFound; s3blob maps
// both to gcerrors.Unknown, not PermissionDenied.
//
// # Caveats
//
//   - Server.SetEnv uses t.Setenv: a test that calls it cannot be
//     parallel, and the credentials it sets are read when a bucket is
//     opened (blob.OpenBucket), not at each request.
//   - The port is chosen by listening on 127.0.0.1:0 and closing the
//     listener, so another process can take it before the server binds;
//     Start then tries a new port, Restart (same port) fails the test.
//   - The posix backend decides "exists" for If-None-Match by the object's
//     stored ETag (in the sidecar directory), not by the file: a file put
//     into the data directory behind the gateway's back has none, so a
//     create-only write of its name succeeds and replaces it.
//   - Methods of Server may be called from any goroutine; Start, Restart
//     and SetEnv call t.Fatal, so only from the test's goroutine.
package s3test
