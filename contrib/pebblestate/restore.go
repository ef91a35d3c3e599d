package pebblestate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// restoreBatchBytes is the size at which a restore commits its batch (a
// variable for tests).
var restoreBatchBytes = 4 << 20

// RestoreSnapshot implements contract.Backend.RestoreSnapshot: it reads a
// snapshot WriteSnapshot wrote (format in view.go) and keeps the key groups
// this backend owns, reading only their sections. The backend must hold no
// entry or timer (cowstate.ErrNotEmpty). Every record is checked (its key
// group, its key's hash, its state's kind, its value's encoding, each
// section's CRC) before it counts: a bad snapshot is an ErrCorrupt or
// ErrMismatch naming what and where, and leaves the backend empty, as does
// a cancelled ctx. Writer goroutine; O(index + owned data).
func (b *Backend) RestoreSnapshot(ctx context.Context, r io.ReaderAt, size int64) error {
	if b.closed {
		return ErrClosed
	}
	if err := b.checkEmpty(); err != nil {
		return err
	}
	sections, restamp, err := b.readIndex(r, size)
	if err != nil {
		return err
	}
	if committed, err := b.restoreSections(ctx, r, sections, restamp); err != nil {
		if !committed {
			return err
		}
		// Back to empty: the backend was empty before.
		lo, hi := kgPrefix(nil, 0), kgPrefix(nil, statetable.MaxParallelismLimit)
		if derr := b.db.DeleteRange(lo, hi, b.wo); derr != nil {
			err = errors.Join(err, fmt.Errorf("pebblestate: clearing a failed restore: %w", derr))
		}
		b.forgetHeads()
		return err
	}
	b.forgetHeads()
	return nil
}

// checkEmpty fails if the database holds an entry or a timer.
func (b *Backend) checkEmpty() error {
	it, err := b.db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	if it.First() && bytes.Compare(it.Key(), metaPrefix) < 0 {
		return fmt.Errorf("%w: restore into a pebblestate backend that holds data (key %x)", cowstate.ErrNotEmpty, it.Key())
	}
	return it.Error()
}

// readIndex reads and checks the footer and the index, and returns the
// sections of the owned key groups.
//
// restamp names the states registered with a TTL that the snapshot has
// without one: their values are restored as if written at the restore.
func (b *Backend) readIndex(r io.ReaderAt, size int64) (sections []sectionEntry, restamp map[string]bool, err error) {
	restamp = map[string]bool{}
	if size < int64(len(magic)+footerSize) {
		return nil, nil, fmt.Errorf("%w: snapshot of %d bytes, want at least %d", ErrCorrupt, size, len(magic)+footerSize)
	}
	head := make([]byte, len(magic))
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, nil, fmt.Errorf("pebblestate: reading the snapshot's header: %w", err)
	}
	foot := make([]byte, footerSize)
	if _, err := r.ReadAt(foot, size-int64(footerSize)); err != nil {
		return nil, nil, fmt.Errorf("pebblestate: reading the snapshot's footer at %d: %w", size-int64(footerSize), err)
	}
	if string(head) != magic || string(foot[16:]) != magic {
		return nil, nil, fmt.Errorf("%w: not a pebblestate snapshot (header %q, footer %q)", ErrCorrupt, head, foot[16:])
	}
	idxOff := binary.LittleEndian.Uint64(foot)
	idxLen := uint64(binary.LittleEndian.Uint32(foot[8:]))
	if idxOff < uint64(len(magic)) || idxOff > uint64(size) || idxOff+idxLen != uint64(size-int64(footerSize)) {
		return nil, nil, fmt.Errorf("%w: index at %d of %d bytes in a snapshot of %d bytes", ErrCorrupt, idxOff, idxLen, size)
	}
	idx := make([]byte, idxLen)
	if _, err := r.ReadAt(idx, int64(idxOff)); err != nil {
		return nil, nil, fmt.Errorf("pebblestate: reading the snapshot's index at %d: %w", idxOff, err)
	}
	if got, want := crc32.Checksum(idx, castagnoli), binary.LittleEndian.Uint32(foot[12:]); got != want {
		return nil, nil, fmt.Errorf("%w: index at %d has CRC %08x, footer says %08x", ErrCorrupt, idxOff, got, want)
	}
	d := decoder{b: idx}
	if mp := d.uvarint(); d.err == nil && mp != uint64(b.maxPar) {
		return nil, nil, fmt.Errorf("%w: snapshot of max parallelism %d, backend %d", ErrMismatch, mp, b.maxPar)
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		name, kb := d.str(), d.byte()
		if d.err != nil {
			break
		}
		kind, fileTTL := statetable.Kind(kb&^ttlFlag), kb&ttlFlag != 0
		if have, ok := b.kinds[name]; !ok || have != kind {
			return nil, nil, fmt.Errorf("%w: the snapshot's %v state %q is not registered as one", ErrMismatch, kind, name)
		}
		_, ttl := b.ttls[name]
		switch {
		case fileTTL && !ttl:
			return nil, nil, fmt.Errorf("%w: the snapshot's state %q has a TTL, the registered one has none", ErrMismatch, name)
		case ttl && !fileTTL:
			restamp[name] = true
		}
	}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		name := d.str()
		if _, ok := b.services[name]; d.err == nil && !ok {
			return nil, nil, fmt.Errorf("%w: the snapshot's timer service %q is not registered", ErrMismatch, name)
		}
	}
	var out []sectionEntry
	prevKG, prevEnd := -1, uint64(len(magic))
	for n := d.count(7); n > 0 && d.err == nil; n-- {
		kg, off, length := d.uvarint(), d.uvarint(), d.uvarint()
		crc := d.uint32()
		if d.err != nil {
			break
		}
		if kg >= uint64(b.maxPar) || int(kg) <= prevKG || off < prevEnd || length > idxOff || off > idxOff-length {
			return nil, nil, fmt.Errorf("%w: section of key group %d at %d of %d bytes (after key group %d ending at %d, index at %d)",
				ErrCorrupt, kg, off, length, prevKG, prevEnd, idxOff)
		}
		prevKG, prevEnd = int(kg), off+length
		if b.owned.Contains(int(kg)) {
			out = append(out, sectionEntry{int(kg), int64(off), int64(length), crc})
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the sections", len(d.b))
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: index at %d: %w", ErrCorrupt, idxOff, d.err)
	}
	return out, restamp, nil
}

