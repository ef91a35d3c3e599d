package timerqueue

import (
	"iter"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/cowstate/cowstate/internal/invariants"
	"github.com/cowstate/cowstate/internal/prefetch"

	"github.com/cowstate/cowstate/cow"
)

// defaultBatch is how many timers Advance pops from the tree at a time. A
// pop takes entries a leaf at a time, so a batch of a leaf or more (64
// entries) pays one descent per leaf, and a larger one only holds more
// popped timers in the pending buffer. Measured firing 1e6 random timers
// (no capture / one live capture): batch 1, the cost of a DeleteMin per
// timer, 110 / 221 ms; 16: 32 / 70 ms; 64: 32 / 40 ms; 256: 28 / 38 ms;
// 1024: 34 / 46 ms.
const defaultBatch = 256

// fireAhead is how many timers ahead of the one it fires Advance asks for
// the bytes of a timer's key and namespace. They were allocated when the
// timer was registered, scattered over the heap, and the callback that
// decodes them comes a few hundred nanoseconds later; without the request
// each decode waits for a cache miss (BenchmarkWindowJob, where a window's
// end fires a timer for every key that had an element in it).
const fireAhead = 8

// aheadOfFire is how many timers ahead of the one it fires AdvanceAhead
// calls ahead: behind fireAhead, so that the timer's bytes ahead reads
// have been asked for already.
const aheadOfFire = 4

// prefetchBytes asks for the bytes of t's key and namespace.
func prefetchBytes(t treeTimer) {
	prefetch.Range(unsafe.Pointer(unsafe.StringData(t.Key)), uintptr(len(t.Key)))
	prefetch.Range(unsafe.Pointer(unsafe.StringData(t.Namespace)), uintptr(len(t.Namespace)))
}

// Queue is the timers of one time domain (event time or processing time):
// a set of Timers in Compare order, each with the key group of its key,
// held in a cow.Tree so that it can be captured in O(1) together with every
// other structure of its cow.Owner.
//
// A Queue belongs to its owner's writer goroutine: every method, including
// the read-only ones, must be called from that goroutine (read a Snapshot
// from other goroutines). With no live capture it is mutated in place; while
// a capture is live, the first write to a tree node copies it (see cow.Owner).
//
// # Firing
//
// Advance removes the due timers from the tree a batch at a time
// (cow.Tree.PopMinUntil) and fires them from a pending buffer. While a
// callback runs, the timers of the batch not yet fired are still in the
// queue as far as every method can tell (Len, Contains, Next, All, Register,
// Delete, View): they are kept in the buffer, sorted, and every method looks
// there first. The invariant that makes this cheap: every pending timer
// sorts before every timer in the tree, because the batch was popped from the
// left edge and a timer registered during a callback goes to the buffer if
// it sorts before the last pending timer and to the tree otherwise (and a
// buffer that callbacks grow too long goes back to the tree whole).
type Queue struct {
	// treep is the *cow.Tree[treeTimer, int], read through qtree. It is not
	// typed because a compiler that loads a type compiles every method of
	// every generic instantiation its fields name, and every importer of the
	// cowstate package loads Queue: typed, each user package recompiled the
	// whole tree (about a second of CPU a build; bench/compilecost).
	treep unsafe.Pointer

	// Advance state. pend[head:] are the pending timers, ascending; pend[:head]
	// were fired (and zeroed). Both are empty outside Advance.
	firing bool
	pend   []cow.Entry[treeTimer, int]
	head   int
	batch  int // timers popped at a time; tests make it small
	// pendWrote is the owner epoch of the last change to the pending timers
	// (cow only sees the tree's writes): View checks it, so that a view
	// never shows a pending timer registered, deleted or fired after its
	// capture.
	pendWrote uint64

	// deletes counts the timers Delete has removed (Deletes).
	deletes uint64

	checks invariants.Budget // when verify runs Check (-race, invariants tag)
}

// New returns an empty queue whose tree belongs to owner: an
// owner.Capture() freezes it together with every other structure of owner
// (state tables, the other time domain). O(1).
func New(owner *cow.Owner) *Queue {
	return &Queue{
		treep: unsafe.Pointer(cow.NewTree[treeTimer, int](owner, compareTree, cow.Equal[int])),
		batch: defaultBatch,
	}
}

// Owner returns the owner of the queue's tree.
func (q *Queue) Owner() *cow.Owner { return qtree(q).Owner() }

// pending returns the timers Advance popped and has not fired yet,
// ascending; empty outside Advance.
func (q *Queue) pending() []cow.Entry[treeTimer, int] { return q.pend[q.head:] }

