package cow

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Owner hands out ownership epochs to a group of persistent structures that
// share one writer goroutine (for example every state table and both timer
// queues of one backend), so that one Capture freezes all of them at once.
//
// # The ownership invariant
//
// Every node of a Map or Tree records the epoch it was created in. The owner
// keeps a writer epoch E (the epoch new nodes are stamped with) and
// H = the epoch of the newest live Capture (0 when none is live). Then:
//
//   - a node with epoch > H is reachable from no live capture, so the writer
//     mutates it in place;
//   - a node with epoch <= H may be shared with a capture, so the writer
//     copies it first; the copy carries epoch E and later writes in the same
//     epoch mutate the copy in place.
//
// Capture records H = E and bumps E: O(1) whatever the size of the
// structures. Every node reachable from a capture c has epoch <= c.Epoch(),
// and no node with epoch <= H is mutated while c is live, so what c sees
// never changes. Releasing captures lowers H again, so a writer with no live
// capture runs at mutable-structure speed.
//
// # Goroutines
//
// Capture, Epoch and all mutations of the owned structures belong to the
// single writer goroutine. Capture.Release may be called from any goroutine
// (the goroutine that finished serializing a snapshot, typically). A writer
// that has not yet observed a concurrent Release only copies more than it
// needs to; it never mutates a node a live capture can see.
//
// # Concurrent writes
//
// Two goroutines writing structures of one owner at once corrupt them, and
// nothing about it is visible until a read goes wrong. So, like the
// builtin map, every mutation (of any Map or Tree of the owner, and
// Capture) sets a flag on entry and clears it on exit, and a mutation that
// finds the flag set on entry, or cleared on exit, panics with
// "cowstate: concurrent writes". The flag is a plain field, as the builtin
// map's is: detection is best effort (two writers may miss each other, and
// -race is what proves there is no race), and it costs a load and a store
// on entry and on exit of a write, nothing on a read (no defer: a mutation
// that panics halfway, because the structure's compare or equal function
// did, leaves the flag set, and every later write of the owner panics as
// concurrent; a compare or equal function must not panic).
type Owner struct {
	epoch  uint64 // E: writer-only
	writes uint64 // mutations since creation: writer-only, detects View after a write
	// writing is set while a mutation runs (beginWrite, endWrite). Read
	// and written by whichever goroutine writes: a plain field on purpose
	// (see Concurrent writes above).
	writing bool
	// reuseBytes and waitingBytes are what the owner's maps keep ready for
	// reuse and waiting for it, bounded by reuseBudget and waitingBudget
	// (map_reuse.go). Writer-only.
	reuseBytes, waitingBytes int
	// sketch counts the distinct entries written since the last
	// DistinctWrites, once that has been called; nil until then. Writer-only.
	sketch *writeSketch
	high   atomic.Uint64 // H: epoch of the newest live capture, 0 if none
	low    atomic.Uint64 // epoch of the oldest live capture, 0 if none

	mu   sync.Mutex
	live []uint64 // epochs of live captures, ascending; guarded by mu
	// branches holds the branches its maps' copies replaced, until no live
	// capture reaches them, and then cleared for the next copies; guarded
	// by mu (map_reuse_branch.go).
	branches branchPool
}

// NewOwner returns an owner with no live capture. Nodes created by its
// structures start at epoch 1.
func NewOwner() *Owner {
	return &Owner{epoch: 1}
}

// Epoch returns the writer epoch: the epoch stamped on nodes created now.
// Writer goroutine only.
func (o *Owner) Epoch() uint64 { return o.epoch }

// High returns H, the epoch of the newest live capture (0 if none). Safe
// from any goroutine; the writer may observe a lowered H late.
func (o *Owner) High() uint64 { return o.high.Load() }

// LiveCaptures returns the number of captures not yet released. Safe from
// any goroutine.
func (o *Owner) LiveCaptures() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.live)
}

// oldestLive returns the epoch of the oldest live capture, 0 if none. Safe
// from any goroutine; the writer may observe a raised value late, which only
// delays reuse (see leafReuse). The load orders the releasing goroutine's
// reads of a capture before the writer's reuse of what it reached.
func (o *Owner) oldestLive() uint64 { return o.low.Load() }

// writable reports whether a node created in epoch e may be mutated in
// place. Writer goroutine only.
func (o *Owner) writable(e uint64) bool { return e > o.high.Load() }

// wrote records a mutation; View uses it to reject a view taken after a
// write. Writer goroutine only.
func (o *Owner) wrote() { o.writes++ }

// beginWrite marks a mutation of one of o's structures as running; it
// panics if one already is (another goroutine's: one goroutine's
// mutations never nest). Every exported mutation calls it on entry and
// endWrite on every exit. Small enough to inline: a load, a branch and a
// store.
func (o *Owner) beginWrite() {
	if o.writing {
		concurrentWrites()
	}
	o.writing = true
}

