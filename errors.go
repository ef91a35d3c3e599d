package cowstate

import (
	"errors"

	"github.com/cowstate/cowstate/statetable"
)

// Sentinel errors of the backend, matched with errors.Is. The state table's
// errors (statetable.ErrKeyGroupNotOwned, statetable.ErrStateMismatch, ...)
// pass through unchanged.
var (
	// ErrConfig: an invalid Config.
	ErrConfig = errors.New("cowstate: invalid config")
	// ErrTimerService: a timer service registered again with other codecs.
	ErrTimerService = errors.New("cowstate: timer service registered with other codecs")
	// ErrUnknownTimerService: no timer service is registered under the
	// name.
	ErrUnknownTimerService = errors.New("cowstate: unknown timer service")
	// ErrNotEmpty: a restore into a backend that already holds state.
	ErrNotEmpty = errors.New("cowstate: backend not empty")
	// ErrReleased: a snapshot written (WriteSnapshot, WriteSavepoint,
	// StartWrite) that was released before the write, or during it from
	// another goroutine. What the write put out is not a snapshot.
	ErrReleased = errors.New("cowstate: snapshot released")
	// ErrForeignSnapshot: a snapshot of another backend (or nil) read
	// through a state or timer service (GetAt, LookupAt, PairsAt, KeysAt,
	// IterateAt, EventTimersAt...). The same sentinel as
	// statetable.ErrForeignSnapshot.
	ErrForeignSnapshot = statetable.ErrForeignSnapshot
)
