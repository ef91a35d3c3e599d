package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Sink receives what Restore reads; its methods are called from the
// restoring goroutine. The key, cell and string arguments alias a buffer
// the reader allocated for their section and never reuses or modifies, so a
// sink may keep them without copying (keeping any keeps the whole section's
// buffer alive).
type Sink interface {
	// RestoreEntries is called for each run of n entries of a state in a
	// section, with the section's bytes from the run's first entry on: per
	// entry a key blob and a cell blob (a uvarint length and that many
	// bytes). It restores the n entries and returns how many bytes they
	// took; bytes it finds bad are an error wrapping
	// statetable.ErrDecode (as statetable.Table.RestoreRun does), which
	// Restore reports as matching ErrCorrupt too.
	RestoreEntries(state string, n int, b []byte) (int, error)
	RestoreTimer(service string, d timerqueue.Domain, g int, ts int64, key, ns string) error
}

// Reader reads a snapshot file through an io.ReaderAt: Open reads the
// footer, metadata and index; Restore reads only the sections of the key
// groups asked for.
type Reader struct {
	r     io.ReaderAt
	size  int64
	meta  Meta
	index []fileformat.Section
	data  []byte // the whole file, for a Reader of OpenBytes
}

// Open checks the file's footer, metadata and index (magic, version,
// checksums, bounds) and returns a Reader. Errors match ErrCorrupt (or are
// r's I/O errors). Nothing is allocated beyond the bytes the file has.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	h := fileformat.Header{Name: "snapshot", Magic: headerMagic, Version: FormatVersion, MinVersion: MinFormatVersion, Corrupt: ErrCorrupt}
	version, _, metaBytes, headerEnd, err := h.Read(r, size)
	if err != nil {
		return nil, err
	}
	meta, err := decodeMeta(metaBytes, version)
	if err != nil {
		return nil, err
	}
	idx, err := fileformat.ReadIndex(r, size, headerEnd, footerMagic, meta.KeyGroups.First, meta.KeyGroups.Last, ErrCorrupt)
	if err != nil {
		return nil, err
	}
	return &Reader{r: r, size: size, meta: meta, index: idx}, nil
}

// OpenBytes is Open of a file held in memory: Restore then hands the sink
// slices of data instead of copies of each section, so the caller must
// not modify data while the Reader is in use, nor after a restore while
// the restored state may alias it (a state's keys longer than 31 bytes,
// and the cells of codecs that alias their input, keep the bytes they
// were read from).
func OpenBytes(data []byte) (*Reader, error) {
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	r.data = data
	return r, nil
}

// Meta returns the snapshot's metadata.
func (r *Reader) Meta() Meta { return r.meta }

// Groups returns the key groups that have a section.
func (r *Reader) Groups() []int {
	gs := make([]int, len(r.index))
	for i, e := range r.index {
		gs[i] = e.Group
	}
	return gs
}

// Restore reads the sections of the key groups in kgs (only those) and
// hands their entries and timers to sink, checking every section's
// checksum first. It stops at the first error (ErrCorrupt for bad bytes, or
// the sink's) or when ctx is done.
func (r *Reader) Restore(ctx context.Context, sink Sink, kgs statetable.KeyGroupRange) error {
	for _, e := range r.index {
		if !kgs.Contains(e.Group) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.section(sink, e); err != nil {
			return err
		}
	}
	return nil
}

// section reads a key group's section, checks its checksum and hands what
// it holds to sink.
func (r *Reader) section(sink Sink, e fileformat.Section) error {
	what := fmt.Sprintf("key group %d section", e.Group)
	var b []byte
	var err error
	if r.data == nil {
		b, err = fileformat.ReadSection(r.r, r.size, e, what, ErrCorrupt)
	} else {
		b, err = fileformat.SliceSection(r.data, e, what, ErrCorrupt)
	}
	if err != nil {
		return err
	}
	d := fileformat.Decoder{Corrupt: ErrCorrupt, B: b, Base: e.Off, What: what}
	wrap := func(err error) error { return fmt.Errorf("%s at offset %d: %w", what, e.Off, err) }
	entries := func(i, n int) error {
		at := e.Off + int64(d.Off)
		used, err := sink.RestoreEntries(r.meta.States[i].Name, n, d.B[d.Off:])
		switch {
		case errors.Is(err, statetable.ErrDecode):
			return fmt.Errorf("%w: %s, entries of state %q at offset %d: %w", ErrCorrupt, what, r.meta.States[i].Name, at, err)
		case err != nil:
			return wrap(err)
		case used < 0 || used > d.Left():
			return fmt.Errorf("snapshot: BUG: a sink took %d bytes of the %d left", used, d.Left())
		}
		d.Off += used
		return nil
	}
	timers := func(j int, dom byte, n int) error {
		name := r.meta.Timers[j].Name
		for range n {
			ts := d.Varint()
			key, ns := d.String(), d.String()
			if d.Err != nil {
				return d.Err
			}
			if err := sink.RestoreTimer(name, timerqueue.Domain(dom), e.Group, ts, key, ns); err != nil {
				return wrap(err)
			}
		}
		return nil
	}
	return d.Records(len(r.meta.States), len(r.meta.Timers), 3, entries, timers)
}
