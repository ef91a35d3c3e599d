package statetable

import (
	"encoding/binary"
	"fmt"
	"reflect"
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
//   - time.Time (TimeCodec) and time.Duration (Signed);
//   - VoidNamespace: Void;
//   - a type implementing CodecProvider: its StateCodec.
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
	switch any(zero).(type) {
	case VoidNamespace:
		return any(Void).(Codec[T]), nil
	case time.Time:
		return any(TimeCodec).(Codec[T]), nil
	case []byte:
		return any(Bytes).(Codec[T]), nil
	}
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.String:
		return relabel[T](String), nil
	case reflect.Bool:
		return relabel[T](Bool), nil
	case reflect.Float64:
		return relabel[T](Float64), nil
	case reflect.Int:
		return relabel[T](Int), nil
	case reflect.Int8:
		return relabel[T](Signed[int8]()), nil
	case reflect.Int16:
		return relabel[T](Signed[int16]()), nil
	case reflect.Int32:
		return relabel[T](Int32), nil
	case reflect.Int64:
		return relabel[T](Int64), nil
	case reflect.Uint:
		return relabel[T](Unsigned[uint]()), nil
	case reflect.Uint8:
		return relabel[T](Unsigned[uint8]()), nil
	case reflect.Uint16:
		return relabel[T](Unsigned[uint16]()), nil
	case reflect.Uint32:
		return relabel[T](Uint32), nil
	case reflect.Uint64:
		return relabel[T](Uint64), nil
	}
	return nil, fmt.Errorf("%w %v: give its state a Codec (FuncCodec) or make the type a CodecProvider", ErrNoCodec, t)
}

// relabel returns c as a codec of T, a type of the same kind (and so the
// same memory layout) as U: a named type of a basic type. It keeps c's ID
// and its fixed-width fast path.
func relabel[T, U any](c Codec[U]) Codec[T] {
	if same, ok := any(c).(Codec[T]); ok {
		return same
	}
	return relabeled[T, U]{c}
}

type relabeled[T, U any] struct{ c Codec[U] }

func (r relabeled[T, U]) ID() string { return r.c.ID() }
func (r relabeled[T, U]) Append(dst []byte, v T) []byte {
	return r.c.Append(dst, *(*U)(unsafe.Pointer(&v)))
}
func (r relabeled[T, U]) Decode(src []byte) (T, error) {
	u, err := r.c.Decode(src)
	return *(*T)(unsafe.Pointer(&u)), err
}
func (r relabeled[T, U]) fixedInt() fixedInt { return fixedOf(r.c) }

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
