package rapidtest_test

import (
	"strings"
	"testing"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/rapidtest"
)

// Another project runs the suite against its own backend in a test: here
// cowstate's, with the timer operations left out as a backend without
// timers would.
func Example() {
	_ = func(t *testing.T) { // func TestMyBackend(t *testing.T)
		rapidtest.Run(t, func(cfg rapidtest.Config) rapidtest.Backend {
			b, err := contract.New(cfg) // your backend's constructor
			if err != nil {
				panic(err)
			}
			return b
		}, rapidtest.Options{Groups: rapidtest.AllGroups &^ rapidtest.GroupTimers})
	}
}

// A backend author checks that the suite catches a bug planted in their
// backend (here a map state that drops user values that are empty), and
// sees how: the outcome as a value.
func ExampleCheck() {
	_ = func(t *testing.T) { // func TestSuite_CatchesMyBug(t *testing.T)
		out := rapidtest.Check(func(cfg rapidtest.Config) rapidtest.Backend {
			b, err := contract.New(cfg) // your backend, with the bug planted
			if err != nil {
				panic(err)
			}
			return b
		}, rapidtest.Options{Groups: rapidtest.GroupState})
		if !out.Failed {
			t.Fatalf("the suite missed the bug in %d test cases, %d steps", out.TestCases, out.Steps)
		}
		t.Logf("caught by machine %q after %d steps: %s", out.Machine, out.Steps, out.Failure)
		t.Logf("shrunk to:\n%s", strings.Join(out.Shrunk, "\n"))
	}
}
