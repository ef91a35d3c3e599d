package contract

import (
	"context"
	"errors"
	"io"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Backend is what a keyed-state and timer backend does, at the level of
// bytes. rapidtest.Model is the executable specification of every method
// below; rapidtest.Run compares a Backend with it.
//
// Kinds. A state is registered by name and kind (statetable.KindValue,
// KindList, KindMap, KindReducing, KindAggregating). Reducing and
// aggregating states use the fixed functions Reduce and Aggregate.
//
// Absence. An entry is a (key, namespace) that has state. Empty is absent:
// a value state has no empty value (Put of "" clears it, like Flink's
// update(null)), a list or map that becomes empty is cleared. A reducing
// state may hold "" (the first value added, if it is "").
//
// Errors. An operation on an unregistered state (statetable.ErrUnknownState)
// or timer service (ErrUnknownTimerService), an operation that does not
// apply to the state's kind (ErrKind), and a key of a key group the backend
// does not own (statetable.ErrKeyGroupNotOwned) are errors, and change
// nothing. The suite compares only whether an error occurred, not which.
//
// Concurrency: single writer. Every method belongs to one goroutine, and
// fire callbacks run on it; a View may be read, written and released from
// any goroutine.
type Backend interface {
	EntryReader

	// MaxParallelism returns the number of key groups; the key group of a
	// key is statetable.KeyGroupOfKey([]byte(key), MaxParallelism()), in
	// every backend and every process.
	MaxParallelism() int
	// KeyGroups returns the range of key groups the backend owns.
	KeyGroups() statetable.KeyGroupRange

	// RegisterState registers a state; registering a name again with the
	// same kind is a no-op, with another kind an error.
	RegisterState(name string, kind statetable.Kind) error
	// RegisterTimerService registers a timer service (again: a no-op).
	RegisterTimerService(name string) error

	// Put sets the value of (key, ns) in a value state; "" clears it.
	Put(state, key, ns, value string) error
	// Get returns the value of (key, ns) in a value, reducing or aggregating
	// state (for aggregating state, Aggregate.Result of the accumulator) and
	// whether there is one.
	Get(state, key, ns string) (string, bool, error)
	// Add appends to a list state, or folds into a reducing state
	// (Reduce(acc, v), or v itself if there is no value yet) or an
	// aggregating state (Aggregate.Add(v, acc), acc being
	// Aggregate.CreateAccumulator() if there is none yet).
	Add(state, key, ns, v string) error
	// GetList returns the list of (key, ns) in a list state, in order (nil
	// if there is none).
	GetList(state, key, ns string) ([]string, error)
	// UpdateList replaces the list of (key, ns); an empty list clears it.
	UpdateList(state, key, ns string, elems []string) error
	// PutMapEntry sets userKey to userValue in the map of (key, ns).
	PutMapEntry(state, key, ns, userKey, userValue string) error
	// GetMapEntry returns the value of userKey in the map of (key, ns).
	GetMapEntry(state, key, ns, userKey string) (string, bool, error)
	// RemoveMapEntry deletes userKey from the map of (key, ns); removing
	// the last one clears the entry.
	RemoveMapEntry(state, key, ns, userKey string) error
	// ClearState removes the entry (key, ns) of a state of any kind.
	ClearState(state, key, ns string) error
	// MergeNamespaces merges, for a list, reducing or aggregating state, the
	// entries of key in the source namespaces into target and clears the
	// sources: processed in the order given, each source that has an entry
	// is folded into the target's (lists: appended; reducing: Reduce(acc,
	// src); aggregating: Aggregate.Merge(acc, src) of the accumulators), or
	// becomes it if the target has none yet. Sources without an entry, and
	// a source equal to target, are skipped. Value and map states: ErrKind.
	MergeNamespaces(state, key, target string, sources []string) error

	// RegisterTimer registers the timer (ts, key, ns) of a service in a time
	// domain and reports whether it was new (a timer is held once).
	RegisterTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error)
	// DeleteTimer deletes a timer and reports whether it was registered.
	DeleteTimer(service string, d timerqueue.Domain, key, ns string, ts int64) (bool, error)
	// AdvanceWatermark fires the service's event-time timers due at wm
	// (timestamp <= wm), and AdvanceProcessingTime its processing-time
	// timers due at the configured clock's current time, one at a time:
	// the smallest due timer (timestamp, then key bytes, then namespace
	// bytes) is removed, then handed to fire, until none is due. So a timer
	// fire registers that is due fires in the same call, and one it deletes
	// does not fire. fire may read and write any state, register and delete
	// timers and Capture. If fire returns an error, the timer it was given
	// is registered again, no more timers fire, and the error is returned
	// (wrapped) with the number fired before.
	AdvanceWatermark(service string, wm int64, fire FireFunc) (int, error)
	AdvanceProcessingTime(service string, fire FireFunc) (int, error)

	// Capture returns a View of every state and timer as they are now;
	// nothing done afterwards shows in it.
	Capture() View
	// RestoreSnapshot reads a snapshot that a View of a backend of the same
	// implementation wrote, keeping the entries and timers of the key
	// groups this backend owns (all, or a share when rescaling). Register
	// the states and timer services first, as the writer had them; restore
	// into an empty backend. The max parallelism must match.
	RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error
}

