package delta

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"slices"

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
	var inputs int64 // the sections' bytes: the merged ones take at most as many
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
			inputs += e.Length
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)

	ix := indexesOf(out)
	// A file's state records number its states by its own metadata; the
	// merged delta by the newest file's.
	states := make([][]int, len(chain))
	for i, r := range chain {
		states[i] = make([]int, len(r.meta.States))
		for j, info := range r.meta.States {
			states[i][j] = ix.states[info.Name] // there: sameEncoding
		}
	}
	m := groupMerger{names: sortedStates(out), states: make([][]mergeEntry, len(ix.states)), file: make([]fileRun, len(ix.states))}
	// The merged sections, one after another, all built before the first
	// byte is written: a corrupt section fails the merge with nothing
	// written.
	body := make([]byte, 0, inputs)
	ends := make([]int, 0, len(groups))
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.reset()
		what := sectionName(g)
		for i, r := range chain {
			e, ok := index[i][g]
			if !ok {
				continue
			}
			if err := m.add(r, states[i], e, what); err != nil {
				return err
			}
		}
		var err error
		if body, err = m.appendSection(body, ix); err != nil {
			return fmt.Errorf("merge of deltas %d->%d, key group %d: %w", out.Base, out.Target, g, err)
		}
		ends = append(ends, len(body))
	}
	next, from := 0, 0
	return writeSections(ctx, w, out, groups, func(int) ([]byte, int, error) {
		sec := body[from:ends[next]]
		from, next = ends[next], next+1
		return sec, 0, nil
	}, nil)
}

// mergeEntry is one entry change of a section as the merge holds it: where
// its bytes are, not their decoded op, so that the merge moves 32 bytes
// with no pointers per entry and writes an entry it keeps by copying its
// bytes. Two entries' keys mostly compare by their prefixes, without
// reading the sections. Once an entry is in a run its bytes are canonical
// (as Write encodes its op), so it starts at startOf.
type mergeEntry struct {
	key    int    // offset of the composite key in its buffer
	end    int    // offset past the entry
	prefix uint64 // the key's first 8 bytes, big-endian, zero-padded
	keyLen uint32 // the composite key's length
	buf    uint16 // the buffer: groupMerger.bufs[buf]
	recode bool   // its bytes are not canonical: decode and encode it again
}

// groupMerger merges one key group's sections, file by file, oldest
// first: per state (numbered as the merged delta's metadata numbers
// them), the merged entries so far sorted by key; the timers, the newest
// change of each winning. Entries point into bufs: bufs[0] is the
// merger's own (entries encoded again: composed patches, and entries not
// written canonically), then the sections added, which it never modifies.
//
// The runs' arrays are kept from group to group (free): a merge's cost is
// then the entries it copies, not the allocation and zeroing of arrays of
// them.
type groupMerger struct {
	names   []string // the merged delta's states, by number
	bufs    [][]byte
	states  [][]mergeEntry // the entries so far, by state
	file    []fileRun      // the file being added, by state
	touched []int          // the states of the file being added
	timers  map[timerKey]bool
	free    [][]mergeEntry // arrays for runs, emptied
}

// fileRun is a state's entries in the section being added, in file order.
type fileRun struct {
	run      []mergeEntry
	unsorted bool // not in strictly ascending key order
	recode   bool // some entries are to be encoded again
}

// maxMergeBufs bounds the sections one key group's merge reads (entries
// name their buffer in a uint16).
const maxMergeBufs = 1<<16 - 1

func (m *groupMerger) reset() {
	if m.timers == nil {
		m.timers, m.bufs = map[timerKey]bool{}, make([][]byte, 1, 8)
	}
	for s, ops := range m.states {
		m.release(ops)
		m.states[s] = nil
	}
	clear(m.timers)
	m.bufs = append(m.bufs[:0], m.bufs[0][:0])
	clear(m.bufs[1:cap(m.bufs)]) // let the sections go
}

// run returns an empty array for a run, of some capacity.
func (m *groupMerger) run() []mergeEntry {
	if n := len(m.free); n > 0 {
		ops := m.free[n-1]
		m.free = m.free[:n-1]
		return ops
	}
	return make([]mergeEntry, 0, 64)
}

