package savepoint

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cowstate/cowstate/statetable"
)

// A jsonCodec shows the encodings of one codec ID as JSON and reads them
// back: the codecs of package statetable by their IDs (string, bytes,
// bool, float64/be, intN/be-signflip, uintN/be, void) and Struct codecs by
// their schema IDs. Any other codec's values are shown as
// {"codec":ID,"base64":...}.
type jsonCodec struct {
	// show appends the JSON of encoding b, or reports false if b is not
	// an encoding it can show (then it is shown raw).
	show func(dst, b []byte) ([]byte, bool)
	// read appends the encoding of the JSON value raw.
	read func(dst []byte, raw json.RawMessage) ([]byte, error)
}

// codecs caches the jsonCodecs of the codec IDs one operation meets (a
// struct schema is parsed once). One goroutine.
type codecs map[string]*jsonCodec

// of returns the jsonCodec of id, nil if values of id are shown raw.
func (cs codecs) of(id string) *jsonCodec {
	if c, ok := cs[id]; ok {
		return c
	}
	c := codecOf(id)
	cs[id] = c
	return c
}

// rawValue is how a value of a codec this package cannot read from its
// ID alone is shown.
type rawValue struct {
	Codec  string `json:"codec"`
	Base64 string `json:"base64"`
}

// appendJSON appends the JSON of b, an encoding of codec id: through
// its jsonCodec if it has one and reading the JSON back gives b again,
// else raw.
func (cs codecs) appendJSON(dst []byte, id string, b []byte) []byte {
	if c := cs.of(id); c != nil {
		start := len(dst)
		if out, ok := c.show(dst, b); ok {
			if back, err := c.read(nil, out[start:]); err == nil && bytes.Equal(back, b) {
				return out
			}
		}
		dst = dst[:start]
	}
	j, _ := json.Marshal(rawValue{Codec: id, Base64: base64.StdEncoding.EncodeToString(b)})
	return append(dst, j...)
}

// encode appends the encoding under codec id of the JSON value raw:
// {"codec":id,"base64":...} for any codec, or the codec's own JSON.
// Errors wrap statetable.ErrDecode and say what was wrong.
func (cs codecs) encode(dst []byte, id string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err == nil && len(m) == 2 && m["codec"] != nil && m["base64"] != nil {
			var rv rawValue
			if err := json.Unmarshal(raw, &rv); err != nil {
				return nil, fmt.Errorf("%w: %v", statetable.ErrDecode, err)
			}
			if rv.Codec != id {
				return nil, fmt.Errorf("%w: a value of codec %q where the state's codec is %q", statetable.ErrDecode, rv.Codec, id)
			}
			b, err := base64.StdEncoding.DecodeString(rv.Base64)
			if err != nil {
				return nil, fmt.Errorf("%w: codec %s: base64: %v", statetable.ErrDecode, id, err)
			}
			return append(dst, b...), nil
		}
	}
	c := cs.of(id)
	if c == nil {
		return nil, fmt.Errorf("%w: values of codec %q cannot be read from JSON but as {\"codec\":%q,\"base64\":...}", statetable.ErrDecode, id, id)
	}
	out, err := c.read(dst, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: codec %s: %v", statetable.ErrDecode, id, err)
	}
	return out, nil
}

// check reports whether b is an encoding of codec id, for the codecs
// this package reads (any bytes pass for the others): nil or an error
// wrapping statetable.ErrDecode.
func (cs codecs) check(id string, b []byte) error {
	c := cs.of(id)
	if c == nil {
		return nil
	}
	if _, ok := c.show(nil, b); !ok {
		return fmt.Errorf("%w: %d bytes %x are no value of codec %s", statetable.ErrDecode, len(b), truncate(b), id)
	}
	return nil
}

