package snapshot

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/cowstate/cowstate/internal/fileformat"

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
		dst = fileformat.AppendString(dst, s.Name)
		dst = append(dst, byte(s.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(s.Codec)))
		for _, c := range s.Codec {
			dst = fileformat.AppendString(dst, c)
		}
		flags := byte(0)
		if s.TTL {
			flags |= stateTTL
		}
		dst = append(dst, flags)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Timers)))
	for _, t := range m.Timers {
		dst = fileformat.AppendString(dst, t.Name)
		dst = fileformat.AppendString(dst, t.Codecs[0])
		dst = fileformat.AppendString(dst, t.Codecs[1])
	}
	return dst
}

// Per-state flags of the metadata (format version 2 on).
const stateTTL = 1 // the state's values carry expiration timestamps

// decodeMeta decodes metadata of a file of format version 1 or 2 (version
// 1 has no per-state flags: no state has a TTL).
func decodeMeta(b []byte, version uint16) (Meta, error) {
	d := fileformat.Decoder{Corrupt: ErrCorrupt, B: b, What: "metadata"}
	var m Meta
	flags := d.Byte()
	m.Savepoint = flags&1 != 0
	m.Version = d.U64()
	m.MaxParallelism = d.Count(statetable.MaxParallelismLimit + 1)
	m.KeyGroups.First = d.Count(m.MaxParallelism)
	m.KeyGroups.Last = d.Count(m.MaxParallelism+1) - 1
	n := d.Count(len(b))
	for range n {
		var s statetable.StateInfo
		s.Name = d.String()
		s.Kind = statetable.Kind(d.Byte())
		nc := d.Count(len(b))
		for range nc {
			s.Codec = append(s.Codec, d.String())
		}
		if version >= 2 {
			flags := d.Byte()
			if flags&^stateTTL != 0 && d.Err == nil {
				d.Fail("state %q: unknown flags %#x", s.Name, flags)
			}
			s.TTL = flags&stateTTL != 0
		}
		m.States = append(m.States, s)
	}
	n = d.Count(len(b))
	for range n {
		var t TimerServiceInfo
		t.Name = d.String()
		t.Codecs[0] = d.String()
		t.Codecs[1] = d.String()
		m.Timers = append(m.Timers, t)
	}
	if d.Err == nil && d.Off != len(b) {
		d.Fail("%d bytes left over", len(b)-d.Off)
	}
	if d.Err == nil && (m.MaxParallelism < 1 || m.KeyGroups.Last < m.KeyGroups.First-1) {
		d.Fail("max parallelism %d, key groups %v", m.MaxParallelism, m.KeyGroups)
	}
	return m, d.Err
}

// AppendMeta appends the binary encoding of m (states and timer services
// sorted by name), as the snapshot header holds it; the delta format
// shares it.
func AppendMeta(dst []byte, m Meta) []byte {
	m.States = slices.Clone(m.States)
	m.Timers = slices.Clone(m.Timers)
	m.normalize()
	return m.append(dst)
}

// DecodeMeta decodes what AppendMeta encoded; errors match ErrCorrupt.
func DecodeMeta(b []byte) (Meta, error) { return decodeMeta(b, FormatVersion) }

// DecodeMetaVersion decodes metadata as a file of the given format version
// holds it (1 or 2; the delta format's versions carry the metadata of the
// snapshot format's version of the same number). Errors match ErrCorrupt.
func DecodeMetaVersion(b []byte, version uint16) (Meta, error) {
	if version < MinFormatVersion || version > FormatVersion {
		return Meta{}, fmt.Errorf("%w: metadata of format version %d, want %d to %d", ErrCorrupt, version, MinFormatVersion, FormatVersion)
	}
	return decodeMeta(b, version)
}
