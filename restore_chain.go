package cowstate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Chain is one checkpoint's state as files hold it: a full snapshot, taken
// as checkpoint FullID, and the deltas that follow it in order (the first
// delta's Base is FullID, each next one's Base the previous one's Target).
type Chain struct {
	Full   *snapshot.Reader
	FullID uint64
	Deltas []*delta.Delta
}

// Empty reports whether b holds no state entry and no timer. O(number of
// states and timer services). Writer goroutine only.
func (b *Backend) Empty() bool {
	for info := range b.table.States() {
		if n, _ := b.table.Entries(info.Name); n > 0 {
			return false
		}
	}
	for _, name := range b.names {
		ev, pr := b.services[name].queues()
		if ev.Len() > 0 || pr.Len() > 0 {
			return false
		}
	}
	return true
}

// RestoreChains restores into b, which must be empty (else ErrNotEmpty), the
// key groups it owns from one or more chains, all or nothing: every file's
// metadata is checked against b (states and timer services registered with
// the same kinds and codecs, the same max parallelism), each chain's deltas
// must follow one another, and the chains must cover disjoint key groups of
// b before the first entry goes in; if anything fails after that (bad bytes
// in a section, ctx cancelled), b is emptied again before the error is
// returned. Several chains restore several subtasks' shares into one
// backend (scale-in). Mismatches match snapshot.ErrMismatch (and
// statetable.ErrStateMismatch for a state's kind or codecs, delta.ErrWrongBase
// for a broken chain). Cost: the entries restored, plus on failure those
// already restored. Writer goroutine only.
func (b *Backend) RestoreChains(ctx context.Context, chains ...Chain) error {
	if !b.Empty() {
		return fmt.Errorf("%w: restore into a backend that already holds state", ErrNotEmpty)
	}
	b.translated = false
	owned := b.KeyGroups()
	var covered []statetable.KeyGroupRange
	for i, c := range chains {
		if c.Full == nil {
			return fmt.Errorf("%w: chain %d has no full snapshot", ErrConfig, i)
		}
		meta := c.Full.Meta()
		if err := b.checkMeta(meta); err != nil {
			return fmt.Errorf("chain %d: full snapshot %d: %w", i, c.FullID, err)
		}
		base := c.FullID
		for _, d := range c.Deltas {
			if d.Base != base {
				return fmt.Errorf("%w: chain %d: delta %d->%d follows checkpoint %d", delta.ErrWrongBase, i, d.Base, d.Target, base)
			}
			if err := b.checkMeta(d.Meta); err != nil {
				return fmt.Errorf("chain %d: delta %d->%d: %w", i, d.Base, d.Target, err)
			}
			if d.Meta.KeyGroups != meta.KeyGroups {
				return fmt.Errorf("%w: chain %d: delta %d->%d covers key groups %v, its full snapshot %v", snapshot.ErrMismatch, i, d.Base, d.Target, d.Meta.KeyGroups, meta.KeyGroups)
			}
			base = d.Target
		}
		r := intersect(meta.KeyGroups, owned)
		for j, o := range covered {
			if !intersect(r, o).Empty() {
				return fmt.Errorf("%w: chains %d and %d both hold key groups %v of the backend", snapshot.ErrMismatch, j, i, intersect(r, o))
			}
		}
		covered = append(covered, r)
	}
	// The deltas patch the cells as the job held them when it diffed
	// them: what has expired since is kept until the last delta is in.
	b.table.HoldExpiry()
	defer b.table.ReleaseExpiry()
	for _, c := range chains {
		err := c.Full.Restore(ctx, newSink(b, c.Full.Meta()), owned)
		base := c.FullID
		for _, d := range c.Deltas {
			if err != nil {
				break
			}
			err = delta.Apply(ctx, deltaSink{newSink(b, d.Meta)}, base, d, owned)
			base = d.Target
		}
		if err != nil {
			if cerr := b.clear(); cerr != nil {
				return errors.Join(err, cerr)
			}
			return err
		}
	}
	return nil
}

func intersect(a, b statetable.KeyGroupRange) statetable.KeyGroupRange {
	return statetable.KeyGroupRange{First: max(a.First, b.First), Last: min(a.Last, b.Last)}
}

// clear removes every state entry and timer of b: what a failed restore
// does to give the backend back empty. O(entries and timers).
func (b *Backend) clear() error {
	snap := b.Snapshot()
	defer snap.Release()
	owned := b.KeyGroups()
	for _, info := range snap.state.States() {
		var keys [][]byte
		for g := owned.First; g <= owned.Last; g++ {
			err := snap.state.KeyGroupEntries(info.Name, g, func(key, _ []byte) bool {
				keys = append(keys, slices.Clone(key))
				return true
			})
			if err != nil {
				return fmt.Errorf("cowstate: emptying state %q after a failed restore: %w", info.Name, err)
			}
		}
		for _, k := range keys {
			if err := b.table.DeleteEntry(info.Name, k); err != nil {
				return fmt.Errorf("cowstate: emptying state %q after a failed restore: %w", info.Name, err)
			}
		}
	}
	for _, name := range b.names {
		ev, pr := b.services[name].queues()
		for _, q := range []*timerqueue.Queue{ev, pr} {
			var ts []timerqueue.Timer
			for t := range q.All() {
				ts = append(ts, t)
			}
			for _, t := range ts {
				q.Delete(t)
			}
		}
	}
	return nil
}

// TimerCount returns the number of timers in s, of every service and both
// time domains. O(number of timer services).
func (s *Snapshot) TimerCount() int {
	n := 0
	for _, tv := range s.timers {
		n += tv.event.Len() + tv.processing.Len()
	}
	return n
}

// Size returns the number of state entries and timers in s. O(number of
// states and timer services).
func (s *Snapshot) Size() int {
	n := s.TimerCount()
	for _, info := range s.state.States() {
		n += s.state.Entries(info.Name)
	}
	return n
}

// SameBackend reports whether s and other are snapshots of one backend (so
// that they can be diffed). Any goroutine.
func (s *Snapshot) SameBackend(other *Snapshot) bool {
	return s.capture.Owner() == other.capture.Owner()
}