// endWrite marks the running mutation as done; it panics if the mark is
// gone (another goroutine's mutation ended meanwhile). The check also
// keeps the compiler from dropping beginWrite's store as dead.
func (o *Owner) endWrite() {
	if !o.writing {
		concurrentWrites()
	}
	o.writing = false
}

// concurrentWrites is the panic of beginWrite and endWrite, out of line so
// that they inline. A panic, not a fatal error: a test can recover it.
//
//go:noinline
func concurrentWrites() {
	panic("cowstate: concurrent writes: two goroutines wrote structures of one cow.Owner " +
		"(one backend's states and timers) at once; they belong to a single writer goroutine")
}

// Capture freezes every structure of this owner at the current version:
// after it, their writers copy any node that existed before the call. It
// costs O(log c) for c live captures and is independent of the structures'
// size. Take views of the structures with their View methods before the next
// write. Writer goroutine only.
func (o *Owner) Capture() *Capture {
	c := new(Capture)
	o.captureInto(c)
	return c
}

// captureInto is Capture into a Capture the caller allocated (a snapshot
// embeds its capture to save an allocation).
func (o *Owner) captureInto(c *Capture) {
	o.beginWrite() // the writer epoch changes
	*c = Capture{owner: o, epoch: o.epoch, writes: o.writes}
	o.mu.Lock()
	o.live = append(o.live, c.epoch) // epochs only grow: stays sorted
	o.high.Store(c.epoch)
	o.low.Store(o.live[0])
	o.mu.Unlock()
	o.epoch++
	o.endWrite()
}

// Capture is a pin on one version of an owner's structures. While it is not
// released, no node reachable from a view taken under it is mutated.
type Capture struct {
	owner    *Owner
	epoch    uint64
	writes   uint64
	released atomic.Bool
}

// Epoch returns the epoch the capture froze; captures of one owner have
// strictly increasing epochs, so it doubles as a version number.
func (c *Capture) Epoch() uint64 { return c.epoch }

// Owner returns the owner that took the capture.
func (c *Capture) Owner() *Owner { return c.owner }

// Released reports whether Release has been called. Safe from any goroutine.
func (c *Capture) Released() bool { return c.released.Load() }

// Release gives the capture back: once no newer capture is live, the nodes
// it pinned become writable in place again, the leaves copies replaced
// become memory the writer's next copies reuse once no older capture is
// live, and the branches copies replaced that no other live capture
// reaches are cleared for reuse here. Views taken under it must not be
// read afterwards (their reads panic), and a read in progress must have
// returned: call Release after the last read. Release is idempotent and
// safe from any goroutine. Cost O(c + r log c) for c live captures and r
// branches waiting, plus clearing those it frees (512 bytes each).
func (c *Capture) Release() {
	if c.released.Swap(true) {
		return
	}
	o := c.owner
	o.mu.Lock()
	defer o.mu.Unlock()
	if i, ok := slices.BinarySearch(o.live, c.epoch); ok {
		o.live = slices.Delete(o.live, i, i+1)
	}
	var h, l uint64
	if n := len(o.live); n > 0 {
		h, l = o.live[n-1], o.live[0]
	}
	o.high.Store(h)
	o.low.Store(l)
	freed := o.branches.takeFree(o.live)
	if len(freed) == 0 {
		return
	}
	// Cleared with the lock let go: nothing else holds them now.
	o.mu.Unlock()
	for _, b := range freed {
		b.kids = [mapFanout]kidSlot{}
	}
	o.mu.Lock()
	o.branches.free = append(o.branches.free, freed...)
}

// mustRead panics if the capture was released: reading a released view would
// race with the writer reusing its nodes. The panic value is an error
// matching ErrReleased.
func (c *Capture) mustRead() {
	if c.released.Load() {
		panic(releasedRead(c.epoch))
	}
}

// releasedRead is what a read of the released capture of an epoch panics
// with.
type releasedRead uint64

func (e releasedRead) Error() string { return ErrReleased.Error() + " (epoch " + itoa(uint64(e)) + ")" }
func (e releasedRead) Unwrap() error { return ErrReleased }

// mustView panics unless the owner is c's owner and nothing was written
// since c was taken: a view must show exactly the captured version.
func (c *Capture) mustView(o *Owner) {
	if c.owner != o {
		panic("cow: View with a capture of another owner")
	}
	if c.released.Load() {
		panic("cow: View of a released capture")
	}
	if o.writes != c.writes {
		panic("cow: View after a write: take views right after Owner.Capture, before any write")
	}
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
