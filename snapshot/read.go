package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/cowstate/cowstate/internal/wire"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/statetable"
)

// Sink receives what Restore reads; its methods are called from the
// restoring goroutine. The key, cell and string arguments alias a buffer
// the reader allocated for their section and never reuses or modifies, so a
// sink may keep them without copying (keeping any keeps the whole section's
// buffer alive).
type Sink interface {
	// EntryRestorer is called for each run of n entries of a state in a
	// section: add receives each entry, then done once after the last.
	EntryRestorer(state string, n int) (add func(key, cell []byte) error, done func() error, err error)
	RestoreTimer(service string, d Domain, g int, ts int64, key, ns string) error
}

// Reader reads a snapshot file through an io.ReaderAt: Open reads the
// footer, metadata and index; Restore reads only the sections of the key
// groups asked for.
type Reader struct {
	r     io.ReaderAt
	size  int64
	meta  Meta
	index []indexEntry
}

type indexEntry struct {
	group       int
	off, length int64
	sum         uint64
}

// Open checks the file's footer, metadata and index (magic, version,
// checksums, bounds) and returns a Reader. Errors match ErrCorrupt (or are
// r's I/O errors). Nothing is allocated beyond the bytes the file has.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	const fixedHeader = len(headerMagic) + 2 + 4
	if size < int64(fixedHeader+8+footerSize) {
		return nil, fmt.Errorf("%w: file of %d bytes is shorter than an empty snapshot", ErrCorrupt, size)
	}
	head, err := readAt(r, 0, int64(fixedHeader), size)
	if err != nil {
		return nil, err
	}
	if string(head[:len(headerMagic)]) != headerMagic {
		return nil, fmt.Errorf("%w: bad magic %q at offset 0", ErrCorrupt, head[:len(headerMagic)])
	}
	if v := binary.BigEndian.Uint16(head[len(headerMagic):]); v != formatVersion {
		return nil, fmt.Errorf("%w: format version %d at offset %d, want %d", ErrCorrupt, v, len(headerMagic), formatVersion)
	}
	metaLen := int64(binary.BigEndian.Uint32(head[len(headerMagic)+2:]))
	headerEnd := int64(fixedHeader) + metaLen + 8
	if headerEnd > size-footerSize {
		return nil, fmt.Errorf("%w: metadata of %d bytes at offset %d runs past the end (%d bytes)", ErrCorrupt, metaLen, fixedHeader, size)
	}
	metaAndSum, err := readAt(r, int64(fixedHeader), metaLen+8, size)
	if err != nil {
		return nil, err
	}
	metaBytes := metaAndSum[:metaLen]
	if sum := binary.BigEndian.Uint64(metaAndSum[metaLen:]); sum != xxhash.Sum64(metaBytes) {
		return nil, fmt.Errorf("%w: metadata checksum at offset %d does not match", ErrCorrupt, int64(fixedHeader)+metaLen)
	}
	meta, err := decodeMeta(metaBytes)
	if err != nil {
		return nil, err
	}
	foot, err := readAt(r, size-footerSize, footerSize, size)
	if err != nil {
		return nil, err
	}
	if string(foot[24:]) != footerMagic {
		return nil, fmt.Errorf("%w: bad footer magic at offset %d (truncated file?)", ErrCorrupt, size-8)
	}
	indexOff := int64(binary.BigEndian.Uint64(foot))
	indexLen := int64(binary.BigEndian.Uint64(foot[8:]))
	if indexOff < headerEnd || indexLen < 1 || indexLen > size-footerSize-indexOff {
		return nil, fmt.Errorf("%w: index at offset %d, %d bytes, outside [%d, %d)", ErrCorrupt, indexOff, indexLen, headerEnd, size-footerSize)
	}
	ib, err := readAt(r, indexOff, indexLen, size)
	if err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint64(foot[16:]) != xxhash.Sum64(ib) {
		return nil, fmt.Errorf("%w: index checksum at offset %d does not match", ErrCorrupt, size-16)
	}
	d := wire.Decoder{Corrupt: ErrCorrupt, B: ib, Base: indexOff, What: "index"}
	n := d.Count(len(ib) + 1)
	idx := make([]indexEntry, 0, n)
	next, prevGroup := headerEnd, meta.KeyGroups.First-1
	for range n {
		e := indexEntry{group: d.Count(meta.MaxParallelism), off: int64(d.Uvarint()), length: int64(d.Uvarint()), sum: d.U64()}
		if d.Err != nil {
			return nil, d.Err
		}
		if e.group <= prevGroup || e.group > meta.KeyGroups.Last || e.off != next || e.length < 1 || e.length > indexOff-e.off {
			return nil, fmt.Errorf("%w: index entry for key group %d (section at %d, %d bytes) out of order or out of bounds", ErrCorrupt, e.group, e.off, e.length)
		}
		prevGroup, next = e.group, e.off+e.length
		idx = append(idx, e)
	}
	if d.Err == nil && d.Left() != 0 {
		d.Fail("%d bytes left over", d.Left())
	}
	if d.Err != nil {
		return nil, d.Err
	}
	if next != indexOff {
		return nil, fmt.Errorf("%w: sections end at %d, index starts at %d", ErrCorrupt, next, indexOff)
	}
	return &Reader{r: r, size: size, meta: meta, index: idx}, nil
}

