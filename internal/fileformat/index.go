package fileformat

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// The snapshot and delta formats end the same way: the key-group sections
// back to back after the header, an index of them, and a footer.
//
//	index:  uvarint n, then n entries: uvarint key group, uvarint offset,
//	        uvarint length, u64 xxhash64 of the section
//	footer: u64 index offset, u64 index length, u64 xxhash64 of the index,
//	        8 bytes of magic

// FooterSize is the length of a footer.
const FooterSize = 8 + 8 + 8 + 8

// Section is one key group's section of a file, as its index lists it.
type Section struct {
	Group       int
	Off, Length int64
	Sum         uint64
}

// AppendSection appends an index entry.
func AppendSection(index []byte, s Section) []byte {
	index = binary.AppendUvarint(index, uint64(s.Group))
	index = binary.AppendUvarint(index, uint64(s.Off))
	index = binary.AppendUvarint(index, uint64(s.Length))
	return binary.BigEndian.AppendUint64(index, s.Sum)
}

// AppendFooter appends the footer of an index written at indexOff.
func AppendFooter(dst []byte, indexOff int64, index []byte, magic string) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(indexOff))
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(index)))
	dst = binary.BigEndian.AppendUint64(dst, xxhash.Sum64(index))
	return append(dst, magic...)
}

// ReadAt reads n bytes at off after checking they are inside a file of
// size bytes, so a length field cannot make it allocate more than the file
// holds; a read past the end is an error wrapping corrupt.
func ReadAt(r io.ReaderAt, off, n, size int64, corrupt error) ([]byte, error) {
	if off < 0 || n < 0 || off > size || n > size-off {
		return nil, fmt.Errorf("%w: %d bytes at offset %d past the end (%d bytes)", corrupt, n, off, size)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("reading %d bytes at offset %d: %w", n, off, err)
	}
	return b, nil
}

// ReadIndex reads and checks the footer and the index of a file of size
// bytes whose header ends at headerEnd: the magic, the index checksum, and
// that the sections are of key groups ascending within [first, last] and
// fill the space between the header and the index exactly. Errors wrap
// corrupt and say where.
func ReadIndex(r io.ReaderAt, size, headerEnd int64, magic string, first, last int, corrupt error) ([]Section, error) {
	if size-FooterSize < headerEnd {
		return nil, fmt.Errorf("%w: no room for a footer after the header (%d bytes)", corrupt, size)
	}
	foot, err := ReadAt(r, size-FooterSize, FooterSize, size, corrupt)
	if err != nil {
		return nil, err
	}
	if string(foot[24:]) != magic {
		return nil, fmt.Errorf("%w: bad footer magic at offset %d (truncated file?)", corrupt, size-8)
	}
	indexOff := int64(binary.BigEndian.Uint64(foot))
	indexLen := int64(binary.BigEndian.Uint64(foot[8:]))
	if indexOff < headerEnd || indexOff > size-FooterSize || indexLen < 1 || indexLen != size-FooterSize-indexOff {
		return nil, fmt.Errorf("%w: index at offset %d, %d bytes, does not fill [%d, %d)", corrupt, indexOff, indexLen, headerEnd, size-FooterSize)
	}
	ib, err := ReadAt(r, indexOff, indexLen, size, corrupt)
	if err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint64(foot[16:]) != xxhash.Sum64(ib) {
		return nil, fmt.Errorf("%w: index checksum at offset %d does not match", corrupt, size-16)
	}
	d := Decoder{Corrupt: corrupt, B: ib, Base: indexOff, What: "index"}
	n := d.Count(len(ib)/11 + 1) // an entry takes at least 11 bytes
	idx := make([]Section, 0, n)
	next, prev := headerEnd, first-1
	for range n {
		s := Section{Group: d.Count(last + 1), Off: int64(d.Uvarint()), Length: int64(d.Uvarint()), Sum: d.U64()}
		if d.Err != nil {
			return nil, d.Err
		}
		if s.Group <= prev || s.Off != next || s.Length < 1 || s.Length > indexOff-s.Off {
			return nil, fmt.Errorf("%w: index entry for key group %d (section at %d, %d bytes) out of order or out of bounds", corrupt, s.Group, s.Off, s.Length)
		}
		prev, next = s.Group, s.Off+s.Length
		idx = append(idx, s)
	}
	if d.Left() != 0 {
		d.Fail("%d bytes left over", d.Left())
		return nil, d.Err
	}
	if next != indexOff {
		return nil, fmt.Errorf("%w: sections end at %d, the index starts at %d", corrupt, next, indexOff)
	}
	return idx, nil
}

// ReadSection reads the section s of a file of size bytes, as its index
// lists it, and checks the section's checksum: one read and one allocation
// of s.Length bytes, after checking they are inside the file. Errors wrap
// corrupt and say what (the section, for messages) and where, or are r's
// I/O errors.
func ReadSection(r io.ReaderAt, size int64, s Section, what string, corrupt error) ([]byte, error) {
	b, err := ReadAt(r, s.Off, s.Length, size, corrupt)
	if err != nil {
		return nil, err
	}
	if xxhash.Sum64(b) != s.Sum {
		return nil, fmt.Errorf("%w: %s at offset %d: checksum does not match", corrupt, what, s.Off)
	}
	return b, nil
}

// SliceSection is ReadSection of a file held whole in data: the section
// is a slice of data (capped at its end), not a copy.
func SliceSection(data []byte, s Section, what string, corrupt error) ([]byte, error) {
	size := int64(len(data))
	if s.Off < 0 || s.Length < 0 || s.Off > size || s.Length > size-s.Off {
		return nil, fmt.Errorf("%w: %d bytes at offset %d past the end (%d bytes)", corrupt, s.Length, s.Off, size)
	}
	b := data[s.Off : s.Off+s.Length : s.Off+s.Length]
	if xxhash.Sum64(b) != s.Sum {
		return nil, fmt.Errorf("%w: %s at offset %d: checksum does not match", corrupt, what, s.Off)
	}
	return b, nil
}
