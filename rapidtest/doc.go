// Package rapidtest is the reference model of a cowstate backend and a
// conformance suite that runs any backend against it.
//
// The contract is contract.Backend (package contract): keyed state of five kinds (value,
// list, map, reducing, aggregating) addressed by state name, key and
// namespace as strings, timer services with event-time and
// processing-time timers fired by callbacks that may write state and
// register timers, captured Views, snapshots written in the backend's own
// format and restored into fresh backends that own all the key groups or a
// share of them. contract.Of adapts a *cowstate.Backend to it; a backend on
// disk, a remote one, or an adapter to another engine can implement it too.
//
// Model is the executable specification: maps and sorted slices, deep
// copies at capture, short enough to read in one sitting. Where the
// contract leaves a choice (timer tie order, list order, what a merged
// namespace holds, what empty means), Model's code is the answer.
//
// Run is the conformance suite, in the manner of testing/fstest.TestFS: it
// runs rapid (pgregory.net/rapid) state machines that drive the backend
// under test and the Model side by side over every operation, and after
// every step compares the whole live backend and every live View with the
// model (views with the model frozen when they were captured). Snapshots
// are also written on their own goroutines while the machine goes on, and
// restored, whole or into the key-group shares of a rescaled job. A failure
// is reported at the caller's test with the shrunk sequence of operations
// and the seed that replays it (-rapid.seed, or the fail file rapid
// writes under testdata/rapid). Check runs the same suite without a
// testing.T and returns its Outcome as a value (failed or not, the first
// failure, the shrunk sequence, the test cases and steps taken), for a
// backend author's meta-tests; Fuzz makes a fuzz target of each machine.
//
// # What the operations reach
//
// Keys, namespaces, values and user-map keys are any bytes: empty, zero
// and separator-like bytes, lengths around 15 and 31 bytes (where backends
// store short keys apart) and over 1 KiB. Timestamps and watermarks cover
// all of int64, negative and extreme ones included. Max parallelism is
// drawn from 1 to 32768, powers of two and others, and a backend may own
// one of up to seven operators' shares. Arguments are drawn mostly from
// what the model holds (its entries, their user keys and list positions,
// its timers, so that watermarks land on, just before and just after
// them) and from per-test-case pools, so operations meet: a value or list
// rewritten with an equal or another value while views of it are live, a
// user key or timer that exists removed, namespaces of one key merged in
// an order that shows. Now and then a state or timer service that is not
// registered, or a state of another kind, is named: an error on both
// sides. The fixed functions contract.Reduce and contract.Aggregate make
// every fold and merge step, and the aggregate's result, visible.
//
// # Cost and options
//
// A machine runs -rapid.checks test cases (default 100; 20 with -short)
// of up to Options.Steps operations (default 100; 50 with -short, a third
// of that on average). Against cowstate's Backend, Run takes about 6
// CPU-seconds, 35 under the race detector (AMD EPYC VM, 2 shared cores).
// Options.Groups selects operation groups (a backend without timers
// leaves out GroupTimers; GroupTTL, states with a time-to-live driven by
// the clock, is not in AllGroups: a backend that implements
// contract.TTLBackend opts in with AllGroups | GroupTTL; GroupSchema, states
// registered with a contract.Schema and upgraded across snapshots into
// states of other schemas, migrated or refused, likewise for a
// contract.SchemaBackend), Options.Keys
// and Options.Namespaces the pool sizes, Options.Duration longer runs, Options.NewRestoreTarget the
// constructor of the backends snapshots are restored into. A run's seed is
// rapid's: a failure prints the -rapid.seed that replays it.
//
// # What it catches
//
// The package's meta-test plants bugs in cowstate's Backend (behind the
// contract adapter, a wrapper breaks one rule) and asserts that the suite
// fails on each within the default budget; over 20 seeds per bug
// (go test ./rapidtest -run PlantedBugs -v -args -rapidtest.seeds=20) each
// must be caught in at least 19. The bugs and the steps each took to be
// caught are in docs/decisions/0019-suite-strength-planted-bugs.md.
//
// # Caveats
//
//   - The backend under test must honour Config.Clock for processing time;
//     the suite advances that clock itself.
//   - Views are read and written on other goroutines than the writer's, and
//     the writer goes on meanwhile: run the suite with -race.
//   - The suite compares contents, not formats: each backend restores only
//     what it wrote itself.
package rapidtest
