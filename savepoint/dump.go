package savepoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// The dump format is JSON lines: a header line, then one line per entry
// and per timer.
//
//	{"max_parallelism":128,"states":[{"name":"count","kind":"value","codecs":["string","void","int64/be-signflip"],"ttl":true}],"timers":[{"name":"t","codecs":["string","void"]}]}
//	{"state":"count","kg":17,"key":"alice","ns":null,"value":3,"expires":1700000000000}
//	{"state":"tags","kg":3,"key":"bob","ns":null,"list":[{"value":"a"},{"value":"b"}]}
//	{"state":"seen","kg":40,"key":7,"ns":null,"map":[{"key":"x","value":true}]}
//	{"timers":"t","domain":"event","kg":17,"ts":1000,"key":"alice","ns":null}
//
// Keys, namespaces and values are JSON for the codecs whose IDs say how
// they encode: "string" (a JSON string), "bytes" (base64, as
// encoding/json writes a []byte), "bool", "float64/be", "intN/be-signflip"
// and "uintN/be" (numbers), "void" (null), and Struct schemas
// ("struct{Name string;N int64}": an object of the fields, integers and
// floats as numbers, bytes as base64, time.Time as an RFC 3339 string).
// Any other value, and one that JSON cannot show exactly (a string that is
// not UTF-8, a NaN), is {"codec":ID,"base64":...}. "expires" is the
// expiration timestamp of a value, element or map value of a state with a
// TTL. "kg" is the key group, for reading; Bootstrap computes it anew.

type headerJSON struct {
	MaxParallelism int                       `json:"max_parallelism"`
	States         []stateHeaderJSON         `json:"states"`
	Timers         []timerHeaderJSON         `json:"timers"`
	KeyGroups      *statetable.KeyGroupRange `json:"key_groups,omitempty"`
}

type stateHeaderJSON struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Codecs []string `json:"codecs"`
	TTL    bool     `json:"ttl,omitempty"`
}

type timerHeaderJSON struct {
	Name   string    `json:"name"`
	Codecs [2]string `json:"codecs"`
}

// Dump writes the states and timers sel selects as JSON lines (the dump
// format, above): the header line of what it selected, then the entries
// and timers in file order. Cost: one read of the selected sections, one
// in memory at a time. Errors are Entries'; on the calling goroutine.
func (f *File) Dump(ctx context.Context, w io.Writer, sel Select) error {
	wk, err := f.resolve(sel)
	if err != nil {
		return err
	}
	h := headerJSON{MaxParallelism: f.meta.MaxParallelism, States: []stateHeaderJSON{}, Timers: []timerHeaderJSON{}}
	if f.meta.KeyGroups != statetable.AllKeyGroups(f.meta.MaxParallelism) {
		kgs := f.meta.KeyGroups
		h.KeyGroups = &kgs
	}
	infos := map[string]statetable.StateInfo{}
	timerCodecs := map[string][2]string{}
	for _, s := range f.meta.States {
		if wk.states[s.Name] {
			infos[s.Name] = s
			h.States = append(h.States, stateHeaderJSON{Name: s.Name, Kind: s.Kind.String(), Codecs: s.Codec, TTL: s.TTL})
		}
	}
	for _, t := range f.meta.Timers {
		if wk.timers[t.Name] {
			timerCodecs[t.Name] = t.Codecs
			h.Timers = append(h.Timers, timerHeaderJSON{Name: t.Name, Codecs: t.Codecs})
		}
	}
	bw := bufio.NewWriter(w)
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	bw.Write(append(hb, '\n'))
	cs := codecs{}
	var line []byte
	wk.onEntry = func(e *Entry) error {
		line = appendEntryJSON(line[:0], cs, infos[e.State], e)
		_, err := bw.Write(line)
		return err
	}
	wk.onTimer = func(t *Timer) error {
		line = appendTimerJSON(line[:0], cs, timerCodecs[t.Service], t)
		_, err := bw.Write(line)
		return err
	}
	if err := wk.run(ctx); err != nil {
		return err
	}
	return bw.Flush()
}

// appendEntryJSON appends the dump line of e, an entry of the state info
// describes.
func appendEntryJSON(dst []byte, cs codecs, info statetable.StateInfo, e *Entry) []byte {
	dst = append(dst, `{"state":`...)
	dst = appendString(dst, e.State)
	dst = append(dst, `,"kg":`...)
	dst = strconv.AppendInt(dst, int64(e.KeyGroup), 10)
	dst = append(dst, `,"key":`...)
	dst = cs.appendJSON(dst, info.Codec[0], e.Key)
	dst = append(dst, `,"ns":`...)
	dst = cs.appendJSON(dst, info.Codec[1], e.Namespace)
	vc := info.Codec[valueCodec(info.Kind)]
	value := func(dst []byte, v Value) []byte {
		dst = append(dst, `"value":`...)
		dst = cs.appendJSON(dst, vc, v.Bytes)
		if info.TTL {
			dst = append(dst, `,"expires":`...)
			dst = strconv.AppendInt(dst, v.Expires, 10)
		}
		return dst
	}
	switch info.Kind {
	case statetable.KindList:
		dst = append(dst, `,"list":[`...)
		for i, v := range e.List {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(value(append(dst, '{'), v), '}')
		}
		dst = append(dst, ']')
	case statetable.KindMap:
		dst = append(dst, `,"map":[`...)
		for i, m := range e.Map {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = cs.appendJSON(dst, info.Codec[2], m.Key)
			dst = append(value(append(dst, ','), m.Value), '}')
		}
		dst = append(dst, ']')
	default:
		dst = value(append(dst, ','), e.Value)
	}
	return append(dst, "}\n"...)
}