func truncate(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// codecOf returns the jsonCodec of a codec ID, nil for an ID it cannot
// read values of.
func codecOf(id string) *jsonCodec {
	switch id {
	case "string":
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) {
				if !utf8.Valid(b) {
					return dst, false
				}
				return appendString(dst, string(b)), true
			},
			read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
				var s string
				err := json.Unmarshal(raw, &s)
				return append(dst, s...), err
			},
		}
	case "bytes":
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) {
				j, _ := json.Marshal(b)
				return append(dst, j...), true
			},
			read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
				var b []byte
				err := json.Unmarshal(raw, &b)
				return append(dst, b...), err
			},
		}
	case "void":
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) { return append(dst, "null"...), len(b) == 0 },
			read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
				if string(raw) != "null" {
					return nil, fmt.Errorf("want null, got %s", raw)
				}
				return dst, nil
			},
		}
	case "bool":
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) {
				if len(b) != 1 || b[0] > 1 {
					return dst, false
				}
				return strconv.AppendBool(dst, b[0] == 1), true
			},
			read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
				var v bool
				if err := json.Unmarshal(raw, &v); err != nil {
					return nil, err
				}
				if v {
					return append(dst, 1), nil
				}
				return append(dst, 0), nil
			},
		}
	case "float64/be":
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) {
				if len(b) != 8 {
					return dst, false
				}
				return appendFloat(dst, math.Float64frombits(binary.BigEndian.Uint64(b)), 64)
			},
			read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
				f, err := parseFloat(raw, 64)
				return binary.BigEndian.AppendUint64(dst, math.Float64bits(f)), err
			},
		}
	}
	for _, w := range []int{8, 16, 32, 64} {
		switch id {
		case fmt.Sprintf("int%d/be-signflip", w):
			return fixedCodec(w, true)
		case fmt.Sprintf("uint%d/be", w):
			return fixedCodec(w, false)
		}
	}
	if strings.HasPrefix(id, "struct") {
		s, err := schemaOf(id)
		if err != nil {
			return nil // not a schema this package knows: shown raw
		}
		return &jsonCodec{
			show: func(dst, b []byte) ([]byte, bool) {
				dst, rest, ok := s.show(dst, b)
				return dst, ok && len(rest) == 0
			},
			read: s.read,
		}
	}
	return nil
}

// fixedCodec is the jsonCodec of statetable's integer codecs of w bits:
// big-endian, the sign bit flipped if signed.
func fixedCodec(w int, signed bool) *jsonCodec {
	n := w / 8
	flip := uint64(0)
	if signed {
		flip = 1 << (w - 1)
	}
	return &jsonCodec{
		show: func(dst, b []byte) ([]byte, bool) {
			if len(b) != n {
				return dst, false
			}
			var u uint64
			for _, c := range b {
				u = u<<8 | uint64(c)
			}
			u ^= flip
			if !signed {
				return strconv.AppendUint(dst, u, 10), true
			}
			shift := 64 - w
			return strconv.AppendInt(dst, int64(u<<shift)>>shift, 10), true
		},
		read: func(dst []byte, raw json.RawMessage) ([]byte, error) {
			var u uint64
			if signed {
				v, err := strconv.ParseInt(string(raw), 10, w)
				if err != nil {
					return nil, fmt.Errorf("want an integer of %d bits: %v", w, err)
				}
				u = uint64(v) ^ flip
			} else {
				v, err := strconv.ParseUint(string(raw), 10, w)
				if err != nil {
					return nil, fmt.Errorf("want an unsigned integer of %d bits: %v", w, err)
				}
				u = v
			}
			for i := n - 1; i >= 0; i-- {
				dst = append(dst, byte(u>>(8*i)))
			}
			return dst, nil
		},
	}
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	j, _ := json.Marshal(s)
	return append(dst, j...)
}

// appendFloat appends f as a JSON number, or reports false for NaN and
// the infinities, which JSON has no number for.
func appendFloat(dst []byte, f float64, bits int) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits), true
}

func parseFloat(raw json.RawMessage, bits int) (float64, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("want a number: %v", err)
	}
	f, err := strconv.ParseFloat(string(n), bits)
	if err != nil {
		return 0, fmt.Errorf("want a float%d: %v", bits, err)
	}
	return f, nil
}

// schema is a struct codec's schema as its ID spells it
// (statetable.Struct): fields in order, each a name and a kind or a
// nested schema.
type schema []field

type field struct {
	name string
	kind string // bool, int8..int64, uint8..uint64, float32, float64, string, bytes, time, struct
	sub  schema
}

// schemaOf returns the schema of a struct codec ID (statetable.ParseStructSchema).
func schemaOf(id string) (schema, error) {
	fs, err := statetable.ParseStructSchema(id)
	if err != nil {
		return nil, err
	}
	var conv func([]statetable.StructField) schema
	conv = func(fs []statetable.StructField) schema {
		sc := make(schema, len(fs))
		for i, f := range fs {
			sc[i] = field{name: f.Name, kind: f.Kind, sub: conv(f.Fields)}
		}
		return sc
	}
	return conv(fs), nil
}

// intBits is the width of each integer kind of a schema, negative for
// the unsigned ones.
var intBits = map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": -8, "uint16": -16, "uint32": -32, "uint64": -64}

// show appends the JSON object of the struct value at the start of b
// and returns what follows it; false if b does not hold one.
func (sc schema) show(dst, b []byte) ([]byte, []byte, bool) {
	dst = append(dst, '{')
	for i, f := range sc {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendString(dst, f.name), ':')
		var ok bool
		if dst, b, ok = f.show(dst, b); !ok {
			return dst, nil, false
		}
	}
	return append(dst, '}'), b, true
}

