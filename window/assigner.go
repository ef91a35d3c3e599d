package window

import (
	"fmt"
	"math"
)

// Assigner puts an element's event timestamp into windows, as Flink's
// WindowAssigner does for event time. AppendWindows appends the windows
// that hold ts to dst, by ascending start, and returns the extended slice;
// a configuration that cannot assign is an ErrInvalid, a timestamp whose
// windows do not fit in int64 an ErrRange, and then dst is returned as
// given. Assigners are values with no state: any goroutine.
type Assigner interface {
	AppendWindows(dst []TimeWindow, ts int64) ([]TimeWindow, error)
}

var (
	_ Assigner = Tumbling{}
	_ Assigner = Sliding{}
	_ Assigner = Session{}
)

// Tumbling assigns each timestamp to exactly one window of Size, the
// windows aligned to Offset: they start at Offset + k*Size (Flink's
// TumblingEventTimeWindows.of(size, offset)). Size must be positive and
// -Size < Offset < Size; Offset shifts the windows, as a time zone does:
// with one-day windows on UTC milliseconds, Offset -8h gives days of
// UTC+8.
type Tumbling struct {
	Size, Offset int64
}

// Assign returns the window that holds ts. O(1), no allocation.
func (a Tumbling) Assign(ts int64) (TimeWindow, error) {
	if a.Size <= 0 || a.Offset <= -a.Size || a.Offset >= a.Size {
		return TimeWindow{}, fmt.Errorf("%w: tumbling windows of size %d and offset %d: the size must be positive and the offset within (-size, size)",
			ErrInvalid, a.Size, a.Offset)
	}
	start, err := StartWithOffset(ts, a.Offset, a.Size)
	if err != nil {
		return TimeWindow{}, err
	}
	e, err := end(start, a.Size, ts)
	if err != nil {
		return TimeWindow{}, err
	}
	return TimeWindow{start, e}, nil
}

// AppendWindows appends the one window that holds ts.
func (a Tumbling) AppendWindows(dst []TimeWindow, ts int64) ([]TimeWindow, error) {
	w, err := a.Assign(ts)
	if err != nil {
		return dst, err
	}
	return append(dst, w), nil
}

// MaxSlidingWindows bounds the windows a Sliding assigner puts one element
// in (Size/Slide, rounded up): each costs the element a state write and a
// timer, and a slide given in the wrong unit would otherwise ask for
// millions of them.
const MaxSlidingWindows = 1 << 16

// Sliding assigns each timestamp to the windows of Size that start every
// Slide, aligned to Offset: windows [s, s+Size) for s = Offset + k*Slide
// (Flink's SlidingEventTimeWindows.of(size, slide, offset)). A timestamp
// is in Size/Slide of them (rounded up or down by where it falls); with
// Slide > Size, timestamps between windows are in none. Size and Slide
// must be positive, -Slide < Offset < Slide, and Size/Slide at most
// MaxSlidingWindows.
type Sliding struct {
	Size, Slide, Offset int64
}

func (a Sliding) check() error {
	if a.Size <= 0 || a.Slide <= 0 || a.Offset <= -a.Slide || a.Offset >= a.Slide {
		return fmt.Errorf("%w: sliding windows of size %d, slide %d and offset %d: size and slide must be positive and the offset within (-slide, slide)",
			ErrInvalid, a.Size, a.Slide, a.Offset)
	}
	if n := (uint64(a.Size) + uint64(a.Slide) - 1) / uint64(a.Slide); n > MaxSlidingWindows {
		return fmt.Errorf("%w: sliding windows of size %d and slide %d: an element would be in %d windows, more than %d",
			ErrInvalid, a.Size, a.Slide, n, MaxSlidingWindows)
	}
	return nil
}

// AppendWindows appends the windows that hold ts, by ascending start.
// O(Size/Slide).
func (a Sliding) AppendWindows(dst []TimeWindow, ts int64) ([]TimeWindow, error) {
	if err := a.check(); err != nil {
		return dst, err
	}
	// The windows holding ts start at last - k*Slide for k >= 0 while the
	// start is above ts - Size: ts-start < Size. In uint64 nothing here
	// overflows: d < Slide and k*Slide < Size.
	d := uint64(sinceStart(ts, a.Offset, a.Slide))
	size, slide := uint64(a.Size), uint64(a.Slide)
	if d >= size {
		return dst, nil // between windows (Slide > Size)
	}
	last, err := StartWithOffset(ts, a.Offset, a.Slide)
	if err != nil {
		return dst, err
	}
	n := (size - d + slide - 1) / slide
	first := (n - 1) * slide // how far the first window starts below last
	if fromMin(last) < first {
		return dst, fmt.Errorf("%w: timestamp %d: its earliest sliding window starts %d before %d, below the smallest int64",
			ErrRange, ts, first, last)
	}
	if last > math.MaxInt64-a.Size {
		return dst, fmt.Errorf("%w: timestamp %d: its latest sliding window starting at %d with size %d ends past the largest int64",
			ErrRange, ts, last, a.Size)
	}
	for k := n; k > 0; k-- {
		s := last - int64((k-1)*slide)
		dst = append(dst, TimeWindow{s, s + a.Size})
	}
	return dst, nil
}

// Session assigns each timestamp ts the window [ts, ts+Gap), to be merged
// with the key's windows it intersects (see Sessions): a session closes
// after Gap without an element (Flink's EventTimeSessionWindows.withGap).
// Gap must be positive.
type Session struct {
	Gap int64
}

// Assign returns [ts, ts+Gap). O(1).
func (a Session) Assign(ts int64) (TimeWindow, error) {
	if a.Gap <= 0 {
		return TimeWindow{}, fmt.Errorf("%w: session gap %d: must be positive", ErrInvalid, a.Gap)
	}
	e, err := end(ts, a.Gap, ts)
	if err != nil {
		return TimeWindow{}, err
	}
	return TimeWindow{ts, e}, nil
}

// AppendWindows appends [ts, ts+Gap).
func (a Session) AppendWindows(dst []TimeWindow, ts int64) ([]TimeWindow, error) {
	w, err := a.Assign(ts)
	if err != nil {
		return dst, err
	}
	return append(dst, w), nil
}
