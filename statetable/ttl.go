package statetable

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// TTLUpdate says which accesses of an entry refresh its expiration
// timestamp (Flink's StateTtlConfig.UpdateType).
type TTLUpdate uint8

const (
	// UpdateOnCreateAndWrite: creating or writing an entry sets its
	// timestamp; reads leave it.
	UpdateOnCreateAndWrite TTLUpdate = iota
	// UpdateOnReadAndWrite: reads refresh the timestamp too (a read is
	// then a write, which copies what a live snapshot pins).
	UpdateOnReadAndWrite
)

// TTLVisibility says whether a read may return an entry that has expired
// but is not cleaned up yet (Flink's StateTtlConfig.StateVisibility).
type TTLVisibility uint8

const (
	// NeverReturnExpired: an expired entry reads as absent.
	NeverReturnExpired TTLVisibility = iota
	// ReturnExpiredIfNotCleanedUp: an expired entry still held is
	// returned once; the read cleans it up.
	ReturnExpiredIfNotCleanedUp
)

// TTL configures a state's time-to-live. An entry (a value, reducing or
// aggregating state's value; each element of a list state; each user key
// of a map state) expires Duration after its timestamp was last refreshed,
// on the table's processing-time clock (Config.Clock): it is expired when
// clock >= refresh time + Duration, in milliseconds.
//
// Expired entries are removed by the read that meets them, by the
// incremental cleanup (CleanupPerAccess, and Table.CleanupExpired, which a
// backend runs when processing time advances), and never written into a
// snapshot file: a full snapshot or savepoint leaves out what has expired
// at its capture, and a restore drops what has expired by the restoring
// table's clock.
type TTL struct {
	// Duration is the time to live, at least one millisecond (the clock's
	// resolution).
	Duration time.Duration
	// Update says which accesses refresh the timestamp.
	Update TTLUpdate
	// Visibility says whether expired entries not cleaned up may be read.
	Visibility TTLVisibility
	// CleanupPerAccess is the number of entries the incremental cleanup
	// visits after each access of the state (Flink's cleanupSize with
	// runCleanupForEveryRecord); 0 leaves cleanup to reads and to
	// Table.CleanupExpired. Each visit costs about a lookup.
	CleanupPerAccess int
}

// check returns an error matching ErrConfig naming the state if the TTL
// is not valid.
func (c TTL) check(state string) error {
	switch {
	case c.Duration < time.Millisecond:
		return fmt.Errorf("%w: state %q: TTL duration %v, want at least 1ms", ErrConfig, state, c.Duration)
	case c.Update > UpdateOnReadAndWrite:
		return fmt.Errorf("%w: state %q: TTL update type %d, want UpdateOnCreateAndWrite or UpdateOnReadAndWrite", ErrConfig, state, c.Update)
	case c.Visibility > ReturnExpiredIfNotCleanedUp:
		return fmt.Errorf("%w: state %q: TTL visibility %d, want NeverReturnExpired or ReturnExpiredIfNotCleanedUp", ErrConfig, state, c.Visibility)
	case c.CleanupPerAccess < 0:
		return fmt.Errorf("%w: state %q: TTL cleanup of %d entries per access, want 0 or more", ErrConfig, state, c.CleanupPerAccess)
	}
	return nil
}

// checkTTL returns an error matching ErrStateMismatch if a state found
// registered under the name has another TTL than asked for.
func checkTTL(name string, have *ttlRuntime, want *TTL) error {
	switch {
	case have == nil && want == nil:
		return nil
	case have == nil:
		return fmt.Errorf("%w: state %q is registered without TTL, not with %+v", ErrStateMismatch, name, *want)
	case want == nil:
		return fmt.Errorf("%w: state %q is registered with TTL %+v, not without", ErrStateMismatch, name, have.cfg)
	case have.cfg != *want:
		return fmt.Errorf("%w: state %q is registered with TTL %+v, not %+v", ErrStateMismatch, name, have.cfg, *want)
	}
	return nil
}

// stamped is what a TTL state stores in place of a value: the value and
// its expiration timestamp (milliseconds of the table's clock). A state of
// int64 values takes 8 bytes more per entry than without TTL, and a state
// without TTL stores the bare value: TTL costs nothing where it is off.
type stamped[V any] struct {
	v   V
	exp int64
}

