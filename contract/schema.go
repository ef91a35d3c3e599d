package contract

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cowstate/cowstate/statetable"
)

// SchemaBackend is a Backend whose states can be registered with a Schema,
// the codecs of their keys, namespaces and values, so that what a job wrote
// under one version of its types restores into the next version: the
// conformance suite's schema-evolution group (rapidtest.GroupSchema) runs
// only on backends that implement it. rapidtest.Model is its specification
// with Schema.Reads.
//
// In short: a state registered with schema s stores its keys and
// namespaces with s.KeyCodec() and s.NamespaceCodec(), and its values (a
// value or reducing state's values, a list's elements, a map's user values,
// an aggregating state's accumulators; a map's user keys stay
// statetable.String) with s.ValueCodec(), which records each value as a
// struct of s's fields. Reads and writes behave as without a schema. A
// snapshot restores into states registered with other schemas when each
// state's new schema reads its old one (Schema.Reads), every value
// migrated: it reads back as it was written. Otherwise RestoreSnapshot
// fails with an error matching what Reads returned (statetable.ErrIncompatible
// for values, statetable.ErrStateMismatch for keys and namespaces, which
// never migrate), before anything is restored: the backend holds nothing.
type SchemaBackend interface {
	Backend
	// RegisterStateSchema registers a state with schema s; again with the
	// same kind and schema is a no-op, with another kind or schema an
	// error, and a schema Validate refuses an error matching
	// statetable.ErrConfig. RegisterState of a name registered with a schema and the same
	// kind is a no-op as well.
	RegisterStateSchema(name string, kind statetable.Kind, s Schema) error
}

// Schema is one version of a contract state's types: the struct its
// values are stored as (one of ValueSchemas) and the versions of its key
// and namespace codecs.
type Schema struct {
	Value ValueSchema
	// Key and Namespace are codec versions: 0 is statetable.String, 1 the
	// same encoding under another codec ID (a key type changed in the job's
	// code, whose bytes happen to agree: still refused).
	Key, Namespace int
}

// String names the schema as a message does: its value codec's ID and the
// key and namespace codec versions.
func (s Schema) String() string {
	return fmt.Sprintf("%s key v%d namespace v%d", s.Value, s.Key, s.Namespace)
}

// KeyCodec returns the codec of the state's keys.
func (s Schema) KeyCodec() statetable.Codec[string] { return stringVersion(s.Key) }

// NamespaceCodec returns the codec of the state's namespaces.
func (s Schema) NamespaceCodec() statetable.Codec[string] { return stringVersion(s.Namespace) }

// ValueCodec returns the codec of the state's values.
func (s Schema) ValueCodec() statetable.Evolving[string] { return s.Value.codec }

// Reads returns nil if a state registered with s restores what the same
// state registered with old wrote: the same key and namespace codecs, and
// a value struct whose fields s's reads by name (statetable.Struct's rules:
// fields added or removed, integers and floats widened). Otherwise an error
// matching statetable.ErrStateMismatch (keys or namespaces) or
// statetable.ErrIncompatible (values) naming both.
func (s Schema) Reads(old Schema) error {
	if err := errors.Join(s.Validate(), old.Validate()); err != nil {
		return err
	}
	if s.Key != old.Key || s.Namespace != old.Namespace {
		return fmt.Errorf("%w: schema %v cannot read %v: keys and namespaces never migrate", statetable.ErrStateMismatch, s, old)
	}
	return statetable.StructReads(s.Value.codec.ID(), old.Value.codec.ID())
}

// ValueSchema is the struct type a state's values are stored as. A
// contract value v (a string) is stored as the struct whose field V holds
// v and whose other fields hold len(v) mod 100 in their own type (N as an
// integer or its decimal string, F halved as a float): fields that are not
// read back, but that change the bytes a value is written as, so that a
// backend that restores old bytes without migrating them reads garbage.
// Reads return field V.
type ValueSchema struct {
	codec statetable.Evolving[string]
}

