package snapshot

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/cowstate/cowstate/statetable"
)

// TimerServiceInfo describes a timer service: its name and the codec IDs of
// its keys and namespaces.
type TimerServiceInfo struct {
	Name   string
	Codecs [2]string
}

// Meta is the metadata of a snapshot: what was captured and how it is
// encoded.
type Meta struct {
	// Savepoint marks a canonical, self-contained savepoint (Version is 0).
	Savepoint bool
	// Version is the capture's version (0 in savepoints).
	Version        uint64
	MaxParallelism int
	// KeyGroups is the range of key groups the file covers.
	KeyGroups statetable.KeyGroupRange
	// States and Timers are sorted by name, so the metadata does not depend
	// on registration order.
	States []statetable.StateInfo
	Timers []TimerServiceInfo
}

// normalize sorts states and timer services by name.
func (m *Meta) normalize() {
	slices.SortFunc(m.States, func(a, b statetable.StateInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(m.Timers, func(a, b TimerServiceInfo) int { return strings.Compare(a.Name, b.Name) })
}

func (m *Meta) append(dst []byte) []byte {
	flags := byte(0)
	if m.Savepoint {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, m.Version)
	dst = binary.AppendUvarint(dst, uint64(m.MaxParallelism))
	dst = binary.AppendUvarint(dst, uint64(m.KeyGroups.First))
	dst = binary.AppendUvarint(dst, uint64(m.KeyGroups.Last+1))
	dst = binary.AppendUvarint(dst, uint64(len(m.States)))
	for _, s := range m.States {
		dst = appendString(dst, s.Name)
		dst = append(dst, byte(s.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(s.Codec)))
		for _, c := range s.Codec {
			dst = appendString(dst, c)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Timers)))
	for _, t := range m.Timers {
		dst = appendString(dst, t.Name)
		dst = appendString(dst, t.Codecs[0])
		dst = appendString(dst, t.Codecs[1])
	}
	return dst
}

func decodeMeta(b []byte) (Meta, error) {
	d := decoder{b: b, what: "metadata"}
	var m Meta
	flags := d.byte()
	m.Savepoint = flags&1 != 0
	m.Version = d.u64()
	m.MaxParallelism = d.count(statetable.MaxParallelismLimit + 1)
	m.KeyGroups.First = d.count(m.MaxParallelism)
	m.KeyGroups.Last = d.count(m.MaxParallelism+1) - 1
	n := d.count(len(b))
	for range n {
		var s statetable.StateInfo
		s.Name = d.string()
		s.Kind = statetable.Kind(d.byte())
		nc := d.count(len(b))
		for range nc {
			s.Codec = append(s.Codec, d.string())
		}
		m.States = append(m.States, s)
	}
	n = d.count(len(b))
	for range n {
		var t TimerServiceInfo
		t.Name = d.string()
		t.Codecs[0] = d.string()
		t.Codecs[1] = d.string()
		m.Timers = append(m.Timers, t)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d bytes left over", len(b)-d.off)
	}
	if d.err == nil && (m.MaxParallelism < 1 || m.KeyGroups.Last < m.KeyGroups.First-1) {
		d.fail("max parallelism %d, key groups %v", m.MaxParallelism, m.KeyGroups)
	}
	return m, d.err
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// decoder reads a byte slice, never trusting a length beyond the bytes left;
// the first problem sticks in err (wrapping ErrCorrupt, with what and the
// offset) and later reads return zero values.
type decoder struct {
	b    []byte
	off  int
	base int64 // file offset of b[0], for messages
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, d.what, d.base+int64(d.off), fmt.Sprintf(format, args...))
	}
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) byte() byte {
	if d.err != nil || d.left() < 1 {
		d.fail("want 1 byte, %d left", d.left())
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) u64() uint64 {
	if d.err != nil || d.left() < 8 {
		d.fail("want 8 bytes, %d left", d.left())
		return 0
	}
	d.off += 8
	return binary.BigEndian.Uint64(d.b[d.off-8:])
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// count reads a uvarint that must be below limit.
func (d *decoder) count(limit int) int {
	v := d.uvarint()
	if d.err == nil && v >= uint64(max(limit, 0)) {
		d.fail("count %d, at most %d", v, limit-1)
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed blob, aliasing the input.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(d.left()) {
		d.fail("length %d, only %d bytes left", n, d.left())
	}
	if d.err != nil {
		return nil
	}
	d.off += int(n)
	return d.b[d.off-int(n) : d.off]
}

func (d *decoder) string() string { return string(d.bytes()) }
