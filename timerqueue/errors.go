package timerqueue

import "errors"

// ErrInvariant is matched (errors.Is) by every error Check returns: the
// queue is broken, which is always a bug in this package or in cow, never
// bad input. Errors that come from the underlying cow.Tree also match
// cow.ErrInvariant.
var ErrInvariant = errors.New("timerqueue: invariant broken")
