package statetable

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unsafe"
)

// Evolving is a Codec that reads what an earlier version of itself wrote:
// a value codec whose ID describes its schema, so that a restore which
// finds another ID in a file asks the registered codec for a decoder of
// the old bytes instead of refusing them (migration at restore, as Flink's
// heap backend does). Keys and namespaces never migrate: their bytes
// decide the key group.
type Evolving[T any] interface {
	Codec[T]
	// DecoderFor returns a decoder of the values a codec with ID old
	// encoded, or an error matching ErrIncompatible that names what
	// cannot be read. Called once per restore of a state, not per value.
	DecoderFor(old string) (func([]byte) (T, error), error)
}

// ErrIncompatible: a state's values in a file were written by a codec
// whose values the registered codec cannot read.
var ErrIncompatible = fmt.Errorf("%w: values written by an incompatible codec", ErrStateMismatch)

// WithMigration returns codec c, which also reads the values that codec
// old wrote, by decoding them with old and converting them with migrate:
// the user migration of a change that c cannot read by itself (a field's
// type changed, a value type replaced). Its ID and encoding are c's, so a
// state registered with it writes what c writes. DecoderFor of old's ID
// uses old.Decode; of another ID, old's own DecoderFor if old is Evolving
// (so migrations chain: a file of any version old reads migrates), else
// c's if c is Evolving; else ErrIncompatible. migrate runs once per value
// restored from a file old (or an earlier version of it) wrote; its error
// fails the restore, naming the state.
func WithMigration[V, O any](c Codec[V], old Codec[O], migrate func(O) (V, error)) Evolving[V] {
	return migratingCodec[V, O]{Codec: c, old: old, migrate: migrate}
}

type migratingCodec[V, O any] struct {
	Codec[V]
	old     Codec[O]
	migrate func(O) (V, error)
}

func (c migratingCodec[V, O]) DecoderFor(id string) (func([]byte) (V, error), error) {
	convert := func(dec func([]byte) (O, error)) func([]byte) (V, error) {
		return func(b []byte) (V, error) {
			o, err := dec(b)
			if err != nil {
				var zero V
				return zero, err
			}
			return c.migrate(o)
		}
	}
	if id == c.ID() {
		return c.Decode, nil
	}
	if id == c.old.ID() {
		return convert(c.old.Decode), nil
	}
	if e, ok := c.old.(Evolving[O]); ok {
		if dec, err := e.DecoderFor(id); err == nil {
			return convert(dec), nil
		}
	}
	if e, ok := c.Codec.(Evolving[V]); ok {
		return e.DecoderFor(id)
	}
	return nil, fmt.Errorf("%w: %s reads values of %s (by migration) but not of %s", ErrIncompatible, c.ID(), c.old.ID(), id)
}

// Struct returns the codec of struct type T by its fields' names: its ID
// is T's schema (every exported field's name and type, in declaration
// order), and it reads values that an earlier declaration of T wrote
// (DecoderFor): a field added since takes its zero value, a field removed
// is dropped, an integer field widened (int32 to int64, uint16 to uint64
// or to int32) or a float32 made float64 keeps its value; any other change
// of a field's type is an error naming the field and both types. Renaming
// a field is a removal and an addition.
//
// Fields may be bool, integers, float32, float64, string, []byte, named
// types of those kinds, time.Time (to the nanosecond, in UTC), and structs
// of such fields; unexported fields are not stored, and a struct with
// none exported is refused. Any other field is an error matching
// ErrNoCodec naming it. Integers are stored as varints and floats by
// their bits, so a value's
// encoding is at most a few bytes longer than its fields'. Cost: Append
// reads the fields at their offsets, with no reflection and no
// allocation; Decode uses reflection and allocates the value; the
// decoder of an old schema is built once.
func Struct[T any]() (Evolving[T], error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w %v: Struct takes a struct type", ErrNoCodec, t)
	}
	s, err := schemaOf(t, t.String())
	if err != nil {
		return nil, err
	}
	return structCodec[T]{s: s, id: "struct" + s.String(), plan: planOf(t, 0)}, nil
}

