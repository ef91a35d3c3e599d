package delta

import (
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
	what := fmt.Sprintf("delta section of key group %d", e.Group)
	b, err := fileformat.ReadSection(r.r, r.size, e, what, ErrCorrupt)
	if err != nil {
		return err
	}
	d := fileformat.Decoder{Corrupt: ErrCorrupt, B: b, Base: e.Off, What: what}
	entries := func(i, n int) error {
		state := r.meta.States[i].Name
		for range n {
			kind := d.Byte()
			ck := d.Bytes()
			op := entryOp{deleted: kind == opDelete, put: kind == opPut || kind == opPutPatch}
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
			if d.Err != nil {
				return d.Err
			}
			entry(state, ck, op)
		}
		return nil
	}
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
	return d.Records(len(r.meta.States), len(r.meta.Timers), 4, entries, timers)
}