// readAt reads n bytes at off, after checking they are inside the file, so
// a length field cannot make it allocate more than the file holds.
func readAt(r io.ReaderAt, off, n, size int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > size {
		return nil, fmt.Errorf("%w: %d bytes at offset %d past the end (%d bytes)", ErrCorrupt, n, off, size)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("snapshot: reading %d bytes at offset %d: %w", n, off, err)
	}
	return b, nil
}

// Meta returns the snapshot's metadata.
func (r *Reader) Meta() Meta { return r.meta }

// Groups returns the key groups that have a section.
func (r *Reader) Groups() []int {
	gs := make([]int, len(r.index))
	for i, e := range r.index {
		gs[i] = e.group
	}
	return gs
}

// Restore reads the sections of the key groups in kgs (only those) and
// hands their entries and timers to sink, checking every section's
// checksum first. It stops at the first error (ErrCorrupt for bad bytes, or
// the sink's) or when ctx is done.
func (r *Reader) Restore(ctx context.Context, sink Sink, kgs statetable.KeyGroupRange) error {
	for _, e := range r.index {
		if !kgs.Contains(e.group) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := readAt(r.r, e.off, e.length, r.size)
		if err != nil {
			return err
		}
		if xxhash.Sum64(b) != e.sum {
			return fmt.Errorf("%w: key group %d section at offset %d: checksum does not match", ErrCorrupt, e.group, e.off)
		}
		if err := r.section(sink, e, b); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) section(sink Sink, e indexEntry, b []byte) error {
	d := wire.Decoder{Corrupt: ErrCorrupt, B: b, Base: e.off, What: fmt.Sprintf("key group %d section", e.group)}
	for {
		switch tag := d.Byte(); {
		case d.Err != nil:
			return d.Err
		case tag == tagEnd:
			if d.Left() != 0 {
				d.Fail("%d bytes after the end tag", d.Left())
			}
			return d.Err
		case tag == tagState:
			i := d.Count(len(r.meta.States))
			n := d.Count(d.Left()/2 + 1)
			if d.Err != nil {
				return d.Err
			}
			name := r.meta.States[i].Name
			restore, done, err := sink.EntryRestorer(name, n)
			if err != nil {
				return fmt.Errorf("key group %d section at offset %d: %w", e.group, e.off, err)
			}
			for range n {
				key, cell := d.Bytes(), d.Bytes()
				if d.Err != nil {
					return d.Err
				}
				if err := restore(key, cell); err != nil {
					return fmt.Errorf("key group %d section at offset %d: %w", e.group, e.off, err)
				}
			}
			if err := done(); err != nil {
				return fmt.Errorf("key group %d section at offset %d: %w", e.group, e.off, err)
			}
		case tag == tagTimers:
			j := d.Count(len(r.meta.Timers))
			dom := Domain(d.Byte())
			if dom > ProcessingTime {
				d.Fail("time domain %d", dom)
			}
			n := d.Count(d.Left()/3 + 1)
			if d.Err != nil {
				return d.Err
			}
			name := r.meta.Timers[j].Name
			for range n {
				ts := d.Varint()
				key, ns := d.String(), d.String()
				if d.Err != nil {
					return d.Err
				}
				if err := sink.RestoreTimer(name, dom, e.group, ts, key, ns); err != nil {
					return fmt.Errorf("key group %d section at offset %d: %w", e.group, e.off, err)
				}
			}
		default:
			d.Fail("unknown tag %d", tag)
		}
	}
}
