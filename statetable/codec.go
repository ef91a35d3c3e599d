package statetable

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// Codec encodes values of T to bytes and back. Encodings must be
// deterministic (equal values give equal bytes, whatever their history):
// keys are hashed and snapshots compared by their encoding. ID names the
// encoding; it is recorded in snapshot metadata, and a state restored with a
// codec of another ID is an error. Codecs are used from the writer goroutine
// and from snapshot writers, concurrently: they must be safe for that
// (stateless ones are).
type Codec[T any] interface {
	ID() string
	// Append appends the encoding of v to dst and returns the extended slice.
	Append(dst []byte, v T) []byte
	// Decode decodes exactly one value from src, which it must not retain.
	// Bad input is an error wrapping ErrDecode, never a panic.
	Decode(src []byte) (T, error)
}

// FuncCodec returns a Codec from functions, for user types.
func FuncCodec[T any](id string, appendFn func([]byte, T) []byte, decodeFn func([]byte) (T, error)) Codec[T] {
	return funcCodec[T]{id, appendFn, decodeFn}
}

type funcCodec[T any] struct {
	id string
	a  func([]byte, T) []byte
	d  func([]byte) (T, error)
}

func (c funcCodec[T]) ID() string                    { return c.id }
func (c funcCodec[T]) Append(dst []byte, v T) []byte { return c.a(dst, v) }
func (c funcCodec[T]) Decode(src []byte) (T, error)  { return c.d(src) }

// String encodes a string as its bytes.
var String Codec[string] = stringCodec{}

type stringCodec struct{}

func (stringCodec) ID() string                         { return "string" }
func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(src []byte) (string, error)  { return string(src), nil }

// Bytes encodes a byte slice as itself (a nil and an empty slice encode
// alike and decode as empty).
var Bytes Codec[[]byte] = bytesCodec{}

type bytesCodec struct{}

func (bytesCodec) ID() string                         { return "bytes" }
func (bytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (bytesCodec) Decode(src []byte) ([]byte, error)  { return append([]byte{}, src...), nil }

// Bool encodes false as 0 and true as 1.
var Bool Codec[bool] = boolCodec{}

type boolCodec struct{}

func (boolCodec) ID() string { return "bool" }
func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}
func (boolCodec) Decode(src []byte) (bool, error) {
	if len(src) != 1 || src[0] > 1 {
		return false, fmt.Errorf("%w bool: got %d bytes %x; want one byte 0 or 1", ErrDecode, len(src), src)
	}
	return src[0] == 1, nil
}

// Float64 encodes a float64 as its IEEE 754 bits, big-endian. (-0 and +0, and
// NaNs with different payloads, encode differently.)
var Float64 Codec[float64] = float64Codec{}

type float64Codec struct{}

func (float64Codec) ID() string         { return "float64/be" }
func (float64Codec) fixedInt() fixedInt { return fixedInt{w: 8} }
func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
}
func (float64Codec) Decode(src []byte) (float64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("%w float64: got %d bytes; want 8", ErrDecode, len(src))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(src)), nil
}

type signed interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}

type unsigned interface {
	~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Signed returns the codec of a signed integer type: fixed width, big-endian
// with the sign bit flipped, so byte order is numeric order. int is encoded
// as 8 bytes.
func Signed[T signed]() Codec[T] { return signedCodec[T]{w: widthOf[T]()} }

// Unsigned returns the codec of an unsigned integer type: fixed width,
// big-endian, so byte order is numeric order. uint is encoded as 8 bytes.
func Unsigned[T unsigned]() Codec[T] { return unsignedCodec[T]{w: widthOf[T]()} }

// Int64, Int32 and Int are the codecs of those types; see Signed.
var (
	Int64  = Signed[int64]()
	Int32  = Signed[int32]()
	Int    = Signed[int]()
	Uint64 = Unsigned[uint64]()
	Uint32 = Unsigned[uint32]()
)

// widthOf returns the encoded width of an integer type: its size, except
// that int and uint are always 8 bytes so that encodings do not depend on
// the platform.
func widthOf[T signed | unsigned]() int {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8, reflect.Uint8:
		return 1
	case reflect.Int16, reflect.Uint16:
		return 2
	case reflect.Int32, reflect.Uint32:
		return 4
	}
	return 8
}

// appendBE appends the low w bytes of u, big-endian.
func appendBE(dst []byte, u uint64, w int) []byte {
	switch w { // the common widths as one store each
	case 8:
		return binary.BigEndian.AppendUint64(dst, u)
	case 4:
		return binary.BigEndian.AppendUint32(dst, uint32(u))
	}
	for i := w - 1; i >= 0; i-- {
		dst = append(dst, byte(u>>(8*i)))
	}
	return dst
}

