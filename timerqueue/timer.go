package timerqueue

import "strings"

// Timer is one registered timer: fire at Timestamp for Key in Namespace.
// Key and Namespace are the encoded bytes of the user's key and namespace,
// held as strings so that a Timer is immutable and comparable; the queue
// never looks inside them except to order them.
type Timer struct {
	Timestamp int64
	Key       string
	Namespace string
}

// Compare is the order of timers: by Timestamp, then by the bytes of Key,
// then by the bytes of Namespace (lexicographic, as strings.Compare). It is
// a total order on Timers: two timers compare equal exactly when they are
// equal, and then they are the same timer (a queue holds it once).
//
// Ordering ties by key and namespace bytes, rather than by registration
// order or a hash, makes firing order a function of the timer set alone:
// the same timers fire in the same order whatever the history that
// registered them, before or after a restore, in every process.
func Compare(a, b Timer) int {
	if a.Timestamp != b.Timestamp {
		if a.Timestamp < b.Timestamp {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.Namespace, b.Namespace)
}
