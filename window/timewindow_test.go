package window

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/cowstate/cowstate/statetable"
	"pgregory.net/rapid"
)

// edgy draws timestamps that are often near the ends of int64 and near 0.
func edgy(t *rapid.T, label string) int64 {
	return rapid.OneOf(
		rapid.Int64(),
		rapid.Int64Range(-1000, 1000),
		rapid.Int64Range(math.MinInt64, math.MinInt64+1000),
		rapid.Int64Range(math.MaxInt64-1000, math.MaxInt64),
	).Draw(t, label)
}

func TestCodec_RoundTripAndOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := TimeWindow{edgy(t, "a.start"), edgy(t, "a.end")}
		b := TimeWindow{edgy(t, "b.start"), edgy(t, "b.end")}
		ea, eb := Codec.Append(nil, a), Codec.Append([]byte("prefix"), b)[6:]
		if len(ea) != EncodedLen {
			t.Fatalf("encoding of %v is %d bytes", a, len(ea))
		}
		got, err := Codec.Decode(ea)
		if err != nil || got != a {
			t.Fatalf("decode(encode(%v)) = %v, %v", a, got, err)
		}
		want := 0
		switch {
		case a.Start < b.Start || a.Start == b.Start && a.End < b.End:
			want = -1
		case a != b:
			want = 1
		}
		if c := bytes.Compare(ea, eb); c != want {
			t.Fatalf("byte order of %v and %v is %d, want %d", a, b, c, want)
		}
	})
}

func TestCodec_BadInput(t *testing.T) {
	for _, n := range []int{0, 1, 15, 17, 32} {
		_, err := Codec.Decode(make([]byte, n))
		if !errors.Is(err, statetable.ErrDecode) {
			t.Errorf("decode of %d bytes: %v, want ErrDecode", n, err)
		}
	}
}

// bigStart is the model of StartWithOffset: the largest s <= ts with
// s = offset mod size, in arbitrary precision.
func bigStart(ts, offset, size int64) *big.Int {
	r := new(big.Int).Sub(big.NewInt(ts), big.NewInt(offset))
	r.Mod(r, big.NewInt(size)) // Euclidean: in [0, size)
	return r.Sub(big.NewInt(ts), r)
}

var minInt, maxInt = big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)

func fits(x *big.Int) bool { return x.Cmp(minInt) >= 0 && x.Cmp(maxInt) <= 0 }

func TestStartWithOffset(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ts, offset := edgy(t, "ts"), edgy(t, "offset")
		size := rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, math.MaxInt64)).Draw(t, "size")
		want := bigStart(ts, offset, size)
		got, err := StartWithOffset(ts, offset, size)
		if !fits(want) {
			if !errors.Is(err, ErrRange) {
				t.Fatalf("StartWithOffset(%d, %d, %d) = %d, %v; want ErrRange (start %v)", ts, offset, size, got, err, want)
			}
			return
		}
		if err != nil || got != want.Int64() {
			t.Fatalf("StartWithOffset(%d, %d, %d) = %d, %v; want %v", ts, offset, size, got, err, want)
		}
	})
	for _, size := range []int64{0, -1, math.MinInt64} {
		if _, err := StartWithOffset(5, 0, size); !errors.Is(err, ErrInvalid) {
			t.Errorf("size %d: %v, want ErrInvalid", size, err)
		}
	}
}

func TestTimeWindow_Methods(t *testing.T) {
	w := TimeWindow{0, 10}
	if w.MaxTimestamp() != 9 || !w.Contains(0) || !w.Contains(9) || w.Contains(10) || w.Contains(-1) {
		t.Errorf("%v: MaxTimestamp %d, Contains wrong", w, w.MaxTimestamp())
	}
	for _, c := range []struct {
		o    TimeWindow
		want bool
	}{{TimeWindow{10, 20}, true}, {TimeWindow{11, 20}, false}, {TimeWindow{-5, 0}, true}, {TimeWindow{-5, -1}, false}, {TimeWindow{2, 3}, true}} {
		if w.Intersects(c.o) != c.want || c.o.Intersects(w) != c.want {
			t.Errorf("%v intersects %v: want %v", w, c.o, c.want)
		}
	}
	if got := w.Cover(TimeWindow{-5, 3}); got != (TimeWindow{-5, 10}) {
		t.Errorf("cover: %v", got)
	}
	if w.String() != "[0, 10)" {
		t.Errorf("String: %q", w.String())
	}
}

func TestTimeWindow_CodecIsInferred(t *testing.T) {
	c, err := statetable.CodecFor[TimeWindow]()
	if err != nil || c.ID() != Codec.ID() {
		t.Fatalf("statetable.CodecFor[TimeWindow] = %v, %v; want %s", c, err, Codec.ID())
	}
}
