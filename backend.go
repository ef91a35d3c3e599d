package cowstate

import (
	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Config configures a Backend: the number of key groups, the share of
// them it owns, its processing-time clock and its TTL cleanup budget (see
// statetable.Config for each field). It is statetable.Config, so that one
// value configures the backend and its state table.
type Config = statetable.Config

// DefaultTTLCleanupPerAdvance is the cleanup budget of an
// AdvanceProcessingTime when Config.TTLCleanupPerAdvance is 0: a few
// hundred microseconds of work at most.
const DefaultTTLCleanupPerAdvance = statetable.DefaultTTLCleanupPerAdvance

// Backend is the in-memory keyed-state and timer engine of one operator
// subtask: the keyed states registered on its Table and the timer services
// registered on it, all in persistent structures under one cow.Owner, so
// that Snapshot captures every state and every timer at one version in
// O(number of states and services), whatever their size.
//
// A Backend has a single writer: every method, every state and every timer
// service of it belongs to one goroutine (like one Flink subtask), and timer
// callbacks run on it. Snapshots may be read, and released, from any
// goroutine.
type Backend struct {
	owner    *cow.Owner
	table    *statetable.Table
	services map[string]timerService
	names    []string // services in registration order
	// restoreNames is what restores do with files' states and services
	// by the files' names (RestoreAs, DropOnRestore).
	restoreNames map[string]restoreName
	// translated: the last restore read a state or service under another
	// name, dropped one, or migrated values (Translated).
	translated bool
}

// timerService is what the backend knows of a TimerService, whatever its
// key and namespace types.
type timerService interface {
	codecs() [2]string
	queues() (event, processing *timerqueue.Queue)
	CurrentWatermark() int64
	restoreWatermark(wm int64)
	checkTimer(key, ns string) error
}

// queue returns the queue of a service for a time domain.
func queueOf(s timerService, d timerqueue.Domain) *timerqueue.Queue {
	ev, pr := s.queues()
	if d == timerqueue.ProcessingTime {
		return pr
	}
	return ev
}

// New returns an empty backend. An invalid cfg is an error matching
// ErrConfig.
func New(cfg Config) (*Backend, error) {
	owner := cow.NewOwner()
	table, err := statetable.NewTable(owner, cfg)
	if err != nil {
		return nil, err
	}
	return &Backend{owner: owner, table: table, services: map[string]timerService{}}, nil
}

// Table returns the registry of keyed states; register states on it with
// the functions of this package (Value, List, ...) or of statetable.
func (b *Backend) Table() *statetable.Table { return b.table }

// MaxParallelism returns the number of key groups.
func (b *Backend) MaxParallelism() int { return b.table.MaxParallelism() }

// KeyGroups returns the range of key groups the backend owns.
func (b *Backend) KeyGroups() statetable.KeyGroupRange { return b.table.KeyGroups() }

// ProcessingTime returns the clock's current processing time, or the
// pinned one (PinProcessingTime). Writer goroutine only.
func (b *Backend) ProcessingTime() int64 { return b.table.Clock() }

// PinProcessingTime reads the clock once and makes every later read of
// processing time (TTL states, AdvanceProcessingTime, ProcessingTime) see
// that time until UnpinProcessingTime: pin around a batch of records
// processed at one processing time, and a TTL state's access costs no
// clock read (a wall-clock read costs about 65 ns on a cloud VM: a value
// update at 1M entries, which reads it twice, took a median 1.35 times
// the update without TTL, pinned 1.07; BenchmarkValueUpdate ttl=). It
// returns the pinned time.
// Writer goroutine only.
func (b *Backend) PinProcessingTime() int64 {
	b.table.UnpinTime()
	now := b.table.Clock()
	b.table.PinTime(now)
	return now
}

// UnpinProcessingTime undoes PinProcessingTime: processing time is read
// from the clock again. Writer goroutine only.
func (b *Backend) UnpinProcessingTime() { b.table.UnpinTime() }

// CleanupExpired runs the incremental cleanup of TTL states: it visits
// about budget entries, resuming where the last cleanup stopped, and
// removes what has expired (see statetable.Table.CleanupExpired). It
// returns the entries visited and those removed or rewritten. Every
// AdvanceProcessingTime runs it with Config.TTLCleanupPerAdvance. Cost:
// about a lookup per entry visited. Writer goroutine only.
func (b *Backend) CleanupExpired(budget int) (visited, removed int) {
	return b.table.CleanupExpired(budget)
}

// Snapshot captures every keyed state and every timer of the backend at one
// version, in O(number of states and timer services): nothing the writer
// does afterwards (timers fired, state written) shows in it, and nothing
// done before is missing. Read it from any goroutine; Release it when done
// (the writer copies what a live snapshot pins). Writer goroutine only.
func (b *Backend) Snapshot() *Snapshot {
	c := b.owner.Capture()
	s := &Snapshot{capture: c, state: b.table.View(c), timers: make(map[string]timerViews, len(b.services))}
	for _, n := range b.names {
		svc := b.services[n]
		ev, pr := svc.queues()
		s.timers[n] = timerViews{event: ev.View(c), processing: pr.View(c)}
		s.services = append(s.services, snapshot.TimerServiceInfo{Name: n, Codecs: svc.codecs()})
	}
	return s
}

// View calls fn with a snapshot of the backend and releases it when fn
// returns, whatever fn returns (bbolt's View): reads that fit in a
// function, with no Release to forget. fn runs on the calling goroutine,
// the writer's, so the writer waits for it; to read while processing goes
// on, hand a Snapshot to another goroutine instead. Each snapshot has its
// own lifetime: releasing one never releases another. Writer goroutine
// only.
func (b *Backend) View(fn func(snap *Snapshot) error) error {
	snap := b.Snapshot()
	defer snap.Release()
	return fn(snap)
}

// LiveSnapshots returns the number of snapshots not yet released. Any
// goroutine.
func (b *Backend) LiveSnapshots() int { return b.owner.LiveCaptures() }

// DistinctWrites returns an estimate of how many distinct state entries
// were written since the previous call, within about 1.6% (a write of a
// value equal to the present one is no write; timers are not counted),
// and starts the next count. The first call starts counting and returns
// ok false: until then writes cost nothing more, and after it a write
// costs a compare and a store. A checkpoint store calls it as it takes
// each checkpoint, to decide whether the next one's delta can pay off
// (checkpoint.Policy). Cost O(4096); writer goroutine only.
func (b *Backend) DistinctWrites() (n int, ok bool) {
	d, ok := b.owner.DistinctWrites()
	return int(d), ok
}

// Snapshot is every keyed state and timer of a Backend at one version.
// Any goroutine may read it until it is released.
type Snapshot struct {
	capture  *cow.Capture
	state    *statetable.Snapshot
	timers   map[string]timerViews
	services []snapshot.TimerServiceInfo
}

type timerViews struct {
	event, processing *timerqueue.Snapshot
}

// Version returns the snapshot's version: snapshots of one backend have
// strictly increasing versions.
func (s *Snapshot) Version() uint64 { return s.capture.Epoch() }

// State returns the keyed states, for the states' GetAt methods.
func (s *Snapshot) State() *statetable.Snapshot { return s.state }

// Release gives the snapshot back; reading it afterwards panics. Idempotent;
// any goroutine.
func (s *Snapshot) Release() { s.capture.Release() }

// Released reports whether the snapshot was released.
func (s *Snapshot) Released() bool { return s.capture.Released() }
