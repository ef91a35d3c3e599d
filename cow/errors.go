package cow

import "errors"

// ErrInvariant is matched (errors.Is) by every error Check returns: the
// structure is broken, which is always a bug in this package or memory
// corruption, never bad input.
var ErrInvariant = errors.New("cow: invariant broken")
