// Package protocodec is a codec of protocol buffer messages for cowstate's
// states, whose schema evolves by protobuf's own rule: fields are matched by
// number, not by name.
//
// A state whose values are messages registers this codec like any other:
//
//	codec, err := protocodec.Message[*eventpb.Event]()
//	...
//	events, err := cowstate.Value[string, *eventpb.Event](b, "events", cowstate.WithValueCodec(codec))
//
// Its codec ID is the message's schema: its full name and every field's
// number, name, cardinality and type, nested messages described where
// they first appear. Snapshots, deltas and
// savepoints record that ID, so when the job's message type changes, a
// restore judges the file's values against the new type before anything
// is restored (statetable.Evolving), and migrates them at restore:
//
//   - a field added reads as its default, a field removed is dropped
//     (not kept as unknown bytes that a later field of that number would
//     misread), a field renamed keeps its values (numbers decide);
//   - a scalar widened keeps its value: int32 to int64, uint32 to uint64
//     or int64, sint32 to sint64, bool to any of the varint integers, an
//     enum to int32 or int64 and back, string to bytes;
//   - anything else a field number changes (a narrowed integer, a float
//     made double, singular made repeated, a message of another type, a
//     map of other types) is refused with an error matching
//     statetable.ErrIncompatible that names the field and both types, where
//     protobuf's parser would truncate or misread in silence.
//
// Values are marshaled deterministically, so equal messages have equal
// bytes and savepoints stay canonical. A message with invalid UTF-8 in a
// proto3 string field cannot be marshaled: storing one panics, naming the
// message type. This is a module of its own: the
// library's module does not depend on google.golang.org/protobuf.
//
// Cost: a marshal per write of a value, an unmarshal per read (a state of
// messages holds their bytes' decoded form, the message itself; reads return
// it without a copy, so treat a message read from a state as read-only).
package protocodec

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/cowstate/cowstate/statetable"
)

// Message returns the codec of generated message type T (a pointer to a
// generated struct, such as *eventpb.Event). An interface type such as
// proto.Message names no message: an error matching statetable.ErrNoCodec
// (use Dynamic with the message type).
func Message[T proto.Message]() (statetable.Evolving[T], error) {
	var zero T
	if any(zero) == nil {
		return nil, fmt.Errorf("%w: protocodec.Message[%T]: an interface type names no message; use Dynamic", statetable.ErrNoCodec, (*T)(nil))
	}
	mt := zero.ProtoReflect().Type()
	return codec[T]{mt: mt, schema: schemaOf(mt.Descriptor()), id: idOf(mt.Descriptor())}, nil
}

// Dynamic returns the codec of messages of type mt, such as a
// dynamicpb.NewMessageType of a descriptor read at run time: what Message
// is for a type known at compile time.
func Dynamic(mt protoreflect.MessageType) statetable.Evolving[proto.Message] {
	return codec[proto.Message]{mt: mt, schema: schemaOf(mt.Descriptor()), id: idOf(mt.Descriptor())}
}

// idPrefix starts every ID of this codec.
const idPrefix = "protobuf "

type codec[T proto.Message] struct {
	mt     protoreflect.MessageType
	schema *message
	id     string
}

func (c codec[T]) ID() string { return c.id }

// marshal is deterministic, so equal messages have equal bytes, and
// partial (a proto2 message with required fields unset is stored as it
// is, as the job built it).
var marshal = proto.MarshalOptions{Deterministic: true, AllowPartial: true}

func (c codec[T]) Append(dst []byte, v T) []byte {
	b, err := marshal.MarshalAppend(dst, v)
	if err != nil {
		// Marshal fails only on invalid UTF-8 in a proto3 string field: a
		// value the job built wrong, which protobuf refuses to write
		// anywhere, and Append has no error to return.
		panic(fmt.Sprintf("protocodec: %s: %v", c.mt.Descriptor().FullName(), err))
	}
	return b
}

func (c codec[T]) Decode(src []byte) (T, error) {
	return c.decode(src, proto.UnmarshalOptions{AllowPartial: true})
}

func (c codec[T]) decode(src []byte, opts proto.UnmarshalOptions) (T, error) {
	m := c.mt.New().Interface()
	if err := opts.Unmarshal(src, m); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: %s: %v", statetable.ErrDecode, c.mt.Descriptor().FullName(), err)
	}
	return m.(T), nil
}

// DecoderFor returns a decoder of the values a protocodec of schema old
// wrote, if this type reads them (see the package doc), or an error
// matching statetable.ErrIncompatible naming what it cannot read.
func (c codec[T]) DecoderFor(old string) (func([]byte) (T, error), error) {
	if old == c.id {
		return c.Decode, nil
	}
	body, ok := strings.CutPrefix(old, idPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot read values of codec %s", statetable.ErrIncompatible, c.id, old)
	}
	om, err := parseID(body)
	if err != nil {
		return nil, fmt.Errorf("%w: codec %s: %v", statetable.ErrIncompatible, old, err)
	}
	if err := reads(c.schema, om, map[[2]string]bool{}); err != nil {
		return nil, fmt.Errorf("%w: %s cannot read values of %s: %v", statetable.ErrIncompatible, c.mt.Descriptor().FullName(), om.name, err)
	}
	// Fields the old schema had and this one has not are dropped, as
	// statetable.Struct drops them: kept as unknown bytes, they would be
	// written back and misread by a later field of their number.
	discard := proto.UnmarshalOptions{DiscardUnknown: true, AllowPartial: true}
	return func(src []byte) (T, error) { return c.decode(src, discard) }, nil
}

// Reads judges from two codec IDs alone whether a protocodec of ID cur
// reads the values one of ID old wrote, as its DecoderFor would: nil if
// so, else an error matching statetable.ErrIncompatible naming the field
// and both types. For tools that check a savepoint against a job's schema
// without the job's Go types (see package savepoint).
func Reads(cur, old string) error {
	if cur == old {
		return nil
	}
	parse := func(id string) (*message, error) {
		body, ok := strings.CutPrefix(id, idPrefix)
		if !ok {
			return nil, fmt.Errorf("%w: codec %s is not a protocodec schema", statetable.ErrIncompatible, id)
		}
		m, err := parseID(body)
		if err != nil {
			return nil, fmt.Errorf("%w: codec %s: %v", statetable.ErrIncompatible, id, err)
		}
		return m, nil
	}
	cm, err := parse(cur)
	if err != nil {
		return err
	}
	om, err := parse(old)
	if err != nil {
		return err
	}
	if err := reads(cm, om, map[[2]string]bool{}); err != nil {
		return fmt.Errorf("%w: %s cannot read values of %s: %v", statetable.ErrIncompatible, cm.name, om.name, err)
	}
	return nil
}