// expired reports whether s has expired at now.
func (s stamped[V]) expired(now int64) bool { return s.exp <= now }

// stampedCodec encodes a stamped value as its expiration timestamp, 8
// bytes big-endian, followed by the value's encoding: the format of every
// value, list element and map value of a TTL state in snapshots and deltas.
func stampedCodec[V any](vc Codec[V]) Codec[stamped[V]] {
	return FuncCodec("ttl("+vc.ID()+")", func(dst []byte, s stamped[V]) []byte {
		return vc.Append(binary.BigEndian.AppendUint64(dst, uint64(s.exp)), s.v)
	}, func(src []byte) (stamped[V], error) {
		if len(src) < 8 {
			return stamped[V]{}, fmt.Errorf("%w: expiration timestamp: %d bytes, want at least 8", ErrDecode, len(src))
		}
		v, err := vc.Decode(src[8:])
		return stamped[V]{v, int64(binary.BigEndian.Uint64(src))}, err
	})
}

// stampedEquality returns the equality of stamped values the maps and
// their diffs use (see equalityFor): equal timestamps and equal values. A
// stamped string or other variable-width value is not comparable as bytes,
// and without it every entry of a leaf a delete rewrote would diff as
// changed.
func stampedEquality[V any]() func(a, b stamped[V]) bool {
	if equalityFor[stamped[V]]() == nil {
		if unsafe.Sizeof(*new(V)) == 8 {
			// Equal bytes, compared by a closure rather than by the map's
			// BytesEqual: the map calls either through a function value,
			// and a generic function's value goes through a wrapper that
			// passes its dictionary (a TTL count's put: 21 -> 5
			// instructions, callgrind, BenchmarkValueUpdate ttl=on).
			return func(a, b stamped[V]) bool {
				return a.exp == b.exp && *(*uint64)(unsafe.Pointer(&a.v)) == *(*uint64)(unsafe.Pointer(&b.v))
			}
		}
		return nil // equal bytes: the map compares them itself
	}
	ev := equalityFor[V]()
	if ev == nil { // V compares as bytes, stamped[V] has padding
		n := int(unsafe.Sizeof(*new(V)))
		return func(a, b stamped[V]) bool {
			return a.exp == b.exp &&
				string(unsafe.Slice((*byte)(unsafe.Pointer(&a.v)), n)) == string(unsafe.Slice((*byte)(unsafe.Pointer(&b.v)), n))
		}
	}
	return func(a, b stamped[V]) bool { return a.exp == b.exp && ev(a.v, b.v) }
}

// ttlRuntime is a TTL state's configuration and clock.
type ttlRuntime struct {
	t   *Table
	cfg TTL
	ms  int64
}

func newTTLRuntime(t *Table, cfg TTL) *ttlRuntime {
	return &ttlRuntime{t: t, cfg: cfg, ms: cfg.Duration.Milliseconds()}
}

// expiry returns the expiration timestamp of an entry refreshed at now.
func (r *ttlRuntime) expiry(now int64) int64 {
	if now > math.MaxInt64-r.ms {
		return math.MaxInt64
	}
	return now + r.ms
}

// onRead reports whether reads refresh timestamps.
func (r *ttlRuntime) onRead() bool { return r.cfg.Update == UpdateOnReadAndWrite }

// returnExpired reports whether an expired entry still held may be read.
func (r *ttlRuntime) returnExpired() bool { return r.cfg.Visibility == ReturnExpiredIfNotCleanedUp }

// ttlHooks is what cells of a TTL state add to the generic cells: how to
// tell and remove what has expired in a cell, how to write only what lives,
// and how to read a cell written without timestamps.
type ttlHooks[C any] struct {
	rt *ttlRuntime
	// least returns the least expiration timestamp of the parts of c. Any
	// goroutine (it only reads c).
	least func(c C) int64
	// prune returns c without its parts expired at now, and whether
	// anything is left. Writer goroutine only (it may build new nodes).
	prune func(c C, now int64) (C, bool)
	// encLive appends the encoding of c without its parts expired at now
	// and reports whether anything was left to encode. Any goroutine.
	encLive func(dst []byte, c C, now int64) ([]byte, bool)
	// decPlain decodes a cell in the encoding of the same state without
	// TTL, every part stamped to expire at exp. Writer goroutine only.
	decPlain func(src []byte, exp int64) (C, error)
	// cur is where the incremental cleanup resumes: a key class (the
	// cellMap's k8, k15, k31 and long maps) and an entry hash in it.
	cur struct {
		class int
		pos   uint64
	}
	// buckets are the floors of each key class's buckets of hashes.
	buckets [4]ttlBuckets
	// floor is a time before which nothing in the state expires
	// (math.MinInt64: unknown), found by the last clean round: while the
	// clock is below it, a cleanup step costs nothing. It holds while the
	// clock does not go back (floorBacks is the table's count of clock
	// reads that did, when it was set).
	floor      int64
	floorBacks uint64
	// round is the cleanup round under way: its start time, the least
	// expiration of what it left, and whether it is clean (nothing came
	// into the state with a timestamp older than its start since: a
	// restore, a delta, a merge of lists).
	round struct {
		start, least int64
		clean        bool
		backs        uint64
	}
}

