//go:build race && !invariants

package invariants

// Enabled is true under -race: the tests' build checks the structures on a
// Budget.
const Enabled = true

// Exhaustive is false without the invariants tag.
const Exhaustive = false
