package delta

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"unsafe"

	"github.com/cowstate/cowstate/internal/fileformat"
)

// MergeFiles writes to w the delta Merge makes of the chain of delta
// files (oldest first), encoded as Write encodes it, byte for byte,
// without building a Delta of each: key group by key group it decodes
// every file's section, merges each state's entries as runs sorted by
// composite key (a file Write made is sorted already, a WriteDiff file is
// sorted per section here) and encodes the result. So its cost follows the
// chain's bytes with no map insert per entry: a checkpoint folding deltas
// into one (checkpoint.Policy.MaxChainLength) spends most of its time here.
// Every section is checked against its checksum as it is read. Errors are
// those of Merge, of Read (ErrCorrupt, naming the section) and of w; a state
// or timer service missing from the newest file's metadata is an error
// matching ErrMismatch. Any goroutine.
func MergeFiles(ctx context.Context, w io.Writer, chain ...*Reader) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: merge of an empty chain", ErrMismatch)
	}
	last := chain[len(chain)-1]
	out := &Delta{Base: chain[0].base, Target: last.target, Meta: last.meta}
	index := make([]map[int]fileformat.Section, len(chain))
	var groups []int
	for i, r := range chain {
		if i > 0 {
			prev := chain[i-1]
			if r.base != prev.target {
				return fmt.Errorf("%w: delta %d->%d follows delta %d->%d", ErrWrongBase, r.base, r.target, prev.base, prev.target)
			}
			if r.meta.MaxParallelism != prev.meta.MaxParallelism || r.meta.KeyGroups != prev.meta.KeyGroups {
				return fmt.Errorf("%w: delta %d->%d covers key groups %v of %d, the one before %v of %d",
					ErrMismatch, r.base, r.target, r.meta.KeyGroups, r.meta.MaxParallelism, prev.meta.KeyGroups, prev.meta.MaxParallelism)
			}
		}
		if err := sameEncoding(&Delta{Base: r.base, Target: r.target, Meta: r.meta}, out); err != nil {
			return err
		}
		index[i] = make(map[int]fileformat.Section, len(r.index))
		for _, e := range r.index {
			index[i][e.Group] = e
			groups = append(groups, e.Group)
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)

	ix := indexesOf(out)
	var m groupMerger
	sections := make(map[int][]byte, len(groups))
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.reset()
		for i, r := range chain {
			e, ok := index[i][g]
			if !ok {
				continue
			}
			if err := m.add(r, e); err != nil {
				return err
			}
		}
		sec, _, err := encodeSection(m.states, m.timers, ix)
		if err != nil {
			return fmt.Errorf("merge of deltas %d->%d, key group %d: %w", out.Base, out.Target, g, err)
		}
		sections[g] = sec
	}
	return writeSections(ctx, w, out, groups, func(g int) ([]byte, int, error) { return sections[g], 0, nil }, nil)
}

// keyedOp is one entry change of a section: its composite key and op.
type keyedOp struct {
	ck string
	op entryOp
}

func compareKeyed(a, b keyedOp) int { return strings.Compare(a.ck, b.ck) }

// groupMerger merges one key group's sections, file by file, oldest
// first: per state, the merged entries so far sorted by key; the timers,
// the newest change of each winning.
//
// The runs' arrays are kept from group to group (free): a merge's cost is
// then the entries it copies, not the allocation and zeroing of arrays of
// them.
type groupMerger struct {
	states map[string][]keyedOp
	timers map[timerKey]bool
	file   map[string][]keyedOp // the file being added, by state
	free   [][]keyedOp          // arrays for runs, emptied
	order  []int32              // scratch of sortRun
}

func (m *groupMerger) reset() {
	if m.states == nil {
		m.states, m.timers, m.file = map[string][]keyedOp{}, map[timerKey]bool{}, map[string][]keyedOp{}
	}
	for _, ops := range m.states {
		m.release(ops)
	}
	clear(m.states)
	clear(m.timers)
}

