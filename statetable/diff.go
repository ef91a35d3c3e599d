package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/cowstate/cowstate/cow"
)

// This file is the state table's side of incremental checkpoints: what
// changed between two snapshots of a table, entry by entry, and the writes
// that replay it.

// ChangeOp says how one entry of a state differs between two versions.
type ChangeOp uint8

const (
	// OpPut: the entry is new or its cell was replaced; Cell is its whole
	// encoding (as KeyGroupEntries gives it).
	OpPut ChangeOp = iota + 1
	// OpDelete: the entry is gone.
	OpDelete
	// OpPatch: the cell of a list or map state changed in some of its
	// parts, listed in Parts; the rest of the cell is as before.
	OpPatch
)

// String returns "put", "delete" or "patch".
func (o ChangeOp) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPatch:
		return "patch"
	}
	return fmt.Sprintf("ChangeOp(%d)", uint8(o))
}

// EntryChange is one entry of a state that differs between two versions.
// The receiver owns every slice.
type EntryChange struct {
	Op    ChangeOp
	Group int    // key group of the entry
	Key   []byte // composite key (see KeyGroupEntries)
	Cell  []byte // OpPut: the new cell's encoding
	Parts []Part // OpPatch: the parts that changed, in the structure's order
}

// Part is one changed part of a list or map cell: for a map state, Key is
// the encoded user key and Value the encoded user value; for a list state,
// Key is the element's position (uvarint) and Value the encoded element.
// Deleted parts have no Value.
type Part struct {
	Key     []byte
	Value   []byte
	Deleted bool
}

// patchMaxShare bounds a patch: a changed cell whose patch would hold more
// parts than this share of the new cell's parts is written whole instead
// (a replaced list or map is a put, not a patch of every element).
const patchMaxShare = 2

// DiffState yields the entries of the named state that differ between prev
// and next, two snapshots of the same table (prev older; both live for the
// whole call), in entry-hash order, so key group by key group. A state
// registered after prev was taken diffs against an empty state. Snapshots
// of two tables, or a nil one, are an error matching ErrForeignSnapshot.
//
// Cost: a structural diff of the state's map (see cow.DiffMaps), plus, for
// each changed list or map cell, a structural diff of the two cells: the
// cost follows the changes, not the size of the state or of the cells.
// Any goroutine.
func DiffState(prev, next *Snapshot, name string, yield func(EntryChange) bool) error {
	if prev == nil || next == nil {
		return fmt.Errorf("%w: diff of state %q with a nil snapshot", ErrForeignSnapshot, name)
	}
	r, ok := next.regs[name]
	if !ok {
		return fmt.Errorf("%w %q in the newer snapshot", ErrUnknownState, name)
	}
	if prev.capture.Owner() != next.capture.Owner() {
		return fmt.Errorf("%w: diff of state %q between snapshots of two tables", ErrForeignSnapshot, name)
	}
	if prev.capture.Epoch() > next.capture.Epoch() {
		return fmt.Errorf("%w: diff from version %d back to %d", ErrConfig, prev.capture.Epoch(), next.capture.Epoch())
	}
	pv, ok := prev.views[name]
	if ok && !prev.infos[indexOfState(prev.infos, name)].equal(r.info()) {
		return fmt.Errorf("%w: state %q changed between the snapshots", ErrStateMismatch, name)
	}
	if !ok {
		pv = nil
	}
	r.diff(pv, next.views[name], yield)
	return nil
}

func indexOfState(infos []StateInfo, name string) int {
	for i, in := range infos {
		if in.Name == name {
			return i
		}
	}
	return -1
}

// DeleteEntry removes one entry, by composite key, from the named state (a
// no-op if absent). Writer goroutine only.
func (t *Table) DeleteEntry(name string, key []byte) error {
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return r.delete(string(key))
}

// PatchEntry applies the parts of an OpPatch change to one entry of the
// named list or map state. A patch of an entry that is absent, or of a
// state of another kind, or parts that do not decode, are errors wrapping
// ErrDecode. Writer goroutine only.
func (t *Table) PatchEntry(name string, key []byte, parts []Part) error {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return r.patch(string(key), parts)
}

// cellParts is what list and map states add to cells for diffs: the
// changed parts of two versions of a cell, and a cell with parts applied.
type cellParts[C any] struct {
	diff  func(old, new C) ([]Part, bool) // false: write the cell whole
	apply func(old C, parts []Part) (C, error)
	empty func(C) bool
}

