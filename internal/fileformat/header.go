package fileformat

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// Header is how the snapshot and delta formats begin:
//
//	magic, u16 format version, Extra bytes of the format's own fields,
//	u32 metadata length, metadata, u64 xxhash64 checksum
//
// The checksum covers the metadata, or with SumHeader every header byte
// before it.
type Header struct {
	Name    string // "snapshot" or "delta", for messages
	Magic   string
	Version uint16 // the version written, and the newest read
	// MinVersion is the oldest version read (0: Version only).
	MinVersion uint16
	Extra      int
	SumHeader  bool
	Corrupt    error // the sentinel errors wrap
}

// Read reads and checks the header at the start of a file of size bytes:
// that the file has room for an empty header and a footer, the magic, the
// version, that the metadata ends before the footer, and the checksum. It
// returns the file's format version (in [MinVersion, Version]), the Extra
// bytes, the metadata and the offset where the header ends, all in one
// buffer of that many bytes. It costs two reads, of the
// fixed fields and of the whole header, and allocates no more than the
// file holds. Errors wrap h.Corrupt and say what and at which offset, or
// are r's I/O errors.
func (h Header) Read(r io.ReaderAt, size int64) (version uint16, extra, meta []byte, end int64, err error) {
	fixed := len(h.Magic) + 2 + h.Extra + 4
	if size < int64(fixed+8+FooterSize) {
		return 0, nil, nil, 0, fmt.Errorf("%w: %[2]s file of %[3]d bytes is shorter than an empty %[2]s", h.Corrupt, h.Name, size)
	}
	head, err := ReadAt(r, 0, int64(fixed), size, h.Corrupt)
	if err != nil {
		return 0, nil, nil, 0, err
	}
	if magic := head[:len(h.Magic)]; string(magic) != h.Magic {
		return 0, nil, nil, 0, fmt.Errorf("%w: bad %s magic %q at offset 0", h.Corrupt, h.Name, magic)
	}
	version = binary.BigEndian.Uint16(head[len(h.Magic):])
	if min := max(h.MinVersion, 1); version < min || version > h.Version {
		if min == h.Version {
			return 0, nil, nil, 0, fmt.Errorf("%w: %s format version %d at offset %d, want %d", h.Corrupt, h.Name, version, len(h.Magic), h.Version)
		}
		return 0, nil, nil, 0, fmt.Errorf("%w: %s format version %d at offset %d, want %d to %d", h.Corrupt, h.Name, version, len(h.Magic), min, h.Version)
	}
	metaLen := int64(binary.BigEndian.Uint32(head[fixed-4:]))
	end = int64(fixed) + metaLen + 8
	if end > size-FooterSize {
		return 0, nil, nil, 0, fmt.Errorf("%w: %s metadata of %d bytes at offset %d runs past the end (%d bytes)", h.Corrupt, h.Name, metaLen, fixed, size)
	}
	b, err := ReadAt(r, 0, end, size, h.Corrupt)
	if err != nil {
		return 0, nil, nil, 0, err
	}
	covered, what := b[fixed:end-8], "metadata"
	if h.SumHeader {
		covered, what = b[:end-8], "header"
	}
	if xxhash.Sum64(covered) != binary.BigEndian.Uint64(b[end-8:]) {
		return 0, nil, nil, 0, fmt.Errorf("%w: %s %s checksum at offset %d does not match", h.Corrupt, h.Name, what, end-8)
	}
	return version, b[fixed-4-h.Extra : fixed-4], b[fixed : end-8], end, nil
}
