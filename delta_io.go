package cowstate

import (
	"context"
	"fmt"
	"io"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Diff returns the delta that turns prev into next, two snapshots of the
// same backend (prev taken first), by diffing their structures: the cost
// follows what changed between them, not the size of the state. The
// delta's Base and Target are left zero for the caller to name. Any
// goroutine, while both snapshots are live. Snapshots of two backends, or
// a nil one, are an error matching ErrForeignSnapshot.
func Diff(prev, next *Snapshot) (*delta.Delta, error) {
	if err := checkSameBackend(prev, next); err != nil {
		return nil, err
	}
	return delta.Diff(prev.deltaSource(), next.deltaSource())
}

// WriteDiff diffs prev and next, two snapshots of one backend (prev taken
// first), and writes the delta from checkpoint base to checkpoint target to
// w in the delta format, stopping early with ok false once it counts more
// than limit changes (entries and timers; limit < 0: no limit). It returns
// the number of changes. Cost: what changed between the two versions, not
// the state's size. Any goroutine, while both snapshots are live.
func WriteDiff(ctx context.Context, w io.Writer, prev, next *Snapshot, base, target uint64, limit int) (changes int, ok bool, err error) {
	if err := checkSameBackend(prev, next); err != nil {
		return 0, false, err
	}
	return delta.WriteDiff(ctx, w, prev.deltaSource(), next.deltaSource(), base, target, limit)
}

// checkSameBackend refuses a diff of snapshots of two backends, or with a
// nil snapshot: an error matching ErrForeignSnapshot and delta.ErrMismatch.
func checkSameBackend(prev, next *Snapshot) error {
	if prev == nil || next == nil {
		return fmt.Errorf("%w: %w: diff with a nil snapshot", ErrForeignSnapshot, delta.ErrMismatch)
	}
	if !prev.SameBackend(next) {
		return fmt.Errorf("%w: %w: diff of snapshots of two backends", ErrForeignSnapshot, delta.ErrMismatch)
	}
	return nil
}

// deltaSource describes s for package delta.
func (s *Snapshot) deltaSource() delta.Source {
	v := delta.Source{Meta: source{s: s}.Meta(), State: s.state, Timers: make(map[string]delta.Queues, len(s.timers))}
	for name, tv := range s.timers {
		v.Timers[name] = delta.Queues{Event: tv.event, Processing: tv.processing}
	}
	return v
}

// ApplyDelta replays d on b, which must hold the version d's Base names:
// base is the id of the checkpoint b was restored to (or the Target of the
// last delta applied), and another base gives an error matching
// delta.ErrWrongBase. Only b's key groups are applied (rescaling). The
// delta's states and timer services must be registered on b, as for
// Restore. A failure part way leaves b partly updated: discard it. Writer
// goroutine only.
func (b *Backend) ApplyDelta(ctx context.Context, base uint64, d *delta.Delta) error {
	if err := b.checkMeta(d.Meta); err != nil {
		return err
	}
	return delta.Apply(ctx, deltaSink{newSink(b, d.Meta)}, base, d, b.KeyGroups())
}

// deltaSink adapts a Backend to delta.Sink.
type deltaSink struct{ sink }

func (t deltaSink) DeleteTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error {
	if name, ok := t.b.restoredName(service); ok {
		queueOf(t.b.services[name], d).Delete(timerqueue.Timer{Timestamp: ts, Key: key, Namespace: ns})
	}
	return nil
}

func (t deltaSink) ApplyEntries(state string, ops []statetable.EntryOp) error {
	name, ok := t.b.restoredName(state)
	if !ok {
		return nil // DropOnRestore
	}
	return t.b.table.ApplyEntriesOf(name, t.files[state], ops)
}
