//go:build !invariants

package statetable

// underInvariants: see invariants_on_test.go.
const underInvariants = false
