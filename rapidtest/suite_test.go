package rapidtest_test

import (
	"flag"
	"testing"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/rapidtest"
)

// Longer and bigger runs, opt-in:
// go test ./rapidtest/ -run Cowstate -args -rapidtest.long=10m -rapidtest.keys=50 -rapidtest.steps=400
var (
	long  = flag.Duration("rapidtest.long", 0, "run each machine of the suite for this long")
	keys  = flag.Int("rapidtest.keys", 0, "size of a test case's pool of keys (0: the suite's default)")
	steps = flag.Int("rapidtest.steps", 0, "most operations per test case (0: the suite's default)")
)

// opts runs every group, TTL and schemas included: the model and cowstate
// have them.
func opts() rapidtest.Options {
	return rapidtest.Options{Groups: rapidtest.AllGroups | rapidtest.GroupTTL | rapidtest.GroupSchema, Duration: *long, Keys: *keys, Steps: *steps}
}

func newModel(cfg rapidtest.Config) rapidtest.Backend {
	m, err := rapidtest.NewModel(cfg)
	if err != nil {
		panic(err)
	}
	return m
}

func newCowstate(cfg rapidtest.Config) rapidtest.Backend {
	b, err := contract.New(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// TestModel runs the suite against the model itself: the suite and the
// model agree with themselves.
func TestModel(t *testing.T) { rapidtest.Run(t, newModel, opts()) }

// TestCowstate runs the suite against cowstate's Backend.
func TestCowstate(t *testing.T) { rapidtest.Run(t, newCowstate, opts()) }

// TestCowstate_WithoutTimers runs the suite with the timer operations
// left out, as a backend without timers would.
func TestCowstate_WithoutTimers(t *testing.T) {
	o := opts()
	o.Groups &^= rapidtest.GroupTimers
	rapidtest.Run(t, newCowstate, o)
}

// The fuzz targets: go test ./rapidtest/ -run '^$' -fuzz FuzzCowstate_Timers

func FuzzCowstate_State(f *testing.F) {
	f.Fuzz(rapidtest.Fuzz(rapidtest.MachineState, newCowstate, rapidtest.Options{}))
}

func FuzzCowstate_Timers(f *testing.F) {
	f.Fuzz(rapidtest.Fuzz(rapidtest.MachineTimers, newCowstate, rapidtest.Options{}))
}

func FuzzCowstate_All(f *testing.F) {
	f.Fuzz(rapidtest.Fuzz(rapidtest.MachineAll, newCowstate, rapidtest.Options{}))
}
