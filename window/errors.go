package window

import "errors"

// Sentinel errors of the window package, matched with errors.Is. Returned
// errors wrap them with the values at fault. A window namespace that does
// not decode is a statetable.ErrDecode, as with every codec.
var (
	// ErrInvalid: an assigner whose configuration cannot assign windows
	// (a size, slide or gap that is not positive, an offset not within
	// the size or slide, a sliding window that would put an element in
	// more than MaxSlidingWindows windows).
	ErrInvalid = errors.New("window: invalid assigner")
	// ErrRange: a timestamp whose windows start before the smallest int64
	// or end after the largest: they cannot be represented.
	ErrRange = errors.New("window: window out of the int64 range")
	// ErrExists: an operator created under a name the backend already
	// has a state of. An operator's state is its own: the operator keeps
	// facts about it that its own writes maintain.
	ErrExists = errors.New("window: an operator of that name exists")
)