// release gives the array of a run no longer used back for reuse.
func (m *groupMerger) release(ops []mergeEntry) {
	if cap(ops) > 0 {
		m.free = append(m.free, ops[:0])
	}
}

// keyOf returns e's composite key.
func (m *groupMerger) keyOf(e mergeEntry) []byte {
	return m.bufs[e.buf][e.key : e.key+int(e.keyLen)]
}

// startOf returns the offset of e's first byte (its op), e being
// canonical: the op, then the key's length in the fewest bytes, then the
// key.
func startOf(e *mergeEntry) int {
	return e.key - 1 - uvarintLen(uint64(e.keyLen))
}

// compare orders two entries by key.
func (m *groupMerger) compare(a, b *mergeEntry) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return m.compareKeys(a, b)
}

// compareKeys orders two entries of equal prefixes by key.
func (m *groupMerger) compareKeys(a, b *mergeEntry) int {
	return bytes.Compare(m.keyOf(*a), m.keyOf(*b))
}

// byKey orders two entries by key, and entries of equal keys by their
// offset.
func (m *groupMerger) byKey(a, b mergeEntry) int {
	return cmp.Or(m.compare(&a, &b), cmp.Compare(a.key, b.key))
}

// prefixOf returns a key's first 8 bytes as a big-endian number, zero-padded:
// keys whose prefixes differ compare as their prefixes do.
func prefixOf(ck []byte) uint64 {
	if len(ck) >= 8 {
		return binary.BigEndian.Uint64(ck)
	}
	var p uint64
	for i, c := range ck {
		p |= uint64(c) << (56 - 8*i)
	}
	return p
}

// add merges the section of index entry e of r (named what in errors)
// into the group: r's changes follow those added before. states maps r's
// state positions to the merged delta's.
func (m *groupMerger) add(r *Reader, states []int, e fileformat.Section, what string) error {
	if len(m.bufs) == maxMergeBufs {
		return fmt.Errorf("%w: merge of more than %d deltas", ErrMismatch, maxMergeBufs-1)
	}
	b, err := r.sectionBytes(e, what)
	if err != nil {
		return err
	}
	buf := uint16(len(m.bufs))
	m.bufs = append(m.bufs, b)
	m.touched = m.touched[:0]
	err = r.decodeRecords(e, b, what, func(i, n int, d *fileformat.Decoder) error {
		s := states[i]
		f := &m.file[s]
		if f.run == nil {
			f.run = m.run()
			m.touched = append(m.touched, s)
		}
		for range n {
			// Read into the run's next slot, field by field: a struct
			// built and then copied whole is read back in 16-byte loads
			// from narrower stores, which stall (BenchmarkMergeFiles).
			f.run = append(f.run, mergeEntry{})
			k := len(f.run) - 1
			e := &f.run[k]
			e.buf = buf
			if !readEntry(d, e) {
				f.run = f.run[:k]
				return d.Err
			}
			if k > 0 && m.compare(&f.run[k-1], e) >= 0 {
				f.unsorted = true
			}
			f.recode = f.recode || e.recode
		}
		return nil
	}, func(t timerKey, present bool) {
		m.timers[t] = present
	})
	if err != nil {
		for _, s := range m.touched {
			m.release(m.file[s].run)
			m.file[s] = fileRun{}
		}
		return err
	}
	for _, s := range m.touched {
		f := m.file[s]
		m.file[s] = fileRun{}
		ops := f.run
		if f.unsorted {
			// Sort a run written in hash order (WriteDiff); of equal keys
			// in one file, the later one stands, as in Read: the entries
			// of one section lie in file order in one buffer, so the key's
			// offset breaks ties.
			slices.SortFunc(ops, m.byKey)
			ops = m.dedupeLast(ops)
		}
		if f.recode {
			for k := range ops {
				if ops[k].recode {
					ops[k] = m.recode(ops[k])
				}
			}
		}
		prev := m.states[s]
		if prev == nil {
			m.states[s] = ops
			continue
		}
		merged, err := m.mergeRuns(m.run(), prev, ops)
		if err != nil {
			return fmt.Errorf("delta %d->%d, state %q, key group %d: %w", r.base, r.target, m.names[s], e.Group, err)
		}
		m.release(prev)
		m.release(ops)
		m.states[s] = merged
	}
	return nil
}