// inPending reports whether t sorts at or before the last pending timer,
// that is, whether t belongs to the pending buffer rather than the tree; if
// so it returns t's position in the buffer and whether t is there.
func (q *Queue) inPending(t treeTimer) (i int, found, ok bool) {
	p := q.pending()
	if len(p) == 0 || compareTree(t, p[len(p)-1].Key) > 0 {
		return 0, false, false
	}
	i, found = slices.BinarySearchFunc(p, t, func(e cow.Entry[treeTimer, int], t treeTimer) int {
		return compareTree(e.Key, t)
	})
	return q.head + i, found, true
}

// Register adds timer t with the key group of its key and reports whether
// it was added. If t is already registered it writes nothing and returns
// false: a timer is registered at most once, however often Register is
// called (a window trigger that registers its end-of-window timer for every
// element costs one lookup per element, no write, no copy).
//
// keyGroup must be the key group of t.Key, computed by the caller, so that
// every registration of a timer passes the same one; Register does not
// check it beyond panicking if it is negative. O(log n); writer goroutine
// only, including from an Advance callback (see Advance).
func (q *Queue) Register(t Timer, keyGroup int) (added bool) {
	if keyGroup < 0 {
		panic("timerqueue: Register: negative key group " + strconv.Itoa(keyGroup))
	}
	tt := inTree(t)
	if i, found, ok := q.inPending(tt); ok {
		if found {
			return false
		}
		if len(q.pending()) < 2*q.batch {
			q.pend = slices.Insert(q.pend, i, cow.Entry[treeTimer, int]{Key: tt, Val: keyGroup})
			q.pendWrote = qtree(q).Owner().Epoch()
			q.verify("Register")
			return true
		}
		// Callbacks keep registering timers inside the batch: rather than
		// shift an ever longer buffer, give it back to the tree (Advance
		// pops it again) and register t there.
		q.flushPending()
	}
	added = !qtree(q).Set(tt, keyGroup)
	q.verify("Register")
	return added
}

// Delete removes timer t and reports whether it was registered; if it was
// not, Delete writes nothing. A deleted timer never fires, even if it was
// due in the Advance whose callback deletes it. O(log n); writer goroutine
// only, including from an Advance callback.
func (q *Queue) Delete(t Timer) (deleted bool) {
	tt := inTree(t)
	if i, found, ok := q.inPending(tt); ok {
		if !found {
			return false
		}
		q.pend = slices.Delete(q.pend, i, i+1)
		q.pendWrote = qtree(q).Owner().Epoch()
		q.deletes++
		q.verify("Delete")
		return true
	}
	if _, deleted = qtree(q).Delete(tt); deleted {
		q.deletes++
	}
	q.verify("Delete")
	return deleted
}

// Deletes returns how many timers Delete has removed from the queue since
// it was created (firing removes timers too, and is not counted). A
// caller that skips registering a timer it knows it registered checks
// that the count has not changed since. O(1); writer goroutine only.
func (q *Queue) Deletes() uint64 { return q.deletes }

// Contains reports whether timer t is registered. O(log n); writer
// goroutine only.
func (q *Queue) Contains(t Timer) bool {
	tt := inTree(t)
	if _, found, ok := q.inPending(tt); ok {
		return found
	}
	_, ok := qtree(q).Get(tt)
	return ok
}

// KeyGroup returns the key group timer t was registered with, and whether t
// is registered. O(log n); writer goroutine only.
func (q *Queue) KeyGroup(t Timer) (keyGroup int, ok bool) {
	tt := inTree(t)
	if i, found, in := q.inPending(tt); in {
		if !found {
			return 0, false
		}
		return q.pend[i].Val, true
	}
	return qtree(q).Get(tt)
}

// Len returns the number of registered timers. O(1); writer goroutine only.
func (q *Queue) Len() int { return qtree(q).Len() + len(q.pending()) }

// Next returns the earliest registered timer (the first in Compare order)
// and whether there is one: for processing time, the instant to wake up at.
// O(log n); writer goroutine only.
func (q *Queue) Next() (Timer, bool) {
	if p := q.pending(); len(p) > 0 {
		return p[0].Key.timer(), true
	}
	t, _, ok := qtree(q).Min()
	return t.timer(), ok
}

// Advance fires, in Compare order, every timer with Timestamp <= upTo and
// returns how many it fired: for event time, upTo is the new watermark; for
// processing time, the current time. Each timer is removed from the queue
// before fire is called with it and its key group (fire may be nil: the due
// timers are then just removed).
//
// fire runs on the writer goroutine, inside Advance, and may Register and
// Delete timers of this queue (and write any other structure of the owner,
// and take captures and views): a timer it registers with Timestamp <= upTo
// fires in this same Advance, in its place in the order; a pending timer it
// deletes never fires. fire must not call Advance on this queue (that
// panics). If fire panics, the timer it was called with stays removed, the
// timers not yet fired stay registered, and the panic propagates.
//
// Cost: due timers are popped from the left edge of the tree a batch at a
// time (cow.Tree.PopMinUntil), so firing k timers costs O(k) plus one
// O(log n) descent per leaf emptied, not a descent and a leaf copy per
// timer; registering or deleting from fire costs O(log n), plus O(b) to
// shift the b popped timers not yet fired when the timer sorts among them
// (b is at most 512: a batch that callbacks grow further goes back into the
// tree, O(log n) amortized per registration).
// Writer goroutine only.
func (q *Queue) Advance(upTo int64, fire func(t Timer, keyGroup int)) (fired int) {
	return q.AdvanceAhead(upTo, nil, fire)
}

