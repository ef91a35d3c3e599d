package statetable

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

type profileV1 struct {
	Seen   time.Time
	Name   string
	Visits int32
	Score  float32
	Admin  bool
	Addr   struct{ City, Zip string }
	Tags   []byte
	secret int // unexported: not stored
}

// profileV2 is profileV1 a release later: Visits widened, Score made
// float64, Admin removed, Plan added, Addr's Zip removed and Country added.
type profileV2 struct {
	Seen   time.Time
	Plan   string
	Name   string
	Visits int64
	Score  float64
	Addr   struct{ City, Country string }
	Tags   []byte
}

func TestStruct_RoundTrip(t *testing.T) {
	c, err := Struct[profileV1]()
	if err != nil {
		t.Fatal(err)
	}
	if want := "struct{Seen time;Name string;Visits int32;Score float32;Admin bool;Addr {City string;Zip string};Tags bytes}"; c.ID() != want {
		t.Fatalf("ID %s, want %s", c.ID(), want)
	}
	v := profileV1{Seen: time.Unix(1700000000, 123).UTC(), Name: "ann", Visits: -7, Score: 1.5, Admin: true, Tags: []byte{1, 2}, secret: 9}
	v.Addr.City, v.Addr.Zip = "Oslo", "0150"
	got, err := c.Decode(c.Append(nil, v))
	v.secret = 0
	if err != nil || !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, v)
	}
}

// The specification of evolution: fields matched by name, added ones zero,
// removed ones dropped, integers and floats widened.
func TestStruct_ReadsAnEarlierDeclaration(t *testing.T) {
	c1 := ok(Struct[profileV1]())(t)
	c2 := ok(Struct[profileV2]())(t)
	v1 := profileV1{Seen: time.Unix(5, 6).UTC(), Name: "ann", Visits: 1 << 30, Score: 0.25, Admin: true, Tags: []byte("x")}
	v1.Addr.City, v1.Addr.Zip = "Oslo", "0150"
	dec := ok(c2.DecoderFor(c1.ID()))(t)
	got, err := dec(c1.Append(nil, v1))
	if err != nil {
		t.Fatal(err)
	}
	want := profileV2{Seen: time.Unix(5, 6).UTC(), Name: "ann", Visits: 1 << 30, Score: 0.25, Tags: []byte("x")}
	want.Addr.City = "Oslo"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("migrated %+v, want %+v", got, want)
	}
	if same := ok(c2.DecoderFor(c2.ID()))(t); same == nil {
		t.Fatal("no decoder for its own ID")
	}
}

func TestStruct_RefusesWhatItCannotHold(t *testing.T) {
	type narrowed struct{ Visits int16 }
	type retyped struct{ Name int64 }
	type toStruct struct{ Name struct{ First string } }
	type signedToUnsigned struct{ Visits uint64 }
	c1 := ok(Struct[profileV1]())(t)
	for name, dec := range map[string]func() error{
		"narrowed":           func() error { _, err := ok(Struct[narrowed]())(t).DecoderFor(c1.ID()); return err },
		"retyped":            func() error { _, err := ok(Struct[retyped]())(t).DecoderFor(c1.ID()); return err },
		"scalar to struct":   func() error { _, err := ok(Struct[toStruct]())(t).DecoderFor(c1.ID()); return err },
		"signed to unsigned": func() error { _, err := ok(Struct[signedToUnsigned]())(t).DecoderFor(c1.ID()); return err },
		"another codec":      func() error { _, err := ok(Struct[profileV2]())(t).DecoderFor("int64/be-signflip"); return err },
		"a bad schema": func() error {
			_, err := ok(Struct[profileV2]())(t).DecoderFor("struct{Name string;Name string}")
			return err
		},
	} {
		err := dec()
		if !errors.Is(err, ErrIncompatible) || !errors.Is(err, ErrStateMismatch) {
			t.Errorf("%s: %v, want ErrIncompatible", name, err)
		}
	}
	_, err := ok(Struct[retyped]())(t).DecoderFor(c1.ID())
	if !strings.Contains(err.Error(), "field Name: int64 cannot hold its old string values") {
		t.Errorf("the error does not name the field and both types: %v", err)
	}
	type withMutex struct{ Mu struct{ locked int } }
	if _, err := Struct[withMutex](); !errors.Is(err, ErrNoCodec) || !strings.Contains(err.Error(), "Mu") {
		t.Errorf("a field with no exported field: %v, want ErrNoCodec naming it", err)
	}
	type withMap struct{ M map[string]int }
	if _, err := Struct[withMap](); !errors.Is(err, ErrNoCodec) || !strings.Contains(err.Error(), "M") {
		t.Errorf("a map field: %v, want ErrNoCodec naming it", err)
	}
}

// Bad bytes are ErrDecode, never a panic nor a huge allocation, whatever
// the schema reading them.
func TestStruct_BadBytes(t *testing.T) {
	c1 := ok(Struct[profileV1]())(t)
	c2 := ok(Struct[profileV2]())(t)
	dec := ok(c2.DecoderFor(c1.ID()))(t)
	good := c1.Append(nil, profileV1{Name: "ann", Tags: []byte("xyz")})
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := append([]byte(nil), good[:r.IntN(len(good)+1)]...)
		if len(b) > 0 && r.IntN(2) == 0 {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		for _, d := range []func([]byte) error{
			func(b []byte) error { _, err := c1.Decode(b); return err },
			func(b []byte) error { _, err := dec(b); return err },
		} {
			if err := d(b); err != nil && !errors.Is(err, ErrDecode) {
				t.Fatalf("%x: %v, want ErrDecode", b, err)
			}
		}
	}
}

