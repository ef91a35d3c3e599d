package statetable

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"time"
	"unsafe"
)

// ErrNoCodec: CodecFor has no codec for a type.
var ErrNoCodec = fmt.Errorf("%w: no codec for type", ErrConfig)

// CodecProvider is implemented by a type that names its own codec: CodecFor
// returns what StateCodec returns (called on the zero value). It is how a
// type of another package (window.TimeWindow) or of the user joins the
// inferred codecs.
type CodecProvider[T any] interface {
	StateCodec() Codec[T]
}

// CodecFor returns the codec a state uses for T when the job names none:
//
//   - string, []byte, bool, float64, and every integer type: String,
//     Bytes, Bool, Float64, Signed or Unsigned (fixed width, so a state keyed
//     by integers takes the inline fast path of its per-event calls);
//   - a named type of one of those kinds (type UserID string): the codec
//     of its kind, under the same ID;
//   - a byte array ([16]byte, and named ones such as a UUID type): its
//     bytes as they are, ID "bytes[16]";
//   - time.Time (TimeCodec) and time.Duration (Signed);
//   - VoidNamespace: Void;
//   - a type implementing CodecProvider: its StateCodec;
//   - a struct whose exported fields are of the kinds above, []byte,
//     time.Time or such structs: Struct, which reads what earlier
//     declarations of the struct wrote (fields matched by name).
//
// Any other type has none: an error matching ErrNoCodec (and ErrConfig)
// naming the type; give its state a codec (FuncCodec). There is no
// fallback to a general encoding such as JSON because Codec.Append cannot
// report a value that does not encode (JSON rejects a NaN float), and such
// a value would fail a checkpoint long after the write that stored it.
// Cost: reflection once per call, none per value. Any goroutine.
func CodecFor[T any]() (Codec[T], error) {
	var zero T
	if p, ok := any(zero).(CodecProvider[T]); ok {
		return p.StateCodec(), nil
	}
	var c any
	switch any(zero).(type) {
	case string:
		c = String
	case int64:
		c = Int64
	case uint64:
		c = Uint64
	case int:
		c = Int
	case int32:
		c = Int32
	case uint32:
		c = Uint32
	case bool:
		c = Bool
	case float64:
		c = Float64
	case []byte:
		c = Bytes
	case time.Time:
		c = TimeCodec
	case VoidNamespace:
		c = Void
	}
	if c != nil {
		return c.(Codec[T]), nil
	}
	t := reflect.TypeFor[T]()
	if k := int(t.Kind()); k < len(kindCodecs) && kindCodecs[k] != nil {
		return relabeled[T]{kindCodecs[k]}, nil
	}
	if t.Kind() == reflect.Array && t.Elem().Kind() == reflect.Uint8 {
		return relabeled[T]{byteArray(t.Len())}, nil
	}
	if t.Kind() == reflect.Struct {
		c, err := Struct[T]()
		if err != nil {
			return nil, fmt.Errorf("%w: give its state a Codec (FuncCodec) or make the type a CodecProvider", err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("%w %v: give its state a Codec (FuncCodec) or make the type a CodecProvider", ErrNoCodec, t)
}

// kindCodec is the codec of a basic kind working on a pointer to the
// value: what CodecFor gives a named type of that kind (type UserID
// string), a byte array ([16]byte) and the integer types without a codec
// variable. It is not generic, so a program compiles it once, not once per
// inferred type (the compile target: a minimal program that infers two
// codecs). Its methods are static calls that only read or write through
// the pointer, so relabeled's value stays on the caller's stack: reaching
// the kind's code through a function value made each Append and Decode of
// a named type allocate (TestCodecFor_NamedTypesDoNotAllocate).
type kindCodec struct {
	id    string
	kind  reflect.Kind // of the values' memory layout
	fixed fixedInt     // the integer kinds and float64 on 64-bit platforms
	n     int          // an array's length (kind Array: bytes)
}

func kindOf[U any](kind reflect.Kind, c Codec[U]) *kindCodec {
	return &kindCodec{id: c.ID(), kind: kind, fixed: fixedOf(c)}
}

// byteArray is the codec of a byte array of n bytes ([16]byte: a UUID, a
// digest): its bytes as they are, so that byte order is the arrays'
// order; a value of any other length does not decode.
func byteArray(n int) *kindCodec {
	return &kindCodec{id: fmt.Sprintf("bytes[%d]", n), kind: reflect.Array, n: n}
}

// appendAt appends the encoding of the value at p.
func (k *kindCodec) appendAt(dst []byte, p unsafe.Pointer) []byte {
	if w := k.fixed.w; w != 0 {
		n := len(dst)
		dst = slices.Grow(dst, w)[:n+w]
		k.fixed.encode(dst[n:], p)
		return dst
	}
	switch k.kind {
	case reflect.String:
		return String.Append(dst, *(*string)(p))
	case reflect.Bool:
		return Bool.Append(dst, *(*bool)(p))
	case reflect.Array:
		return append(dst, unsafe.Slice((*byte)(p), k.n)...)
	case reflect.Int: // 4 bytes in memory, 8 in a file, on 32-bit platforms
		return Int.Append(dst, *(*int)(p))
	}
	return uintCodec.Append(dst, *(*uint)(p)) // kind Uint, as Int
}

// decodeAt decodes src, exactly one value, into the value at p.
func (k *kindCodec) decodeAt(src []byte, p unsafe.Pointer) (err error) {
	if w := k.fixed.w; w != 0 {
		if len(src) != w {
			return fmt.Errorf("%w %s: got %d bytes; want %d", ErrDecode, k.id, len(src), w)
		}
		k.fixed.decode(src, p)
		return nil
	}
	switch k.kind {
	case reflect.String:
		*(*string)(p), err = String.Decode(src)
	case reflect.Bool:
		*(*bool)(p), err = Bool.Decode(src)
	case reflect.Array:
		if len(src) != k.n {
			return fmt.Errorf("%w %s: got %d bytes; want %d", ErrDecode, k.id, len(src), k.n)
		}
		copy(unsafe.Slice((*byte)(p), k.n), src)
	case reflect.Int:
		*(*int)(p), err = Int.Decode(src)
	default:
		*(*uint)(p), err = uintCodec.Decode(src)
	}
	return err
}

// uintCodec is the codec of uint, which has no variable of its own.
var uintCodec = Unsigned[uint]()

// kindCodecs are the codecs of the basic kinds, by reflect.Kind.
var kindCodecs = [...]*kindCodec{
	reflect.String:  kindOf(reflect.String, String),
	reflect.Bool:    kindOf(reflect.Bool, Bool),
	reflect.Float64: kindOf(reflect.Float64, Float64),
	reflect.Int:     kindOf(reflect.Int, Int),
	reflect.Int8:    kindOf(reflect.Int8, Signed[int8]()),
	reflect.Int16:   kindOf(reflect.Int16, Signed[int16]()),
	reflect.Int32:   kindOf(reflect.Int32, Int32),
	reflect.Int64:   kindOf(reflect.Int64, Int64),
	reflect.Uint:    kindOf(reflect.Uint, uintCodec),
	reflect.Uint8:   kindOf(reflect.Uint8, Unsigned[uint8]()),
	reflect.Uint16:  kindOf(reflect.Uint16, Unsigned[uint16]()),
	reflect.Uint32:  kindOf(reflect.Uint32, Uint32),
	reflect.Uint64:  kindOf(reflect.Uint64, Uint64),
}

// relabeled is the codec of its kind for T, a type of that kind (and so
// of its memory layout), under the kind codec's ID and with its
// fixed-width fast path.
type relabeled[T any] struct{ k *kindCodec }

func (r relabeled[T]) ID() string { return r.k.id }
func (r relabeled[T]) Append(dst []byte, v T) []byte {
	return r.k.appendAt(dst, unsafe.Pointer(&v))
}
func (r relabeled[T]) Decode(src []byte) (T, error) {
	var v T
	err := r.k.decodeAt(src, unsafe.Pointer(&v))
	return v, err
}
func (r relabeled[T]) fixedInt() fixedInt { return r.k.fixed }

// TimeCodec is the codec of time.Time: the instant as Unix nanoseconds,
// 8 bytes big-endian with the sign bit flipped (byte order is time order),
// decoded in UTC. Times with the same instant encode alike whatever their
// location or monotonic reading; a time outside the years 1678 to 2262
// (UnixNano's range) does not round-trip.
var TimeCodec Codec[time.Time] = timeCodec{}

type timeCodec struct{}

func (timeCodec) ID() string { return "time/unixnano-be-signflip" }
func (timeCodec) Append(dst []byte, v time.Time) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v.UnixNano())^1<<63)
}
func (timeCodec) Decode(src []byte) (time.Time, error) {
	u, err := readBE(src, 8, "time")
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, int64(u^1<<63)).UTC(), nil
}
