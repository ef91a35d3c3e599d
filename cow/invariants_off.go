//go:build !invariants

package cow

// invariants is false in normal builds: the per-mutation self-check costs
// nothing. See invariants_on.go.
const invariants = false