// run returns an empty array for a run, of some capacity.
func (m *groupMerger) run() []keyedOp {
	if n := len(m.free); n > 0 {
		ops := m.free[n-1]
		m.free = m.free[:n-1]
		return ops
	}
	return make([]keyedOp, 0, 64)
}

// release gives the array of a run no longer used back for reuse.
func (m *groupMerger) release(ops []keyedOp) {
	if cap(ops) > 0 {
		m.free = append(m.free, ops[:0])
	}
}

// add merges the section of index entry e of r into the group: r's
// changes follow those added before.
func (m *groupMerger) add(r *Reader, e fileformat.Section) error {
	clear(m.file)
	// The entries of a state record come one after another: look the
	// state's run up when the state changes, not for every entry.
	var (
		curState string
		cur      []keyedOp
	)
	flush := func() {
		if cur != nil {
			m.file[curState] = cur
		}
	}
	err := r.decodeSection(e, func(state string, ck []byte, op entryOp) {
		// ck aliases the section's buffer, which nothing writes.
		if cur == nil || state != curState {
			flush()
			curState = state
			if cur = m.file[state]; cur == nil {
				cur = m.run()
			}
		}
		cur = append(cur, keyedOp{unsafe.String(unsafe.SliceData(ck), len(ck)), op})
	}, func(t timerKey, present bool) {
		m.timers[t] = present
	})
	flush()
	if err != nil {
		return err
	}
	for state, ops := range m.file {
		// Sort a run written in hash order (WriteDiff); of equal keys in
		// one file, the later one stands, as in Read.
		if !slices.IsSortedFunc(ops, compareKeyed) {
			ops = m.sortRun(ops)
		}
		ops = dedupeLast(ops)
		prev, ok := m.states[state]
		if !ok {
			m.states[state] = ops
			continue
		}
		merged, err := mergeRuns(m.run(), prev, ops)
		if err != nil {
			return fmt.Errorf("delta %d->%d, state %q, key group %d: %w", r.base, r.target, state, e.Group, err)
		}
		m.release(prev)
		m.release(ops)
		m.states[state] = merged
	}
	return nil
}

// sortRun returns ops sorted by key, equal keys in the order they came
// (dedupeLast then keeps the later), in an array of m's; ops's array goes
// back to m. It sorts the entries' indexes by key and index, then moves
// each entry once: a stable sort of the 56-byte entries themselves
// (insertion sorts and in-place merges, O(n log² n) moves) was most of a
// merge's time, and with back-to-back checkpoints of 1M keys the store
// committed 515-782 of them in 8 s against 950-958 with an unstable sort
// (BenchmarkCheckpointCadence, every=busy; AMD EPYC).
func (m *groupMerger) sortRun(ops []keyedOp) []keyedOp {
	m.order = m.order[:0]
	for i := range ops {
		m.order = append(m.order, int32(i))
	}
	slices.SortFunc(m.order, func(a, b int32) int {
		return cmp.Or(strings.Compare(ops[a].ck, ops[b].ck), cmp.Compare(a, b))
	})
	sorted := m.run()
	for _, i := range m.order {
		sorted = append(sorted, ops[i])
	}
	m.release(ops)
	return sorted
}

// dedupeLast keeps the last of each run of equal keys in sorted ops.
func dedupeLast(ops []keyedOp) []keyedOp {
	out := ops[:0]
	for i := range ops {
		if i+1 < len(ops) && ops[i].ck == ops[i+1].ck {
			continue
		}
		out = append(out, ops[i])
	}
	return out
}

// mergeRuns appends to dst the merge of two sorted runs of distinct keys,
// older a and newer b, composing the ops of a key in both.
func mergeRuns(dst, a, b []keyedOp) ([]keyedOp, error) {
	dst = slices.Grow(dst, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i].ck, b[j].ck); {
		case c < 0:
			dst = append(dst, a[i])
			i++
		case c > 0:
			dst = append(dst, b[j])
			j++
		default:
			op, err := compose(&a[i].op, &b[j].op)
			if err != nil {
				return nil, err
			}
			dst = append(dst, keyedOp{b[j].ck, *op})
			i++
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...), nil
}
