package statetable

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

type userID string
type shard uint16

// roundTrip checks that c is the codec want names (by ID) and that v
// encodes and decodes back to itself.
func roundTrip[T comparable](t *testing.T, v T, wantID string) {
	t.Helper()
	c, err := CodecFor[T]()
	if err != nil {
		t.Fatalf("CodecFor[%T]: %v", v, err)
	}
	if c.ID() != wantID {
		t.Errorf("CodecFor[%T]: ID %q, want %q", v, c.ID(), wantID)
	}
	got, err := c.Decode(c.Append(nil, v))
	if err != nil || got != v {
		t.Errorf("CodecFor[%T]: %v round-trips to %v, %v", v, v, got, err)
	}
}

func TestCodecFor_InfersTheCommonTypes(t *testing.T) {
	roundTrip(t, "alice", String.ID())
	roundTrip(t, true, Bool.ID())
	roundTrip(t, 2.5, Float64.ID())
	roundTrip(t, int64(-7), Int64.ID())
	roundTrip(t, -7, Int.ID())
	roundTrip(t, int8(-7), Signed[int8]().ID())
	roundTrip(t, int16(-7), Signed[int16]().ID())
	roundTrip(t, int32(-7), Int32.ID())
	roundTrip(t, uint(7), Unsigned[uint]().ID())
	roundTrip(t, uint8(7), Unsigned[uint8]().ID())
	roundTrip(t, uint32(7), Uint32.ID())
	roundTrip(t, uint64(7), Uint64.ID())
	roundTrip(t, 3*time.Second, Int64.ID())
	roundTrip(t, VoidNamespace{}, Void.ID())
	roundTrip(t, userID("bob"), String.ID())
	roundTrip(t, shard(9), Unsigned[uint16]().ID())
	roundTrip(t, time.Unix(1700000000, 123).UTC(), TimeCodec.ID())

	c, err := CodecFor[[]byte]()
	if err != nil || c.ID() != Bytes.ID() {
		t.Fatalf("CodecFor[[]byte]: %v, %v", c, err)
	}
}

// A named integer type keeps the inline fast path of integer keys.
func TestCodecFor_NamedIntegerIsFixedWidth(t *testing.T) {
	type accountID int64
	c, err := CodecFor[accountID]()
	if err != nil {
		t.Fatal(err)
	}
	if f := fixedOf(c); f != fixedOf(Int64) {
		t.Errorf("fixedOf(CodecFor[accountID]) = %+v, want %+v", f, fixedOf(Int64))
	}
	// The same bytes as the int64 codec: a state may switch between them.
	if got, want := string(c.Append(nil, -3)), string(Int64.Append(nil, -3)); got != want {
		t.Errorf("encoding %x, want %x", got, want)
	}
}

func TestCodecFor_TimeIsOrderedAndLocationFree(t *testing.T) {
	c, _ := CodecFor[time.Time]()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("x", 3600))
	if string(c.Append(nil, t0)) != string(c.Append(nil, t0.UTC())) {
		t.Error("the same instant in two locations encodes differently")
	}
	early, late := c.Append(nil, time.Unix(-5, 0)), c.Append(nil, time.Unix(5, 0))
	if string(early) >= string(late) {
		t.Error("byte order is not time order")
	}
	if _, err := c.Decode([]byte{1, 2, 3}); !errors.Is(err, ErrDecode) {
		t.Errorf("decoding 3 bytes: %v, want ErrDecode", err)
	}
}

type celsius struct{ v float64 }

func (celsius) StateCodec() Codec[celsius] {
	return FuncCodec("celsius", func(dst []byte, c celsius) []byte { return Float64.Append(dst, c.v) },
		func(src []byte) (celsius, error) { v, err := Float64.Decode(src); return celsius{v}, err })
}

func TestCodecFor_UsesAProvidersCodec(t *testing.T) {
	roundTrip(t, celsius{21.5}, "celsius")
}

