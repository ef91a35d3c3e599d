package protocodec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// A codec's ID is "protobuf " followed by its message's schema:
//
//	message := fullName "{" [field {";" field}] "}"
//	field   := number " " name " " ["repeated "] type
//	type    := scalar | "enum " fullName | ("message " | "group ") (message | fullName) | "map<" type "," type ">"
//
// with fields in number order, scalar a protoreflect.Kind's name (int32,
// sint64, fixed32, double, string, bytes...), and a nested message
// described where it first appears, named alone after that (so recursive
// types have finite IDs). For example:
//
//	protobuf shop.Order{1 id string;2 items repeated message shop.Item{1 sku string;2 count int32};3 prices map<string,int64>}

type message struct {
	name   string
	fields []field // by number
}

type field struct {
	number   int64
	name     string
	repeated bool
	typ      fieldType
}

type fieldType struct {
	kind     string   // a protoreflect.Kind's name, or "map"
	name     string   // an enum's full name
	msg      *message // a message's or group's schema
	key, val *fieldType
}

// schemaOf returns the schema of a message descriptor.
func schemaOf(md protoreflect.MessageDescriptor) *message {
	return describe(md, map[protoreflect.FullName]*message{})
}

func describe(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*message) *message {
	if m, ok := seen[md.FullName()]; ok {
		return m
	}
	m := &message{name: string(md.FullName())}
	seen[md.FullName()] = m
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		f := field{number: int64(fd.Number()), name: string(fd.Name())}
		if fd.IsMap() {
			k, v := typeOf(fd.MapKey(), seen), typeOf(fd.MapValue(), seen)
			f.typ = fieldType{kind: "map", key: &k, val: &v}
		} else {
			f.repeated = fd.IsList()
			f.typ = typeOf(fd, seen)
		}
		m.fields = append(m.fields, f)
	}
	slices.SortFunc(m.fields, func(a, b field) int { return int(a.number - b.number) })
	return m
}

func typeOf(fd protoreflect.FieldDescriptor, seen map[protoreflect.FullName]*message) fieldType {
	t := fieldType{kind: fd.Kind().String()}
	switch fd.Kind() {
	case protoreflect.EnumKind:
		t.name = string(fd.Enum().FullName())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		t.msg = describe(fd.Message(), seen)
	}
	return t
}

// idOf returns the codec ID of a message descriptor.
func idOf(md protoreflect.MessageDescriptor) string {
	var b strings.Builder
	b.WriteString(idPrefix)
	writeMessage(&b, schemaOf(md), map[*message]bool{})
	return b.String()
}

func writeMessage(b *strings.Builder, m *message, written map[*message]bool) {
	b.WriteString(m.name)
	if written[m] {
		return
	}
	written[m] = true
	b.WriteByte('{')
	for i, f := range m.fields {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.FormatInt(f.number, 10))
		b.WriteByte(' ')
		b.WriteString(f.name)
		b.WriteByte(' ')
		if f.repeated {
			b.WriteString("repeated ")
		}
		writeType(b, f.typ, written)
	}
	b.WriteByte('}')
}

func writeType(b *strings.Builder, t fieldType, written map[*message]bool) {
	switch t.kind {
	case "map":
		b.WriteString("map<")
		writeType(b, *t.key, written)
		b.WriteByte(',')
		writeType(b, *t.val, written)
		b.WriteByte('>')
	case "enum":
		b.WriteString("enum ")
		b.WriteString(t.name)
	case "message", "group":
		b.WriteString(t.kind)
		b.WriteByte(' ')
		writeMessage(b, t.msg, written)
	default:
		b.WriteString(t.kind)
	}
}

// parseID parses the schema part of an ID (after idPrefix).
func parseID(s string) (*message, error) {
	p := parser{s: s, named: map[string]*message{}}
	m, err := p.message()
	if err == nil && p.i != len(p.s) {
		err = p.errorf("trailing text")
	}
	return m, err
}

type parser struct {
	s     string
	i     int
	depth int                 // messages being described, nested
	named map[string]*message // messages described so far, by name
}

// maxNesting bounds how deeply an ID's messages nest: an ID comes from a
// file, and a damaged one must not exhaust the stack.
const maxNesting = 100

var errSyntax = errors.New("not a protobuf schema")

func (p *parser) errorf(what string) error {
	return fmt.Errorf("%w: %s at byte %d", errSyntax, what, p.i)
}

// token returns the text up to the first of the stop bytes (or the end).
func (p *parser) token(stops string) string {
	j := p.i
	for j < len(p.s) && !strings.ContainsRune(stops, rune(p.s[j])) {
		j++
	}
	t := p.s[p.i:j]
	p.i = j
	return t
}

func (p *parser) expect(s string) error {
	if !strings.HasPrefix(p.s[p.i:], s) {
		return p.errorf(fmt.Sprintf("want %q", s))
	}
	p.i += len(s)
	return nil
}