// expired reports whether any part of c has expired at now.
func (h *ttlHooks[C]) expired(c C, now int64) bool { return h.least(c) <= now }

// taint records that what came into the state may expire before the
// floor: the floor is unknown until a whole round has run again.
func (h *ttlHooks[C]) taint() {
	h.floor = math.MinInt64
	h.round.clean = false
	for i := range h.buckets {
		h.buckets[i].clear()
	}
}

// ttlState is a registered state with a TTL, as the table's cleanup sees it.
type ttlState interface {
	// cleanupRound removes everything that has expired at now: a whole
	// round of cleanupStep. Writer goroutine only.
	cleanupRound(now int64) (removed int)
	// cleanupStep visits about budget entries from where the last step
	// stopped, removing what has expired at now, and reports whether it
	// reached the end of the state (the next step starts over from its
	// beginning). Writer goroutine only.
	cleanupStep(budget int, now int64) (visited, removed int, roundEnd bool)
}

// Clock returns the time the table's TTL states read: the pinned time (see
// PinTime), else the configured clock's. Writer goroutine only.
func (t *Table) Clock() int64 { return t.now() }

// now is Clock. The pinned time is returned inline and the clock read in
// a call of its own, so that a pinned read, what a batch of a job's
// accesses makes, is a load and no call (BenchmarkReadModifyWrite,
// op=ttl-get-put: two reads an update).
func (t *Table) now() int64 {
	if t.pinned {
		return t.pinnedAt
	}
	return t.readClock()
}

// readClock reads the configured clock and records the read (saw).
func (t *Table) readClock() int64 {
	n := t.clock()
	t.saw(n)
	return n
}

// saw records a time read, and counts the reads that went back in time.
func (t *Table) saw(n int64) {
	if n < t.lastNow {
		t.clockBacks++
	}
	t.lastNow = n
}

// PinTime makes the table's TTL states read now as the processing time
// instead of calling the clock, until UnpinTime: a caller that processes a
// batch of records at one processing time reads the clock once for the
// batch instead of once per access (a wall-clock read costs about 65 ns;
// a read-modify-write at 1M entries that reads it twice took a median
// 1.35 times the one without TTL, pinned 1.07: BenchmarkValueUpdate
// ttl=on/clock=wall and ttl=on). Writer goroutine only.
func (t *Table) PinTime(now int64) {
	t.saw(now)
	t.pinned, t.pinnedAt = true, now
}

// UnpinTime undoes PinTime. Writer goroutine only.
func (t *Table) UnpinTime() { t.pinned = false }

// CleanupExpired runs the incremental TTL cleanup: it visits about budget
// entries of the table's TTL states, resuming where the last call stopped
// (state by state, each through a cursor over its hash order), and
// removes what has expired at the table's current time. It returns the
// entries visited and the entries removed or rewritten without expired
// elements. The removals are ordinary writes: a delta taken across them
// carries them as deletes (or patches of list and map cells). Cost: about
// a lookup per entry visited, whatever the size of the states; a full
// round over a state of n entries takes n/budget calls. Writer goroutine
// only.
func (t *Table) CleanupExpired(budget int) (visited, removed int) {
	if len(t.ttl) == 0 || budget <= 0 {
		return 0, 0
	}
	now := t.now()
	for range len(t.ttl) {
		v, r, end := t.ttl[t.ttlNext].cleanupStep(budget-visited, now)
		visited += v
		removed += r
		if end { // this state's round ended: the next one's turn
			t.ttlNext = (t.ttlNext + 1) % len(t.ttl)
		}
		if visited >= budget {
			break
		}
	}
	return visited, removed
}

