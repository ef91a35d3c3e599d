//go:build !invariants

package timerqueue

// invariants is false in ordinary builds: see invariants_on.go.
const invariants = false
