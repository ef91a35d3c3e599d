//go:build invariants

package invariants

// Enabled is true under the invariants build tag.
const Enabled = true
