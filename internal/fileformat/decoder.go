// Package fileformat holds what the snapshot and delta file formats share: the
// header check, the records of a section, the index and the footer,
// length-prefixed strings and a bounds-checked decoder.
package fileformat

import (
	"encoding/binary"
	"fmt"
)

// AppendString appends uvarint(len(s)) and s.
func AppendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// AppendBytes appends uvarint(len(b)) and b.
func AppendBytes(dst []byte, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// Decoder reads a byte slice, never trusting a length beyond the bytes
// left; the first problem sticks in Err (wrapping Corrupt, with What and
// the offset) and later reads return zero values.
type Decoder struct {
	B       []byte
	Off     int
	Base    int64 // file offset of B[0], for messages
	What    string
	Corrupt error // the sentinel errors wrap
	Err     error
}

// Fail records a problem at the current offset, unless one is recorded.
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s at offset %d: %s", d.Corrupt, d.What, d.Base+int64(d.Off), fmt.Sprintf(format, args...))
	}
}

// Left returns the number of bytes not read yet.
func (d *Decoder) Left() int { return len(d.B) - d.Off }

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil || d.Left() < 1 {
		d.Fail("want 1 byte, %d left", d.Left())
		return 0
	}
	d.Off++
	return d.B[d.Off-1]
}

// U64 reads a big-endian uint64.
func (d *Decoder) U64() uint64 {
	if d.Err != nil || d.Left() < 8 {
		d.Fail("want 8 bytes, %d left", d.Left())
		return 0
	}
	d.Off += 8
	return binary.BigEndian.Uint64(d.B[d.Off-8:])
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B[d.Off:])
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.Off += n
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B[d.Off:])
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.Off += n
	return v
}

// Count reads a uvarint that must be below limit.
func (d *Decoder) Count(limit int) int {
	v := d.Uvarint()
	if d.Err == nil && v >= uint64(max(limit, 0)) {
		d.Fail("count %d, at most %d", v, limit-1)
		return 0
	}
	return int(v)
}

// Bytes reads a length-prefixed blob, aliasing the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(d.Left()) {
		d.Fail("length %d, only %d bytes left", n, d.Left())
	}
	if d.Err != nil {
		return nil
	}
	d.Off += int(n)
	return d.B[d.Off-int(n) : d.Off]
}

// String reads a length-prefixed string (a copy).
func (d *Decoder) String() string { return string(d.Bytes()) }
