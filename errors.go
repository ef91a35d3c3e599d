package cowstate

import (
	"errors"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/statetable"
)

// Sentinel errors of the backend, matched with errors.Is. The state table's
// errors (statetable.ErrKeyGroupNotOwned, statetable.ErrStateMismatch, ...)
// pass through unchanged. Where this package and a lower one both name a
// sentinel, they are one value, so errors.Is matches whichever a caller
// picks.
var (
	// ErrConfig: an invalid Config, or an invalid setting given when a
	// state is registered (a TTL). The same sentinel as
	// statetable.ErrConfig.
	ErrConfig = statetable.ErrConfig
	// ErrNoCodec: CodecFor has no codec for the type; it matches ErrConfig
	// too. The same sentinel as statetable.ErrNoCodec.
	ErrNoCodec = statetable.ErrNoCodec
	// ErrStateMismatch: a state registered again with another kind,
	// codec, Go type, TTL or default. The same sentinel as
	// statetable.ErrStateMismatch.
	ErrStateMismatch = statetable.ErrStateMismatch
	// ErrKeyGroupNotOwned: a key whose key group the backend does not own
	// (Config.KeyGroups). The same sentinel as
	// statetable.ErrKeyGroupNotOwned.
	ErrKeyGroupNotOwned = statetable.ErrKeyGroupNotOwned
	// ErrTimerService: a timer service registered again with other codecs.
	ErrTimerService = errors.New("cowstate: timer service registered with other codecs")
	// ErrUnknownTimerService: no timer service is registered under the
	// name.
	ErrUnknownTimerService = errors.New("cowstate: unknown timer service")
	// ErrNotEmpty: a restore into a backend that already holds state.
	ErrNotEmpty = errors.New("cowstate: backend not empty")
	// ErrReleased: a snapshot written (WriteSnapshot, WriteSavepoint,
	// StartWrite) that was released before the write, or during it from
	// another goroutine; what the write put out is not a snapshot. A read
	// of a released view (a state's GetAt, a timer snapshot) panics with
	// an error matching it. The same sentinel as cow.ErrReleased.
	ErrReleased = cow.ErrReleased
	// ErrForeignSnapshot: a snapshot of another backend (or nil) read
	// through a state or timer service (GetAt, LookupAt, PairsAt, KeysAt,
	// IterateAt, EventTimersAt...). The same sentinel as
	// statetable.ErrForeignSnapshot.
	ErrForeignSnapshot = statetable.ErrForeignSnapshot
)