func (f field) show(dst, b []byte) ([]byte, []byte, bool) {
	if w, ok := intBits[f.kind]; ok {
		if w > 0 {
			x, n := binary.Varint(b)
			if n <= 0 || (w < 64 && (x < -1<<(w-1) || x >= 1<<(w-1))) {
				return dst, nil, false
			}
			return strconv.AppendInt(dst, x, 10), b[n:], true
		}
		x, n := binary.Uvarint(b)
		if n <= 0 || (w > -64 && x >= 1<<-w) {
			return dst, nil, false
		}
		return strconv.AppendUint(dst, x, 10), b[n:], true
	}
	switch f.kind {
	case "bool":
		if len(b) < 1 || b[0] > 1 {
			return dst, nil, false
		}
		return strconv.AppendBool(dst, b[0] == 1), b[1:], true
	case "float32":
		if len(b) < 4 {
			return dst, nil, false
		}
		dst, ok := appendFloat(dst, float64(math.Float32frombits(binary.BigEndian.Uint32(b))), 32)
		return dst, b[4:], ok
	case "float64":
		if len(b) < 8 {
			return dst, nil, false
		}
		dst, ok := appendFloat(dst, math.Float64frombits(binary.BigEndian.Uint64(b)), 64)
		return dst, b[8:], ok
	case "string", "bytes":
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return dst, nil, false
		}
		v := b[n : n+int(l)]
		if f.kind == "bytes" {
			j, _ := json.Marshal(v)
			return append(dst, j...), b[n+int(l):], true
		}
		if !utf8.Valid(v) {
			return dst, nil, false
		}
		return appendString(dst, string(v)), b[n+int(l):], true
	case "time":
		x, n := binary.Varint(b)
		if n <= 0 {
			return dst, nil, false
		}
		return appendString(dst, time.Unix(0, x).UTC().Format(time.RFC3339Nano)), b[n:], true
	case "struct":
		return f.sub.show(dst, b)
	}
	return dst, nil, false
}

// read appends the encoding of the JSON object raw: the fields of sc in
// order, a field the object lacks as its zero value; a member sc has no
// field of is an error.
func (sc schema) read(dst []byte, raw json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("want an object of fields %s, got %.40s", sc.names(), raw)
	}
	for name := range m {
		if !sc.has(name) {
			return nil, fmt.Errorf("no field %q in the schema (fields %s)", name, sc.names())
		}
	}
	for _, f := range sc {
		v, ok := m[f.name]
		var err error
		if dst, err = f.read(dst, v, ok); err != nil {
			return nil, fmt.Errorf("field %s: %v", f.name, err)
		}
	}
	return dst, nil
}

func (sc schema) has(name string) bool {
	for _, f := range sc {
		if f.name == name {
			return true
		}
	}
	return false
}

func (sc schema) names() string {
	var s []string
	for _, f := range sc {
		s = append(s, f.name)
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// read appends the encoding of raw as f's kind (its zero value if !ok).
func (f field) read(dst []byte, raw json.RawMessage, ok bool) ([]byte, error) {
	if !ok {
		if f.kind == "struct" {
			return f.sub.read(dst, json.RawMessage("{}"))
		}
		if f.kind == "time" {
			return binary.AppendVarint(dst, time.Time{}.UnixNano()), nil
		}
		raw = json.RawMessage(map[string]string{"bool": "false", "string": `""`, "bytes": `""`}[f.kind])
		if raw == nil {
			raw = json.RawMessage("0")
		}
	}
	if w, ok := intBits[f.kind]; ok {
		if w > 0 {
			x, err := strconv.ParseInt(string(raw), 10, w)
			if err != nil {
				return nil, fmt.Errorf("want an integer of %d bits: %v", w, err)
			}
			return binary.AppendVarint(dst, x), nil
		}
		x, err := strconv.ParseUint(string(raw), 10, -w)
		if err != nil {
			return nil, fmt.Errorf("want an unsigned integer of %d bits: %v", -w, err)
		}
		return binary.AppendUvarint(dst, x), nil
	}
	switch f.kind {
	case "bool":
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case "float32":
		v, err := parseFloat(raw, 32)
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(v))), err
	case "float64":
		v, err := parseFloat(raw, 64)
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v)), err
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return append(binary.AppendUvarint(dst, uint64(len(s))), s...), nil
	case "bytes":
		var b []byte
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, err
		}
		return append(binary.AppendUvarint(dst, uint64(len(b))), b...), nil
	case "time":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, err
		}
		return binary.AppendVarint(dst, t.UnixNano()), nil
	case "struct":
		return f.sub.read(dst, raw)
	}
	return nil, fmt.Errorf("unknown kind %s", f.kind)
}
