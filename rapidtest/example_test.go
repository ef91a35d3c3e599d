package rapidtest_test

import (
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