// AdvanceAhead is Advance that also calls ahead with each timer
// aheadOfFire places before it is due to fire (not the first aheadOfFire
// timers of each batch the tree gives up), so that ahead can ask for what fire
// will read for it (the entry of a state at the timer's key and
// namespace). What ahead is given is a hint: fire may register or delete
// timers in between, so a timer it was called with may not fire, and a
// timer may fire that it was not called with. ahead must not write the
// queue (nor anything else: it runs among the fires, which it must not
// change); it may be nil.
func (q *Queue) AdvanceAhead(upTo int64, ahead func(t Timer), fire func(t Timer, keyGroup int)) (fired int) {
	if q.firing {
		panic("timerqueue: Advance called from an Advance callback of the same queue")
	}
	q.firing = true
	defer q.endAdvance()
	for {
		// Pop every timer <= bound. No Timer sorts after every Timer with
		// Timestamp upTo, so the bound is the first Timer of the next
		// instant, and if that very timer is registered it is popped and put
		// back (at most once per batch).
		var bound treeTimer
		if upTo == math.MaxInt64 {
			last, _, ok := qtree(q).Max()
			if !ok {
				break
			}
			bound = last
		} else {
			bound = treeTimer{Timestamp: upTo + 1}
		}
		q.pend = qtree(q).PopMinUntil(bound, q.batch, q.pend[:0])
		n := len(q.pend)
		if n > 0 && q.pend[n-1].Key.Timestamp > upTo {
			e := q.pend[n-1]
			q.pend[n-1] = cow.Entry[treeTimer, int]{}
			q.pend = q.pend[:n-1]
			n--
			qtree(q).Set(e.Key, e.Val)
		}
		if n == 0 {
			break
		}
		owner := qtree(q).Owner()
		for q.head < len(q.pend) {
			if j := q.head + fireAhead; j < len(q.pend) {
				prefetchBytes(q.pend[j].Key)
			}
			if j := q.head + aheadOfFire; ahead != nil && j < len(q.pend) {
				ahead(q.pend[j].Key.timer())
			}
			e := q.pend[q.head]
			q.pend[q.head] = cow.Entry[treeTimer, int]{} // hold no fired timer
			q.head++
			q.pendWrote = owner.Epoch()
			fired++
			if fire != nil {
				fire(e.Key.timer(), e.Val)
			}
		}
		q.pend, q.head = q.pend[:0], 0
		q.verify("Advance")
	}
	return fired
}

// endAdvance leaves Advance, normally or by a panic of a callback: timers
// still pending go back into the tree.
func (q *Queue) endAdvance() {
	q.flushPending()
	q.firing = false
	if cap(q.pend) > 4*q.batch {
		q.pend = nil // callbacks inserted many timers into a batch: do not keep the buffer
	}
}

// flushPending puts the pending timers back into the tree: O(b log n) for b
// pending timers.
func (q *Queue) flushPending() {
	p := q.pending()
	for _, e := range p {
		qtree(q).Set(e.Key, e.Val)
	}
	if len(p) > 0 {
		q.pendWrote = qtree(q).Owner().Epoch()
	}
	clear(q.pend)
	q.pend, q.head = q.pend[:0], 0
}

// All yields every registered timer with its key group, in Compare order.
// The queue must not be written during the iteration (iterate a Snapshot
// for that). O(n) for the whole sequence. Writer goroutine only.
func (q *Queue) All() iter.Seq2[Timer, int] {
	return func(yield func(Timer, int) bool) {
		for _, e := range q.pending() {
			if !yield(e.Key.timer(), e.Val) {
				return
			}
		}
		for t, kg := range qtree(q).All() {
			if !yield(t.timer(), kg) {
				return
			}
		}
	}
}

// verify runs Check after a mutation: after every one under the
// invariants build tag, on a Budget under -race.
func (q *Queue) verify(op string) {
	if invariants.Enabled && q.checks.Due(q.Len()) {
		if err := q.Check(); err != nil {
			panic("timerqueue: invariant broken after " + op + ": " + err.Error())
		}
	}
}

func qtree(q *Queue) *cow.Tree[treeTimer, int] { return (*cow.Tree[treeTimer, int])(q.treep) }
func stree(s *Snapshot) *cow.TreeSnapshot[treeTimer, int] {
	return (*cow.TreeSnapshot[treeTimer, int])(s.treep)
}
