//go:build invariants

package timerqueue

// invariants is true under the invariants build tag: every mutation of a
// Queue runs its Check afterwards and panics on the first broken invariant.
// Run the tests with it: go test -tags invariants ./timerqueue/
const invariants = true
