package rapidtest

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
)

// This file is the suite's API: what it tests, its options, Run and Fuzz.
// check.go runs it without a testing.T (Check, Outcome); machine.go is the
// state machine that drives a backend and the model side by side;
// generators.go draws the operations' arguments; ops_*.go are the
// operations, by group.

// Config configures a backend under test: cowstate's Config. The suite
// always sets MaxParallelism, and Clock to a clock it advances itself;
// KeyGroups is nil (all key groups) or the share of one operator.
type Config = cowstate.Config

// Backend is what the suite tests: contract.Backend.
type Backend = contract.Backend

// Group is a set of operation groups, for Options.Groups.
type Group uint

const (
	// GroupState: Put, Get, Add, the list and map operations and
	// ClearState, on states of every kind, and registering states again.
	GroupState Group = 1 << iota
	// GroupMerge: MergeNamespaces.
	GroupMerge
	// GroupTimers: timer services, RegisterTimer and DeleteTimer, and
	// firing with callbacks that write state, register, delete and
	// capture, and sometimes fail.
	GroupTimers
	// GroupSnapshots: Capture and Release; every live view is compared
	// after every step with the model frozen at capture.
	GroupSnapshots
	// GroupWrites: WriteSnapshot of a live view on its own goroutine while
	// the machine goes on; the bytes are restored into a fresh backend.
	GroupWrites
	// GroupRescale: a snapshot restored into fresh backends owning shares
	// of the key groups, each compared with the model's share, and probed
	// with writes of every key.
	GroupRescale
	// GroupTTL: states of every kind with a time-to-live (a TTL drawn per
	// test case), driven by the state operations and by moves of the
	// processing-time clock and incremental cleanups, with snapshots,
	// writes and rescaling as selected, in the "state" machine. Not in
	// AllGroups: the backend must
	// implement contract.TTLBackend, and a backend without TTL leaves the
	// group out; select it with AllGroups | GroupTTL.
	GroupTTL
	// GroupSchema: the states registered with a contract.Schema drawn per
	// test case, and Upgrade: a snapshot restored into a fresh backend
	// whose states are registered with other schemas (values of another
	// struct, keys or namespaces of another codec), which must migrate
	// every value when each new schema reads the old one
	// (contract.Schema.Reads) and go on in its place, or else refuse the
	// snapshot with the error Reads names, holding nothing. In the "state"
	// machine; not in AllGroups: the backend must implement
	// contract.SchemaBackend; select it with AllGroups | GroupSchema.
	GroupSchema

	// AllGroups is every group.
	AllGroups = GroupState | GroupMerge | GroupTimers | GroupSnapshots | GroupWrites | GroupRescale
)

// Machine names one of the suite's state machines.
type Machine string

const (
	// MachineState drives keyed state: every kind, namespaces and merges,
	// with snapshots, writes and rescaling.
	MachineState Machine = "state"
	// MachineTimers drives timers and firing (callbacks write state), with
	// snapshots, writes and rescaling.
	MachineTimers Machine = "timers"
	// MachineAll drives every operation group at once.
	MachineAll Machine = "all"
)

// Machines lists the machines Run runs, in order.
var Machines = []Machine{MachineState, MachineTimers, MachineAll}

// core returns the groups a machine is about: it runs only if one of them
// is selected.
func (m Machine) core() Group {
	switch m {
	case MachineState:
		return GroupState | GroupMerge
	case MachineTimers:
		return GroupTimers
	}
	return AllGroups
}

func (m Machine) groups() Group {
	switch m {
	case MachineState:
		return GroupState | GroupMerge | GroupSnapshots | GroupWrites | GroupRescale | GroupTTL | GroupSchema
	case MachineTimers:
		return GroupTimers | GroupSnapshots | GroupWrites | GroupRescale
	}
	return AllGroups // GroupTTL and GroupSchema ride the state machine only, which keeps the suite's time
}

// Options tunes a run. The zero value runs every group with the defaults.
type Options struct {
	// Groups selects the operation groups (0: AllGroups). A machine none
	// of whose core groups is selected is skipped: "state" needs GroupState
	// or GroupMerge, "timers" GroupTimers.
	Groups Group
	// Keys is the size of a test case's pool of keys (default 6), and
	// Namespaces of its pool of namespaces ("" always among them; default
	// 4). Pools are drawn per test case from every byte string: empty,
	// arbitrary bytes, lengths around 15 and 31 bytes and over 1 KiB.
	// Operations draw their keys and namespaces mostly from the pools and
	// from what the model holds, now and then a fresh one.
	Keys, Namespaces int
	// Steps is the most operations in one test case (default 100, or 50
	// under testing.Short); rapid draws the number, biased towards fewer
	// (about a third of Steps on average), and shrinks it.
	Steps int
	// MaxParallelism lists the numbers of key groups to draw from
	// (default: the whole range, 1 to statetable.MaxParallelismLimit,
	// powers of two and others).
	MaxParallelism []int
	// Duration keeps running rounds of rapid checks until it has passed
	// (0: one round). A round is -rapid.checks test cases (default 100,
	// a fifth of that under testing.Short).
	Duration time.Duration
	// NewRestoreTarget, if set, makes the backends that snapshots are
	// restored into (whole, or a share of the key groups when rescaling):
	// RestoreSnapshot is the first call on them after the states and timer
	// services are registered. nil: the backend constructor given to Run
	// makes them too.
	NewRestoreTarget func(Config) Backend
	// hooks, for Check: count steps and record operations.
	hooks *hooks
}

func (o Options) withDefaults() Options {
	if o.Groups == 0 {
		o.Groups = AllGroups
	}
	if o.Keys <= 0 {
		o.Keys = 6
	}
	if o.Namespaces <= 0 {
		o.Namespaces = 4
	}
	if o.Steps <= 0 {
		o.Steps = 100
		if testing.Short() {
			o.Steps = 50
		}
	}
	return o
}

// Run runs every machine of the suite against the backends newBackend
// returns, side by side with the Model, each as a subtest of t (named after
// the machine). newBackend must return a new, empty backend for the Config
// it is given, every call (it may panic if it cannot). A failure is
// reported on the subtest with the shrunk sequence of operations and a
// -rapid.seed (or -rapid.failfile) to replay it. Run belongs to the test's
// goroutine; the suite writes views on goroutines of its own.
func Run(t *testing.T, newBackend func(Config) Backend, opts Options) {
	t.Helper()
	opts = opts.withDefaults()
	for _, m := range Machines {
		t.Run(string(m), func(t *testing.T) {
			t.Helper()
			if m.core()&opts.Groups == 0 {
				t.Skipf("no operation group of machine %q selected", m)
			}
			start := time.Now()
			for {
				rapid.Check(t, prop(m, newBackend, opts))
				if time.Since(start) >= opts.Duration {
					return
				}
			}
		})
	}
}

// Fuzz returns a fuzz target running one machine, for testing.F.Fuzz:
//
//	func FuzzMyBackend(f *testing.F) {
//		f.Fuzz(rapidtest.Fuzz(rapidtest.MachineAll, newMyBackend, rapidtest.Options{}))
//	}
func Fuzz(m Machine, newBackend func(Config) Backend, opts Options) func(*testing.T, []byte) {
	return rapid.MakeFuzz(prop(m, newBackend, opts.withDefaults()))
}
