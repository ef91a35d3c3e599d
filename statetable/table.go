package statetable

import (
	"fmt"
	"iter"
	"math"
	"strings"
	"time"

	"github.com/cowstate/cowstate/cow"
)

// Config configures a Table, and the backend built on it (cowstate.Config
// is this type).
type Config struct {
	// MaxParallelism is the number of key groups, in [1, MaxParallelismLimit];
	// 0 means DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups is the range of key groups this table owns (one operator
	// subtask's share); nil means all of them. Writing a key of another
	// key group is an error.
	KeyGroups *KeyGroupRange
	// Clock returns processing time in milliseconds; nil means the wall
	// clock. Tests inject their own. It is the time of TTL states (see
	// TTL) and of a backend's processing-time timers, called on the
	// writer goroutine only, at most once per access of a TTL state.
	Clock func() int64
	// TTLCleanupPerAdvance is the number of entries of TTL states the
	// incremental cleanup visits on each processing-time advance of a
	// backend's timer service (see Table.CleanupExpired): 0 means
	// DefaultTTLCleanupPerAdvance; negative is an error.
	TTLCleanupPerAdvance int
}

// DefaultTTLCleanupPerAdvance is Config.TTLCleanupPerAdvance when it is 0:
// a few hundred microseconds of work at most.
const DefaultTTLCleanupPerAdvance = 1000

// Table is the registry of the keyed states of one backend: every state's
// entries live in persistent maps owned by one cow.Owner, so one capture
// freezes all of them (and the timers, which share the owner) at one
// version.
//
// A Table and its states belong to one writer goroutine; captured views may
// be read from any goroutine.
type Table struct {
	owner  *cow.Owner
	maxPar int
	owned  KeyGroupRange
	// ownsAll: owned is every key group, so a key needs no check.
	ownsAll bool
	states  map[string]registered
	names   []string // registration order
	clock   func() int64
	// pinned: TTL states read pinnedAt instead of the clock (PinTime).
	pinned   bool
	pinnedAt int64
	ttl      []ttlState // the TTL states, in registration order
	ttlNext  int        // the TTL state CleanupExpired goes on with
	// expiryHeld: restores and replayed changes keep what has expired
	// (HoldExpiry).
	expiryHeld bool
	// cleanupStep is Config.TTLCleanupPerAdvance, its default applied.
	cleanupStep int
	// lastNow is the last time read; clockBacks counts the reads that went
	// back in time (TTL cleanup floors hold only while it does not change).
	lastNow    int64
	clockBacks uint64
	// entryWrites counts the calls that wrote entries by their encoded
	// bytes (EntryWrites).
	entryWrites uint64
}

// NewTable returns an empty table whose structures are owned by owner.
func NewTable(owner *cow.Owner, cfg Config) (*Table, error) {
	maxPar := cfg.MaxParallelism
	if maxPar == 0 {
		maxPar = DefaultMaxParallelism
	}
	if maxPar < 1 || maxPar > MaxParallelismLimit {
		return nil, fmt.Errorf("%w: max parallelism %d, want 1 to %d", ErrConfig, maxPar, MaxParallelismLimit)
	}
	owned := AllKeyGroups(maxPar)
	if cfg.KeyGroups != nil {
		owned = *cfg.KeyGroups
		if !owned.Empty() && (owned.First < 0 || owned.Last >= maxPar) {
			return nil, fmt.Errorf("%w: key groups %v outside [0, %d)", ErrConfig, owned, maxPar)
		}
	}
	if cfg.TTLCleanupPerAdvance < 0 {
		return nil, fmt.Errorf("%w: TTLCleanupPerAdvance %d, want 0 (the default) or more", ErrConfig, cfg.TTLCleanupPerAdvance)
	}
	step := cfg.TTLCleanupPerAdvance
	if step == 0 {
		step = DefaultTTLCleanupPerAdvance
	}
	clock := cfg.Clock
	if clock == nil {
		clock = func() int64 { return time.Now().UnixMilli() }
	}
	return &Table{owner: owner, maxPar: maxPar, owned: owned, ownsAll: owned == AllKeyGroups(maxPar), states: map[string]registered{}, clock: clock, cleanupStep: step, lastNow: math.MinInt64}, nil
}

// EntryWrites returns how many calls have written entries by their
// encoded bytes since the table was created: restores of snapshot runs
// and entries, replays of deltas (RestoreRun, RestoreEntry, PatchEntry,
// ApplyEntries and their variants). Writes through the typed states are
// not counted. A caller that keeps facts about a state's entries that its
// own writes maintain (the window operator: every window it holds state
// for has its end-of-window timer) checks that the count has not changed
// since. O(1); writer goroutine only.
func (t *Table) EntryWrites() uint64 { return t.entryWrites }

// Owner returns the owner of every structure of the table.
func (t *Table) Owner() *cow.Owner { return t.owner }

// MaxParallelism returns the number of key groups.
func (t *Table) MaxParallelism() int { return t.maxPar }

