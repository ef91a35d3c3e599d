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
// writes under testdata/rapid). Fuzz makes a fuzz target of each machine.
//
// # Cost and options
//
// A machine runs -rapid.checks test cases (default 100; 20 with -short)
// of up to Options.Steps operations (default 100; 50 with -short, a third
// of that on average). Against cowstate's Backend, Run takes about a second,
// three under the race detector. Options.Groups selects operation groups
// (a backend without timers leaves out GroupTimers), Options.Keys and
// Options.Namespaces the key space, Options.Duration longer runs.
//
// # What it catches
//
// The package's tests run the suite against deliberately broken backends
// (cowstate's Backend behind a wrapper that breaks one rule) and assert
// that it fails. Measured over ten runs each, the steps executed until the
// first failure (median, range) and the length of the shrunk failing
// sequence:
//
//	broken rule                                      steps to failure   shrunk to
//	a View that reads the live state                 12 (7-50)          2
//	ClearState lost while a View is live             145 (30-340)       3
//	equal-timestamp timers fired in reverse order    60 (27-374)        2-3
//	a due timer a callback registers not fired       27 (9-63)          2
//	key groups from a per-process random hash        33 (1-213)         1-2
//	a restore that drops its last key group          28 (6-126)         2-3
//
// Every one was found within the first 12 test cases of the first machine
// that exercises it.
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