// fieldSchema is one stored field: its name, its kind, and for a nested
// struct its fields; index is the field's index in the Go struct (-1 in
// a schema parsed from an ID).
type fieldSchema struct {
	name   string
	kind   string // bool, int8..int64, uint8..uint64, float32, float64, string, bytes, time, struct
	fields structSchema
	index  int
}

type structSchema []fieldSchema

func (s structSchema) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range s {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(f.name)
		b.WriteByte(' ')
		if f.kind == "struct" {
			b.WriteString(f.fields.String())
		} else {
			b.WriteString(f.kind)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// schemaOf returns the schema of struct type t; where names t in errors.
func schemaOf(t reflect.Type, where string) (structSchema, error) {
	var s structSchema
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fs := fieldSchema{name: f.Name, index: i}
		switch k := f.Type.Kind(); k {
		case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
			fs.kind = k.String()
		case reflect.Int:
			fs.kind = "int64"
		case reflect.Uint:
			fs.kind = "uint64"
		case reflect.Slice:
			if f.Type.Elem().Kind() != reflect.Uint8 {
				return nil, fmt.Errorf("%w: field %s.%s of type %v", ErrNoCodec, where, f.Name, f.Type)
			}
			fs.kind = "bytes"
		case reflect.Struct:
			if f.Type == reflect.TypeFor[time.Time]() {
				fs.kind = "time"
				break
			}
			sub, err := schemaOf(f.Type, where+"."+f.Name)
			if err != nil {
				return nil, err
			}
			fs.kind, fs.fields = "struct", sub
		default:
			return nil, fmt.Errorf("%w: field %s.%s of type %v", ErrNoCodec, where, f.Name, f.Type)
		}
		s = append(s, fs)
	}
	if len(s) == 0 && t.NumField() > 0 {
		// Every field unexported (sync.Mutex, a type of another
		// package): storing nothing of it would lose its value silently.
		return nil, fmt.Errorf("%w: %s of type %v has no exported field", ErrNoCodec, where, t)
	}
	return s, nil
}

type structCodec[T any] struct {
	s    structSchema
	id   string
	plan []fieldRead // the stored fields in schema order, nested ones flattened
}

func (c structCodec[T]) ID() string { return c.id }

// Append writes v's stored fields in schema order. v stays on the
// caller's stack, as appendFields only reads through the pointer: a
// reflect.Value of &v would move v to the heap, an allocation an event
// for a state keyed by a struct (TestStruct_AppendDoesNotAllocate;
// BenchmarkUpdateEach, key=struct).
func (c structCodec[T]) Append(dst []byte, v T) []byte {
	return appendFields(dst, c.plan, unsafe.Pointer(&v))
}

// fieldRead is how Append reads one stored field of a struct: its offset
// from the start of the outermost struct, its kind and its size in
// memory (of the integer kinds: 1, 2, 4 or 8 bytes).
type fieldRead struct {
	off  uintptr
	kind fieldKind
	size uint8
}

type fieldKind uint8

const (
	fieldBool fieldKind = iota
	fieldInt            // signed integers of any size: a varint
	fieldUint           // unsigned integers of any size: a uvarint
	fieldFloat32
	fieldFloat64
	fieldString
	fieldBytes
	fieldTime
)

// planOf returns the reads of struct type t's stored fields, at offsets
// from base, in the order of schemaOf(t), which has accepted t: exported
// fields in declaration order, a nested struct's fields in its place.
func planOf(t reflect.Type, base uintptr) []fieldRead {
	var plan []fieldRead
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		r := fieldRead{off: base + f.Offset, size: uint8(f.Type.Size())}
		switch f.Type.Kind() {
		case reflect.Bool:
			r.kind = fieldBool
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			r.kind = fieldInt
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			r.kind = fieldUint
		case reflect.Float32:
			r.kind = fieldFloat32
		case reflect.Float64:
			r.kind = fieldFloat64
		case reflect.String:
			r.kind = fieldString
		case reflect.Slice:
			r.kind = fieldBytes
		case reflect.Struct:
			if f.Type == reflect.TypeFor[time.Time]() {
				r.kind = fieldTime
				break
			}
			plan = append(plan, planOf(f.Type, r.off)...)
			continue
		}
		plan = append(plan, r)
	}
	return plan
}

