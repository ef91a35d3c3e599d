package savepoint

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Value is one encoded value, list element or map value, with its
// expiration timestamp in a state with a TTL (milliseconds of the
// writer's processing-time clock; 0 and meaningless without a TTL).
type Value struct {
	Bytes   []byte
	Expires int64
}

// MapEntry is one user key and value of a map state's cell.
type MapEntry struct {
	Key   []byte
	Value Value
}

// Entry is one (key, namespace) entry of a state, at the level of encoded
// bytes: Key and Namespace are the key and namespace codecs' encodings,
// and the cell is Value (value, reducing and aggregating states), List
// (list state) or Map (map state), in the file's order (a map's entries in
// the hash order of their user keys).
type Entry struct {
	State     string
	KeyGroup  int // of Key, for the file's max parallelism
	Key       []byte
	Namespace []byte
	Value     Value
	List      []Value
	Map       []MapEntry
}

// Timer is one timer of a timer service.
type Timer struct {
	Service   string
	Domain    timerqueue.Domain
	KeyGroup  int // of Key, for the file's max parallelism
	Timestamp int64
	Key       []byte
	Namespace []byte
}

// valueCodec returns the index, in a state's codec IDs, of the codec of
// its values, list elements or map values.
func valueCodec(k statetable.Kind) int {
	if k == statetable.KindMap {
		return 3
	}
	return 2
}

// codecCount is the number of codec IDs a state of kind k has.
func codecCount(k statetable.Kind) int { return valueCodec(k) + 1 }

// parseCell fills e's cell from its encoding in a state info describes
// (snapshot/doc.go, "Cells"). The slices alias cell.
func (e *Entry) parseCell(info statetable.StateInfo, cell []byte) error {
	stamped := func(b []byte) (Value, error) {
		if !info.TTL {
			return Value{Bytes: b}, nil
		}
		if len(b) < 8 {
			return Value{}, fmt.Errorf("a value of %d bytes has no expiration timestamp (8 bytes)", len(b))
		}
		return Value{Bytes: b[8:], Expires: int64(binary.BigEndian.Uint64(b))}, nil
	}
	switch info.Kind {
	case statetable.KindValue, statetable.KindReducing, statetable.KindAggregating:
		v, err := stamped(cell)
		e.Value = v
		return err
	case statetable.KindList, statetable.KindMap:
		per := 1
		if info.Kind == statetable.KindMap {
			per = 2
		}
		n, k := binary.Uvarint(cell)
		if k <= 0 || n == 0 || n > uint64(len(cell)-k)/uint64(per) {
			return fmt.Errorf("%s cell of %d bytes: bad element count", info.Kind, len(cell))
		}
		off := k
		for i := range int(n) {
			var kb, vb []byte
			var err error
			if per == 2 {
				if kb, off, err = blob(cell, off); err != nil {
					return fmt.Errorf("map entry %d of %d: %v", i, n, err)
				}
			}
			if vb, off, err = blob(cell, off); err != nil {
				return fmt.Errorf("%s element %d of %d: %v", info.Kind, i, n, err)
			}
			v, err := stamped(vb)
			if err != nil {
				return fmt.Errorf("%s element %d of %d: %v", info.Kind, i, n, err)
			}
			if per == 2 {
				e.Map = append(e.Map, MapEntry{Key: kb, Value: v})
			} else {
				e.List = append(e.List, v)
			}
		}
		if off != len(cell) {
			return fmt.Errorf("%s cell: %d bytes left over", info.Kind, len(cell)-off)
		}
		return nil
	}
	return fmt.Errorf("unknown state kind %v", info.Kind)
}

// appendCell appends the canonical encoding of e's cell in a state info
// describes, and reports false for a list or map with no element (no
// entry at all, as a backend writes it). A map's entries are sorted into
// the hash order of their user keys; a user key twice is an error
// matching ErrDuplicate.
func (e *Entry) appendCell(dst []byte, info statetable.StateInfo) ([]byte, bool, error) {
	value := func(dst []byte, v Value) []byte {
		if info.TTL {
			dst = binary.BigEndian.AppendUint64(dst, uint64(v.Expires))
		}
		return append(dst, v.Bytes...)
	}
	blobOf := func(dst []byte, v Value) []byte {
		n := len(v.Bytes)
		if info.TTL {
			n += 8
		}
		return value(binary.AppendUvarint(dst, uint64(n)), v)
	}
	switch info.Kind {
	case statetable.KindValue, statetable.KindReducing, statetable.KindAggregating:
		return value(dst, e.Value), true, nil
	case statetable.KindList:
		if len(e.List) == 0 {
			return dst, false, nil
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.List)))
		for _, v := range e.List {
			dst = blobOf(dst, v)
		}
		return dst, true, nil
	case statetable.KindMap:
		if len(e.Map) == 0 {
			return dst, false, nil
		}
		type hashed struct {
			h uint64
			e MapEntry
		}
		hs := make([]hashed, len(e.Map))
		for i, m := range e.Map {
			hs[i] = hashed{xxhash.Sum64(m.Key), m}
		}
		slices.SortFunc(hs, func(a, b hashed) int {
			if c := cmp.Compare(a.h, b.h); c != 0 {
				return c
			}
			return bytes.Compare(a.e.Key, b.e.Key)
		})
		dst = binary.AppendUvarint(dst, uint64(len(hs)))
		for i, h := range hs {
			if i > 0 && bytes.Equal(hs[i-1].e.Key, h.e.Key) {
				return nil, false, fmt.Errorf("%w: state %q, key %x: map user key %x twice", ErrDuplicate, info.Name, e.Key, h.e.Key)
			}
			dst = binary.AppendUvarint(dst, uint64(len(h.e.Key)))
			dst = append(dst, h.e.Key...)
			dst = blobOf(dst, h.e.Value)
		}
		return dst, true, nil
	}
	return nil, false, fmt.Errorf("%w: state %q: unknown kind %v", statetable.ErrConfig, info.Name, info.Kind)
}

// values calls f for every value of e's cell in a state of kind k (the
// value, each element, each map value) with a pointer it may replace the
// value through.
func (e *Entry) values(k statetable.Kind, f func(*Value) error) error {
	switch k {
	case statetable.KindList:
		for i := range e.List {
			if err := f(&e.List[i]); err != nil {
				return err
			}
		}
	case statetable.KindMap:
		for i := range e.Map {
			if err := f(&e.Map[i].Value); err != nil {
				return err
			}
		}
	default:
		return f(&e.Value)
	}
	return nil
}
