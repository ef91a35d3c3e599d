//go:build invariants

package invariants

// Enabled is true under the invariants build tag.
const Enabled = true

// Exhaustive is true under the invariants build tag: every mutation checks.
const Exhaustive = true