// appendFields appends the encodings of the fields that plan reads from
// the struct at p. It only reads through p.
func appendFields(dst []byte, plan []fieldRead, p unsafe.Pointer) []byte {
	for _, f := range plan {
		q := unsafe.Add(p, f.off)
		switch f.kind {
		case fieldBool:
			dst = append(dst, *(*byte)(q)) // a Go bool's byte is 0 or 1
		case fieldInt:
			var x int64
			switch f.size {
			case 1:
				x = int64(*(*int8)(q))
			case 2:
				x = int64(*(*int16)(q))
			case 4:
				x = int64(*(*int32)(q))
			default:
				x = *(*int64)(q)
			}
			dst = binary.AppendVarint(dst, x)
		case fieldUint:
			var x uint64
			switch f.size {
			case 1:
				x = uint64(*(*uint8)(q))
			case 2:
				x = uint64(*(*uint16)(q))
			case 4:
				x = uint64(*(*uint32)(q))
			default:
				x = *(*uint64)(q)
			}
			dst = binary.AppendUvarint(dst, x)
		case fieldFloat32:
			dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(*(*float32)(q)))
		case fieldFloat64:
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(*(*float64)(q)))
		case fieldString:
			s := *(*string)(q)
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		case fieldBytes:
			b := *(*[]byte)(q)
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		case fieldTime:
			dst = binary.AppendVarint(dst, (*time.Time)(q).UnixNano())
		}
	}
	return dst
}

func (c structCodec[T]) Decode(src []byte) (T, error) {
	var v T
	rest, err := readStruct(src, c.s, reflect.ValueOf(&v).Elem())
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %s: %d bytes left over", ErrDecode, c.id, len(rest))
	}
	return v, err
}

// DecoderFor returns a decoder of values encoded under the struct schema
// old (another version of T's declaration): fields are matched by name.
func (c structCodec[T]) DecoderFor(old string) (func([]byte) (T, error), error) {
	if old == c.id {
		return c.Decode, nil
	}
	body, ok := strings.CutPrefix(old, "struct")
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot read values of codec %s", ErrIncompatible, c.id, old)
	}
	p := schemaParser{s: body}
	os, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("%w: codec %s: %v", ErrIncompatible, old, err)
	}
	plan, err := planStruct(os, c.s, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %s cannot read values of %s: %v", ErrIncompatible, c.id, old, err)
	}
	return func(src []byte) (T, error) {
		var v T
		rest, err := readStruct(src, plan, reflect.ValueOf(&v).Elem())
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%w: %s: %d bytes left over", ErrDecode, old, len(rest))
		}
		return v, err
	}, nil
}

// StructReads judges from two codec IDs alone whether a Struct codec of ID
// cur reads the values a Struct codec of ID old wrote, as its DecoderFor
// would: nil if so (the same ID, or fields added, removed or widened),
// else an error matching ErrIncompatible naming the field and both types,
// or that an ID is not a struct schema (other codecs are judged only by
// the codec itself, in a job). For tools that check a file against a
// job's schemas without the job's Go types (package savepoint).
func StructReads(cur, old string) error {
	if cur == old {
		return nil
	}
	os, err := parseStructID(old, ErrIncompatible)
	if err != nil {
		return err
	}
	cs, err := parseStructID(cur, ErrIncompatible)
	if err != nil {
		return err
	}
	if _, err := planStruct(os, cs, ""); err != nil {
		return fmt.Errorf("%w: %s cannot read values of %s: %v", ErrIncompatible, cur, old, err)
	}
	return nil
}

// planStruct returns the old schema with each field's index set to the
// new struct's field of the same name (-1: dropped), checking that each
// kept field's new kind can hold its old values.
func planStruct(old, cur structSchema, where string) (structSchema, error) {
	byName := map[string]fieldSchema{}
	for _, f := range cur {
		byName[f.name] = f
	}
	plan := make(structSchema, len(old))
	for i, f := range old {
		p := f
		p.index = -1
		if n, ok := byName[f.name]; ok {
			switch {
			case f.kind == "struct" && n.kind == "struct":
				sub, err := planStruct(f.fields, n.fields, where+f.name+".")
				if err != nil {
					return nil, err
				}
				p.fields = sub
			case f.kind == "struct" || n.kind == "struct" || !widens(f.kind, n.kind):
				return nil, fmt.Errorf("field %s%s: %s cannot hold its old %s values", where, f.name, kindName(n), kindName(f))
			}
			p.index, p.kind = n.index, f.kind
		}
		plan[i] = p
	}
	return plan, nil
}

