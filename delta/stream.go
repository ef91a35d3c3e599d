package delta

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// projectAfter and projectMargin: WriteDiff extrapolates a state's changes
// once it has diffed 1/projectAfter of its key groups, and gives up if they
// come to more than projectMargin times the limit.
const projectAfter, projectMargin = 16, 2

// WriteDiff diffs prev and next like Diff and writes the delta
// straight to w in the file format, without building a Delta: each state's
// changes are encoded as the structural diff yields them (key group by key
// group, in entry-hash order), so the cost is the diff plus the encoding,
// with no per-change map or sort. It gives up, writing nothing, once more
// than maxChanges entries and timers changed (negative: no limit), and
// reports ok false then; it also gives up early when a state's changes in
// the key groups diffed so far (at least a sixteenth of them, and two),
// extrapolated over all its key groups, come to more than twice
// maxChanges: key groups are ranges of the key hash, so changes spread
// over them evenly unless a job's keys cluster, and a diff that is far over
// the limit stops after a sixteenth of the state instead of at the limit
// (see BenchmarkCheckpointCadence). Within a state and key group, entries
// come in entry-hash order rather than the composite-key order of Write: the bytes
// are deterministic for a pair of versions, and Read gives the same Delta
// either way. Any goroutine, while both captures are live.
func WriteDiff(ctx context.Context, w io.Writer, prev, next Source, base, target uint64, maxChanges int) (changes int, ok bool, err error) {
	pm, nm := prev.Meta, next.Meta
	if pm.MaxParallelism != nm.MaxParallelism || pm.KeyGroups != nm.KeyGroups {
		return 0, false, fmt.Errorf("%w: max parallelism %d, key groups %v, then %d, %v", ErrMismatch, pm.MaxParallelism, pm.KeyGroups, nm.MaxParallelism, nm.KeyGroups)
	}
	d := &Delta{Base: base, Target: target, Meta: nm}
	d.Meta.Version = 0
	nGroups := nm.KeyGroups.Last - nm.KeyGroups.First + 1
	sections := make(map[int][]byte, min(nGroups, 1024))
	var slab []byte // the sections' first records, one after another
	over := func() bool {
		changes++
		return maxChanges >= 0 && changes > maxChanges
	}
	projected := false
	for i, name := range sortedStates(d) {
		// A run of one key group's changes, flushed as one state record.
		var run []byte
		runGroup, runLen := -1, 0
		before := changes // of the earlier states
		flush := func() {
			if runLen == 0 {
				return
			}
			sec := sections[runGroup]
			if sec == nil {
				// A key group's first record: cut from slab with one byte
				// to spare for its end tag, and capped there so that a
				// later record of the group (another state, the timers)
				// moves the section out instead of overwriting the next.
				from := len(slab)
				slab = append(slab, tagState)
				slab = binary.AppendUvarint(slab, uint64(i))
				slab = binary.AppendUvarint(slab, uint64(runLen))
				slab = append(slab, run...)
				slab = append(slab, tagEnd) // room for the section's end tag
				sections[runGroup] = slab[from : len(slab)-1 : len(slab)]
				run, runLen = run[:0], 0
				return
			}
			sec = append(sec, tagState)
			sec = binary.AppendUvarint(sec, uint64(i))
			sec = binary.AppendUvarint(sec, uint64(runLen))
			sections[runGroup] = append(sec, run...)
			run, runLen = run[:0], 0
		}
		err := statetable.DiffState(prev.State, next.State, name, func(c statetable.EntryChange) bool {
			if c.Group != runGroup {
				flush()
				runGroup = c.Group
				if maxChanges >= 0 {
					if done := c.Group - nm.KeyGroups.First; done >= 2 && done*projectAfter >= nGroups &&
						before+(changes-before)*nGroups/done > projectMargin*maxChanges {
						projected = true
						return false
					}
				}
			}
			run = appendChange(run, c)
			runLen++
			return !over()
		})
		if err != nil {
			return 0, false, fmt.Errorf("%w: %w", ErrMismatch, err)
		}
		if projected || maxChanges >= 0 && changes > maxChanges {
			return changes, false, nil
		}
		flush()
	}
	timers := map[int][]timerChange{}
	for j, svc := range sortedServices(d) {
		nq, ok := next.Timers[svc]
		if !ok {
			return 0, false, fmt.Errorf("%w: timer service %q has no queues", ErrMismatch, svc)
		}
		pq, had := prev.Timers[svc]
		for _, dq := range []struct {
			dom        timerqueue.Domain
			prev, next *timerqueue.Snapshot
		}{{timerqueue.EventTime, pq.Event, nq.Event}, {timerqueue.ProcessingTime, pq.Processing, nq.Processing}} {
			var diffs func(func(cow.Change[timerqueue.Timer, int]) bool)
			if had {
				diffs = timerqueue.Diff(dq.prev, dq.next)
			} else {
				diffs = func(yield func(cow.Change[timerqueue.Timer, int]) bool) {
					for t, g := range dq.next.All() {
						if !yield(cow.Change[timerqueue.Timer, int]{Kind: cow.Added, Key: t, New: g}) {
							return
						}
					}
				}
			}
			for c := range diffs {
				g := c.New
				if c.Kind == cow.Removed {
					g = c.Old
				}
				timers[g] = append(timers[g], timerChange{service: j, domain: dq.dom, t: c.Key, present: c.Kind != cow.Removed})
				if over() {
					return changes, false, nil
				}
			}
		}
	}
	for g, ts := range timers {
		sections[g] = appendTimers(sections[g], ts)
	}

	groups := slices.Sorted(maps.Keys(sections))
	if g, ok := w.(interface{ Grow(int) }); ok { // a bytes.Buffer: grown once
		size := 1024 + 32*len(groups) // header, metadata, index, footer: about
		for _, sec := range sections {
			size += len(sec) + 1
		}
		g.Grow(size)
	}
	err = writeSections(ctx, w, d, groups, func(g int) ([]byte, int, error) { return append(sections[g], tagEnd), 0, nil }, nil)
	if err != nil {
		return 0, false, err
	}
	return changes, true, nil
}