// HoldExpiry makes restores and replayed changes (RestoreRun, RestoreEntry,
// ApplyEntries and their ...From and ...Of forms) keep what has expired,
// until ReleaseExpiry: a chain of an incremental checkpoint restores its
// deltas onto exactly the cells they were diffed against, as the job held
// them, not onto cells the restore's later clock has pruned (a list's
// patch addresses positions; a map's or list's patch of an entry whose
// values have all expired since would find nothing). Reads treat what
// has expired as absent all the while. Writer goroutine only.
func (t *Table) HoldExpiry() { t.expiryHeld = true }

// ReleaseExpiry ends HoldExpiry and removes from every TTL state what has
// expired at the clock's time, as a restore does. It returns the values,
// elements and map entries' entries removed. Cost: one pass over the
// entries of the TTL states. Writer goroutine only.
func (t *Table) ReleaseExpiry() (removed int) {
	if !t.expiryHeld {
		return 0
	}
	t.expiryHeld = false
	now := t.now()
	for _, s := range t.ttl {
		removed += s.cleanupRound(now)
	}
	return removed
}

// cleanupRound implements ttlState: steps until a round that began at the
// state's first entry ends (the cursor may be inside one).
func (c *cells[K, N, C]) cleanupRound(now int64) (removed int) {
	const budget = math.MaxInt / 64 // unbounded, with room for cleanMap's 16*budget
	fromStart := c.ttl.cur.class == 0 && c.ttl.cur.pos == 0
	for {
		_, r, end := c.cleanupStep(budget, now)
		removed += r
		if end && fromStart {
			return removed
		}
		fromStart = fromStart || end
	}
}

// cleanupStep implements ttlState for cells of a TTL state: it goes through
// the key classes in order and stops at the end of the last one (the end
// of a round), the next step starting over.
//
// A round that ran clean sets the state's floor: the least expiration it
// left, or the expiration of what was written since it started, whichever
// is less (a state's TTL is fixed, so what is written later expires
// later). Until the clock reaches the floor a step visits nothing. Within
// a round, each bucket of hashes keeps a floor of its own the same way
// (see ttlBuckets), and a step passes over a bucket whose floor the clock
// has not reached without visiting its entries.
func (c *cells[K, N, C]) cleanupStep(budget int, now int64) (visited, removed int, roundEnd bool) {
	h := c.ttl
	if now < h.floor && h.floorBacks == c.t.clockBacks {
		return 0, 0, true // nothing has expired
	}
	if h.cur.class == 0 && h.cur.pos == 0 {
		h.round.start, h.round.least, h.round.clean, h.round.backs = now, math.MaxInt64, true, c.t.clockBacks
	}
	work := 0 // entries visited, and buckets passed over by sixteens
	for work < budget {
		var v, r, skipped int
		var done bool
		switch h.cur.class {
		case 0:
			v, r, skipped, done = cleanMap(c.m.k8, budget-work, now, h)
		case 1:
			v, r, skipped, done = cleanMap(c.m.k15, budget-work, now, h)
		case 2:
			v, r, skipped, done = cleanMap(c.m.k31, budget-work, now, h)
		default:
			v, r, skipped, done = cleanMap(c.m.long, budget-work, now, h)
		}
		visited += v
		removed += r
		work += v + skipped/16
		if done {
			h.cur.class, h.cur.pos = (h.cur.class+1)%len(h.buckets), 0
			if h.cur.class == 0 {
				h.floor = math.MinInt64
				if h.round.clean && h.round.backs == c.t.clockBacks {
					h.floor, h.floorBacks = min(h.round.least, h.rt.expiry(h.round.start)), h.round.backs
				}
				return visited, removed, true
			}
		}
	}
	return visited, removed, false
}

