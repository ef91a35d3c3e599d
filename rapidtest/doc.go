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
// contract.TTLBackend opts in with AllGroups | GroupTTL), Options.Keys
// and Options.Namespaces the pool sizes, Options.Duration longer runs, Options.NewRestoreTarget the
// constructor of the backends snapshots are restored into. A run's seed is
// rapid's: a failure prints the -rapid.seed that replays it.
//
// # What it catches
//
// The package's meta-test plants bugs in cowstate's Backend (behind the
// contract adapter, a wrapper breaks one rule) and asserts that the suite
// fails on each within the default budget. Over 20 seeds per bug
// (go test ./rapidtest -run PlantedBugs -v -args -rapidtest.seeds=20),
// each was caught in at least 19; the steps run up to the first failure
// (median over the seeds) are:
//
//	planted bug                               what it breaks                          steps: median (range)
//	aliasing-view                             Capture (views)                         13 (5-58)
//	lost-delete-under-view                    ClearState (views)                      163 (17-375)
//	release-releases-all-views                View.Release (views)                    32 (6-78)
//	write-releases-view                       View.WriteSnapshot (writes)             57 (24-123)
//	restore-drops-last-key-group              RestoreSnapshot (restores)              111 (29-515)
//	restore-drops-processing-timers           RestoreSnapshot (restores, timers)      35 (5-127)
//	restore-keeps-unowned-key-groups          RestoreSnapshot (rescales)              83 (18-209)
//	random-hash-key-groups                    KeyGroups (rescales)                    108 (1-244)
//	owns-every-key-group                      KeyGroups (rescales)                    49 (1-156)
//	max-parallelism-rounded-up                MaxParallelism (rescales)               1 (0-83)
//	timer-tie-order-flipped                   AdvanceWatermark (timers)               57 (13-180)
//	timer-registered-while-firing-not-fired   AdvanceWatermark (timers)               92 (12-156)
//	negative-timestamps-unsigned              AdvanceWatermark (timers)               160 (59-355)
//	watermark-exclusive                       AdvanceWatermark (timers)               114 (10-451)
//	processing-time-exclusive                 AdvanceProcessingTime (timers)          332 (9-1555)
//	failed-timer-lost                         AdvanceWatermark (timers)               220 (8-908)
//	duplicate-timer-reported-new              RegisterTimer (timers)                  52 (11-302)
//	delete-timer-ignores-namespace            DeleteTimer (timers)                    236 (24-1215)
//	service-registered-again-cleared          RegisterTimerService (timers)           37 (7-130)
//	unregistered-service-accepted             RegisterTimer (timers)                  50 (18-211)
//	timer-key-cut-at-zero-byte                TimerEntries (timers)                   26 (1-131)
//	merge-sources-reversed                    MergeNamespaces (merges)                423 (158-1616)
//	merge-into-itself                         MergeNamespaces (merges)                173 (32-923)
//	aggregate-merge-swapped                   MergeNamespaces (merges, aggregating)   167 (16-1064)
//	put-empty-stores-empty                    Put (value)                             118 (1-318)
//	reduce-first-value-folded                 Add (reducing)                          14 (1-67)
//	reduce-operands-swapped                   Add (reducing)                          47 (12-96)
//	aggregate-without-initial-accumulator     Add (aggregating)                       15 (1-44)
//	aggregate-result-is-accumulator           Get (aggregating)                       13 (1-40)
//	get-list-drops-empty-elements             GetList (list)                          125 (2-544)
//	update-list-empty-ignored                 UpdateList (list)                       384 (13-1573)
//	map-empty-value-removes                   PutMapEntry (map)                       88 (1-497)
//	map-empty-user-key-absent                 GetMapEntry (map)                       403 (47-8702)
//	map-remove-clears-map                     RemoveMapEntry (map)                    198 (45-2379)
//	clear-every-namespace                     ClearState (state)                      163 (47-544)
//	state-registered-again-cleared            RegisterState (state)                   89 (23-528)
//	keys-cut-at-1KiB                          StateEntries (state, long keys)         102 (25-547)
//	ttl-ignored                               RegisterStateTTL (ttl)                  27 (8-79)
//	ttl-expires-a-millisecond-late            RegisterStateTTL (ttl)                  46 (10-173)
//	ttl-read-does-not-refresh                 Get (ttl, update on read)               1362 (474-3387)
//	ttl-cleanup-removes-live-entry            CleanupExpired (ttl)                    635 (16-3237)
//	ttl-list-per-list                         Add (ttl, list)                         228 (35-1511)
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