// appendTimerJSON appends the dump line of t, of a service with codecs.
func appendTimerJSON(dst []byte, cs codecs, codecs [2]string, t *Timer) []byte {
	dst = append(dst, `{"timers":`...)
	dst = appendString(dst, t.Service)
	dst = append(dst, `,"domain":"`...)
	dst = append(dst, domainName(t.Domain)...)
	dst = append(dst, `","kg":`...)
	dst = strconv.AppendInt(dst, int64(t.KeyGroup), 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, t.Timestamp, 10)
	dst = append(dst, `,"key":`...)
	dst = cs.appendJSON(dst, codecs[0], t.Key)
	dst = append(dst, `,"ns":`...)
	dst = cs.appendJSON(dst, codecs[1], t.Namespace)
	return append(dst, "}\n"...)
}

// lineJSON is an entry or timer line, as read.
type lineJSON struct {
	State   *string         `json:"state"`
	Timers  *string         `json:"timers"`
	KG      json.RawMessage `json:"kg"`
	Key     json.RawMessage `json:"key"`
	NS      json.RawMessage `json:"ns"`
	Value   json.RawMessage `json:"value"`
	Expires *int64          `json:"expires"`
	List    []valueJSON     `json:"list"`
	Map     []valueJSON     `json:"map"`
	Domain  string          `json:"domain"`
	TS      *int64          `json:"ts"`
}

type valueJSON struct {
	Key     json.RawMessage `json:"key"`
	Value   json.RawMessage `json:"value"`
	Expires *int64          `json:"expires"`
}

// MaxLine is the longest line BootstrapJSON reads, in bytes.
const MaxLine = 64 << 20

// BootstrapJSON writes to w the savepoint that lines in the dump format
// (above) describe, read from r: the header line first (max_parallelism,
// states with their kinds and codec IDs, timer services), then entry and
// timer lines in any order; blank lines are skipped. It is Bootstrap of
// what the lines hold, and costs the same (everything in memory). A line
// that is not JSON of the format, or does not fit the header (an unknown
// state, a value that does not encode by its codec ID, a missing or
// extra "expires"), is an error matching ErrLine (and the cause, such as
// statetable.ErrUnknownState or statetable.ErrDecode) naming the line
// number; a line longer than MaxLine too.
func BootstrapJSON(ctx context.Context, w io.Writer, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	n := 0
	lineErr := func(err error) error { return fmt.Errorf("%w: line %d: %w", ErrLine, n, err) }
	var o *out
	cs := codecs{}
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if o == nil {
			h, err := parseHeader(b)
			if err == nil {
				o, err = newBootstrap(h)
			}
			if err != nil {
				return lineErr(err)
			}
			continue
		}
		if err := o.addLine(cs, b); err != nil {
			return lineErr(err)
		}
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			n++
			return lineErr(fmt.Errorf("longer than %d bytes", MaxLine))
		}
		return fmt.Errorf("savepoint: reading line %d: %w", n+1, err)
	}
	if o == nil {
		return fmt.Errorf("%w: no header line (the input is empty)", ErrLine)
	}
	return o.write(ctx, w)
}

// strict unmarshals b into v, refusing members v has no field for.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	return nil
}

// parseHeader parses the header line.
func parseHeader(b []byte) (Header, error) {
	var hj headerJSON
	if err := strict(b, &hj); err != nil {
		return Header{}, fmt.Errorf("the header line: %v", err)
	}
	if hj.MaxParallelism == 0 {
		return Header{}, fmt.Errorf("the header line has no max_parallelism (the first line must be the header)")
	}
	h := Header{MaxParallelism: hj.MaxParallelism, KeyGroups: hj.KeyGroups}
	for _, s := range hj.States {
		k, ok := kindOf(s.Kind)
		if !ok {
			return Header{}, fmt.Errorf("%w: state %q: unknown kind %q (value, list, map, reducing or aggregating)", statetable.ErrConfig, s.Name, s.Kind)
		}
		h.States = append(h.States, statetable.StateInfo{Name: s.Name, Kind: k, Codec: s.Codecs, TTL: s.TTL})
	}
	for _, t := range hj.Timers {
		h.Timers = append(h.Timers, snapshot.TimerServiceInfo{Name: t.Name, Codecs: t.Codecs})
	}
	return h, nil
}

