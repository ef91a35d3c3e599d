//go:build invariants

package cow

// invariants is true under the invariants build tag: every mutation of a Map
// or Tree runs its Check afterwards and panics on the first broken invariant.
// Run the tests with it: go test -tags invariants ./cow/
const invariants = true
