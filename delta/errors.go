package delta

import (
	"errors"

	"github.com/cowstate/cowstate/snapshot"
)

var (
	// ErrCorrupt: the input is not a well-formed delta file. It is the
	// snapshot package's sentinel, so one errors.Is covers both formats.
	ErrCorrupt = snapshot.ErrCorrupt
	// ErrWrongBase: a delta applied to, or merged after, a version that is
	// not its base.
	ErrWrongBase = errors.New("delta: wrong base")
	// ErrMismatch: two versions or deltas that do not fit together (another
	// max parallelism or key-group range, a state that changed kind).
	ErrMismatch = errors.New("delta: versions do not match")
)
