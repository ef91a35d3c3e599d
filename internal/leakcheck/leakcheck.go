// Package leakcheck fails a test binary whose tests leave goroutines
// running: a package that starts goroutines (snapshot writes, checkpoint
// stores and loops, the conformance suite's readers) calls Main from its
// TestMain. It is a few lines over runtime.Stack rather than a dependency,
// so that the library's module requires nothing for its tests that a user's
// module graph would then list.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests and, if they passed, fails the binary when goroutines
// the tests started are still running after a grace period (goroutines that
// are ending, a store's write returning after its caller's deadline, get
// that long).
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Leaked(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked waits up to grace for every goroutine but the caller's and the
// runtime's and testing's own to end, and returns the stacks of those that
// did not ("" if none).
func Leaked(grace time.Duration) string {
	deadline := time.Now().Add(grace)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		left := others()
		if len(left) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(wait)
	}
}

// others returns the stacks of the goroutines other than the caller's that
// a test may have started.
func others() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	var left []string
	for _, s := range stacks[1:] { // the first is the caller's
		if !ignored(s) {
			left = append(left, s)
		}
	}
	return left
}

// ignored reports whether a goroutine's stack is one the testing package
// or the runtime runs whatever the tests did.
func ignored(stack string) bool {
	// runtime.Stack leaves out the runtime's own goroutines; these are the
	// testing package's and signal handling's.
	for _, f := range []string{
		"testing.(*M).",
		"testing.tRunner",
		"testing.runFuzzing",
		"os/signal.signal_recv",
		"os/signal.loop",
		"runtime.ensureSigM",
	} {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}
