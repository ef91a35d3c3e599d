package delta

import (
	"context"
	"fmt"

	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Sink is what Apply writes to: a backend holding the delta's base
// version (a Backend restoring a chain implements it). Its methods run on
// Apply's goroutine.
type Sink interface {
	// ApplyEntries replays the changes of one state in one key group, each
	// on a different entry, in an order of its choosing (see
	// statetable.Table.ApplyEntries); the target may keep the keys.
	ApplyEntries(state string, ops []statetable.EntryOp) error
	// RestoreTimer registers a timer; DeleteTimer removes one (a no-op if
	// absent).
	RestoreTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error
	DeleteTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error
}

// Apply replays d on dst, which must hold version base (the id of the
// checkpoint dst was restored to, or the Target of the last delta applied):
// another base is an error matching ErrWrongBase. Only the key groups in
// kgs are applied (a rescaled backend applies its own range). ctx is
// checked between key groups. A failure part way leaves dst partly
// updated: restore into a fresh backend. Cost: O(changes in kgs).
func Apply(ctx context.Context, dst Sink, base uint64, d *Delta, kgs statetable.KeyGroupRange) error {
	if d.Base != base {
		return fmt.Errorf("%w: delta %d->%d applied to checkpoint %d", ErrWrongBase, d.Base, d.Target, base)
	}
	for _, g := range d.Groups() {
		if !kgs.Contains(g) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		gr := d.groups[g]
		for _, state := range sortedKeys(gr.states) {
			ops := make([]statetable.EntryOp, 0, len(gr.states[state]))
			for ck, op := range gr.states[state] {
				ops = append(ops, statetable.EntryOp{Key: []byte(ck), Delete: op.deleted, Put: op.put, Cell: op.cell, Parts: op.partList()})
			}
			if err := dst.ApplyEntries(state, ops); err != nil {
				return fmt.Errorf("delta %d->%d, key group %d: %w", d.Base, d.Target, g, err)
			}
		}
		for t, present := range gr.timers {
			var err error
			if present {
				err = dst.RestoreTimer(t.service, t.domain, g, t.ts, t.key, t.ns)
			} else {
				err = dst.DeleteTimer(t.service, t.domain, g, t.ts, t.key, t.ns)
			}
			if err != nil {
				return fmt.Errorf("delta %d->%d, key group %d, timer service %q: %w", d.Base, d.Target, g, t.service, err)
			}
		}
	}
	return nil
}

// partList returns the op's parts in part-key order (nil if none).
func (op *entryOp) partList() []statetable.Part {
	if len(op.parts) == 0 {
		return nil
	}
	parts := make([]statetable.Part, 0, len(op.parts))
	for _, k := range sortedKeys(op.parts) {
		parts = append(parts, op.parts[k])
	}
	return parts
}