// ttlBuckets are the cleanup's floors of one key class of a TTL state: its
// hash space cut into len(floor) equal buckets (a power of two, about one
// per bucketEntries entries), each with a time before which nothing in it
// expires (math.MinInt64: unknown), found when the cleanup last went
// through the bucket with nothing coming in older than that pass's start.
// Writes do not lower a floor: a state's TTL is fixed and the clock does
// not go back (backs), so what is written later expires later; what can
// bring in an older timestamp clears every floor (ttlHooks.taint). A step
// then visits only the buckets where something may have expired: when
// few entries expire between rounds, as when a job cleans up on every
// processing-time advance, a round costs about bucketEntries entries per
// expired entry instead of the whole state (BenchmarkTTLCleanup
// expired=1000 at 1M and 10M entries).
type ttlBuckets struct {
	floor []int64
	backs uint64 // the table's clockBacks when the floors were found
	// pass is the bucket the cursor is in: when its pass began, the least
	// expiration it has left so far, and whether it is clean.
	pass struct {
		start, least int64
		clean        bool
	}
}

// bucketEntries is about the entries per bucket: two leaves' worth.
const bucketEntries = 64

// size gives b about one bucket per bucketEntries of n entries, clearing
// the floors if that changes their number (twice as many, or a quarter).
// Cost: O(buckets) when it changes, at most once per round.
func (b *ttlBuckets) size(n int) {
	want := 1
	for want < 1<<20 && want*bucketEntries < n {
		want <<= 1
	}
	if have := len(b.floor); have == 0 || want >= 2*have || 4*want <= have {
		b.floor = make([]int64, want)
		b.clear()
	}
}

// clear makes every floor unknown. O(buckets).
func (b *ttlBuckets) clear() {
	for i := range b.floor {
		b.floor[i] = math.MinInt64
	}
	b.pass.clean = false
}

// cleanMap goes through m's buckets from the cursor (h.cur.pos), passing
// over those whose floor the clock has not reached, and in the others
// visits about budget entries (at least one) and removes (or rewrites
// without their expired parts) those that have expired at now. It moves
// the cursor to where the next step resumes, and reports the entries
// visited and removed, the buckets passed over, and whether it reached
// the end of m. A step stops only between entries of distinct hashes, so
// it always makes progress.
func cleanMap[K comparable, C any](m *cow.Map[K, C], budget int, now int64, h *ttlHooks[C]) (visited, removed, skipped int, done bool) {
	b := &h.buckets[h.cur.class]
	if h.cur.pos == 0 {
		b.size(m.Len())
	}
	if b.backs != h.rt.t.clockBacks {
		b.clear()
		b.backs = h.rt.t.clockBacks
	}
	var fixes []cleanupFix[K, C] // reused by the step's scans
	// Bucket i holds the hashes from i<<shift to (i+1)<<shift - 1. Go's
	// shifts of a uint64 by 64 give 0, so one bucket (shift 64) and the
	// last bucket's end (MaxUint64) need no case of their own.
	shift := 64 - bits.TrailingZeros(uint(len(b.floor)))
	for visited < budget && skipped < 16*budget {
		i := int(h.cur.pos >> shift)
		first, last := uint64(i)<<shift, uint64(i+1)<<shift-1
		if now < b.floor[i] { // nothing in the bucket has expired
			h.round.least = min(h.round.least, b.floor[i])
			skipped++
		} else {
			if h.cur.pos == first { // the pass over the bucket begins
				b.pass.start, b.pass.least, b.pass.clean = now, math.MaxInt64, true
			}
			v, r, next, whole := cleanRange(m, h.cur.pos, last, budget-visited, now, h, &b.pass.least, &fixes)
			visited += v
			removed += r
			if !whole {
				h.cur.pos = next
				return visited, removed, skipped, false
			}
			b.floor[i] = math.MinInt64
			if b.pass.clean {
				b.floor[i] = min(b.pass.least, h.rt.expiry(b.pass.start))
			}
			h.round.least = min(h.round.least, b.floor[i])
		}
		if last == math.MaxUint64 {
			return visited, removed, skipped, true
		}
		h.cur.pos = last + 1
	}
	return visited, removed, skipped, false
}

// cleanupFix is an expired entry a cleanup found: removed or rewritten
// after its scan.
type cleanupFix[K comparable, C any] struct {
	h uint64
	k K
	c C
}

