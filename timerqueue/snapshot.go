package timerqueue

import (
	"iter"
	"slices"
	"strconv"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// Snapshot is a read-only version of a Queue, frozen by a cow.Capture. Any
// number of goroutines may read it, concurrently with each other and with
// the queue's writer, until its capture is released; every read after that
// panics (iterations check before every timer, so a release during an
// iteration stops it with a panic too).
type Snapshot struct {
	treep unsafe.Pointer // *cow.TreeSnapshot[treeTimer, int], read through stree: see Queue.treep
	// extra holds the pending timers of an Advance that was in progress when
	// the capture was taken (a view taken from a callback): a private copy,
	// ascending, every one before every timer of tree. Nil otherwise.
	extra []cow.Entry[treeTimer, int]
}

// View returns the queue's version frozen by c in O(1) (plus a copy of the
// at most few hundred popped-but-unfired timers if called from an Advance
// callback). As for cow.Tree.View, c must come from the queue's owner and no
// structure of the owner may have been written since c was taken: take
// every view of one checkpoint right after owner.Capture(). Views taken
// under one capture share it: releasing any of them releases all. Writer
// goroutine only.
func (q *Queue) View(c *cow.Capture) *Snapshot {
	s := &Snapshot{treep: unsafe.Pointer(qtree(q).View(c))}
	if q.pendWrote > c.Epoch() {
		// The tree is unchanged since c, but Advance or its callback changed
		// the pending timers: the queue is not the version c froze.
		panic("timerqueue: View after a write: take views right after Owner.Capture, before any write")
	}
	if p := q.pending(); len(p) > 0 {
		s.extra = slices.Clone(p)
	}
	return s
}

// Snapshot captures the queue's current version in O(1) and returns it. It
// takes a new capture of the queue's owner, which freezes every structure of
// that owner; releasing the snapshot releases that capture. To capture state
// and timers at one logical point, use owner.Capture() and the View methods
// instead. Writer goroutine only.
func (q *Queue) Snapshot() *Snapshot {
	return q.View(qtree(q).Owner().Capture())
}

// Epoch returns the epoch of the snapshot's capture: captures of one owner
// have strictly increasing epochs. Safe from any goroutine, even after
// Release.
func (s *Snapshot) Epoch() uint64 { return stree(s).Epoch() }

// Capture returns the capture that froze the snapshot.
func (s *Snapshot) Capture() *cow.Capture { return stree(s).Capture() }

// Release releases the snapshot's capture, and with it every view taken
// under that capture (see cow.Capture.Release). Safe from any goroutine;
// idempotent.
func (s *Snapshot) Release() { stree(s).Release() }

// Released reports whether the snapshot's capture was released. Safe from
// any goroutine.
func (s *Snapshot) Released() bool { return stree(s).Released() }

// mustRead panics if the snapshot was released, with an error matching
// cow.ErrReleased (as the tree's own reads do).
func (s *Snapshot) mustRead() {
	if stree(s).Released() {
		panic(releasedRead(s.Epoch()))
	}
}

// releasedRead is what a read of a snapshot released at an epoch panics
// with.
type releasedRead uint64

func (e releasedRead) Error() string {
	return "timerqueue: read of a released snapshot (epoch " + strconv.FormatUint(uint64(e), 10) + ")"
}
func (e releasedRead) Unwrap() error { return cow.ErrReleased }

// Len returns the number of timers. O(1).
func (s *Snapshot) Len() int {
	s.mustRead()
	return stree(s).Len() + len(s.extra)
}

// KeyGroup returns the key group of timer t and whether t is in the
// snapshot. O(log n).
func (s *Snapshot) KeyGroup(t Timer) (keyGroup int, ok bool) {
	s.mustRead()
	tt := inTree(t)
	if n := len(s.extra); n > 0 && compareTree(tt, s.extra[n-1].Key) <= 0 {
		i, found := slices.BinarySearchFunc(s.extra, tt, func(e cow.Entry[treeTimer, int], t treeTimer) int {
			return compareTree(e.Key, t)
		})
		if !found {
			return 0, false
		}
		return s.extra[i].Val, true
	}
	return stree(s).Get(tt)
}

// Contains reports whether timer t is in the snapshot. O(log n).
func (s *Snapshot) Contains(t Timer) bool {
	_, ok := s.KeyGroup(t)
	return ok
}

// All yields every timer with its key group, in Compare order. O(n) for the
// whole sequence.
func (s *Snapshot) All() iter.Seq2[Timer, int] {
	return func(yield func(Timer, int) bool) {
		for _, e := range s.extra {
			s.mustRead()
			if !yield(e.Key.timer(), e.Val) {
				return
			}
		}
		for t, kg := range stree(s).All() {
			if !yield(t.timer(), kg) {
				return
			}
		}
	}
}

// InKeyGroups yields the timers whose key group is in [lo, hi], with their
// key group, in Compare order: the timers of one section of a snapshot
// written per key group, or of the key-group range a rescaled subtask
// restores. It reads every timer: O(n) for the whole sequence, whatever the
// range.
func (s *Snapshot) InKeyGroups(lo, hi int) iter.Seq2[Timer, int] {
	return func(yield func(Timer, int) bool) {
		for t, kg := range s.All() {
			if kg >= lo && kg <= hi && !yield(t, kg) {
				return
			}
		}
	}
}

// Diff yields the changes that turn old into new, in Compare order: Added
// for timers only in new, Removed for timers only in old, Changed for a
// timer in both with different key groups (which a caller that keeps the key
// group a function of the key never sees). old and new must be snapshots of
// queues that order timers by Compare (any two Snapshots do); they need not
// come from the same queue or owner.
//
// Cost: for two snapshots of one queue it follows the changes, not the size
// (see cow.DiffTrees): subtrees both versions share are skipped. If either
// snapshot was taken from an Advance callback, the few pending timers it
// holds outside its tree cost O(log n) each more.
//
// Both snapshots must stay live during the iteration (reads panic
// otherwise). Safe from any goroutine.
func Diff(old, new *Snapshot) iter.Seq[cow.Change[Timer, int]] {
	return func(yield func(cow.Change[Timer, int]) bool) {
		if len(old.extra) == 0 && len(new.extra) == 0 {
			for c := range cow.DiffTrees(stree(old), stree(new)) {
				if !yield(publicChange(c)) {
					return
				}
			}
			return
		}
		diffExtra(old, new, yield)
	}
}

// diffExtra is Diff when either snapshot holds pending timers outside its
// tree. A timer's membership can differ only if it differs between the two
// trees or is pending in either snapshot, so it walks the tree diff merged
// with the pending timers of both and looks each candidate up on both sides.
func diffExtra(old, new *Snapshot, yield func(cow.Change[Timer, int]) bool) {
	extra := make([]Timer, 0, len(old.extra)+len(new.extra))
	for _, e := range old.extra {
		extra = append(extra, e.Key.timer())
	}
	for _, e := range new.extra {
		extra = append(extra, e.Key.timer())
	}
	slices.SortFunc(extra, Compare)
	extra = slices.Compact(extra)

	emit := func(t Timer) bool {
		ov, oin := old.KeyGroup(t)
		nv, nin := new.KeyGroup(t)
		switch {
		case oin && nin && ov != nv:
			return yield(cow.Change[Timer, int]{Kind: cow.Changed, Key: t, Old: ov, New: nv})
		case oin && !nin:
			return yield(cow.Change[Timer, int]{Kind: cow.Removed, Key: t, Old: ov})
		case !oin && nin:
			return yield(cow.Change[Timer, int]{Kind: cow.Added, Key: t, New: nv})
		}
		return true
	}
	i := 0
	for tc := range cow.DiffTrees(stree(old), stree(new)) {
		c := publicChange(tc)
		for ; i < len(extra) && Compare(extra[i], c.Key) < 0; i++ {
			if !emit(extra[i]) {
				return
			}
		}
		if i < len(extra) && Compare(extra[i], c.Key) == 0 {
			i++
		}
		if !emit(c.Key) {
			return
		}
	}
	for ; i < len(extra); i++ {
		if !emit(extra[i]) {
			return
		}
	}
}

// publicChange returns a change of the tree as one of Timers.
func publicChange(c cow.Change[treeTimer, int]) cow.Change[Timer, int] {
	return cow.Change[Timer, int]{Kind: c.Kind, Key: c.Key.timer(), Old: c.Old, New: c.New}
}
