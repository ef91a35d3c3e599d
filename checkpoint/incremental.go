package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/delta"
)

// writeIncremental writes checkpoint cp as a delta from base, or returns
// (nil, nil) when the policy wants a full snapshot. The manifest it returns
// is not committed yet. It runs on the checkpoint's goroutine.
func (s *Store) writeIncremental(ctx context.Context, cp *Checkpoint, base *checkpointBase, epoch uint64) (*Manifest, error) {
	limit := -1
	if s.policy.MaxChangeShare < 1 {
		limit = int(s.policy.MaxChangeShare * float64(cp.snap.Size()))
	}
	var buf bytes.Buffer
	changed, ok, err := cowstate.WriteDiff(ctx, &buf, base.snap, cp.snap, base.manifest.ID, cp.id, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: diff from checkpoint %d: %w", ErrInvalid, base.manifest.ID, err)
	}
	cp.diffed, cp.changed, cp.changeLimit = true, changed, limit
	if !ok {
		cp.tooManyChanges = true
		return nil, nil // too many changes: a full snapshot is cheaper
	}
	chain := base.manifest.Segments
	full := chain[0].Size
	var chainBytes int64
	for _, seg := range chain[1:] {
		chainBytes += seg.Size
	}
	size := int64(buf.Len())
	if float64(size) > s.policy.MaxDeltaShare*float64(full) || float64(chainBytes+size) > s.policy.MaxChainShare*float64(full) {
		return nil, nil
	}
	m := manifestOf(cp, KindIncremental, epoch)
	m.Changed = changed
	file := buf.Bytes()
	segBase := base.manifest.ID
	if k := mergeCount(chain[1:], size, s.policy.MaxChainLength); k > 0 {
		// Fold the chain's last k deltas and this one into one, file by
		// file (delta.MergeFiles). Each is checked against its size and
		// xxhash64 as it is read, and each section against its own.
		keep := len(chain) - k
		rs := make([]*delta.Reader, 0, k+1)
		total := int64(len(file)) // the merge is at most as big as its inputs
		for _, seg := range chain[keep:] {
			r, err := openDelta(ctx, s.st, seg, nil)
			if err != nil {
				return nil, fmt.Errorf("merge of the chain of checkpoint %d: %w", base.manifest.ID, err)
			}
			rs = append(rs, r)
			total += r.Size()
		}
		r, err := delta.OpenBytes(file)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint %d: reading back its delta: %w", ErrCorrupt, cp.id, err)
		}
		var merged bytes.Buffer
		merged.Grow(int(total))
		if err := delta.MergeFiles(ctx, &merged, append(rs, r)...); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: merge of the chain of checkpoint %d: %w", ErrCorrupt, base.manifest.ID, err)
		}
		file, segBase = merged.Bytes(), rs[0].Base()
		chain = chain[:keep]
	}
	name := deltaName(epoch, segBase, cp.id) // in cp.names since take
	n, sum, err := writeObject(ctx, s.st, name, &cp.sync, func(w io.Writer) error {
		_, err := w.Write(file)
		cp.progress.Bytes.Add(int64(len(file)))
		cp.progress.Entries.Add(int64(m.Changed))
		return err
	})
	if err != nil {
		return nil, err
	}
	cp.written += n
	seg := Segment{Name: name, Delta: true, Base: segBase, Target: cp.id, Size: n, Sum: sumHex(sum)}
	if seg.Skeleton, err = skeletonSum(ctx, s.st, seg, file); err != nil {
		return nil, err
	}
	m.Segments = append(slices.Clone(chain), seg)
	return m, nil
}

// mergeCount returns how many of a chain's last deltas to merge with a new
// delta of size bytes: none while the chain has room (MaxChainLength);
// when it has not, the newest deltas are folded together, and each older
// one too while it is smaller than the run being folded. The chain's
// deltas so stay ordered by size, big and old first, a merge rewrites
// mostly small recent deltas, and a big delta is rewritten only once the
// small ones after it have grown as big.
func mergeCount(deltas []Segment, size int64, maxLen int) int {
	if len(deltas) < maxLen {
		return 0
	}
	k, tail := 0, size
	for k < len(deltas) {
		prev := deltas[len(deltas)-1-k].Size
		if k > 0 && prev >= tail && len(deltas)-k+1 <= maxLen {
			break
		}
		tail += prev
		k++
	}
	return k
}
