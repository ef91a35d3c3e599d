//go:build !invariants

// Package invariants says whether the structures check themselves: under
// the invariants build tag (go test -tags invariants ./...) every mutation
// of a cow.Map, cow.Tree or timerqueue.Queue runs its Check afterwards and
// panics on the first broken invariant. In normal builds Enabled is a false
// constant, so the checks compile away and cost nothing.
package invariants

// Enabled is false in normal builds.
const Enabled = false
