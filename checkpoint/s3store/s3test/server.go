package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Region is the region the server answers for and URL names.
const Region = "us-east-1"

const (
	accessKey = "cowstate-test-access"
	secretKey = "cowstate-test-secret"
	bucket    = "cowstate-test"

	// readyTimeout bounds how long Start and Restart wait for the server
	// to answer HTTP after the process starts (it takes about 50ms).
	readyTimeout = 30 * time.Second
	// startAttempts is how many free ports Start tries when the one it
	// picked was taken before the server could bind it.
	startAttempts = 3
)

// Server is a running versitygw over a posix directory, with one bucket.
// The exported fields are fixed for its lifetime, Restart included.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Bucket is the bucket Start created, empty at first.
	Bucket string
	// AccessKey and SecretKey are the root credentials the server accepts.
	AccessKey, SecretKey string

	bin     string
	addr    string // 127.0.0.1:PORT
	dataDir string // the posix backend's root: one directory per bucket
	metaDir string // the sidecar metadata (ETags, content types, ...)
	logPath string // the server's stdout and stderr, appended by each run

	mu   sync.Mutex
	proc *process // nil when stopped
}

// process is one run of the server binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts a server on a free loopback port with its data in a
// temporary directory of t, waits until it answers, creates Bucket, and
// stops it when t ends. It fails t (never skips) if the binary is missing
// or the server does not come up. It takes about 50ms. Call it from the
// test's goroutine.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	s := &Server{
		Bucket:    bucket,
		AccessKey: accessKey,
		SecretKey: secretKey,
		bin:       bin,
		dataDir:   filepath.Join(root, "data"),
		metaDir:   filepath.Join(root, "meta"),
		logPath:   filepath.Join(root, "versitygw.log"),
	}
	for _, dir := range []string{s.dataDir, s.metaDir} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Stop)
	for attempt := 1; ; attempt++ {
		s.addr, err = freeLoopbackAddr()
		if err != nil {
			t.Fatalf("s3test: %v", err)
		}
		s.Endpoint = "http://" + s.addr
		err = s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("s3test: create bucket %q at %s: %v%s", s.Bucket, s.Endpoint, err, s.logTail())
	}
	return s
}

// Binary returns the path of the versitygw binary: $COWSTATE_VERSITYGW if
// set, else where scripts/install-s3-server puts it. It returns an error
// saying how to install it if there is no executable file there.
func Binary() (string, error) {
	path := os.Getenv("COWSTATE_VERSITYGW")
	from := "COWSTATE_VERSITYGW"
	if path == "" {
		tools := os.Getenv("COWSTATE_TOOLS")
		if tools == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("s3test: cannot find versitygw: COWSTATE_VERSITYGW and COWSTATE_TOOLS are unset and %v; run scripts/install-s3-server", err)
			}
			tools = filepath.Join(home, ".cache", "cowstate-tools")
		}
		path = filepath.Join(tools, "bin", "versitygw")
		from = "the install cache"
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("s3test: no versitygw at %s (from %s): %v; run scripts/install-s3-server and export COWSTATE_VERSITYGW=<the path it prints>", path, from, err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("s3test: %s (from %s) is not an executable file (mode %v); run scripts/install-s3-server", path, from, fi.Mode())
	}
	return path, nil
}

// URL returns the gocloud.dev/blob URL of Bucket with every key under
// prefix (none if prefix is empty), for blob.OpenBucket with
// gocloud.dev/blob/s3blob imported. The credentials come from the
// environment: see SetEnv.
//
// The parameters are those gocloud.dev v0.47.0 accepts: prefix (package
// blob), use_path_style and disable_https (s3blob), endpoint, region and
// request_checksum_calculation (gocloud.dev/aws.V2ConfigFromURLParams,
// which rejects any other name). An empty prefix= is left out because
// blob passes it on to s3blob, which rejects it as unknown.
func (s *Server) URL(prefix string) string {
	return s.url(prefix, "disable_https", "true", "request_checksum_calculation", "when_required")
}

// StoreURL returns the URL of Bucket with every key under prefix for
// s3store.Open. The credentials come from the environment: see SetEnv.
func (s *Server) StoreURL(prefix string) string { return s.url(prefix) }

// url returns the s3:// URL of Bucket with prefix (left out if empty),
// the endpoint, the region, path-style addressing and the parameters
// more (name, value, ...).
func (s *Server) url(prefix string, more ...string) string {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	for i := 0; i+1 < len(more); i += 2 {
		q.Set(more[i], more[i+1])
	}
	return "s3://" + s.Bucket + "?" + q.Encode()
}

// SetEnv sets the AWS SDK's environment for the rest of t to the server's
// credentials, and points its shared config and credentials files at a
// path that does not exist so a developer's ~/.aws cannot interfere. Like
// t.Setenv it cannot be used in parallel tests.
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "no-aws-config")
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Client returns a raw S3 client of the server with its credentials, for
// what gocloud.dev/blob does not expose (buckets, S3 error codes). Each
// call returns a new client; it does not read the environment.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:                     Region,
		BaseEndpoint:               aws.String(s.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Stop kills the server with SIGKILL, as a crash would, and waits for it
// to exit; its data and metadata stay for Restart. Requests in flight fail
// with a connection error. Stopping a stopped server does nothing. It may
// be called from any goroutine.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Kill()
	<-s.proc.done
	s.proc = nil
}

// Restart stops the server if it is running and starts it again on the
// same port, data and metadata, waiting until it answers. It fails t if
// the server does not come up (for instance if another process took the
// port meanwhile). Call it from the test's goroutine.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("s3test: address in use")

// start runs the binary on s.addr and waits until it answers HTTP.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		panic("s3test: BUG: start of a running server")
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("s3test: server log: %w", err)
	}
	before, _ := log.Seek(0, 2)
	cmd := exec.Command(s.bin,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--port", s.addr,
		"--region", Region,
		"--quiet",
		"posix",
		"--sidecar", s.metaDir,
		s.dataDir)
	cmd.Env = serverEnv()
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("s3test: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	if err := s.waitReady(p); err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		out, _ := os.ReadFile(s.logPath)
		if int64(len(out)) > before {
			out = out[before:]
		}
		if bytes.Contains(out, []byte("address already in use")) {
			err = fmt.Errorf("%w: %s: %v", errAddrInUse, s.addr, err)
		}
		return fmt.Errorf("s3test: %s on %s: %w; its output:\n%s", s.bin, s.addr, err, out)
	}
	s.proc = p
	return nil
}

// waitReady polls the endpoint until it answers any HTTP request (an
// unsigned GET gets 403 from a ready server), the process exits, or
// readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		select {
		case <-p.done:
			return fmt.Errorf("exited before answering: %v", p.err)
		default:
		}
		resp, err := client.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			if resp.Header.Get("Server") != "VERSITYGW" {
				return fmt.Errorf("something else answers on %s (Server: %q)", s.addr, resp.Header.Get("Server"))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %v: %v", readyTimeout, err)
		}
		time.Sleep(delay)
	}
}

// logTail returns the end of the server's output, for failure messages.
func (s *Server) logTail() string {
	out, err := os.ReadFile(s.logPath)
	if err != nil || len(out) == 0 {
		return ""
	}
	const max = 4 << 10
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return "\nserver output (end):\n" + string(out)
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port that was free a
// moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// serverEnv is this process's environment without the variables versitygw
// reads as flag defaults (VGW_*, ROOT_*, LOGFILE, WEBHOOK), so only the
// flags Start passes configure it.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VGW_") || strings.HasPrefix(name, "ROOT_") || name == "LOGFILE" || name == "WEBHOOK" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