// KeyGroups returns the range of key groups the table owns.
func (t *Table) KeyGroups() KeyGroupRange { return t.owned }

// TTLCleanupPerAdvance returns Config.TTLCleanupPerAdvance, or its default:
// the budget of the CleanupExpired that follows each processing-time
// advance.
func (t *Table) TTLCleanupPerAdvance() int { return t.cleanupStep }

// Kind is the kind of a keyed state.
type Kind uint8

const (
	KindValue Kind = iota + 1
	KindList
	KindMap
	KindReducing
	KindAggregating
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindReducing:
		return "reducing"
	case KindAggregating:
		return "aggregating"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// StateInfo describes a registered state: what snapshot metadata records
// and what a re-registration or a restore must match.
type StateInfo struct {
	Name  string
	Kind  Kind
	Codec []string // codec IDs: key, namespace, then the kind's value codecs
	// TTL: the state has a time-to-live, and its values, list elements and
	// map values carry their expiration timestamps (see TTL).
	TTL bool
}

func (i StateInfo) String() string {
	ttl := ""
	if i.TTL {
		ttl = " with TTL"
	}
	return fmt.Sprintf("%s state %q (codecs %s)%s", i.Kind, i.Name, strings.Join(i.Codec, ", "), ttl)
}

func (i StateInfo) equal(o StateInfo) bool {
	if i.Name != o.Name || i.Kind != o.Kind || i.TTL != o.TTL || len(i.Codec) != len(o.Codec) {
		return false
	}
	for j := range i.Codec {
		if i.Codec[j] != o.Codec[j] {
			return false
		}
	}
	return true
}

// registered is what the table knows of every state, whatever its types.
type registered interface {
	info() StateInfo
	// count returns the number of (key, namespace) entries.
	count() int
	// handle returns the typed state (to hand back on re-registration).
	handle() any
	// view returns the state's storage as frozen by a capture.
	view(c *cow.Capture) any
	// sampleBytes returns the encoded size of the first n entries, and
	// how many there were (see Table.Stats).
	sampleBytes(n int) (bytes, sampled int)
	// viewLen returns the number of entries of a view.
	viewLen(view any) int
	// scan yields the entries of a view with entry hash in [lo, hi], in
	// canonical order, encoded (see KeyGroupEntries).
	scan(view any, lo, hi uint64, now *int64, yield func(key, cell []byte) bool)
	// appendEntries appends the same entries, as blobs, and counts them
	// (see Snapshot.AppendKeyGroupEntries).
	appendEntries(view any, lo, hi uint64, now int64, dst []byte) ([]byte, int)
	// passed tells the writer that no entry of a view with an entry
	// hash below below is read again (see Snapshot.Passed).
	passed(view any, below uint64)
	// restore decodes one entry and stores it.
	restore(ck string, cell []byte) error
	// restoreRun decodes and stores a run of n entries (see
	// Table.RestoreRun), returning the bytes they took.
	restoreRun(ttl bool, n int, b []byte) (int, error)
	// diff yields the changes between two views (prev nil: empty).
	diff(prev, next any, yield func(EntryChange) bool)
	// check is Table.Check of the state's structures.
	check() error
	// delete removes one entry; patch applies an OpPatch change.
	delete(ck string) error
	patch(ck string, parts []Part) error
	// apply replays a batch of entry changes (see Table.ApplyEntries).
	apply(ttl bool, ops []EntryOp) error
	// transcoder returns the function that rewrites a value written by
	// the value codec with ID from in the registered codec's encoding
	// (see Table.CheckRestorable); an error matching ErrIncompatible if
	// there is none.
	transcoder(from string) (valueTranscoder, error)
}

// register records a new state, or returns the one already registered under
// the name if it has the same kind and codecs.
func (t *Table) register(info StateInfo, make func() registered) (any, error) {
	if info.Name == "" {
		return nil, fmt.Errorf("%w: empty state name", ErrConfig)
	}
	if old, ok := t.states[info.Name]; ok {
		if !old.info().equal(info) {
			return nil, fmt.Errorf("%w: %v is already registered as %v", ErrStateMismatch, info, old.info())
		}
		return old.handle(), nil
	}
	r := make()
	t.states[info.Name] = r
	t.names = append(t.names, info.Name)
	return r.handle(), nil
}

// States yields the registered states in registration order.
func (t *Table) States() iter.Seq[StateInfo] {
	return func(yield func(StateInfo) bool) {
		for _, n := range t.names {
			if !yield(t.states[n].info()) {
				return
			}
		}
	}
}

// State returns the info of the state registered under name.
func (t *Table) State(name string) (StateInfo, error) {
	r, ok := t.states[name]
	if !ok {
		return StateInfo{}, fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return r.info(), nil
}

// Entries returns the number of (key, namespace) entries of the named state.
func (t *Table) Entries(name string) (int, error) {
	r, ok := t.states[name]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return r.count(), nil
}
