// Package invariants says whether the structures check themselves. Under
// -race (the tests' build) and under the invariants build tag, mutations of
// a cow.Map, cow.Tree or timerqueue.Queue run the structure's Check and
// panic on the first broken invariant: under the tag after every mutation
// (Exhaustive, for property tests: go test -tags invariants ./...), under
// -race on a budget that keeps the checks' cost proportional to the
// mutations (Budget). In other builds Enabled is a false constant and the
// checks compile away.
package invariants

import "sync/atomic"

// Budget spaces a structure's self-checks when they are not exhaustive: a
// check of a structure of n entries costs O(n), so after a check the next
// waits for max(n, minSpacing) mutations, which costs each mutation O(1)
// amortized whatever the size, and a corruption is still caught within a
// structure's size of mutations. The zero Budget is ready (the first
// mutation checks); one per structure, owned by its writer.
type Budget struct{ left int }

// minSpacing is the least number of mutations between two checks of a
// structure that is not checked exhaustively.
const minSpacing = 64

// Due counts one mutation of a structure of size entries and reports
// whether its check should run now. Always true when Exhaustive.
func (b *Budget) Due(size int) bool {
	if Exhaustive {
		return true
	}
	if suspended.Load() != 0 {
		return false
	}
	if b.left > 0 {
		b.left--
		return false
	}
	b.left = max(size, minSpacing)
	return true
}

// suspended counts the Suspend calls not yet resumed.
var suspended atomic.Int32

// Suspend stops budgeted checks process-wide until the returned function is
// called: for a test that counts allocations, which a check would add to.
// Exhaustive checks are never suspended (such tests do not run under the
// invariants tag).
func Suspend() (resume func()) {
	suspended.Add(1)
	return func() { suspended.Add(-1) }
}
