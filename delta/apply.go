package delta

import (
	"context"
	"fmt"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Target is what Apply writes to: a backend holding the delta's base
// version (a Backend restoring a chain implements it). Its methods run on
// Apply's goroutine.
type Target interface {
	// RestoreEntry stores an entry whole (as a snapshot's restore does);
	// the target may keep key.
	RestoreEntry(state string, key, cell []byte) error
	// DeleteEntry removes an entry (a no-op if absent).
	DeleteEntry(state string, key []byte) error
	// PatchEntry applies the parts of a list or map cell.
	PatchEntry(state string, key []byte, parts []statetable.Part) error
	// RestoreTimer registers a timer; DeleteTimer removes one (a no-op if
	// absent).
	RestoreTimer(service string, d snapshot.Domain, g int, ts int64, key, ns string) error
	DeleteTimer(service string, d snapshot.Domain, g int, ts int64, key, ns string) error
}

// Apply replays d on dst, which must hold version base (the id of the
// checkpoint dst was restored to, or the Target of the last delta applied):
// another base is an error matching ErrWrongBase. Only the key groups in
// kgs are applied (a rescaled backend applies its own range). ctx is
// checked between key groups. A failure part way leaves dst partly
// updated: restore into a fresh backend. Cost: O(changes in kgs).
func Apply(ctx context.Context, dst Target, base uint64, d *Delta, kgs statetable.KeyGroupRange) error {
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
			for ck, op := range gr.states[state] {
				if err := applyOp(dst, state, []byte(ck), op); err != nil {
					return fmt.Errorf("delta %d->%d, key group %d: %w", d.Base, d.Target, g, err)
				}
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

func applyOp(dst Target, state string, ck []byte, op *entryOp) error {
	if op.deleted {
		return dst.DeleteEntry(state, ck)
	}
	if op.put {
		if err := dst.RestoreEntry(state, ck, op.cell); err != nil {
			return err
		}
	}
	if len(op.parts) == 0 {
		return nil
	}
	parts := make([]statetable.Part, 0, len(op.parts))
	for _, k := range sortedKeys(op.parts) {
		parts = append(parts, op.parts[k])
	}
	return dst.PatchEntry(state, ck, parts)
}