// restoreSections reads, checks and writes the records of the sections,
// committing a batch whenever it reaches restoreBatchBytes; committed
// reports whether any batch was committed.
func (b *Backend) restoreSections(ctx context.Context, r io.ReaderAt, sections []sectionEntry, restamp map[string]bool) (committed bool, err error) {
	batch := b.db.NewBatch()
	defer func() { batch.Close() }()
	for _, s := range sections {
		if err := ctx.Err(); err != nil {
			return committed, err
		}
		if err := b.restoreSection(r, s, batch, restamp); err != nil {
			return committed, err
		}
		if batch.Len() >= restoreBatchBytes {
			committed = true
			if err := batch.Commit(b.wo); err != nil {
				return committed, err
			}
			batch.Close()
			batch = b.db.NewBatch()
		}
	}
	return true, batch.Commit(b.wo)
}

// restoreSection reads one section, checking every record, and adds its
// records to batch; the section's CRC is checked at its end, before the
// batch is committed.
func (b *Backend) restoreSection(r io.ReaderAt, s sectionEntry, batch *pebble.Batch, restamp map[string]bool) error {
	br := bufio.NewReaderSize(io.NewSectionReader(r, s.off, s.length), 64<<10)
	crc := crc32.New(castagnoli)
	left := s.length
	var k, v []byte
	where := func(off int64) string {
		return fmt.Sprintf("section of key group %d at %d, record at %d", s.kg, s.off, off)
	}
	for left > 0 {
		off := s.off + s.length - left
		var err error
		if k, err = readField(br, crc, &left, k); err != nil {
			return fmt.Errorf("%w: %s: key: %w", ErrCorrupt, where(off), err)
		}
		if v, err = readField(br, crc, &left, v); err != nil {
			return fmt.Errorf("%w: %s: value: %w", ErrCorrupt, where(off), err)
		}
		pk, err := b.checkRecord(s.kg, k, v, restamp)
		if err != nil {
			return fmt.Errorf("%s: %w", where(off), err)
		}
		if restamp[pk.name] && !pk.timer {
			v = b.restamped(pk.name, v)
		}
		if err := batch.Set(k, v, nil); err != nil {
			return err
		}
	}
	if got := crc.Sum32(); got != s.crc {
		return fmt.Errorf("%w: section of key group %d at %d has CRC %08x, index says %08x", ErrCorrupt, s.kg, s.off, got, s.crc)
	}
	return nil
}

