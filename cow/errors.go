package cow

import "errors"

// ErrInvariant is matched (errors.Is) by every error Check returns: the
// structure is broken, which is always a bug in this package or memory
// corruption, never bad input.
var ErrInvariant = errors.New("cow: invariant broken")

// ErrReleased is matched (errors.Is) by the value a read of a released
// snapshot panics with (an error, "cow: read of a released snapshot (epoch
// N)"), so that code that recovers the panic can tell this misuse from
// other panics. Packages built on cow (timerqueue) panic with values that
// match it too.
var ErrReleased = errors.New("cow: read of a released snapshot")

// ErrPassed is matched (errors.Is) by the value a read of a map snapshot
// panics with when it reads hashes its reader promised not to read again
// (MapSnapshot.Passed): the writer may have written them in place since.
var ErrPassed = errors.New("cow: read of a snapshot behind where its reader passed")