// timerChange is one timer registered or removed, for WriteDiff.
type timerChange struct {
	service int
	domain  timerqueue.Domain
	t       timerqueue.Timer
	present bool
}

// appendChange encodes one entry change as a state record holds it.
func appendChange(dst []byte, c statetable.EntryChange) []byte {
	kind := byte(opPatch)
	switch c.Op {
	case statetable.OpDelete:
		kind = opDelete
	case statetable.OpPut:
		kind = opPut
	}
	return appendEntry(dst, kind, c.Key, c.Cell, c.Parts)
}

// appendEntry encodes one entry of a state record: op kind, composite key,
// the cell (puts) and the parts (patches).
func appendEntry(dst []byte, kind byte, key, cell []byte, parts []statetable.Part) []byte {
	dst = append(dst, kind)
	dst = fileformat.AppendBytes(dst, key)
	if kind == opPut || kind == opPutPatch {
		dst = fileformat.AppendBytes(dst, cell)
	}
	if kind != opPatch && kind != opPutPatch {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(parts)))
	for _, p := range parts {
		if p.Deleted {
			dst = append(dst, 1)
			dst = fileformat.AppendBytes(dst, p.Key)
			continue
		}
		dst = append(dst, 0)
		dst = fileformat.AppendBytes(dst, p.Key)
		dst = fileformat.AppendBytes(dst, p.Value)
	}
	return dst
}

// appendTimers encodes a key group's timer changes as timer records, by
// service, domain and firing order.
func appendTimers(sec []byte, ts []timerChange) []byte {
	slices.SortFunc(ts, func(a, b timerChange) int {
		return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.domain, b.domain), timerqueue.Compare(a.t, b.t))
	})
	for i := 0; i < len(ts); {
		j := i + 1
		for j < len(ts) && ts[j].service == ts[i].service && ts[j].domain == ts[i].domain {
			j++
		}
		sec = append(sec, tagTimers)
		sec = binary.AppendUvarint(sec, uint64(ts[i].service))
		sec = append(sec, byte(ts[i].domain))
		sec = binary.AppendUvarint(sec, uint64(j-i))
		for _, t := range ts[i:j] {
			present := byte(0)
			if t.present {
				present = 1
			}
			sec = append(sec, present)
			sec = binary.AppendVarint(sec, t.t.Timestamp)
			sec = fileformat.AppendString(sec, t.t.Key)
			sec = fileformat.AppendString(sec, t.t.Namespace)
		}
		i = j
	}
	return sec
}
