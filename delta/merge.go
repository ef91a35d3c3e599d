package delta

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cowstate/cowstate/statetable"
)

// Merge composes a chain of consecutive deltas (each one's Base is the
// previous one's Target) into one with the same net effect, without
// restoring anything: an entry written then deleted is a delete, the last
// write wins, patches on a put fold into it, and a timer's last state
// counts. The result goes from the first Base to the last Target, with the
// last Meta. Cost: O(changes in the chain). The inputs are not modified.
func Merge(chain ...*Delta) (*Delta, error) {
	if len(chain) == 0 {
		return nil, fmt.Errorf("%w: merge of an empty chain", ErrMismatch)
	}
	last := chain[len(chain)-1]
	out := &Delta{Base: chain[0].Base, Target: last.Target, Meta: last.Meta}
	for i, d := range chain {
		if i > 0 {
			prev := chain[i-1]
			if d.Base != prev.Target {
				return nil, fmt.Errorf("%w: delta %d->%d follows delta %d->%d", ErrWrongBase, d.Base, d.Target, prev.Base, prev.Target)
			}
			if d.Meta.MaxParallelism != prev.Meta.MaxParallelism || d.Meta.KeyGroups != prev.Meta.KeyGroups {
				return nil, fmt.Errorf("%w: delta %d->%d covers key groups %v of %d, the one before %v of %d",
					ErrMismatch, d.Base, d.Target, d.Meta.KeyGroups, d.Meta.MaxParallelism, prev.Meta.KeyGroups, prev.Meta.MaxParallelism)
			}
		}
		if err := sameEncoding(d, last); err != nil {
			return nil, err
		}
		for g, gr := range d.groups {
			og := out.group(g)
			for state, ops := range gr.states {
				oops := og.ops(state)
				for ck, op := range ops {
					merged, err := compose(oops[ck], op)
					if err != nil {
						return nil, fmt.Errorf("delta %d->%d, state %q, key group %d: %w", d.Base, d.Target, state, g, err)
					}
					oops[ck] = merged
				}
			}
			maps.Copy(og.timers, gr.timers)
		}
	}
	return out, nil
}

// compose returns the net effect of a then b on one entry (a may be nil).
func compose(a, b *entryOp) (*entryOp, error) {
	switch {
	case a == nil || b.deleted || b.put:
		return b, nil
	case a.deleted:
		return nil, fmt.Errorf("%w: a patch of a deleted entry", ErrWrongBase)
	}
	parts := make(map[string]statetable.Part, len(a.parts)+len(b.parts))
	maps.Copy(parts, a.parts)
	maps.Copy(parts, b.parts)
	return &entryOp{put: a.put, cell: a.cell, parts: parts}, nil
}

// sameEncoding returns an error matching ErrMismatch if a state has a TTL in one
// of d and last and not in the other, or other codecs: their cells are
// encoded differently (with and without expiration timestamps, or by two
// versions of a codec) and cannot be merged as bytes. Every state of d
// must be in last: the merged delta is read with last's metadata.
func sameEncoding(d, last *Delta) error {
	infos := map[string]statetable.StateInfo{}
	for _, s := range last.Meta.States {
		infos[s.Name] = s
	}
	for _, s := range d.Meta.States {
		l, ok := infos[s.Name]
		switch {
		case !ok:
			return fmt.Errorf("%w: state %q of delta %d->%d is not in delta %d->%d", ErrMismatch, s.Name, d.Base, d.Target, last.Base, last.Target)
		case l.TTL != s.TTL:
			return fmt.Errorf("%w: state %q has a TTL in only one of deltas %d->%d and %d->%d", ErrMismatch, s.Name, d.Base, d.Target, last.Base, last.Target)
		case !slices.Equal(l.Codec, s.Codec):
			return fmt.Errorf("%w: state %q has codecs %v in delta %d->%d and %v in %d->%d", ErrMismatch, s.Name, s.Codec, d.Base, d.Target, l.Codec, last.Base, last.Target)
		}
	}
	return nil
}