func kindName(f fieldSchema) string {
	if f.kind == "struct" {
		return "struct" + f.fields.String()
	}
	return f.kind
}

// numberClass is a numeric field kind's class and width (widens).
type numberClass struct {
	signed, unsigned, float bool
	bits                    int
}

var numberClasses = map[string]numberClass{
	"int8": {signed: true, bits: 8}, "int16": {signed: true, bits: 16}, "int32": {signed: true, bits: 32}, "int64": {signed: true, bits: 64},
	"uint8": {unsigned: true, bits: 8}, "uint16": {unsigned: true, bits: 16}, "uint32": {unsigned: true, bits: 32}, "uint64": {unsigned: true, bits: 64},
	"float32": {float: true, bits: 32}, "float64": {float: true, bits: 64},
}

// widens reports whether a field of kind to holds every value of kind
// from: the same kind, a wider integer of the same signedness, a signed
// integer wider than an unsigned one, or float32 to float64.
func widens(from, to string) bool {
	f, fok := numberClasses[from]
	t, tok := numberClasses[to]
	switch {
	case from == to:
		return true
	case !fok || !tok:
		return false
	case f.unsigned && t.signed:
		return t.bits > f.bits
	}
	return f.signed == t.signed && f.unsigned == t.unsigned && f.float == t.float && t.bits >= f.bits
}

// readStruct decodes the fields of schema s from src into v (fields with
// index -1 are read and dropped) and returns what follows them.
func readStruct(src []byte, s structSchema, v reflect.Value) ([]byte, error) {
	for _, f := range s {
		var fv reflect.Value
		if f.index >= 0 {
			fv = v.Field(f.index)
		}
		var err error
		if src, err = readField(src, f, fv); err != nil {
			return nil, err
		}
	}
	return src, nil
}

func readField(src []byte, f fieldSchema, fv reflect.Value) ([]byte, error) {
	bad := func(what string) error { return fmt.Errorf("%w: struct field %s: %s", ErrDecode, f.name, what) }
	set := fv.IsValid()
	switch f.kind {
	case "bool":
		if len(src) < 1 || src[0] > 1 {
			return nil, bad("not a bool")
		}
		if set {
			fv.SetBool(src[0] == 1)
		}
		return src[1:], nil
	case "int8", "int16", "int32", "int64":
		x, n := binary.Varint(src)
		if n <= 0 {
			return nil, bad("bad varint")
		}
		if set { // a signed field (planStruct)
			if fv.OverflowInt(x) {
				return nil, bad(fmt.Sprintf("%d does not fit %v", x, fv.Type()))
			}
			fv.SetInt(x)
		}
		return src[n:], nil
	case "uint8", "uint16", "uint32", "uint64":
		x, n := binary.Uvarint(src)
		if n <= 0 {
			return nil, bad("bad uvarint")
		}
		if set {
			switch fv.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				if x > math.MaxInt64 || fv.OverflowInt(int64(x)) {
					return nil, bad(fmt.Sprintf("%d does not fit %v", x, fv.Type()))
				}
				fv.SetInt(int64(x))
			default:
				if fv.OverflowUint(x) {
					return nil, bad(fmt.Sprintf("%d does not fit %v", x, fv.Type()))
				}
				fv.SetUint(x)
			}
		}
		return src[n:], nil
	case "float32":
		if len(src) < 4 {
			return nil, bad("short float32")
		}
		if set {
			fv.SetFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(src))))
		}
		return src[4:], nil
	case "float64":
		if len(src) < 8 {
			return nil, bad("short float64")
		}
		if set {
			fv.SetFloat(math.Float64frombits(binary.BigEndian.Uint64(src)))
		}
		return src[8:], nil
	case "string", "bytes":
		l, n := binary.Uvarint(src)
		if n <= 0 || l > uint64(len(src)-n) {
			return nil, bad("length runs past the end")
		}
		b := src[n : n+int(l)]
		if set {
			if f.kind == "string" {
				fv.SetString(string(b))
			} else {
				fv.SetBytes(append([]byte(nil), b...))
			}
		}
		return src[n+int(l):], nil
	case "time":
		x, n := binary.Varint(src)
		if n <= 0 {
			return nil, bad("bad varint")
		}
		if set {
			fv.Set(reflect.ValueOf(time.Unix(0, x).UTC()))
		}
		return src[n:], nil
	case "struct":
		if !set {
			return readStruct(src, f.fields, reflect.Value{})
		}
		return readStruct(src, f.fields, fv)
	}
	return nil, bad("unknown kind " + f.kind)
}