// readEntry reads the next entry of a state record from d into e (all but
// its buf); false: a problem, in d.Err.
func readEntry(d *fileformat.Decoder, e *mergeEntry) bool {
	b, at := d.B, d.Off
	// Most entries are puts and deletes whose key and cell are shorter
	// than 128 bytes (lengths in one byte, so canonical): read those
	// directly.
	if at+2 <= len(b) && b[at+1] < 0x80 {
		kind, key := b[at], at+2
		end := key + int(b[at+1])
		switch {
		case kind == opDelete && end <= len(b):
		case kind == opPut && end < len(b) && b[end] < 0x80 && end+1+int(b[end]) <= len(b):
			end += 1 + int(b[end])
		default:
			end = -1
		}
		if end >= 0 {
			d.Off = end
			ck := b[key : at+2+int(b[at+1])]
			e.key, e.end, e.prefix, e.keyLen = key, end, prefixOf(ck), uint32(len(ck))
			return true
		}
	}
	kind := d.Byte()
	ck := d.Bytes()
	key := d.Off - len(ck)
	canonical := 1 + uvarintLen(uint64(len(ck))) + len(ck)
	switch kind {
	case opDelete:
	case opPut:
		cell := d.Bytes()
		canonical += uvarintLen(uint64(len(cell))) + len(cell)
	case opPatch, opPutPatch:
		if kind == opPutPatch {
			d.Bytes()
		}
		np := d.Count(d.Left()/2 + 1)
		for range np {
			if deleted := d.Byte(); deleted != 1 {
				d.Bytes()
			}
			d.Bytes()
		}
		canonical = -1 // parts must be in key order, each once: encode it again
	default:
		d.Fail("entry op %d", kind)
	}
	if d.Err == nil && uint64(len(ck)) > 1<<32-1 {
		d.Fail("composite key of %d bytes", len(ck))
	}
	if d.Err != nil {
		return false
	}
	e.key, e.end, e.prefix, e.keyLen, e.recode = key, d.Off, prefixOf(ck), uint32(len(ck)), canonical != d.Off-at
	return true
}

// dedupeLast keeps the last of each run of equal keys in sorted ops.
func (m *groupMerger) dedupeLast(ops []mergeEntry) []mergeEntry {
	out := ops[:0]
	for i := range ops {
		if i+1 < len(ops) && m.compare(&ops[i], &ops[i+1]) == 0 {
			continue
		}
		out = append(out, ops[i])
	}
	return out
}

// decode returns e's composite key and op, aliasing e's buffer.
func (m *groupMerger) decode(e mergeEntry) ([]byte, entryOp) {
	at := startOf(&e)
	if e.recode {
		// The op byte and key length are before the key; the length's
		// encoding need not be the shortest.
		at = e.key - 1
		for at > 0 && m.bufs[e.buf][at-1] >= 0x80 {
			at--
		}
		at--
	}
	d := fileformat.Decoder{B: m.bufs[e.buf][:e.end], Off: at}
	return decodeOp(&d) // read once already: no error
}

// encode appends op with composite key ck to bufs[0], canonically, and
// returns it as an entry.
func (m *groupMerger) encode(ck []byte, op *entryOp) mergeEntry {
	at := len(m.bufs[0])
	m.bufs[0] = appendEntry(m.bufs[0], op.kind(), ck, op.cell, op.partList())
	return mergeEntry{key: at + 1 + uvarintLen(uint64(len(ck))), end: len(m.bufs[0]), prefix: prefixOf(ck), keyLen: uint32(len(ck))}
}

// recode returns e encoded again, canonically, in bufs[0].
func (m *groupMerger) recode(e mergeEntry) mergeEntry {
	ck, op := m.decode(e)
	return m.encode(ck, &op)
}