// diff implements DiffState for one state; prevView is nil if the state is
// not in the older snapshot.
func (c *cells[K, N, C]) diff(prevView, nextView any, yield func(EntryChange) bool) {
	next := nextView.(cellView[C])
	changes := func(yield func(cow.Change[string, C]) bool) {
		if prevView != nil {
			next.diff(prevView.(cellView[C]), yield)
			return
		}
		next.all(func(_ uint64, ck string, cell C) bool {
			return yield(cow.Change[string, C]{Kind: cow.Added, Key: ck, New: cell})
		})
	}
	var room changeBytes
	for ch := range changes {
		ec := EntryChange{Key: room.took(append(room.tail(len(ch.Key)), ch.Key...)), Group: c.groupOf(ch.Key)}
		switch ch.Kind {
		case cow.Removed:
			ec.Op = OpDelete
		case cow.Changed:
			if c.parts != nil {
				if parts, ok := c.parts.diff(ch.Old, ch.New); ok {
					ec.Op, ec.Parts = OpPatch, parts
					break
				}
			}
			fallthrough
		default:
			ec.Op, ec.Cell = OpPut, room.took(c.cell.enc(room.tail(16), ch.New))
		}
		if !yield(ec) {
			return
		}
	}
}

// changeBytes holds the key and cell bytes of a diff's changes, cut from
// chunks of changeChunk bytes: a diff of a million changes (a checkpoint
// every second at 10M keys, BenchmarkJob) makes a few thousand
// allocations instead of two a change. Each slice handed out is its
// receiver's, as EntryChange promises: its bytes are its own, and its
// capacity ends at its length, so an append to it copies.
type changeBytes struct{ buf []byte }

const changeChunk = 4 << 10

// tail returns the free room of the chunk, empty, to append at least need
// bytes to; a new chunk when less is left.
func (r *changeBytes) tail(need int) []byte {
	if cap(r.buf)-len(r.buf) < need {
		r.buf = make([]byte, 0, max(changeChunk, need))
	}
	return r.buf[len(r.buf):len(r.buf)]
}

// took returns b, appended to what tail returned, with its capacity cut
// at its length, and counts its bytes as taken when b is in the chunk (an
// append that outgrew the room went elsewhere).
func (r *changeBytes) took(b []byte) []byte {
	if free := r.buf[len(r.buf):cap(r.buf)]; len(b) > 0 && len(b) <= len(free) && unsafe.SliceData(b) == unsafe.SliceData(free) {
		r.buf = r.buf[:len(r.buf)+len(b)]
	}
	return b[:len(b):len(b)]
}

// groupOf returns the key group of a stored composite key.
func (c *cells[K, N, C]) groupOf(ck string) int {
	kb, _, _ := splitComposite(ck) // stored keys are well formed
	return KeyGroupOf(HashKey(readOnlyBytes(kb)), c.t.maxPar)
}