// cleanRange visits the entries of m with hashes from pos to last, at
// least one and about budget of them, then removes (or rewrites without
// their expired parts) those that have expired at now, lowering *least to
// the least expiration of what it left. It returns the hash where the
// next step resumes, or whole if it reached last. *scratch is a buffer
// for what it found, kept for the next call.
func cleanRange[K comparable, C any](m *cow.Map[K, C], pos, last uint64, budget int, now int64, h *ttlHooks[C], least *int64, scratch *[]cleanupFix[K, C]) (visited, removed int, next uint64, whole bool) {
	fixes := (*scratch)[:0]
	defer func() { *scratch = fixes[:0] }()
	whole = true
	m.ScanLive(pos, last, func(eh uint64, k *K, c C) bool {
		if visited >= budget && eh != pos {
			whole, next = false, eh
			return false
		}
		visited++
		if l := h.least(c); l <= now {
			fixes = append(fixes, cleanupFix[K, C]{eh, *k, c})
		} else {
			*least = min(*least, l)
		}
		return true
	})
	for _, f := range fixes {
		if c, live := h.prune(f.c, now); live {
			*least = min(*least, h.least(c))
			m.SetHashed(f.h, f.k, c, nil)
		} else {
			m.DeleteHashed(f.h, f.k)
		}
		removed++
	}
	return visited, removed, next, whole
}

// ttlReg is the table's entry of a value, reducing or aggregating state
// with a TTL: the stamped cells (which implement the table's side:
// snapshots, diffs, restores), and the typed state handed to the user.
type ttlReg[K, N, C any] struct {
	*cells[K, N, C]
	outer any
}

func (r ttlReg[K, N, C]) info() StateInfo { return r.cells.info }
func (r ttlReg[K, N, C]) handle() any     { return r.outer }

// ttlInner is the table's entry of a list or map state with a TTL: the
// state of stamped elements that stores it, and the typed state handed to
// the user.
type ttlInner struct {
	registered
	outer any
}

func (r ttlInner) handle() any { return r.outer }

// valueHooks are the TTL hooks of value, reducing and aggregating state:
// a cell is one stamped value.
func valueHooks[V any](rt *ttlRuntime, vc Codec[V]) *ttlHooks[stamped[V]] {
	sc := stampedCodec(vc)
	return &ttlHooks[stamped[V]]{
		rt:    rt,
		least: func(c stamped[V]) int64 { return c.exp },
		prune: func(c stamped[V], now int64) (stamped[V], bool) { return c, !c.expired(now) },
		encLive: func(dst []byte, c stamped[V], now int64) ([]byte, bool) {
			if c.expired(now) {
				return dst, false
			}
			return sc.Append(dst, c), true
		},
		decPlain: func(src []byte, exp int64) (stamped[V], error) {
			v, err := vc.Decode(src)
			return stamped[V]{v, exp}, err
		},
	}
}

// ttlCells is the storage of a value, reducing or aggregating state with a
// TTL: stamped values, read and written with the TTL's rules.
type ttlCells[K, N, V any] struct {
	*cells[K, N, stamped[V]]
	rt *ttlRuntime
	// plain8: the state's keys are direct8 and an access does nothing
	// but read or write its entry (no refresh on read, no cleanup per
	// access), so getLive and putNow go to the key8 map directly. Fixed
	// at registration, one load where the test it stands for reads three
	// fields through two pointers.
	plain8 bool
}

// valueTTL is the TTL side of a value, reducing or aggregating state
// (*ttlCells). The states reach it through this interface so that only a
// program that registers a TTL state (NewValueWithTTL and the others)
// instantiates the TTL code and the stamped cell type: a second shape of
// the whole cell stack, which would double what a user's build of a
// program without TTL compiles (bench/compilecost;
// docs/decisions/0024-compile-cost-ttl-constructors.md). One indirect call
// per access on the TTL path.
type valueTTL[K, N, V any] interface {
	prefetcher[K, N]
	now() int64
	getLive(key K, ns N) (V, bool, error)
	getFresh(key K, ns N, now int64) (V, bool, error)
	reduceNow(key K, ns N, v V, reduce func(acc, v V) V) (created bool, err error)
	putLive(key K, ns N, v V, now int64) error
	putNow(key K, ns N, v V) error
	getAtLive(snap *Snapshot, key K, ns N) (V, bool, error)
	mergeLive(key K, target N, sources []N, combine func(acc, v V) V) error
	clear(key K, ns N) error
	runtime() *ttlRuntime
}

// runtimeOf returns the TTL of a state's TTL side, or nil if it has none.
func runtimeOf(side interface{ runtime() *ttlRuntime }) *ttlRuntime {
	if side == nil {
		return nil
	}
	return side.runtime()
}

func (c *ttlCells[K, N, V]) runtime() *ttlRuntime { return c.rt }
func (c *ttlCells[K, N, V]) now() int64           { return c.t.now() }