func kindOf(s string) (statetable.Kind, bool) {
	for k := statetable.KindValue; k <= statetable.KindAggregating; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// addLine adds the entry or timer of one line.
func (o *out) addLine(cs codecs, b []byte) error {
	var l lineJSON
	if err := strict(b, &l); err != nil {
		return err
	}
	null := json.RawMessage("null")
	if l.NS == nil {
		l.NS = null
	}
	if l.Key == nil {
		return fmt.Errorf("no key")
	}
	switch {
	case l.Timers != nil && l.State == nil:
		i := -1
		for j, t := range o.meta.Timers {
			if t.Name == *l.Timers {
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("%w: timer service %q: not in the header", statetable.ErrUnknownState, *l.Timers)
		}
		t := Timer{Service: *l.Timers}
		switch l.Domain {
		case "event":
			t.Domain = timerqueue.EventTime
		case "processing":
			t.Domain = timerqueue.ProcessingTime
		default:
			return fmt.Errorf("timer service %q: domain %q: want \"event\" or \"processing\"", t.Service, l.Domain)
		}
		if l.TS == nil {
			return fmt.Errorf("timer service %q: no ts", t.Service)
		}
		t.Timestamp = *l.TS
		var err error
		codecs := o.meta.Timers[i].Codecs
		if t.Key, err = cs.encode(nil, codecs[0], l.Key); err != nil {
			return fmt.Errorf("timer service %q: key: %w", t.Service, err)
		}
		if t.Namespace, err = cs.encode(nil, codecs[1], l.NS); err != nil {
			return fmt.Errorf("timer service %q: ns: %w", t.Service, err)
		}
		return o.addTimerChecked(cs, &t)
	case l.State == nil || l.Timers != nil:
		return fmt.Errorf(`want a line with "state" or one with "timers"`)
	}
	info, ok := o.infos[*l.State]
	if !ok {
		return fmt.Errorf("%w %q: not in the header", statetable.ErrUnknownState, *l.State)
	}
	e := Entry{State: info.Name}
	var err error
	if e.Key, err = cs.encode(nil, info.Codec[0], l.Key); err != nil {
		return fmt.Errorf("state %q: key: %w", info.Name, err)
	}
	if e.Namespace, err = cs.encode(nil, info.Codec[1], l.NS); err != nil {
		return fmt.Errorf("state %q: ns: %w", info.Name, err)
	}
	vc := info.Codec[valueCodec(info.Kind)]
	value := func(raw json.RawMessage, exp *int64) (Value, error) {
		switch {
		case raw == nil:
			return Value{}, fmt.Errorf("state %q: no value", info.Name)
		case info.TTL && exp == nil:
			return Value{}, fmt.Errorf("state %q has a TTL: every value needs \"expires\"", info.Name)
		case !info.TTL && exp != nil:
			return Value{}, fmt.Errorf("state %q has no TTL: no value has \"expires\"", info.Name)
		}
		b, err := cs.encode(nil, vc, raw)
		if err != nil {
			return Value{}, fmt.Errorf("state %q: value: %w", info.Name, err)
		}
		v := Value{Bytes: b}
		if exp != nil {
			v.Expires = *exp
		}
		return v, nil
	}
	switch info.Kind {
	case statetable.KindList:
		if l.Value != nil || l.Map != nil || l.Expires != nil {
			return fmt.Errorf("state %q is a list state: want \"list\" only", info.Name)
		}
		e.List = []Value{}
		for _, lv := range l.List {
			if lv.Key != nil {
				return fmt.Errorf("state %q: a list element has a key", info.Name)
			}
			v, err := value(lv.Value, lv.Expires)
			if err != nil {
				return err
			}
			e.List = append(e.List, v)
		}
	case statetable.KindMap:
		if l.Value != nil || l.List != nil || l.Expires != nil {
			return fmt.Errorf("state %q is a map state: want \"map\" only", info.Name)
		}
		e.Map = []MapEntry{}
		for _, mv := range l.Map {
			if mv.Key == nil {
				return fmt.Errorf("state %q: a map entry has no key", info.Name)
			}
			uk, err := cs.encode(nil, info.Codec[2], mv.Key)
			if err != nil {
				return fmt.Errorf("state %q: map key: %w", info.Name, err)
			}
			v, err := value(mv.Value, mv.Expires)
			if err != nil {
				return err
			}
			e.Map = append(e.Map, MapEntry{Key: uk, Value: v})
		}
	default:
		if l.List != nil || l.Map != nil {
			return fmt.Errorf("state %q is a %s state: want \"value\"", info.Name, info.Kind)
		}
		if e.Value, err = value(l.Value, l.Expires); err != nil {
			return err
		}
	}
	if err := o.addChecked(cs, &e); err != nil {
		return err
	}
	return o.add(e.State, &e)
}