func (p *parser) message() (*message, error) {
	name := p.token("{};,> ")
	if name == "" {
		return nil, p.errorf("want a message name")
	}
	if p.i == len(p.s) || p.s[p.i] != '{' {
		m, ok := p.named[name]
		if !ok {
			return nil, p.errorf("message " + name + " named before it is described")
		}
		return m, nil
	}
	if _, ok := p.named[name]; ok {
		return nil, p.errorf("message " + name + " described twice")
	}
	if p.depth++; p.depth > maxNesting {
		return nil, p.errorf(fmt.Sprintf("messages nested deeper than %d", maxNesting))
	}
	defer func() { p.depth-- }()
	m := &message{name: name}
	p.named[name] = m
	p.i++ // {
	for p.i < len(p.s) && p.s[p.i] != '}' {
		if len(m.fields) > 0 {
			if err := p.expect(";"); err != nil {
				return nil, err
			}
		}
		f, err := p.field()
		if err != nil {
			return nil, err
		}
		if len(m.fields) > 0 && f.number <= m.fields[len(m.fields)-1].number {
			return nil, p.errorf("field numbers out of order")
		}
		m.fields = append(m.fields, f)
	}
	if err := p.expect("}"); err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) field() (field, error) {
	var f field
	n, err := strconv.ParseInt(p.token(" "), 10, 32)
	if err != nil || n < 1 {
		return f, p.errorf("want a field number")
	}
	f.number = n
	if err := p.expect(" "); err != nil {
		return f, err
	}
	if f.name = p.token(" "); f.name == "" {
		return f, p.errorf("want a field name")
	}
	if err := p.expect(" "); err != nil {
		return f, err
	}
	if strings.HasPrefix(p.s[p.i:], "repeated ") {
		f.repeated = true
		p.i += len("repeated ")
	}
	f.typ, err = p.fieldType()
	return f, err
}

func (p *parser) fieldType() (fieldType, error) {
	kind := p.token(" <,;}>")
	t := fieldType{kind: kind}
	switch kind {
	case "map":
		if err := p.expect("<"); err != nil {
			return t, err
		}
		k, err := p.fieldType()
		if err != nil {
			return t, err
		}
		if err := p.expect(","); err != nil {
			return t, err
		}
		v, err := p.fieldType()
		if err != nil {
			return t, err
		}
		t.key, t.val = &k, &v
		return t, p.expect(">")
	case "enum":
		if err := p.expect(" "); err != nil {
			return t, err
		}
		if t.name = p.token(";},>"); t.name == "" {
			return t, p.errorf("want an enum name")
		}
		return t, nil
	case "message", "group":
		if err := p.expect(" "); err != nil {
			return t, err
		}
		m, err := p.message()
		t.msg = m
		return t, err
	}
	if _, ok := scalars[kind]; !ok {
		return t, p.errorf("unknown type " + strconv.Quote(kind))
	}
	return t, nil
}

// scalars are the scalar kinds, each with the kinds whose values it reads
// as they are (besides itself): protobuf's wire-compatible changes that
// neither truncate nor reinterpret a value.
var scalars = map[string][]string{
	"bool":     nil,
	"int32":    {"bool", "enum"},
	"int64":    {"bool", "int32", "uint32", "enum"},
	"uint32":   {"bool"},
	"uint64":   {"bool", "uint32"},
	"sint32":   nil,
	"sint64":   {"sint32"},
	"fixed32":  nil,
	"fixed64":  nil,
	"sfixed32": nil,
	"sfixed64": nil,
	"float":    nil,
	"double":   nil,
	"string":   nil,
	"bytes":    {"string"},
}

// reads returns nil if values of schema old read as schema cur: for each
// field number both have, the same cardinality and a type cur reads.
// visiting holds the pairs of messages being compared, for recursive types.
func reads(cur, old *message, visiting map[[2]string]bool) error {
	pair := [2]string{cur.name, old.name}
	if visiting[pair] {
		return nil
	}
	visiting[pair] = true
	for _, of := range old.fields {
		i := slices.IndexFunc(cur.fields, func(f field) bool { return f.number == of.number })
		if i < 0 {
			continue // removed: dropped
		}
		cf := cur.fields[i]
		where := fmt.Sprintf("field %d (%s)", of.number, cf.name)
		if cf.repeated != of.repeated {
			return fmt.Errorf("%s: %s cannot hold its old %s values", where, showField(cf), showField(of))
		}
		if err := typeReads(cf.typ, of.typ, where, visiting); err != nil {
			return err
		}
	}
	return nil
}

func typeReads(cur, old fieldType, where string, visiting map[[2]string]bool) error {
	switch {
	case cur.kind == "map" && old.kind == "map":
		if cur.key.kind != old.key.kind {
			return fmt.Errorf("%s: map keys of %s cannot hold its old %s keys", where, showType(*cur.key), showType(*old.key))
		}
		return typeReads(*cur.val, *old.val, where+" map value", visiting)
	case (cur.kind == "message" || cur.kind == "group") && cur.kind == old.kind:
		if err := reads(cur.msg, old.msg, visiting); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	case cur.kind == old.kind && cur.kind != "map":
		return nil // a scalar, or an enum (values kept by number)
	case cur.kind == "enum" && old.kind == "int32":
		return nil
	case slices.Contains(scalars[cur.kind], old.kind):
		return nil
	}
	return fmt.Errorf("%s: %s cannot hold its old %s values", where, showType(cur), showType(old))
}

func showField(f field) string {
	if f.repeated {
		return "repeated " + showType(f.typ)
	}
	return showType(f.typ)
}

func showType(t fieldType) string {
	switch t.kind {
	case "map":
		return "map<" + showType(*t.key) + "," + showType(*t.val) + ">"
	case "enum":
		return "enum " + t.name
	case "message", "group":
		return t.kind + " " + t.msg.name
	}
	return t.kind
}