// readField reads uvarint(len) and that many bytes, within left.
func readField(br *bufio.Reader, crc hash.Hash32, left *int64, buf []byte) ([]byte, error) {
	var lb [binary.MaxVarintLen64]byte
	n := 0
	for {
		if *left <= 0 || n == len(lb) {
			return nil, fmt.Errorf("bad length")
		}
		c, err := br.ReadByte()
		if err != nil {
			return nil, err
		}
		lb[n] = c
		n++
		*left--
		if c < 0x80 {
			break
		}
	}
	crc.Write(lb[:n])
	l, _ := binary.Uvarint(lb[:n])
	if l > uint64(*left) {
		return nil, fmt.Errorf("length %d past the section's end (%d bytes left)", l, *left)
	}
	buf = slices.Grow(buf[:0], int(l))[:l]
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, err
	}
	crc.Write(buf)
	*left -= int64(l)
	return buf, nil
}

// checkRecord checks that a record of a snapshot is one this backend could
// have written in key group kg (the values of a state with a TTL stamped,
// but those of the states restamp names), and returns its key, parsed.
func (b *Backend) checkRecord(kg int, k, v []byte, restamp map[string]bool) (parsedKey, error) {
	pk, err := parseKey(k)
	if err != nil {
		return pk, fmt.Errorf("%w: key %x: %w", ErrCorrupt, k, err)
	}
	if pk.kg != kg {
		return pk, fmt.Errorf("%w: key %x of key group %d", ErrCorrupt, k, pk.kg)
	}
	if g := statetable.KeyGroupOfKey([]byte(pk.key), b.maxPar); g != kg {
		return pk, fmt.Errorf("%w: key %q is in key group %d, not %d", ErrCorrupt, pk.key, g, kg)
	}
	if pk.timer {
		if _, ok := b.services[pk.name]; !ok {
			return pk, fmt.Errorf("%w: timer of service %q, not registered", ErrMismatch, pk.name)
		}
		if len(v) != 0 {
			return pk, fmt.Errorf("%w: timer %x with a value of %d bytes", ErrCorrupt, k, len(v))
		}
		return pk, nil
	}
	kind, ok := b.kinds[pk.name]
	if !ok {
		return pk, fmt.Errorf("%w: entry of state %q, not registered", ErrMismatch, pk.name)
	}
	if pk.hasUserKey != (kind == statetable.KindMap) {
		return pk, fmt.Errorf("%w: key %x does not fit the %v state %q", ErrCorrupt, k, kind, pk.name)
	}
	_, ttl := b.ttls[pk.name]
	stamped := ttl && !restamp[pk.name]
	if kind == statetable.KindList {
		l, err := decodeList(v)
		if err == nil && len(l) == 0 {
			err = fmt.Errorf("no element")
		}
		for i := 0; err == nil && stamped && i < len(l); i++ {
			if len(l[i]) < 8 {
				err = fmt.Errorf("element %d of %d bytes has no expiration stamp", i, len(l[i]))
			}
		}
		if err != nil {
			return pk, fmt.Errorf("%w: list of (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, pk.name, err)
		}
	} else if stamped && len(v) < 8 {
		return pk, fmt.Errorf("%w: value of (%q, %q) in state %q: %d bytes, no expiration stamp", ErrCorrupt, pk.key, pk.ns, pk.name, len(v))
	}
	return pk, nil
}

// restamped returns a checked record of a state registered with a TTL,
// written without one, stamped as if written now.
func (b *Backend) restamped(state string, v []byte) []byte {
	t := b.ttlAt(state)
	if b.kinds[state] == statetable.KindList {
		l, _ := decodeList(v)
		return encodeList(stampList(t.exp, l))
	}
	return stamp(t.exp, v)
}

// decoder reads the index; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least minSize bytes each, bounded by
// what is left.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/minSize) {
		d.err = fmt.Errorf("count %d with %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = fmt.Errorf("string of %d bytes with %d left", n, len(d.b))
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() byte {
	if d.err == nil && len(d.b) < 1 {
		d.err = fmt.Errorf("truncated")
	}
	if d.err != nil {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint32() uint32 {
	if d.err == nil && len(d.b) < 4 {
		d.err = fmt.Errorf("truncated")
	}
	if d.err != nil {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}