// newValueTTL returns the TTL side of a value, reducing or aggregating
// state (outer, the typed state handed to the user), its key enumeration
// and the table's entry for it.
func newValueTTL[K, N, V any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], vc Codec[V], cfg TTL, outer any) (valueTTL[K, N, V], keyed[K, N], registered) {
	c := newTTLCells(t, info, kc, nc, vc, cfg)
	return c, keyed[K, N]{c.cells}, ttlReg[K, N, stamped[V]]{c.cells, outer}
}

func newTTLCells[K, N, V any](t *Table, info StateInfo, kc Codec[K], nc Codec[N], vc Codec[V], cfg TTL) *ttlCells[K, N, V] {
	rt := newTTLRuntime(t, cfg)
	c := newCells[K, N, stamped[V]](t, info, kc, nc, stampedEquality[V]())
	c.m.compact()
	c.cell = valueCell(stampedCodec(vc))
	c.migrate = valueMigration(vc)
	c.ttl = valueHooks(rt, vc)
	c.ttl.floor = math.MinInt64
	t.ttl = append(t.ttl, c)
	tc := &ttlCells[K, N, V]{cells: c, rt: rt}
	tc.plain8 = tc.direct8() && !rt.onRead() && cfg.CleanupPerAccess == 0
	return tc
}

// after runs the per-access cleanup, if configured. Every access runs it,
// whether the key accessed has an entry or not (Flink runs its cleanup
// before every get, update, add or clear): a job that mostly reads keys it
// never wrote still cleans up.
func (c *ttlCells[K, N, V]) after(now int64) {
	if n := c.rt.cfg.CleanupPerAccess; n > 0 {
		c.cleanupStep(n, now)
	}
}

// clear removes the value of (key, ns), then runs the per-access cleanup.
func (c *ttlCells[K, N, V]) clear(key K, ns N) error {
	if err := c.cells.clear(key, ns); err != nil {
		return err
	}
	c.after(c.t.now())
	return nil
}

// direct8 reports whether the state's keys go to the key8 map located
// inline with no key-group check: 8-byte keys with no namespace, on a
// table that owns every key group (ValueState.direct8 for states without
// a TTL).
func (c *ttlCells[K, N, V]) direct8() bool { return c.fixedKey.w == 8 && c.t.ownsAll }

// getLive returns the value of (key, ns) by the TTL's rules: an expired
// value is removed, and returned only with ReturnExpiredIfNotCleanedUp; a
// live one is refreshed with UpdateOnReadAndWrite.
//
// A read of a plain8 state goes to the key8 map directly, with no
// location built: an absent key or a live value is the whole of it, and
// an expired one takes the general path (getLocated). It notes where it
// found the key, and putNow's write of the same key after it goes there
// (cow.Map.GetForSet), as a state's without TTL does.
func (c *ttlCells[K, N, V]) getLive(key K, ns N) (V, bool, error) {
	if c.plain8 {
		s, ok := c.m.k8.GetForSet(c.locate8(key), cow.NoKey{})
		if !ok || !s.expired(c.t.now()) {
			return s.v, ok, nil // s is the zero value if !ok
		}
	}
	return c.getLocated(key, ns)
}

// getLocated is getLive by a location: a key that is not direct8, a
// state whose reads refresh or clean up, or an expired value.
func (c *ttlCells[K, N, V]) getLocated(key K, ns N) (V, bool, error) {
	var zero V
	l, err := c.find(key, ns)
	if err != nil {
		return zero, false, err
	}
	s, ok := c.m.getLoc(&l)
	now := c.t.now()
	if !ok {
		c.after(now) // the cleanup runs on every access, as Flink's does
		return zero, false, nil
	}
	switch {
	case s.expired(now):
		c.m.deleteLoc(&l)
		if !c.rt.returnExpired() {
			s.v, ok = zero, false
		}
	case c.rt.onRead():
		c.m.setLoc(&l, stamped[V]{s.v, c.rt.expiry(now)})
	}
	c.after(now)
	return s.v, ok, nil
}

// getFresh returns the live value of (key, ns) for a write that folds into
// it (aggregating): an expired one is absent, whatever the visibility,
// since a write starts its entry over.
func (c *ttlCells[K, N, V]) getFresh(key K, ns N, now int64) (V, bool, error) {
	var zero V
	s, ok, err := c.get(key, ns)
	if err != nil || !ok || s.expired(now) {
		return zero, false, err
	}
	return s.v, true, nil
}