// String returns the schema's codec ID, its fields by name and type.
func (v ValueSchema) String() string {
	if v.codec == nil {
		return "no value schema"
	}
	return v.codec.ID()
}

// Validate returns an error matching statetable.ErrConfig for a schema a
// state cannot be registered with: one whose Value is not one of
// ValueSchemas (the zero ValueSchema), or a codec version below 0.
func (s Schema) Validate() error {
	if s.Value.codec == nil || s.Key < 0 || s.Namespace < 0 {
		return fmt.Errorf("%w: schema %v: Value must be one of contract.ValueSchemas, Key and Namespace 0 or more", statetable.ErrConfig, s)
	}
	return nil
}

// The value structs, one per ValueSchemas entry. Between them (cur reads
// old): a field added (N, F), removed, reordered, widened (int16 -> int32
// -> int64, float32 -> float64), narrowed (int64 -> int32, float64 ->
// float32) and changed in kind (int -> string): the last two refused.
type (
	recordV struct{ V string }
	recordN struct {
		V string
		N int32
	}
	recordNF struct {
		N int64
		V string
		F float32
	}
	recordF struct {
		V string
		F float64
	}
	recordNString struct {
		V string
		N string
	}
	recordN16 struct {
		V string
		N int16
	}
)

// ValueSchemas is every value struct a Schema may name.
var ValueSchemas = []ValueSchema{
	valueSchema(func(v string) recordV { return recordV{v} }, func(r recordV) string { return r.V }),
	valueSchema(func(v string) recordN { return recordN{v, int32(filler(v))} }, func(r recordN) string { return r.V }),
	valueSchema(func(v string) recordNF { return recordNF{int64(filler(v)), v, float32(filler(v)) / 2} }, func(r recordNF) string { return r.V }),
	valueSchema(func(v string) recordF { return recordF{v, float64(filler(v)) / 2} }, func(r recordF) string { return r.V }),
	valueSchema(func(v string) recordNString { return recordNString{v, strconv.Itoa(filler(v))} }, func(r recordNString) string { return r.V }),
	valueSchema(func(v string) recordN16 { return recordN16{v, int16(filler(v))} }, func(r recordN16) string { return r.V }),
}

// filler is what a value struct's fields other than V hold.
func filler(v string) int { return len(v) % 100 }

func valueSchema[T any](to func(string) T, from func(T) string) ValueSchema {
	c, err := statetable.Struct[T]()
	if err != nil {
		panic("contract: BUG: value struct: " + err.Error())
	}
	return ValueSchema{recordCodec[T]{c, to, from}}
}

// recordCodec is a Codec of strings that stores each as a struct T
// (statetable.Struct), and reads what earlier versions of T wrote.
type recordCodec[T any] struct {
	s    statetable.Evolving[T]
	to   func(string) T
	from func(T) string
}

func (c recordCodec[T]) ID() string { return c.s.ID() }

func (c recordCodec[T]) Append(dst []byte, v string) []byte { return c.s.Append(dst, c.to(v)) }

func (c recordCodec[T]) Decode(src []byte) (string, error) {
	r, err := c.s.Decode(src)
	return c.from(r), err
}

func (c recordCodec[T]) DecoderFor(old string) (func([]byte) (string, error), error) {
	d, err := c.s.DecoderFor(old)
	if err != nil {
		return nil, err
	}
	return func(src []byte) (string, error) {
		r, err := d(src)
		return c.from(r), err
	}, nil
}

// stringVersion returns version v of the key and namespace codec: the
// bytes of statetable.String under an ID of their own from version 1 on.
func stringVersion(v int) statetable.Codec[string] {
	if v == 0 {
		return statetable.String
	}
	return renamedString("string-v" + strconv.Itoa(v))
}

type renamedString string

func (c renamedString) ID() string                         { return string(c) }
func (c renamedString) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (c renamedString) Decode(src []byte) (string, error)  { return string(src), nil }