// A struct of fields that have codecs gets Struct, which evolves with the
// struct's declaration.
func TestCodecFor_StructsByFieldName(t *testing.T) {
	type point struct{ X, Y int }
	c, err := CodecFor[point]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(Evolving[point]); !ok || c.ID() != "struct{X int64;Y int64}" {
		t.Fatalf("CodecFor[point] = %T %s, want Struct", c, c.ID())
	}
	if got, err := c.Decode(c.Append(nil, point{3, -4})); err != nil || got != (point{3, -4}) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
}

func TestCodecFor_OtherTypesAreAnErrorNamingThem(t *testing.T) {
	type withMap struct{ M map[string]int }
	_, err := CodecFor[withMap]()
	if !errors.Is(err, ErrNoCodec) || !errors.Is(err, ErrConfig) {
		t.Fatalf("CodecFor[withMap]: %v, want ErrNoCodec and ErrConfig", err)
	}
	if want := "statetable.withMap.M"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	for name, f := range map[string]func() error{
		"chan":  func() error { _, err := CodecFor[chan int](); return err },
		"map":   func() error { _, err := CodecFor[map[string]int](); return err },
		"slice": func() error { _, err := CodecFor[[]int](); return err },
		"any":   func() error { _, err := CodecFor[any](); return err },
	} {
		if err := f(); !errors.Is(err, ErrNoCodec) {
			t.Errorf("CodecFor[%s]: %v, want ErrNoCodec", name, err)
		}
	}
}

type digest [16]byte

// A byte array (a UUID, a digest) encodes as its bytes, under an ID that
// names its length, so that the byte order of encodings is the arrays'
// order; a named array type gets the same codec.
func TestCodecFor_ByteArraysAsTheirBytes(t *testing.T) {
	d := digest{0: 0xff, 7: 1, 15: 0x80}
	roundTrip(t, d, "bytes[16]")
	roundTrip(t, [16]byte(d), "bytes[16]")
	roundTrip(t, [4]byte{1, 2, 3, 4}, "bytes[4]")
	roundTrip(t, [0]byte{}, "bytes[0]")

	c := must[Codec[digest]](t)(CodecFor[digest]())
	if got := c.Append([]byte("prefix"), d); string(got) != "prefix"+string(d[:]) {
		t.Fatalf("Append = %x, want the prefix and the array's bytes", got)
	}
	lo, hi := digest{0: 1, 15: 0xff}, digest{0: 2}
	if bytes.Compare(c.Append(nil, lo), c.Append(nil, hi)) >= 0 {
		t.Error("encodings are not in the arrays' byte order")
	}
	for _, n := range []int{0, 15, 17} {
		_, err := c.Decode(make([]byte, n))
		if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "bytes[16]") || !strings.Contains(err.Error(), "want 16") {
			t.Errorf("Decode of %d bytes: %v, want ErrDecode naming bytes[16] and its length", n, err)
		}
	}
}

// A named type's codec reads and writes the value where it lies: Append
// into room the buffer has allocates nothing, nor does Decode but for a
// string's own bytes (a job keyed by type UserID string encodes a key an
// event).
func TestCodecFor_NamedTypesDoNotAllocate(t *testing.T) {
	type (
		name  string
		flag  bool
		score float64
		count int
		size  uint
		small int16
	)
	noAllocs(t, name("alice"), true)
	noAllocs(t, flag(true), false)
	noAllocs(t, score(2.5), false)
	noAllocs(t, count(-3), false)
	noAllocs(t, size(3), false)
	noAllocs(t, small(-3), false)
	noAllocs(t, digest{1, 2, 3}, false)
}

func noAllocs[T comparable](t *testing.T, v T, decodeAllocates bool) {
	t.Helper()
	c := must[Codec[T]](t)(CodecFor[T]())
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = c.Append(buf[:0], v) }); n != 0 {
		t.Errorf("%T: Append allocates %v times", v, n)
	}
	enc := c.Append(nil, v)
	var got T
	n := testing.AllocsPerRun(100, func() { got, _ = c.Decode(enc) })
	if got != v {
		t.Errorf("%T: decoded %v, want %v", v, got, v)
	}
	if want := map[bool]float64{false: 0, true: 1}[decodeAllocates]; n != want {
		t.Errorf("%T: Decode allocates %v times, want %v", v, n, want)
	}
}
