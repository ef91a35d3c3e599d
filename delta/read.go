package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Reader reads a delta file through an io.ReaderAt: Open checks the
// header, index and footer; Read loads the sections of a key-group range.
type Reader struct {
	r            io.ReaderAt
	size         int64
	base, target uint64
	meta         snapshot.Meta
	index        []fileformat.Section
	data         []byte // the whole file, for a Reader of OpenBytes
}

// Open checks a delta file's magic, version, header checksum, footer and
// index, and returns a Reader. Errors match ErrCorrupt (or are r's I/O
// errors), say what and at which offset, and nothing is allocated beyond
// the bytes the file has.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	h := fileformat.Header{Name: "delta", Magic: headerMagic, Version: formatVersion, MinVersion: minFormatVersion, Extra: 8 + 8, SumHeader: true, Corrupt: ErrCorrupt}
	version, versions, meta, headerEnd, err := h.Read(r, size)
	if err != nil {
		return nil, err
	}
	rd := &Reader{r: r, size: size, base: binary.BigEndian.Uint64(versions), target: binary.BigEndian.Uint64(versions[8:])}
	if rd.meta, err = snapshot.DecodeMetaVersion(meta, version); err != nil {
		return nil, err
	}

	if rd.index, err = fileformat.ReadIndex(r, size, headerEnd, footerMagic, rd.meta.KeyGroups.First, rd.meta.KeyGroups.Last, ErrCorrupt); err != nil {
		return nil, err
	}
	return rd, nil
}

// OpenBytes is Open of a file held in memory: its sections are then
// slices of data instead of copies (a Delta that Read returns, and what
// MergeFiles reads, alias data), so the caller must not modify data while
// the Reader or what it returned is in use.
func OpenBytes(data []byte) (*Reader, error) {
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	r.data = data
	return r, nil
}

// Base and Target return the versions the delta goes between.
func (r *Reader) Base() uint64   { return r.base }
func (r *Reader) Target() uint64 { return r.target }

// Meta returns the metadata of the newer version.
func (r *Reader) Meta() snapshot.Meta { return r.meta }

// Size returns the file's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Read loads the sections of the key groups in kgs, checking each one's
// checksum, into a Delta (whose byte slices alias the sections' buffers).
// ctx is checked between sections.
func (r *Reader) Read(ctx context.Context, kgs statetable.KeyGroupRange) (*Delta, error) {
	d := &Delta{Base: r.base, Target: r.target, Meta: r.meta}
	for _, e := range r.index {
		if !kgs.Contains(e.Group) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.section(d.group(e.Group), e); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// section reads a key group's section, checks its checksum and decodes it
// into gr.
func (r *Reader) section(gr *group, e fileformat.Section) error {
	return r.decodeSection(e, func(state string, ck []byte, op entryOp) {
		gr.ops(state)[string(ck)] = &op
	}, func(t timerKey, present bool) {
		gr.timers[t] = present
	})
}

// decodeSection reads the section of index entry e, checks its checksum
// and decodes it, calling entry for each entry change (ck and the op's
// byte slices alias the section's buffer) and timer for each timer change,
// in file order.
func (r *Reader) decodeSection(e fileformat.Section, entry func(state string, ck []byte, op entryOp), timer func(t timerKey, present bool)) error {
	what := sectionName(e.Group)
	b, err := r.sectionBytes(e, what)
	if err != nil {
		return err
	}
	return r.decodeRecords(e, b, what, func(i, n int, d *fileformat.Decoder) error {
		state := r.meta.States[i].Name
		for range n {
			ck, op := decodeOp(d)
			if d.Err != nil {
				return d.Err
			}
			entry(state, ck, op)
		}
		return nil
	}, timer)
}

// sectionName names the section of key group g in messages.
func sectionName(g int) string { return fmt.Sprintf("delta section of key group %d", g) }

// sectionBytes returns the bytes of the section of index entry e (named
// what in errors), checked against its checksum. A Reader of OpenBytes
// slices its bytes; any other reads them into a new buffer.
func (r *Reader) sectionBytes(e fileformat.Section, what string) ([]byte, error) {
	if r.data == nil {
		return fileformat.ReadSection(r.r, r.size, e, what, ErrCorrupt)
	}
	return fileformat.SliceSection(r.data, e, what, ErrCorrupt)
}

// decodeRecords decodes section b (of index entry e, named what): entries
// reads the n entries of a record of state i from d, and timer is called
// for each timer change, in file order.
func (r *Reader) decodeRecords(e fileformat.Section, b []byte, what string, entries func(i, n int, d *fileformat.Decoder) error, timer func(t timerKey, present bool)) error {
	d := fileformat.Decoder{Corrupt: ErrCorrupt, B: b, Base: e.Off, What: what}
	timers := func(j int, dom byte, n int) error {
		for range n {
			present := d.Byte()
			t := timerKey{service: r.meta.Timers[j].Name, domain: timerqueue.Domain(dom), ts: d.Varint()}
			t.key, t.ns = d.String(), d.String()
			if d.Err != nil {
				return d.Err
			}
			timer(t, present == 1)
		}
		return nil
	}
	return d.Records(len(r.meta.States), len(r.meta.Timers), 4, func(i, n int) error { return entries(i, n, &d) }, timers)
}

// decodeOp reads one entry of a state record: its composite key and op
// (both alias d's bytes). A problem is left in d.Err.
func decodeOp(d *fileformat.Decoder) (ck []byte, op entryOp) {
	kind := d.Byte()
	ck = d.Bytes()
	op = entryOp{deleted: kind == opDelete, put: kind == opPut || kind == opPutPatch}
	if kind < opPut || kind > opPutPatch {
		d.Fail("entry op %d", kind)
	}
	if op.put {
		op.cell = d.Bytes()
	}
	if kind == opPatch || kind == opPutPatch {
		np := d.Count(d.Left()/2 + 1)
		op.parts = make(map[string]statetable.Part, np)
		for range np {
			p := statetable.Part{Deleted: d.Byte() == 1, Key: d.Bytes()}
			if !p.Deleted {
				p.Value = d.Bytes()
			}
			op.parts[string(p.Key)] = p
		}
	}
	return ck, op
}
