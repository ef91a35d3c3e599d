package timerqueue

import (
	"encoding/binary"
	"strings"
)

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

// treeTimer is a Timer as the queue's tree holds it, with the first eight
// bytes of its key inline (head, big-endian, zero-padded): timers of one
// instant are ordered by key, and a key's bytes live behind a pointer, so
// without it each compare of a search reads a key of some other timer
// from wherever it was allocated, a cache miss per compare once there are
// more timers than the cache holds. With it, a compare reads only the
// tree node, unless the two heads are equal (the same key, or keys longer
// than eight bytes that share their first eight). 48 bytes, 8 more than a
// Timer.
type treeTimer struct {
	Timestamp int64
	head      uint64
	Key       string
	Namespace string
}

// inTree returns t as the tree holds it.
func inTree(t Timer) treeTimer {
	var b [8]byte
	copy(b[:], t.Key)
	return treeTimer{t.Timestamp, binary.BigEndian.Uint64(b[:]), t.Key, t.Namespace}
}

// timer returns the Timer t holds.
func (t treeTimer) timer() Timer { return Timer{t.Timestamp, t.Key, t.Namespace} }

// compareTree is Compare on the timers a and b hold. Heads that differ
// order the keys as their bytes do: they differ at a byte both keys have,
// or where the shorter key has ended (a zero of the padding) and the
// longer one has a byte above zero, and a key is ordered before every
// longer key it is a prefix of. It repeats Compare's steps rather than
// calling it: building two Timers and the call for every pair of distinct
// timestamps took BenchmarkTimers (1M timers) from 714-720 to 1104-1181 ms.
func compareTree(a, b treeTimer) int {
	if a.Timestamp != b.Timestamp {
		if a.Timestamp < b.Timestamp {
			return -1
		}
		return 1
	}
	if a.head != b.head {
		if a.head < b.head {
			return -1
		}
		return 1
	}
	// Equal heads of keys of one length of at most eight bytes are equal
	// keys: the key's bytes are not read. A search for a timer already
	// registered (a window's end timer, registered by every element of the
	// window) ends on such a pair, and the key's bytes are a cache miss.
	if len(a.Key) != len(b.Key) || len(a.Key) > 8 {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
	}
	return strings.Compare(a.Namespace, b.Namespace)
}