// TTLBackend is a Backend with state time-to-live (Flink's
// StateTtlConfig): the conformance suite's TTL group (rapidtest.GroupTTL)
// runs only on backends that implement it, so a backend without TTL
// leaves it out. rapidtest.Model is its specification (see there).
//
// In short: a state registered with a TTL expires each value (value,
// reducing, aggregating), each list element and each map user key
// ttl.Duration after its timestamp was last refreshed, on the
// processing-time clock (cowstate.Config.Clock): by writes, and with
// UpdateOnReadAndWrite by reads. Expired is timestamp <= clock. An expired
// value reads as absent; an Add to it starts over; a merge skips it. What
// has expired is left out of StateEntries (a View's at its capture's
// time) and of snapshots, and a restore drops it; when a backend removes
// it otherwise (CleanupExpired) is not observable.
type TTLBackend interface {
	Backend
	// RegisterStateTTL registers a state with a TTL; again with the same
	// kind and TTL is a no-op, with another kind or TTL (or registered
	// without TTL) an error. An invalid TTL is an error matching
	// statetable.ErrConfig (which is cowstate.ErrConfig).
	RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error
	// CleanupExpired removes some of what has expired, visiting about
	// budget entries, and returns the entries visited and removed.
	CleanupExpired(budget int) (visited, removed int)
}

// EntryReader enumerates what a backend or a View holds: what the
// conformance suite compares after every step.
type EntryReader interface {
	// StateEntries returns every entry of a state, in any order.
	StateEntries(state string) ([]Entry, error)
	// TimerEntries returns every timer of a service in a time domain, in
	// firing order.
	TimerEntries(service string, d timerqueue.Domain) ([]Timer, error)
}

// View is a captured, immutable version of a Backend. Any goroutine may
// call its methods, concurrently with the backend's writer and with each
// other, until it is released.
type View interface {
	EntryReader
	// WriteSnapshot writes the view in the backend's own snapshot format;
	// it does not release the view.
	WriteSnapshot(ctx context.Context, w io.Writer) error
	// Release gives the view back; it must not be read afterwards.
	// Idempotent.
	Release()
}

// Entry is one (key, namespace) that has state, with its content: Value for
// value, reducing and aggregating states (for aggregating states the
// result, Aggregate.Result of the accumulator), List for list states, Map
// for map states.
type Entry struct {
	Key, Namespace string
	Value          string
	List           []string
	Map            map[string]string
}

// Timer is one timer: timestamp, key and namespace.
type Timer = cowstate.Timer[string, string]

// FireFunc is the callback of Backend.AdvanceWatermark and
// Backend.AdvanceProcessingTime.
type FireFunc func(key, ns string, ts int64) error

// Sentinel errors, matched with errors.Is.
var (
	// ErrKind: an operation that does not apply to the state's kind, or a
	// state registered with a kind that is none of the five.
	ErrKind = errors.New("contract: operation does not apply to the state's kind")
	// ErrUnknownTimerService: an operation on a timer service that was not
	// registered (or, on a View, not registered when it was captured).
	ErrUnknownTimerService = errors.New("contract: timer service not registered")
)

// Reduce is the reduce function of every reducing state of a contract. Its
// result shows the order of its operands and an empty accumulator:
// Reduce("a", "b") is "(a+b)", Reduce("b", "a") is "(b+a)", and
// Reduce("", "b") is "(+b)", not "b".
func Reduce(acc, v string) string { return "(" + acc + "+" + v + ")" }

// Aggregate is the aggregate function of every aggregating state of a
// contract, each step visible in the result: the accumulator starts as
// "0", Add folds an input in as Reduce does ("(0+a)"), Merge joins two
// accumulators in order ("((0+a)|(0+b))"), and the result is the
// accumulator behind "=", so that a backend that hands out the accumulator
// instead of the result, forgets the initial accumulator or merges in
// another order gives another string.
type Aggregate struct{}

// CreateAccumulator returns "0".
func (Aggregate) CreateAccumulator() string { return "0" }

// Add returns "(acc+in)".
func (Aggregate) Add(in, acc string) string { return "(" + acc + "+" + in + ")" }

// Result returns "=acc".
func (Aggregate) Result(acc string) string { return "=" + acc }

// Merge returns "(a|b)".
func (Aggregate) Merge(a, b string) string { return "(" + a + "|" + b + ")" }
