package window

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// modelWindows returns, in arbitrary precision, every window [s, s+size)
// with s = offset mod slide that holds ts, by ascending start, and whether
// all of them fit in int64.
func modelWindows(ts, size, slide, offset int64) ([]TimeWindow, bool) {
	var ws []TimeWindow
	ok := true
	bs, bsize, bslide, bts := bigStart(ts, offset, slide), big.NewInt(size), big.NewInt(slide), big.NewInt(ts)
	for s := bs; ; s = new(big.Int).Sub(s, bslide) {
		e := new(big.Int).Add(s, bsize)
		if e.Cmp(bts) <= 0 { // s + size <= ts: this and earlier starts do not hold ts
			break
		}
		if !fits(s) || !fits(e) {
			ok = false
			continue
		}
		ws = append(ws, TimeWindow{s.Int64(), e.Int64()})
	}
	slices.Reverse(ws)
	return ws, ok
}

func TestTumbling_Assign(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ts := edgy(t, "ts")
		size := rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "size")
		offset := rapid.Int64Range(-(size-1), size-1).Draw(t, "offset")
		a := Tumbling{Size: size, Offset: offset}
		want, ok := modelWindows(ts, size, size, offset)
		got, err := a.Assign(ts)
		if !ok {
			if !errors.Is(err, ErrRange) {
				t.Fatalf("%+v.Assign(%d) = %v, %v; want ErrRange", a, ts, got, err)
			}
			return
		}
		if err != nil || len(want) != 1 || got != want[0] {
			t.Fatalf("%+v.Assign(%d) = %v, %v; want %v", a, ts, got, err, want)
		}
		if ws, err := a.AppendWindows(nil, ts); err != nil || !slices.Equal(ws, want) {
			t.Fatalf("AppendWindows: %v, %v", ws, err)
		}
	})
}

func TestSliding_AppendWindows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ts := edgy(t, "ts")
		slide := rapid.OneOf(rapid.Int64Range(1, 50), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "slide")
		// Sizes a small multiple of the slide or so, and above it.
		size := rapid.OneOf(
			rapid.Int64Range(1, min(slide, math.MaxInt64/20)*20),
			rapid.Int64Range(1, math.MaxInt64),
		).Draw(t, "size")
		if size/slide >= 64 {
			size = slide * 64 // keep the model's enumeration short
		}
		offset := rapid.Int64Range(-(slide-1), slide-1).Draw(t, "offset")
		a := Sliding{Size: size, Slide: slide, Offset: offset}
		want, ok := modelWindows(ts, size, slide, offset)
		prefix := []TimeWindow{{1, 2}}
		got, err := a.AppendWindows(slices.Clone(prefix), ts)
		if !ok {
			if !errors.Is(err, ErrRange) || !slices.Equal(got, prefix) {
				t.Fatalf("%+v.AppendWindows(%d) = %v, %v; want ErrRange and the prefix", a, ts, got, err)
			}
			return
		}
		if err != nil || !slices.Equal(got[1:], want) || got[0] != prefix[0] {
			t.Fatalf("%+v.AppendWindows(%d) = %v, %v; want %v", a, ts, got, err, want)
		}
		for _, w := range got[1:] {
			if !w.Contains(ts) {
				t.Fatalf("%v does not hold %d", w, ts)
			}
		}
	})
}

func TestSliding_Examples(t *testing.T) {
	got, err := Sliding{Size: 10, Slide: 5}.AppendWindows(nil, 12)
	if want := []TimeWindow{{5, 15}, {10, 20}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("size 10 slide 5 at 12: %v, %v; want %v", got, err, want)
	}
	got, err = Sliding{Size: 10, Slide: 5, Offset: -3}.AppendWindows(nil, -1)
	if want := []TimeWindow{{-8, 2}, {-3, 7}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("offset -3 at -1: %v, %v; want %v", got, err, want)
	}
	got, err = Sliding{Size: 3, Slide: 10}.AppendWindows(nil, 5) // in a gap
	if err != nil || len(got) != 0 {
		t.Errorf("between windows: %v, %v", got, err)
	}
}

func TestSession_Assign(t *testing.T) {
	if w, err := (Session{Gap: 30}).Assign(-100); err != nil || w != (TimeWindow{-100, -70}) {
		t.Errorf("session at -100: %v, %v", w, err)
	}
	if _, err := (Session{Gap: 30}).Assign(math.MaxInt64 - 29); !errors.Is(err, ErrRange) {
		t.Errorf("session ending past MaxInt64: %v", err)
	}
	if w, err := (Session{Gap: 30}).Assign(math.MaxInt64 - 30); err != nil || w.End != math.MaxInt64 {
		t.Errorf("session ending at MaxInt64: %v, %v", w, err)
	}
}

func TestAssigners_Invalid(t *testing.T) {
	for _, a := range []Assigner{
		Tumbling{}, Tumbling{Size: -1}, Tumbling{Size: 10, Offset: 10}, Tumbling{Size: 10, Offset: -10},
		Tumbling{Size: 10, Offset: math.MinInt64},
		Sliding{Size: 10}, Sliding{Slide: 10}, Sliding{Size: 10, Slide: 5, Offset: 5},
		Sliding{Size: 1 << 40, Slide: 1}, Sliding{Size: math.MaxInt64, Slide: 1},
		Session{}, Session{Gap: -5},
	} {
		got, err := a.AppendWindows(nil, 0)
		if !errors.Is(err, ErrInvalid) || len(got) != 0 {
			t.Errorf("%T%+v: %v, %v; want ErrInvalid", a, a, got, err)
		}
	}
	if _, err := (Sliding{Size: MaxSlidingWindows, Slide: 1}).AppendWindows(nil, 0); err != nil {
		t.Errorf("MaxSlidingWindows windows: %v", err)
	}
}