// reduceNow folds v into the live value of (key, ns) with reduce (v
// itself if it has none: an expired value is absent, whatever the
// visibility, since a write starts its entry over), to expire the TTL
// after the table's time, and reports whether it created the value. A
// reducing state's Add in one walk of the map (cells.update) where
// getFresh and putLive made two, and one call through the state's TTL
// side where they made three. reduce is the state's own function, not a
// closure: what a call through an interface is given escapes, and a
// closure would be allocated each add. reduce may use the backend, as
// Update's f may. (A TTL sum's Add of an int64 key: 618 -> 435
// instructions, 338 without a TTL, callgrind at 1K keys;
// BenchmarkReadModifyWrite at size=1000, op=ttl-reduce-add 51-59 -> 38-41
// ns, op=reduce-add 30-40.)
func (c *ttlCells[K, N, V]) reduceNow(key K, ns N, v V, reduce func(acc, v V) V) (created bool, err error) {
	now := c.t.now()
	exp := c.rt.expiry(now)
	err = c.update(key, ns, func(old stamped[V], ok bool) stamped[V] {
		if !ok || old.expired(now) {
			created = true
			return stamped[V]{v, exp}
		}
		return stamped[V]{reduce(old.v, v), exp}
	})
	if err != nil {
		return false, err
	}
	c.after(now)
	return created, nil
}

// putLive stores v for (key, ns), to expire the TTL after now.
func (c *ttlCells[K, N, V]) putLive(key K, ns N, v V, now int64) error {
	if c.direct8() {
		c.m.k8.SetHashed(c.locate8(key), cow.NoKey{}, stamped[V]{v, c.rt.expiry(now)}, nil)
	} else if err := c.put(key, ns, stamped[V]{v, c.rt.expiry(now)}); err != nil {
		return err
	}
	c.after(now)
	return nil
}

// putNow is putLive at the table's time: one call through the state's
// TTL side where putLive with now() as its argument makes two, and for a
// plain8 state the write itself, with no call before the map's.
func (c *ttlCells[K, N, V]) putNow(key K, ns N, v V) error {
	now := c.t.now()
	if c.plain8 {
		c.m.k8.SetAfterGet(c.locate8(key), cow.NoKey{}, stamped[V]{v, c.rt.expiry(now)}, nil)
		return nil
	}
	return c.putLive(key, ns, v, now)
}

// getAtLive reads (key, ns) in a snapshot: an expired value (by the
// snapshot's time) is absent unless the visibility returns it.
func (c *ttlCells[K, N, V]) getAtLive(snap *Snapshot, key K, ns N) (V, bool, error) {
	var zero V
	s, ok, err := c.getAt(snap, key, ns)
	if err != nil || !ok {
		return zero, false, err
	}
	if s.expired(snap.now) && !c.rt.returnExpired() {
		return zero, false, nil
	}
	return s.v, true, nil
}

// mergeLive folds the live values of key in sources into target's with
// combine (see ReducingState.MergeNamespaces), clearing the sources; the
// result is stamped afresh. Expired values are skipped and cleared.
func (c *ttlCells[K, N, V]) mergeLive(key K, target N, sources []N, combine func(acc, v V) V) error {
	now := c.t.now()
	live := func(ns N) error {
		s, ok, err := c.get(key, ns)
		if err == nil && ok && s.expired(now) {
			err = c.clear(key, ns)
		}
		return err
	}
	if err := live(target); err != nil {
		return err
	}
	want := string(c.nc.Append(nil, target))
	merged := false
	for _, src := range sources {
		if err := live(src); err != nil {
			return err
		}
		if _, ok, _ := c.get(key, src); ok && string(c.nc.Append(nil, src)) != want {
			merged = true
		}
	}
	exp := c.rt.expiry(now)
	err := c.mergeNamespaces(key, target, sources, func(acc, v stamped[V]) stamped[V] {
		return stamped[V]{combine(acc.v, v.v), exp}
	})
	if err != nil {
		return err
	}
	if s, ok, _ := c.get(key, target); merged && ok && s.exp != exp { // a lone source moved: refresh it
		return c.put(key, target, stamped[V]{s.v, exp})
	}
	return nil
}