// StructField is one field of a Struct codec's schema, as its codec ID
// names it: the field's name, its kind (bool, int8 to int64, uint8 to
// uint64, float32, float64, string, bytes, time, or struct) and, for a
// nested struct, its fields.
type StructField struct {
	Name, Kind string
	Fields     []StructField
}

// ParseStructSchema returns the fields, in order, of the Struct codec whose
// ID is id ("struct{Name string;Visits int64}"), for tools that read
// values without the Go type (package savepoint's dump and JSON). An ID
// that is no struct schema is an error matching ErrNoCodec.
func ParseStructSchema(id string) ([]StructField, error) {
	s, err := parseStructID(id, ErrNoCodec)
	if err != nil {
		return nil, err
	}
	return s.fields(), nil
}

// parseStructID parses a Struct codec's ID; an ID that is none is an error
// matching sentinel.
func parseStructID(id string, sentinel error) (structSchema, error) {
	body, ok := strings.CutPrefix(id, "struct")
	if !ok {
		return nil, fmt.Errorf("%w: codec %s is not a struct schema", sentinel, id)
	}
	p := schemaParser{s: body}
	s, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("%w: codec %s: %v", sentinel, id, err)
	}
	return s, nil
}

func (s structSchema) fields() []StructField {
	out := make([]StructField, len(s))
	for i, f := range s {
		out[i] = StructField{Name: f.name, Kind: f.kind}
		if f.kind == "struct" {
			out[i].Fields = f.fields.fields()
		}
	}
	return out
}

// schemaParser parses a struct schema as structSchema.String writes it.
type schemaParser struct {
	s     string
	depth int
}

func (p *schemaParser) parse() (structSchema, error) {
	s, err := p.structBody()
	if err == nil && p.s != "" {
		err = fmt.Errorf("%q left over after the schema", p.s)
	}
	return s, err
}

func (p *schemaParser) structBody() (structSchema, error) {
	if p.depth++; p.depth > 32 {
		return nil, fmt.Errorf("structs nested more than 32 deep")
	}
	defer func() { p.depth-- }()
	if !strings.HasPrefix(p.s, "{") {
		return nil, fmt.Errorf("want '{' at %q", p.s)
	}
	p.s = p.s[1:]
	var s structSchema
	seen := map[string]bool{}
	for !strings.HasPrefix(p.s, "}") {
		if len(s) > 0 {
			if !strings.HasPrefix(p.s, ";") {
				return nil, fmt.Errorf("want ';' or '}' at %q", p.s)
			}
			p.s = p.s[1:]
		}
		name, rest, ok := strings.Cut(p.s, " ")
		if !ok || name == "" || strings.ContainsAny(name, "{};") || seen[name] {
			return nil, fmt.Errorf("bad field name at %q", p.s)
		}
		seen[name] = true
		p.s = rest
		f := fieldSchema{name: name, index: -1}
		if strings.HasPrefix(p.s, "{") {
			sub, err := p.structBody()
			if err != nil {
				return nil, err
			}
			f.kind, f.fields = "struct", sub
		} else {
			end := strings.IndexAny(p.s, ";}")
			if end < 0 {
				return nil, fmt.Errorf("unterminated schema")
			}
			f.kind, p.s = p.s[:end], p.s[end:]
			switch f.kind {
			case "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
				"float32", "float64", "string", "bytes", "time":
			default:
				return nil, fmt.Errorf("field %s: unknown type %q", name, f.kind)
			}
		}
		s = append(s, f)
	}
	p.s = p.s[1:]
	return s, nil
}
