package storeurl_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/s3store/s3test"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"github.com/cowstate/cowstate/internal/testjob"
)

// stallProxy forwards TCP connections to an S3 server until stalled;
// from then on it accepts connections and reads requests and never
// answers, on new connections and on those already open, as a proxy that
// hangs does.
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, stop: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		close(p.stop)
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, c) })
		p.wg.Go(func() { p.pipe(c, up) })
	}
}

// pipe copies src to dst, holding every byte once the proxy is stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.stalled.Load() {
			<-p.stop
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}

// TestS3_StalledEndpoint: an S3 endpoint that stops answering (a stalled
// proxy in front of the real server) fails a checkpoint, a listing, a
// restore and a verify after the request timeout, with errors matching
// os.ErrDeadlineExceeded (and the store's, ErrStorage), and Close returns
// at once; what
// was committed before is intact once the proxy answers again.
func TestS3_StalledEndpoint(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	proxy := newStallProxy(t, srv.Endpoint[len("http://"):])
	u, err := url.Parse(srv.URL("stall/"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("endpoint", "http://"+proxy.ln.Addr().String())
	q.Set("request_timeout", "500ms")
	u.RawQuery = q.Encode()
	st, err := storeurl.Open(bg, u.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.(*storeurl.BucketStorage).RequestTimeout(); got != 500*time.Millisecond {
		t.Fatalf("request timeout %v, want the URL's 500ms", got)
	}
	j := testjob.New(t, 16, nil)
	j.Load(2000, 1)
	s, err := checkpoint.Open(bg, j.B, st, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := s.Checkpoint(bg, 1)
	if err := cp.Wait(); err != nil {
		t.Fatal(err)
	}
	want := j.Dump(t, nil)

	proxy.stalled.Store(true)
	timeout := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, os.ErrDeadlineExceeded) || (what != "list" && !errors.Is(err, checkpoint.ErrStorage)) {
			t.Errorf("%s with the endpoint stalled: %v, want ErrStorage and os.ErrDeadlineExceeded", what, err)
		}
	}
	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); f() }()
		select {
		case <-done:
			t.Logf("%s: %v", what, time.Since(start))
		case <-time.After(30 * time.Second):
			t.Fatalf("%s with the endpoint stalled: no answer after 30s", what)
		}
	}
	j.Load(2000, 2)
	cp2, err := s.Checkpoint(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	within("checkpoint", func() { timeout("checkpoint", cp2.Wait()) })
	within("close", func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	within("list", func() { _, err := st.List(bg); timeout("list", err) })
	within("verify", func() { _, err := checkpoint.Verify(bg, st); timeout("verify", err) })
	within("restore", func() {
		_, err := checkpoint.RestoreFrom(bg, testjob.New(t, 16, nil).B, checkpoint.Source{Storage: st})
		timeout("restore", err)
	})

	proxy.stalled.Store(false)
	got := testjob.New(t, 16, nil)
	if _, err := checkpoint.RestoreFrom(bg, got.B, checkpoint.Source{Storage: st}); err != nil {
		t.Fatalf("restore once the endpoint answers: %v", err)
	}
	if d := got.Dump(t, nil); len(d) != len(want) {
		t.Fatalf("checkpoint 1 restores %d entries, want %d", len(d), len(want))
	}
}
