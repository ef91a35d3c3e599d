//go:build !invariants && !race

package invariants

// Enabled is false in builds without -race and the invariants tag.
const Enabled = false

// Exhaustive is false without the invariants tag.
const Exhaustive = false
