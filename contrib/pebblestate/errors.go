package pebblestate

import (
	"errors"
	"fmt"

	"github.com/cowstate/cowstate/snapshot"
)

var (
	// ErrCorrupt: a snapshot or a stored value that does not decode, or
	// whose checksum does not match. It matches snapshot.ErrCorrupt too.
	ErrCorrupt = fmt.Errorf("pebblestate: corrupt: %w", snapshot.ErrCorrupt)
	// ErrMismatch: a snapshot or a database written with another max
	// parallelism, or holding a state or timer service this backend has
	// not registered (or registered with another kind). It matches
	// snapshot.ErrMismatch too.
	ErrMismatch = fmt.Errorf("pebblestate: does not match the backend: %w", snapshot.ErrMismatch)
	// ErrClosed: an operation on a closed backend.
	ErrClosed = errors.New("pebblestate: backend closed")
)
