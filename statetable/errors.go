package statetable

import "errors"

// Sentinel errors of the state table, matched with errors.Is. Returned
// errors wrap them with what and where.
var (
	// ErrUnknownState: no state is registered under the name.
	ErrUnknownState = errors.New("statetable: unknown state")
	// ErrStateMismatch: a state is registered again, or restored, with
	// another kind, codec or default value than it has.
	ErrStateMismatch = errors.New("statetable: state registered with another kind or codec")
	// ErrForeignSnapshot: a snapshot read through a state of another table
	// (another backend), or a nil snapshot.
	ErrForeignSnapshot = errors.New("statetable: snapshot of another table")
	// ErrNilNamespace: a namespace was nil where one is required.
	ErrNilNamespace = errors.New("statetable: nil namespace")
	// ErrKeyGroupNotOwned: the key belongs to a key group outside the range
	// this table owns.
	ErrKeyGroupNotOwned = errors.New("statetable: key group not owned")
	// ErrDecode: bytes that do not decode with the codec they claim.
	ErrDecode = errors.New("statetable: cannot decode")
	// ErrConfig: an invalid configuration (Config, a TTL). It is
	// cowstate.ErrConfig too, hence the module's name in its text.
	ErrConfig = errors.New("cowstate: invalid config")
)
