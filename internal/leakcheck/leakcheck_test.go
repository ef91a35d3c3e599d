package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func blockedUntil(done chan struct{}) { <-done }

// A goroutine still blocked is reported with its stack; once it ends,
// nothing is.
func TestLeaked(t *testing.T) {
	done := make(chan struct{})
	go blockedUntil(done)
	if got := Leaked(50 * time.Millisecond); !strings.Contains(got, "leakcheck.blockedUntil") {
		t.Fatalf("a blocked goroutine: Leaked = %q, want its stack", got)
	}
	close(done)
	if got := Leaked(5 * time.Second); got != "" {
		t.Fatalf("after it ended: Leaked = %q, want nothing", got)
	}
}
