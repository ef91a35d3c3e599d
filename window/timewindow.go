package window

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cowstate/cowstate/statetable"
)

// TimeWindow is the half-open interval of event time [Start, End), in the
// unit of the job's timestamps (milliseconds, as in Flink). It is a value:
// compare windows with ==.
type TimeWindow struct {
	Start, End int64
}

// MaxTimestamp returns the largest timestamp in the window, End-1: the
// instant its end-of-window timer fires at (see RegisterEnd).
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

// Contains reports whether ts is in the window.
func (w TimeWindow) Contains(ts int64) bool { return w.Start <= ts && ts < w.End }

// Intersects reports whether the windows overlap or touch: as Flink's
// TimeWindow.intersects, [0, 10) and [10, 20) intersect, so session
// windows one gap apart merge.
func (w TimeWindow) Intersects(o TimeWindow) bool { return w.Start <= o.End && o.Start <= w.End }

// Cover returns the smallest window that holds both.
func (w TimeWindow) Cover(o TimeWindow) TimeWindow {
	return TimeWindow{min(w.Start, o.Start), max(w.End, o.End)}
}

// String formats the window as [Start, End).
func (w TimeWindow) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// Codec encodes a TimeWindow in 16 bytes: Start then End, each big-endian
// with the sign bit flipped, so byte order is the windows' order (by start,
// then end). An int64 or a short string key with a window namespace is a
// composite key of at most 31 bytes, which the state table holds inline
// (no pointer, no allocation per entry). Every TimeWindow round-trips; an
// encoding of another length is an error wrapping statetable.ErrDecode.
var Codec statetable.Codec[TimeWindow] = windowCodec{}

// StateCodec returns Codec: a TimeWindow is a statetable.CodecProvider, so
// statetable.CodecFor (and cowstate.CodecFor) infer it.
func (TimeWindow) StateCodec() statetable.Codec[TimeWindow] { return Codec }

// EncodedLen is the length of a window's encoding.
const EncodedLen = 16

type windowCodec struct{}

func (windowCodec) ID() string { return "timewindow/v1" }

func (windowCodec) Append(dst []byte, w TimeWindow) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start)^signBit)
	return binary.BigEndian.AppendUint64(dst, uint64(w.End)^signBit)
}

func (windowCodec) Decode(src []byte) (TimeWindow, error) {
	if len(src) != EncodedLen {
		return TimeWindow{}, fmt.Errorf("%w time window: got %d bytes; want %d", statetable.ErrDecode, len(src), EncodedLen)
	}
	return TimeWindow{
		Start: int64(binary.BigEndian.Uint64(src) ^ signBit),
		End:   int64(binary.BigEndian.Uint64(src[8:]) ^ signBit),
	}, nil
}

const signBit = 1 << 63

// StartWithOffset returns the start of the window of size size, aligned to
// offset (windows start at offset + k*size for integers k), that holds ts:
// the largest such start at or below ts, for negative timestamps too (it
// rounds towards minus infinity, as Flink's
// TimeWindow.getWindowStartWithOffset). size must be positive; any offset
// is taken modulo size. The start is below the smallest int64 for some ts
// near it: an error matching ErrRange.
func StartWithOffset(ts, offset, size int64) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("%w: window size %d: must be positive", ErrInvalid, size)
	}
	r := sinceStart(ts, offset, size)
	if fromMin(ts) < uint64(r) {
		return 0, fmt.Errorf("%w: timestamp %d: its window of size %d and offset %d starts %d before it, below the smallest int64",
			ErrRange, ts, size, offset, r)
	}
	return ts - r, nil
}

// sinceStart returns how far ts is past the start of its window:
// (ts - offset) mod size, in [0, size), for size > 0. Each remainder is in
// [0, size), so no sum or difference overflows.
func sinceStart(ts, offset, size int64) int64 {
	r := mod(ts, size) - mod(offset, size)
	if r < 0 {
		r += size
	}
	return r
}

// mod returns a mod m in [0, m), for m > 0.
func mod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// fromMin returns ts - MinInt64 as a uint64: how far ts is above the
// smallest int64.
func fromMin(ts int64) uint64 { return uint64(ts) ^ signBit }

// end returns start+size, or an ErrRange error if it overflows.
func end(start, size, ts int64) (int64, error) {
	if start > math.MaxInt64-size {
		return 0, fmt.Errorf("%w: timestamp %d: its window starting at %d with size %d ends past the largest int64",
			ErrRange, ts, start, size)
	}
	return start + size, nil
}
