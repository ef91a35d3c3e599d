package cow

import "slices"

// Reuse of the branches copy-on-write leaves behind.
//
// A write under a capture copies every branch on its path that the
// capture shares (ownBranch); the original leaves the live tree then, and
// only captures can still reach it. At 10M entries a checkpoint's writes
// copy each of the map's 34K branches once (576 bytes each, 19.5 MB), and
// into fresh memory those copies are most of what the writer allocates
// between two checkpoints (BenchmarkJob, keys=10000000, every=1s; decision
// 0065). So a copy's original waits here and is copied into once no live
// capture can reach it, as leaves are (map_reuse.go).
//
// # When a branch may be reused
//
// A branch records the epoch it was made in, and leaves the live tree in
// the writer epoch E of the write that copies it. A capture of epoch c
// froze the version at the end of writer epoch c, so it reaches the branch
// exactly when b.epoch <= c < E. The branch is free once no live capture
// has an epoch in that range.
//
// # What a waiting branch keeps alive
//
// A branch points at 32 subtrees. While a capture reaches it, the capture
// keeps them alive anyway; once none does, a branch still waiting would
// keep alive old versions the collector should have. Two things keep that
// short. The rule above is exact, where the leaves' is conservative
// (oldest live capture at E), and a branch it holds back holds back no
// other (promote): a checkpoint's base held long does not keep waiting
// the branches that only shorter captures since could reach (a
// conservative rule in retirement order held the demo's largest live
// heap at 105 MB against 68-73, decision 0004). And the first writes
// that find no capture live move the waiting branches on
// (drainBranches), a bounded number a write: a branch moved on is
// cleared, so a ready one points at nothing.
//
// A map used as a cursor (Root, SetRoot) reuses no branch, for the
// reason it reuses no leaf.

// retiredBranch is a branch that left the live tree in writer epoch
// epoch, made in epoch born.
type retiredBranch[K comparable, V any] struct {
	b           *mapBranch[K, V]
	born, epoch uint64
}

// branchReuse holds one map's retired branches: those waiting for the
// captures that reach them and those ready to be copied into. Writer
// goroutine only.
type branchReuse[K comparable, V any] struct {
	waiting  []retiredBranch[K, V] // in no order
	ready    []*mapBranch[K, V]
	releases uint64   // Owner.releases at the start of promote's last pass
	next     int      // where promote's pass goes on
	looking  bool     // a pass is under way
	scratch  []uint64 // promote's copy of the live captures' epochs
	off      bool     // no reuse: a cursor
}

// branchesKeptPer bounds a map's waiting and ready branches together: one
// for each branchesKeptPer entries, plus branchesKeptMin. A map has about
// one branch for each 300 (at 10M) to 950 (at 1M) entries, so every branch
// a checkpoint's writes copy fits.
const (
	branchesKeptPer = 128
	branchesKeptMin = 64
)

// stop turns reuse off for good and lets the collector have what it held.
func (r *branchReuse[K, V]) stop() { *r = branchReuse[K, V]{off: true} }

// retireBranch records that b, which the writer just copied, left the
// live tree now.
func (m *Map[K, V]) retireBranch(b *mapBranch[K, V]) {
	r := &m.branches
	if r.off || len(r.waiting)+len(r.ready) >= m.len/branchesKeptPer+branchesKeptMin {
		return
	}
	r.waiting = append(r.waiting, retiredBranch[K, V]{b, b.epoch, m.owner.epoch})
}

// newBranch returns a branch to copy into: a retired one no capture
// reaches, cleared, or fresh memory. The caller overwrites all of it.
func (m *Map[K, V]) newBranch() *mapBranch[K, V] {
	r := &m.branches
	r.promote(m.owner)
	if n := len(r.ready); n > 0 {
		b := r.ready[n-1]
		r.ready[n-1] = nil
		r.ready = r.ready[:n-1]
		return b
	}
	return new(mapBranch[K, V])
}

// drainBranches moves on the waiting branches, if any, when a write
// finds no capture live: every one is then free, and cleared it keeps no
// old version alive until the next capture's copies would have moved it.
// Small enough to inline: one load and a branch when none waits.
func (m *Map[K, V]) drainBranches() {
	if len(m.branches.waiting) != 0 {
		m.branches.promote(m.owner)
	}
}

// promote moves the waiting branches no live capture reaches to the
// ready list, clearing each (it points at nothing while it waits to be
// copied into). A branch is retired because a live capture reaches it, and
// only a release can change that: so promote looks only after a release
// (Owner.releases), at every waiting branch once, up to reusePromoteMax a
// call, and a branch a capture still reaches holds back none of the others
// (a checkpoint's base held long does not keep waiting the branches only
// shorter captures reached). Between releases it costs a load and a
// compare; over a pass, O(1) per waiting branch plus the clearing. The
// live captures' epochs are read under the owner's lock at most once a
// call, and only when their bounds do not decide.
func (r *branchReuse[K, V]) promote(o *Owner) {
	if rel := o.releases.Load(); rel != r.releases {
		r.releases, r.next, r.looking = rel, 0, true // a new pass
	}
	if !r.looking {
		return
	}
	// Captures are taken only by the writer (this goroutine) and released
	// by any: every capture live from here on was live at these loads, so
	// its epoch lies in [oldest, newest].
	oldest := o.low.Load()
	newest := o.high.Load()
	var live []uint64 // the live captures' epochs, once read
	for range reusePromoteMax {
		if r.next >= len(r.waiting) {
			r.looking = false
			return
		}
		w := r.waiting[r.next]
		reached := false
		switch {
		case oldest == 0 || oldest >= w.epoch || newest < w.born:
		case oldest >= w.born:
			reached = true // by the oldest live capture
		default:
			if live == nil {
				live = o.liveEpochs(r.scratch[:0])
				r.scratch = live
			}
			i, _ := slices.BinarySearch(live, w.born)
			reached = i < len(live) && live[i] < w.epoch
		}
		if reached {
			r.next++
			continue
		}
		last := len(r.waiting) - 1
		r.waiting[r.next] = r.waiting[last] // looked at next
		r.waiting[last] = retiredBranch[K, V]{}
		r.waiting = r.waiting[:last]
		w.b.kids = [mapFanout]mapSlot[K, V]{}
		r.ready = append(r.ready, w.b)
	}
}
