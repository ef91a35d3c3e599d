package checkpoint

import (
	"errors"
	"fmt"
)

// The store's errors, matched with errors.Is. Every error a Store, Restore,
// Verify or Inspect returns matches exactly one of them (or is ctx's error),
// and wraps the specific cause (a snapshot.ErrCorrupt, a
// statetable.ErrStateMismatch, an fs.ErrNotExist...), so that both the class
// and the cause can be matched.
//
//	ErrNoCheckpoint    the store holds no committed checkpoint yet, or not
//	                   the one asked for: start fresh, or ask for another
//	ErrCorrupt         a manifest or segment is damaged or missing (the
//	                   message names the object and what is wrong)
//	ErrMismatch        the checkpoint does not fit the backend: max
//	                   parallelism, a state's kind or codecs, a timer
//	                   service's codecs
//	ErrFenced          another writer took ownership of the store: this one
//	                   can no longer commit; stop it
//	ErrTooManyPending  too many checkpoints taken and not yet confirmed or
//	                   aborted (Options.MaxPending)
//	ErrInvalid         a call the store refuses: an id at or below the
//	                   newest committed one, a confirm of a checkpoint that
//	                   is not pending, a restore into a backend that holds
//	                   state
//	ErrStorage         the storage failed an operation (I/O, permissions)
//	ErrSink            a Loop's Sink failed to recover, prepare or commit
//	                   the job's output (the message says which and for
//	                   which checkpoint)
var (
	ErrNoCheckpoint   = errors.New("checkpoint: no such checkpoint")
	ErrCorrupt        = errors.New("checkpoint: damaged")
	ErrMismatch       = errors.New("checkpoint: does not fit the backend")
	ErrFenced         = errors.New("checkpoint: store owned by another writer")
	ErrTooManyPending = errors.New("checkpoint: too many pending checkpoints")
	ErrInvalid        = errors.New("checkpoint: invalid call")
	ErrStorage        = errors.New("checkpoint: storage failed")
	ErrSink           = errors.New("checkpoint: output sink failed")
)

// sinkError wraps a Sink's failure as an ErrSink, unless it already
// matches one of the store's errors (a sink that found another owner says
// ErrFenced, one that found the output ahead of the checkpoint ErrMismatch).
func sinkError(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	for _, class := range []error{ErrNoCheckpoint, ErrCorrupt, ErrMismatch, ErrFenced, ErrTooManyPending, ErrInvalid, ErrStorage, ErrSink} {
		if errors.Is(err, class) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrSink, err)
}

// ErrWriteConflict is what a Storage's Commit wraps when the service
// refused a create-only write because another write of the same name was
// in flight, so neither is known to have won (S3 answers so with 409
// ConditionalRequestConflict). The store then writes the object again to
// learn the outcome: fs.ErrExist, or success; after five conflicts in a
// row it gives up with the error. The storages of this package never
// return it; storeurl's bucket storage does.
var ErrWriteConflict = errors.New("checkpoint: concurrent conditional write")