// opOf returns the op code e was written with.
func (m *groupMerger) opOf(e mergeEntry) byte {
	return m.bufs[e.buf][startOf(&e)]
}

// compose returns the net effect of a then b on one entry (see compose):
// b itself when it puts or deletes, else the two composed and encoded in
// bufs[0].
func (m *groupMerger) compose(a, b mergeEntry) (mergeEntry, error) {
	switch m.opOf(b) {
	case opPut, opDelete, opPutPatch:
		return b, nil
	}
	if m.opOf(a) == opDelete {
		return mergeEntry{}, fmt.Errorf("%w: a patch of a deleted entry", ErrWrongBase)
	}
	ck, aop := m.decode(a)
	_, bop := m.decode(b)
	op, err := compose(&aop, &bop)
	if err != nil {
		return mergeEntry{}, err
	}
	return m.encode(ck, op), nil
}

// mergeRuns appends to dst the merge of two sorted runs of distinct keys,
// older a and newer b, composing the ops of a key in both. Once one run
// has given gallopAfter entries in a row it gallops (see gallop) to the
// end of its entries before the other's next and copies them at once:
// merging a few new entries into a big older run costs about their
// searches and a copy of the rest, and runs that interleave finely cost a
// compare an entry.
func (m *groupMerger) mergeRuns(dst, a, b []mergeEntry) ([]mergeEntry, error) {
	dst = slices.Grow(dst, len(a)+len(b))
	i, j, streak := 0, 0, 0 // streak > 0: a's entries in a row, < 0: b's
	for i < len(a) && j < len(b) {
		switch c := m.compare(&a[i], &b[j]); {
		case c < 0:
			if streak = max(streak, 0) + 1; streak < gallopAfter {
				dst = append(dst, a[i])
				i++
				continue
			}
			k := m.gallop(a, i+1, &b[j])
			dst = append(dst, a[i:k]...)
			i, streak = k, 0
		case c > 0:
			if streak = min(streak, 0) - 1; streak > -gallopAfter {
				dst = append(dst, b[j])
				j++
				continue
			}
			k := m.gallop(b, j+1, &a[i])
			dst = append(dst, b[j:k]...)
			j, streak = k, 0
		default:
			e, err := m.compose(a[i], b[j])
			if err != nil {
				return nil, err
			}
			dst = append(dst, e)
			i, j, streak = i+1, j+1, 0
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...), nil
}

// gallopAfter is how many entries in a row one run gives a merge before
// it gallops.
const gallopAfter = 8

// gallop returns the first index at or after from of sorted run whose key
// is not below x's: it probes from, from+1, from+3, from+7, ... then
// searches the last step by halves, so a short step costs a compare or two
// and a long one about twice its logarithm.
func (m *groupMerger) gallop(run []mergeEntry, from int, x *mergeEntry) int {
	lo, step := from, 1
	hi := lo
	for hi < len(run) && m.compare(&run[hi], x) < 0 {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(run))
	for lo < hi { // run[lo-1] < x, run[hi] >= x or hi = len(run)
		mid := int(uint(lo+hi) >> 1)
		if m.compare(&run[mid], x) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// appendSection appends the key group's merged section to sec: each
// state's entries as one state record (their bytes copied as they are,
// entries that lie one after another in a buffer at once), then the
// timers, then the end tag.
func (m *groupMerger) appendSection(sec []byte, ix indexes) ([]byte, error) {
	for s, ops := range m.states {
		if len(ops) == 0 {
			continue
		}
		sec = append(sec, tagState)
		sec = binary.AppendUvarint(sec, uint64(s))
		sec = binary.AppendUvarint(sec, uint64(len(ops)))
		for k := 0; k < len(ops); {
			e := ops[k]
			from, to := startOf(&e), e.end
			for k++; k < len(ops) && ops[k].buf == e.buf && startOf(&ops[k]) == to; k++ {
				to = ops[k].end
			}
			sec = append(sec, m.bufs[e.buf][from:to]...)
		}
	}
	sec, _, err := appendTimerChanges(sec, m.timers, ix)
	if err != nil {
		return nil, err
	}
	return append(sec, tagEnd), nil
}

// uvarintLen returns the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}
