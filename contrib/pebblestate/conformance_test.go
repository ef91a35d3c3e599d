package pebblestate_test

import (
	"flag"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cowstate/cowstate/contrib/pebblestate"
	"github.com/cowstate/cowstate/rapidtest"
)

// Longer runs, opt-in:
// go test -run Conformance -args -pebblestate.long=10m
var long = flag.Duration("pebblestate.long", 0, "run each machine of the conformance suite for this long")

// newMem opens a backend on an in-memory filesystem. The suite does not
// close the backends it asks for, so each is closed once unreachable (its
// Views hold it).
func newMem(cfg rapidtest.Config) rapidtest.Backend {
	b, err := pebblestate.Open(pebblestate.Options{Config: cfg, Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	runtime.AddCleanup(b, func(c closer) { c.Close() }, closer(b.DB()))
	return b
}

type closer interface{ Close() error }

// TestConformance runs the whole conformance suite against the backend,
// TTL group included (the backend is a contract.TTLBackend).
func TestConformance(t *testing.T) {
	rapidtest.Run(t, newMem, rapidtest.Options{Groups: rapidtest.AllGroups | rapidtest.GroupTTL, Duration: *long})
}
