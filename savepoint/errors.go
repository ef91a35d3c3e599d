package savepoint

import "errors"

// Sentinel errors of the package, matched with errors.Is. Returned errors
// wrap them with what and where (state, key group, line, offset). Besides
// these, a damaged file gives snapshot.ErrCorrupt, a state or timer
// service a file does not hold statetable.ErrUnknownState, bytes that do
// not decode as their codec statetable.ErrDecode, and options that do not
// make sense statetable.ErrConfig (which is cowstate.ErrConfig).
var (
	// ErrLine: a line of JSON input (Bootstrap, ReadJSON) that does not
	// decode as the dump format or does not fit its header.
	ErrLine = errors.New("savepoint: bad input line")
	// ErrMigrate: a migration function returned an error (wrapped too).
	ErrMigrate = errors.New("savepoint: migration failed")
	// ErrDuplicate: two entries of one state with the same key and
	// namespace, two map entries with the same user key, or the same
	// timer twice, in the data of a Bootstrap.
	ErrDuplicate = errors.New("savepoint: duplicate entry")
)
