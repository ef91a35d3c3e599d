package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/timerqueue"

	"github.com/cespare/xxhash/v2"
)

// Source is one captured version of a backend, as Write reads it. Its
// methods are called from the writing goroutine only, while the capture is
// live.
type Source interface {
	// Meta describes the capture (Write sorts its states and services).
	Meta() Meta
	// AppendStateEntries appends to dst the entries of a state in key
	// group g, in canonical order, each as a key blob and a cell blob (a
	// uvarint length and that many bytes), and returns the extended slice
	// and the number of entries.
	AppendStateEntries(dst []byte, state string, g int) ([]byte, int, error)
	// TimerEntries yields every timer of a service and domain in firing
	// order, with its key group.
	TimerEntries(service string, d timerqueue.Domain, yield func(g int, ts int64, key, ns string) bool) error
}

// Progress counts what a write has done so far; read it from any goroutine.
type Progress struct {
	Bytes   atomic.Int64 // bytes written
	Entries atomic.Int64 // state entries and timers written
}

// Section tags.
const (
	tagEnd    = fileformat.TagEnd
	tagState  = fileformat.TagState
	tagTimers = fileformat.TagTimers
)

const (
	headerMagic = "CWSNAP\x00\x01"
	footerMagic = "CWSNAPND"
)

// FormatVersion is the snapshot format version written (2: the metadata
// records which states have a TTL, and their values carry expiration
// timestamps); MinFormatVersion the oldest read (1: no TTL).
const (
	FormatVersion    = 2
	MinFormatVersion = 1
)

// countingWriter counts bytes and sticks to the first error.
type countingWriter struct {
	w    io.Writer
	n    int64
	err  error
	prog *Progress
}

func (c *countingWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	if c.prog != nil {
		c.prog.Bytes.Add(int64(n))
	}
	c.err = err
}

// entryBuffers holds the buffers Write appends a key group's entries to
// (*[]byte), for the next write. A write's buffer grows to its largest key
// group's entries (about 1.6 MB a group at 10M int64 counts in 128 key
// groups), by doubling; a checkpoint every second that grew a fresh one
// each time left 8-10 MB of garbage a checkpoint, about a fifth of what
// BenchmarkJob's writer and checkpoints allocate at 10M keys every=1s
// (heap-peak-MB).
var entryBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEntries is the largest buffer kept for the next write: one a
// huge key group grew is left to the collector rather than held.
const maxPooledEntries = 64 << 20

// timerGroup is the timers of one service and domain in one key group,
// encoded.
type timerGroup struct {
	service int
	domain  timerqueue.Domain
	n       int
	buf     []byte
}

// Write writes the capture src to w in the snapshot format (see doc.go),
// for the key groups of src's metadata. It stops at the first error of w,
// of src, or of ctx (checked between key-group sections), and returns it.
// prog, if not nil, is updated as the write goes. Write runs on the calling
// goroutine: start it on its own to keep the writer of the backend going.
func Write(ctx context.Context, w io.Writer, src Source, prog *Progress) error {
	meta := src.Meta()
	meta.normalize()
	cw := &countingWriter{w: w, prog: prog}

	metaBytes := meta.append(nil)
	header := append([]byte(headerMagic), 0, FormatVersion)
	header = binary.BigEndian.AppendUint32(header, uint32(len(metaBytes)))
	header = append(header, metaBytes...)
	header = binary.BigEndian.AppendUint64(header, xxhash.Sum64(metaBytes))
	cw.write(header)

	// Timers are ordered by time, not key group: bucket them in one pass.
	timers := map[int][]timerGroup{}
	for j, ts := range meta.Timers {
		for _, d := range []timerqueue.Domain{timerqueue.EventTime, timerqueue.ProcessingTime} {
			err := src.TimerEntries(ts.Name, d, func(g int, at int64, key, ns string) bool {
				gs := timers[g]
				if len(gs) == 0 || gs[len(gs)-1].service != j || gs[len(gs)-1].domain != d {
					gs = append(gs, timerGroup{service: j, domain: d})
				}
				t := &gs[len(gs)-1]
				t.n++
				t.buf = binary.AppendVarint(t.buf, at)
				t.buf = fileformat.AppendString(t.buf, key)
				t.buf = fileformat.AppendString(t.buf, ns)
				timers[g] = gs
				return true
			})
			if err != nil {
				return fmt.Errorf("snapshot: timers of %q: %w", ts.Name, err)
			}
		}
	}

	// A section goes out in pieces, each record's head and then its
	// entries as the source appended them, checksummed as it goes: the
	// entries, most of a file's bytes, are not copied again into a second
	// buffer of a key group's size to sit behind their head. That saves a
	// pass over the bytes and the buffer; BenchmarkSnapshotWrite at 10M
	// keys moves within its noise (medians 170 -> 162 ms, decision 0054).
	var index, head []byte
	buf := entryBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledEntries {
			entryBuffers.Put(buf)
		}
	}()
	entries := (*buf)[:0]
	sum := xxhash.New()
	sections := 0
	for g := meta.KeyGroups.First; g <= meta.KeyGroups.Last; g++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		off, length := cw.n, int64(0)
		sum.Reset()
		emit := func(b []byte) {
			sum.Write(b)
			cw.write(b)
			length += int64(len(b))
		}
		for i, s := range meta.States {
			var n int
			var err error
			entries, n, err = src.AppendStateEntries(entries[:0], s.Name, g)
			*buf = entries
			if err != nil {
				return fmt.Errorf("snapshot: state %q, key group %d: %w", s.Name, g, err)
			}
			if n > 0 {
				head = append(head[:0], tagState)
				head = binary.AppendUvarint(head, uint64(i))
				head = binary.AppendUvarint(head, uint64(n))
				emit(head)
				emit(entries)
				if prog != nil {
					prog.Entries.Add(int64(n))
				}
			}
		}
		for _, t := range timers[g] {
			head = append(head[:0], tagTimers)
			head = binary.AppendUvarint(head, uint64(t.service))
			head = append(head, byte(t.domain))
			head = binary.AppendUvarint(head, uint64(t.n))
			emit(head)
			emit(t.buf)
			if prog != nil {
				prog.Entries.Add(int64(t.n))
			}
		}
		delete(timers, g)
		if length == 0 {
			continue
		}
		head = append(head[:0], tagEnd)
		emit(head)
		if cw.err != nil {
			return fmt.Errorf("snapshot: writing key group %d: %w", g, cw.err)
		}
		index = fileformat.AppendSection(index, fileformat.Section{Group: g, Off: off, Length: length, Sum: sum.Sum64()})
		sections++
	}
	index = append(binary.AppendUvarint(nil, uint64(sections)), index...)
	indexOff := cw.n
	cw.write(index)
	cw.write(fileformat.AppendFooter(nil, indexOff, index, footerMagic))
	if cw.err != nil {
		return fmt.Errorf("snapshot: %w", cw.err)
	}
	return nil
}
