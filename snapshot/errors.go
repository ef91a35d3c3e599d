package snapshot

import "errors"

var (
	// ErrCorrupt: the input is not a well-formed snapshot file (truncated,
	// bit-flipped, reordered, garbage). The wrapping error says what and
	// where.
	ErrCorrupt = errors.New("snapshot: corrupt")
	// ErrMismatch: the snapshot does not fit the backend restoring it (max
	// parallelism, or a state or timer service with another kind or codec).
	ErrMismatch = errors.New("snapshot: does not match the backend")
)