// readBE reads exactly w big-endian bytes; kind ("int" or "uint") names the
// type in the error.
func readBE(src []byte, w int, kind string) (uint64, error) {
	if len(src) != w {
		return 0, fmt.Errorf("%w %s%d: got %d bytes; want %d", ErrDecode, kind, 8*w, len(src), w)
	}
	switch w { // the common widths as one load each
	case 8:
		return binary.BigEndian.Uint64(src), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(src)), nil
	}
	var u uint64
	for _, b := range src {
		u = u<<8 | uint64(b)
	}
	return u, nil
}

// fixedInt describes a codec whose encoding is exactly w bytes, the
// big-endian bits of the value's own memory (w of them, unsafe.Sizeof of
// the type) xored with flip: the integer codecs and Float64. A restore
// decodes such cells inline, and a snapshot write encodes them inline,
// with no call through the Codec interface (a tenth of BenchmarkRestore,
// of BenchmarkSnapshotWrite). w == 0
// means the codec is not one of them.
type fixedInt struct {
	w    int
	flip uint64
}

// fixedOf returns the fixedInt of c, if it is one of this package's
// fixed-width codecs of a type of its width (the zero fixedInt otherwise).
func fixedOf[T any](c Codec[T]) fixedInt {
	var f fixedInt
	switch c := any(c).(type) {
	case interface{ fixedInt() fixedInt }:
		f = c.fixedInt()
	default:
		return fixedInt{}
	}
	var zero T
	if uintptr(f.w) != unsafe.Sizeof(zero) {
		return fixedInt{} // int and uint are 8 bytes in a file, 4 in memory on 32-bit platforms
	}
	return f
}

// encode writes the f.w-byte encoding of *p, a value of f.w bytes, into
// dst[:f.w]: what the codec's Append appends.
func (f fixedInt) encode(dst []byte, p unsafe.Pointer) {
	switch f.w {
	case 8:
		binary.BigEndian.PutUint64(dst, *(*uint64)(p)^f.flip)
	case 4:
		binary.BigEndian.PutUint32(dst, *(*uint32)(p)^uint32(f.flip))
	case 2:
		binary.BigEndian.PutUint16(dst, *(*uint16)(p)^uint16(f.flip))
	default:
		dst[0] = *(*uint8)(p) ^ uint8(f.flip)
	}
}

// decode decodes exactly f.w bytes of src (len(src) == f.w) into *p, a
// value of f.w bytes.
func (f fixedInt) decode(src []byte, p unsafe.Pointer) {
	var u uint64
	switch f.w {
	case 8:
		u = binary.BigEndian.Uint64(src)
	case 4:
		u = uint64(binary.BigEndian.Uint32(src))
	case 2:
		u = uint64(binary.BigEndian.Uint16(src))
	default:
		u = uint64(src[0])
	}
	u ^= f.flip
	switch f.w {
	case 8:
		*(*uint64)(p) = u
	case 4:
		*(*uint32)(p) = uint32(u)
	case 2:
		*(*uint16)(p) = uint16(u)
	default:
		*(*uint8)(p) = uint8(u)
	}
}

type signedCodec[T signed] struct{ w int }

func (c signedCodec[T]) fixedInt() fixedInt {
	return fixedInt{w: c.w, flip: 1 << (8*c.w - 1)}
}

func (c signedCodec[T]) ID() string { return fmt.Sprintf("int%d/be-signflip", 8*c.w) }
func (c signedCodec[T]) Append(dst []byte, v T) []byte {
	return appendBE(dst, uint64(int64(v))^1<<(8*c.w-1), c.w)
}
func (c signedCodec[T]) Decode(src []byte) (T, error) {
	u, err := readBE(src, c.w, "int")
	if err != nil {
		return 0, err
	}
	u ^= 1 << (8*c.w - 1)
	shift := 64 - 8*c.w // sign-extend from w bytes
	return T(int64(u<<shift) >> shift), nil
}

type unsignedCodec[T unsigned] struct{ w int }

func (c unsignedCodec[T]) fixedInt() fixedInt { return fixedInt{w: c.w} }

func (c unsignedCodec[T]) ID() string { return fmt.Sprintf("uint%d/be", 8*c.w) }
func (c unsignedCodec[T]) Append(dst []byte, v T) []byte {
	return appendBE(dst, uint64(v), c.w)
}
func (c unsignedCodec[T]) Decode(src []byte) (T, error) {
	u, err := readBE(src, c.w, "uint")
	return T(u), err
}

// VoidNamespace is the namespace of state that is not windowed: it has one
// value and encodes to nothing.
type VoidNamespace struct{}

// Void is the codec of VoidNamespace.
var Void Codec[VoidNamespace] = voidCodec{}

type voidCodec struct{}

func (voidCodec) ID() string                                { return "void" }
func (voidCodec) Append(dst []byte, _ VoidNamespace) []byte { return dst }
func (voidCodec) Decode(src []byte) (VoidNamespace, error) {
	if len(src) != 0 {
		return VoidNamespace{}, fmt.Errorf("%w void namespace: got %d bytes; want none", ErrDecode, len(src))
	}
	return VoidNamespace{}, nil
}
