package pebblestate

// SetRestoreBatchBytes sets the size at which a restore commits, and
// returns a function that sets it back.
func SetRestoreBatchBytes(n int) (undo func()) {
	old := restoreBatchBytes
	restoreBatchBytes = n
	return func() { restoreBatchBytes = old }
}