// delete implements DeleteEntry.
func (c *cells[K, N, C]) delete(ck string) error {
	if _, _, err := splitComposite(ck); err != nil {
		return fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	c.m.delete(compositeHash(ck), ck)
	return nil
}

// patch implements PatchEntry.
func (c *cells[K, N, C]) patch(ck string, parts []Part) error {
	if _, _, err := splitComposite(ck); err != nil {
		return fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	if c.ttl != nil {
		c.ttl.taint() // patched timestamps may be older than the cleanup's floor
	}
	return c.patchHashed(compositeHash(ck), ck, parts)
}

// patchHashed is patch for a checked composite key whose entry hash is h.
func (c *cells[K, N, C]) patchHashed(h uint64, ck string, parts []Part) error {
	if c.parts == nil {
		return fmt.Errorf("%w: state %q: a %v state has no parts to patch", ErrDecode, c.info.Name, c.info.Kind)
	}
	old, ok := c.m.get(h, ck)
	if !ok {
		return fmt.Errorf("%w: state %q: patch of an absent entry", ErrDecode, c.info.Name)
	}
	// Pin the current version: a patch that fails half way then leaves
	// copies behind, never a half-patched cell.
	pin := c.t.owner.Capture()
	cell, err := c.parts.apply(old, parts)
	pin.Release()
	if err != nil {
		return fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	if c.parts.empty(cell) {
		c.m.delete(h, ck)
		return nil
	}
	c.m.set(h, ck, cell, true)
	return nil
}

// appendPosition encodes a list position as a part key.
func appendPosition(dst []byte, pos uint64) []byte { return binary.AppendUvarint(dst, pos) }

// EntryOp is one entry's net change as a delta replays it: a delete, or a
// put of Cell, then the Parts patched onto the cell (either may be absent).
type EntryOp struct {
	Key    []byte
	Delete bool
	Put    bool
	Cell   []byte
	Parts  []Part
}

// ApplyEntries replays ops, each on a different entry, on the named state,
// in entry-hash order: the walk down the map then visits its nodes in
// order, so consecutive ops share the path and the caches. The table may
// keep the keys. Errors as RestoreEntry, DeleteEntry and PatchEntry; a key
// or cell that does not decode fails before anything is written, a failing
// patch leaves the ops before it applied. Writer goroutine only.
//
// Cells and parts are in the state's own encoding (see ApplyEntriesFrom).
func (t *Table) ApplyEntries(name string, ops []EntryOp) error {
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return t.ApplyEntriesFrom(name, r.info().TTL, ops)
}

// ApplyEntriesFrom is ApplyEntries of changes written by a state that had a
// TTL (ttl: cells and parts carry expiration timestamps) or not, as
// RestoreRunFrom: into a state with a TTL, cells and parts without
// timestamps are stamped to expire the TTL after the table's time, and a
// put of a cell with nothing left that has not expired deletes the entry.
// Writer goroutine only.
func (t *Table) ApplyEntriesFrom(name string, ttl bool, ops []EntryOp) error {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	if ttl && !r.info().TTL {
		return fmt.Errorf("%w: state %q has no TTL, the changes applied carry expiration timestamps", ErrStateMismatch, name)
	}
	return r.apply(ttl, ops)
}

// apply implements ApplyEntriesFrom: each key is checked and hashed once (a
// put's cell decoded with it), then the ops run in hash order.
func (c *cells[K, N, C]) apply(stamped bool, ops []EntryOp) error {
	dec, now := c.cell.dec, int64(0)
	if c.ttl != nil {
		c.ttl.taint() // replayed timestamps may be older than the cleanup's floor
		now = c.t.now()
		if !stamped {
			exp := c.ttl.rt.expiry(now)
			dec = func(b []byte) (C, error) { return c.ttl.decPlain(b, exp) }
			ops = stampParts(ops, exp)
		}
	}
	type item struct {
		h    uint64
		ck   string
		op   *EntryOp
		cell C
	}
	items := make([]item, len(ops))
	for i := range ops {
		it := &items[i]
		it.op = &ops[i]
		it.ck = unsafe.String(unsafe.SliceData(it.op.Key), len(it.op.Key))
		var err error
		if it.op.Put {
			it.h, it.cell, err = c.decodeEntry(it.ck, it.op.Cell, dec)
		} else if _, _, err = splitComposite(it.ck); err != nil {
			err = fmt.Errorf("state %q: %w", c.info.Name, err)
		} else {
			it.h = compositeHash(it.ck)
		}
		if err != nil {
			return err
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.h, b.h) })
	for _, it := range items {
		switch {
		case it.op.Delete:
			c.m.delete(it.h, it.ck)
		case it.op.Put:
			c.m.set(it.h, it.ck, it.cell, false)
		}
		if len(it.op.Parts) > 0 {
			if err := c.patchHashed(it.h, it.ck, it.op.Parts); err != nil {
				return err
			}
		}
		if c.ttl != nil && !c.t.expiryHeld {
			c.dropExpired(it.h, it.ck, now)
		}
	}
	return nil
}

// stampParts returns ops with the values of their parts stamped to expire
// at exp (the parts of a state without TTL replayed on one with a TTL);
// ops is not modified.
func stampParts(ops []EntryOp, exp int64) []EntryOp {
	out := make([]EntryOp, len(ops))
	for i, op := range ops {
		out[i] = op
		if len(op.Parts) == 0 {
			continue
		}
		out[i].Parts = make([]Part, len(op.Parts))
		for j, p := range op.Parts {
			if !p.Deleted {
				p.Value = append(binary.BigEndian.AppendUint64(nil, uint64(exp)), p.Value...)
			}
			out[i].Parts[j] = p
		}
	}
	return out
}

// dropExpired removes from the entry ck, of a TTL state, what has expired
// at now: the parts of its cell, or the entry if nothing is left.
func (c *cells[K, N, C]) dropExpired(h uint64, ck string, now int64) {
	cell, ok := c.m.get(h, ck)
	if !ok || !c.ttl.expired(cell, now) {
		return
	}
	if cell, live := c.ttl.prune(cell, now); live {
		c.m.set(h, ck, cell, true)
		return
	}
	c.m.delete(h, ck)
}
