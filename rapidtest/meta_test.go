package rapidtest

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The meta-test: the suite against each planted bug (bugs_test.go), over
// several seeds. Each seed is a run of Check with the default options and
// budget; a bug is caught in a seed if the run fails. The default is one
// seed per bug, which must catch it (under -short, one bug of each group);
// the strength figures in the package doc come from
//
//	go test ./rapidtest -run PlantedBugs -v -args -rapidtest.seeds=20
//
// where at least 19 of 20 seeds must catch each bug.
var metaSeeds = flag.Int("rapidtest.seeds", 0, "seeds per planted bug in TestSuite_CatchesPlantedBugs (0: 1)")

// shortSample is the planted bugs the meta-test runs under -short: one of
// each group.
var shortSample = []string{"lost-delete-under-view", "restore-keeps-unowned-key-groups", "negative-timestamps-unsigned",
	"merge-sources-reversed", "aggregate-result-is-accumulator", "map-empty-value-removes", "ttl-list-per-list"}

func TestSuite_CatchesPlantedBugs(t *testing.T) {
	seeds := max(1, *metaSeeds)
	// The default budget, also under -short, where rapid runs a fifth of
	// -rapid.checks.
	budget := Options{Steps: 100}
	if testing.Short() {
		defer withFlag("rapid.checks", "500")()
	}
	need := seeds
	if seeds >= 20 {
		need = seeds - seeds/20 // 19 of 20
	}
	// Finding takes a few test cases; shrinking is what takes time here:
	// bound it, more tightly in the default run, which only asserts that
	// each bug is caught. A shrink cut short shows a longer sequence.
	shrink := "1s"
	if *metaSeeds <= 0 {
		shrink = "300ms"
	}
	defer withFlag("rapid.shrinktime", shrink)()
	for i, b := range plantedBugs {
		if testing.Short() && !slices.Contains(shortSample, b.name) {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			caught := 0
			var steps, shrunk []int
			for s := range seeds {
				opts := b.opts
				opts.Steps = budget.Steps
				seed := 1000*i + s + 1
				start := time.Now()
				out := checkSeed(b.new, opts, seed)
				if !out.Failed {
					t.Logf("seed %d: not caught in %d test cases, %d steps (%v)", seed, out.TestCases, out.Steps, time.Since(start))
					continue
				}
				caught++
				steps, shrunk = append(steps, out.Steps), append(shrunk, len(out.Shrunk))
				if s == 0 {
					t.Logf("seed %d: machine %q after %d test cases, %d steps (%v): %s", seed, out.Machine, out.TestCases, out.Steps, time.Since(start), cut(out.Failure))
					t.Logf("shrunk to:\n%s", cut(fmt.Sprint(out.Shrunk)))
				}
			}
			slices.Sort(steps)
			slices.Sort(shrunk)
			t.Logf("%s: caught in %d of %d seeds; steps to failure median %d (%d-%d); shrunk to median %d lines",
				b.group, caught, seeds, median(steps), first(steps), last(steps), median(shrunk))
			if caught < need {
				t.Errorf("planted bug %q (%s) caught in %d of %d seeds, want at least %d", b.name, b.group, caught, seeds, need)
			}
		})
	}
}

// checkSeed runs Check from rapid's seed seed, as -rapid.seed would: the
// meta-test's counts are then the same run after run. It sets rapid's
// flag, as this package's tests, which are not parallel, may.
func checkSeed(newBackend func(Config) Backend, opts Options, seed int) Outcome {
	defer withFlag("rapid.seed", fmt.Sprint(seed))()
	return Check(newBackend, opts)
}

func median(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
func first(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}
func last(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// TestCheck_Outcome: Check reports a passing run as not failed with the
// steps it took, and a failing one with its failure and shrunk sequence.
func TestCheck_Outcome(t *testing.T) {
	out := checkSeed(newCow, Options{Groups: GroupState, Steps: 10}, 1)
	if out.Failed || out.TestCases == 0 || out.Steps == 0 {
		t.Fatalf("cowstate: %+v, want passed with test cases and steps counted", out)
	}
	defer withFlag("rapid.shrinktime", "2s")()
	out = checkSeed(func(cfg Config) Backend { return mapEmptyUserKeyAbsent{newCow(cfg)} }, Options{Groups: GroupState}, 1)
	if !out.Failed || out.Failure == "" || len(out.Shrunk) == 0 {
		t.Fatalf("planted bug: %+v, want failed with a failure and a shrunk sequence", out)
	}
	if last := out.Shrunk[len(out.Shrunk)-1]; !slices.Contains([]string{"GetMapEntry"}, opName(last)) {
		t.Errorf("the shrunk sequence ends with %q, want the GetMapEntry that shows the bug", last)
	}
}

// opName returns the operation a failure line names after "step N: ".
func opName(line string) string {
	var n int
	var rest string
	fmt.Sscanf(line, "step %d: %s", &n, &rest)
	for i, c := range rest {
		if c == '(' {
			return rest[:i]
		}
	}
	return rest
}
