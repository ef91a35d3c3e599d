package statetable

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// This file is the state table's side of snapshot files: every state's
// entries of a key group, in a canonical order and encoding, and back.

// cellCodec encodes and decodes the cell of one state kind.
type cellCodec[C any] struct {
	enc func(dst []byte, c C) []byte
	dec func(src []byte) (C, error)
	// fixed, when its width is not 0, is dec as a fixed-width big-endian
	// integer that a restore decodes inline (see fixedInt).
	fixed fixedInt
}

// KeyGroupEntries calls yield for every entry of the named state in key
// group g of snap: the composite key (uvarint key length, key bytes,
// namespace bytes) and the cell's encoding, in canonical order (entry hash,
// then composite key bytes), so the same logical state gives the same
// sequence whatever history built it. The bytes passed to yield are valid
// only during the call. Every entry held is yielded, including those of a
// TTL state that have expired but are not cleaned up yet (snapshot files
// leave those out: AppendKeyGroupEntries). Any goroutine while snap is live
// (it reads only what the snapshot froze).
func (snap *Snapshot) KeyGroupEntries(name string, g int, yield func(key, cell []byte) bool) error {
	r, ok := snap.regs[name]
	if !ok {
		return fmt.Errorf("%w %q in snapshot", ErrUnknownState, name)
	}
	lo, hi, err := snap.groupHashes(g)
	if err != nil {
		return err
	}
	r.scan(snap.views[name], lo, hi, nil, yield)
	return nil
}

// RestoreEntry stores one entry, as KeyGroupEntries gave it, into the named
// state: the key must belong to a key group the table owns. Bad bytes are an
// error wrapping ErrDecode. The table keeps key (it must never be modified
// afterwards; a snapshot reader's section buffers qualify, and sharing them
// spares an allocation per key) and only decodes cell. Writer goroutine
// only.
func (t *Table) RestoreEntry(name string, key, cell []byte) error {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	return r.restore(unsafe.String(unsafe.SliceData(key), len(key)), cell)
}

// scan yields the entries of a view with hash in [lo, hi] in canonical
// order. Entries are yielded as they are met, except runs of equal hashes
// (rare), which are sorted by composite key first. The key bytes alias the
// stored key: the consumer must not modify them. With now non-nil (a TTL
// state's file write), cells are encoded without what has expired at *now,
// and entries with nothing left are skipped.
func (c *cells[K, N, C]) scan(view any, lo, hi uint64, now *int64, yield func(key, cell []byte) bool) {
	type entry struct {
		ck string
		c  C
	}
	var (
		pending  entry
		havePend bool
		pendHash uint64
		run      []entry // a run of equal hashes, once one is met
		buf      []byte
	)
	emit := func(e entry) bool {
		if now != nil {
			var live bool
			if buf, live = c.ttl.encLive(buf[:0], e.c, *now); !live {
				return true
			}
		} else {
			buf = c.cell.enc(buf[:0], e.c)
		}
		return yield(readOnlyBytes(e.ck), buf)
	}
	flushRun := func() bool {
		slices.SortFunc(run, func(a, b entry) int { return strings.Compare(a.ck, b.ck) })
		for _, e := range run {
			if !emit(e) {
				return false
			}
		}
		run = run[:0]
		return true
	}
	ok := true
	view.(cellView[C]).scan(lo, hi, func(h uint64, ck string, cell C) bool {
		e := entry{ck, cell}
		switch {
		case len(run) > 0 && h == pendHash:
			run = append(run, e)
			return true
		case len(run) > 0:
			ok = flushRun()
		case havePend && h == pendHash:
			run = append(run, pending, e)
			havePend = false
			return true
		case havePend:
			ok = emit(pending)
		}
		pending, havePend, pendHash = e, true, h
		return ok
	})
	switch {
	case !ok:
	case len(run) > 0:
		flushRun()
	case havePend:
		emit(pending)
	}
}

// restore decodes one entry and stores it.
func (c *cells[K, N, C]) restore(ck string, cellBytes []byte) error {
	dec := c.cell.dec
	if c.ttl != nil {
		dec = c.ttlDecoder(true)
		c.ttl.taint() // restored timestamps may be older than the cleanup's floor
	}
	h, cell, err := c.decodeEntry(ck, cellBytes, dec)
	switch {
	case err == errExpired:
		return nil
	case err != nil:
		return err
	}
	c.m.set(h, ck, cell, false)
	return nil
}

// decodeEntry checks a restored composite key and decodes its cell with
// dec (errExpired passes through unwrapped).
func (c *cells[K, N, C]) decodeEntry(ck string, cellBytes []byte, dec func([]byte) (C, error)) (uint64, C, error) {
	var zero C
	kb, nb, err := splitComposite(ck)
	if err != nil {
		return 0, zero, fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	if err := c.keyCheck.check(readOnlyBytes(kb), readOnlyBytes(nb)); err != nil {
		return 0, zero, fmt.Errorf("%w: state %q: %s", ErrDecode, c.info.Name, err)
	}
	keyHash := HashKey(readOnlyBytes(kb))
	if g := KeyGroupOf(keyHash, c.t.maxPar); !c.t.owned.Contains(g) {
		return 0, zero, fmt.Errorf("%w: state %q: restored key in key group %d, table owns %v", ErrKeyGroupNotOwned, c.info.Name, g, c.t.owned)
	}
	h := EntryHash(keyHash, readOnlyBytes(nb))
	cell, err := dec(cellBytes)
	if err == errExpired {
		return h, zero, err
	}
	if err != nil {
		return 0, zero, fmt.Errorf("state %q: cell of %d bytes: %w", c.info.Name, len(cellBytes), err)
	}
	return h, cell, nil
}

// valueCell is the cell codec of value, reducing and aggregating state: the
// value's own codec.
func valueCell[V any](vc Codec[V]) cellCodec[V] {
	return cellCodec[V]{enc: vc.Append, dec: vc.Decode, fixed: fixedOf(vc)}
}

// appendBlob appends uvarint(len(b)) and b.
func appendBlob(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// readBlob reads one blob from src, never trusting the length beyond the
// bytes present.
func readBlob(src []byte) (blob, rest []byte, err error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return nil, nil, fmt.Errorf("%w: blob length at offset 0 of %d bytes", ErrDecode, len(src))
	}
	return src[k : k+int(n)], src[k+int(n):], nil
}

// readCount reads an element count, bounded by the bytes left (every
// element takes at least minBytes).
func readCount(src []byte, minBytes int) (int, []byte, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k)/uint64(minBytes) {
		return 0, nil, fmt.Errorf("%w: element count does not fit in %d bytes", ErrDecode, len(src))
	}
	return int(n), src[k:], nil
}