// ok returns v, failing the test on err.
func ok[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// ParseStructSchema reads a Struct codec's ID back into its fields, nested
// structs included; anything else is ErrNoCodec.
func TestParseStructSchema(t *testing.T) {
	c, err := Struct[profileV1]()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseStructSchema(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	want := []StructField{
		{Name: "Seen", Kind: "time"}, {Name: "Name", Kind: "string"}, {Name: "Visits", Kind: "int32"},
		{Name: "Score", Kind: "float32"}, {Name: "Admin", Kind: "bool"},
		{Name: "Addr", Kind: "struct", Fields: []StructField{{Name: "City", Kind: "string"}, {Name: "Zip", Kind: "string"}}},
		{Name: "Tags", Kind: "bytes"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseStructSchema(%s) = %+v, want %+v", c.ID(), got, want)
	}
	for _, id := range []string{"string", "struct{", "struct{A int99}", "struct{A int64;A int64}", "struct{A int64}x"} {
		if _, err := ParseStructSchema(id); !errors.Is(err, ErrNoCodec) {
			t.Errorf("ParseStructSchema(%q): %v, want ErrNoCodec", id, err)
		}
	}
}

// everyKind has a stored field of every kind and size Struct takes, named
// types, unexported fields between them (at offsets the plan skips) and a
// nested struct between fields of the outer one.
type everyKind struct {
	B   bool
	I8  int8
	pad int16
	I16 int16
	I32 int32
	I64 int64
	I   int
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
	U   uint
	F32 float32
	F64 float64
	In  struct {
		S    userName
		hide bool
		N    int32
	}
	S   string
	Bs  []byte
	T   time.Time
	Sum counter
}

type (
	userName string
	counter  uint16
)

// The encoding, field by field, in schema order: a bool as one byte,
// signed integers of every size as varints, unsigned ones as uvarints,
// floats as their big-endian bits, strings and bytes by a uvarint
// length, a time as the varint of its Unix nanoseconds, a nested
// struct's fields in its place; unexported fields are not written.
// Append reads each field at its offset, so a wrong offset, size or sign
// shows here as a wrong byte.
func TestStruct_EncodingOfEveryKind(t *testing.T) {
	c := ok(Struct[everyKind]())(t)
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var v everyKind
		v.B = r.IntN(2) == 1
		v.I8, v.pad, v.I16 = int8(r.Uint64()), int16(r.Uint64()), int16(r.Uint64())
		v.I32, v.I64, v.I = int32(r.Uint64()), int64(r.Uint64()), int(r.Uint64())
		v.U8, v.U16, v.U32, v.U64, v.U = uint8(r.Uint64()), uint16(r.Uint64()), uint32(r.Uint64()), r.Uint64(), uint(r.Uint64())
		v.F32, v.F64 = float32(r.NormFloat64()), r.NormFloat64()
		v.In.S, v.In.hide, v.In.N = userName(strings.Repeat("x", r.IntN(300))), true, int32(r.Uint64())
		v.S, v.Bs = strings.Repeat("é", r.IntN(3)), make([]byte, r.IntN(200))
		for i := range v.Bs {
			v.Bs[i] = byte(r.Uint64())
		}
		v.T, v.Sum = time.Unix(0, int64(r.Uint64())).UTC(), counter(r.Uint64())
		var want []byte
		want = append(want, map[bool]byte{false: 0, true: 1}[v.B])
		for _, x := range []int64{int64(v.I8), int64(v.I16), int64(v.I32), v.I64, int64(v.I)} {
			want = binary.AppendVarint(want, x)
		}
		for _, x := range []uint64{uint64(v.U8), uint64(v.U16), uint64(v.U32), v.U64, uint64(v.U)} {
			want = binary.AppendUvarint(want, x)
		}
		want = binary.BigEndian.AppendUint32(want, math.Float32bits(v.F32))
		want = binary.BigEndian.AppendUint64(want, math.Float64bits(v.F64))
		want = append(binary.AppendUvarint(want, uint64(len(v.In.S))), v.In.S...)
		want = binary.AppendVarint(want, int64(v.In.N))
		want = append(binary.AppendUvarint(want, uint64(len(v.S))), v.S...)
		want = append(binary.AppendUvarint(want, uint64(len(v.Bs))), v.Bs...)
		want = binary.AppendVarint(want, v.T.UnixNano())
		want = binary.AppendUvarint(want, uint64(v.Sum))
		got := c.Append([]byte("prefix"), v)
		if string(got) != "prefix"+string(want) {
			t.Fatalf("Append(%+v)\n = %x\nwant %x", v, got[len("prefix"):], want)
		}
		back, err := c.Decode(want)
		v.pad, v.In.hide = 0, false
		if len(v.Bs) == 0 {
			v.Bs = nil // what Decode gives for no bytes
		}
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("Decode(Append(%+v)) = %+v, %v", v, back, err)
		}
	}
}

// A struct's Append allocates nothing beyond dst's growth, whatever its
// fields: a struct key costs no allocation an event.
func TestStruct_AppendDoesNotAllocate(t *testing.T) {
	c := ok(Struct[everyKind]())(t)
	v := everyKind{S: "alice", Bs: []byte{1, 2, 3}, T: time.Unix(7, 8)}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = c.Append(buf[:0], v) }); n != 0 {
		t.Fatalf("Append allocates %v times", n)
	}
}
