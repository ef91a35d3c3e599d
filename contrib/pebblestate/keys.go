package pebblestate

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// The key layout. Every entry and every timer of the backend is one key of
// one Pebble keyspace, and every such key starts with its key group as two
// big-endian bytes, so that the data of a key-group range is one key range
// (a share is restored, written or dropped as a range):
//
//	entry        kg:2 's' esc(state) esc(key) esc(ns)              -> value
//	map entry    kg:2 's' esc(state) esc(key) esc(ns) esc(userKey) -> user value
//	timer        kg:2 't' esc(service) domain:1 ts:8 esc(key) esc(ns) -> ""
//	registration ff ff 's' esc(state) -> kind:1
//	             ff ff 'p' -> uvarint max parallelism
//	             ff ff 'i' esc(state) -> codec IDs and TTL flag (savepoint.go)
//	             ff ff 'c' esc(service) -> key and namespace codec IDs
//
// esc(s) is s with every 0x00 byte written 0x00 0xff, then 0x00 0x01: it is
// prefix-free (so the entries of one state, or one (key, namespace) of a
// map, are a key range) and keeps the byte order of s (so the timers of one
// key group are in firing order: timestamp, then key bytes, then namespace
// bytes). ts is the timestamp with its sign bit flipped, big-endian, so
// that negative timestamps sort first. Key groups are below 2^15, so the
// registrations at ff ff are outside every key-group range.
//
// A value state's value, a reducing state's value and an aggregating
// state's accumulator are stored as they are (Put writes no "", a restored
// savepoint may); a list is uvarint(count) then uvarint(len(e)) e for each
// element. In a state with a TTL, each of these values, each list element
// and each map value is its expiration timestamp (8 bytes, big-endian)
// then its bytes, as in a cowstate savepoint's cells.

const (
	tagState = 's'
	tagTimer = 't'
	tagKind  = 's' // under metaPrefix
	tagMaxP  = 'p' // under metaPrefix
	tagInfo  = 'i' // under metaPrefix
	tagCodec = 'c' // under metaPrefix
)

// metaPrefix is the prefix of the registrations, above every key group.
var metaPrefix = []byte{0xff, 0xff}

// kgPrefix appends the key group's two bytes.
func kgPrefix(dst []byte, kg int) []byte { return append(dst, byte(kg>>8), byte(kg)) }

// appendEsc appends esc(s).
func appendEsc(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xff)
		} else {
			dst = append(dst, s[i])
		}
	}
	return append(dst, 0, 1)
}

// cutEsc decodes one esc component at the start of b and returns it and the
// rest.
func cutEsc(b []byte) (s string, rest []byte, err error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case 1:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			return string(append(out, b[:i]...)), b[i+2:], nil
		case 0xff:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
			i = -1
		default:
			return "", nil, fmt.Errorf("byte %#x after 0x00", b[i+1])
		}
	}
	return "", nil, fmt.Errorf("component without its terminator")
}

// entryKey is the key of the entry (key, ns) of a state in key group kg.
func entryKey(kg int, state, key, ns string) []byte {
	b := kgPrefix(make([]byte, 0, 3+len(state)+len(key)+len(ns)+6), kg)
	b = append(b, tagState)
	b = appendEsc(b, state)
	b = appendEsc(b, key)
	return appendEsc(b, ns)
}

// statePrefix is the prefix of every entry of a state in key group kg.
func statePrefix(kg int, state string) []byte {
	return appendEsc(append(kgPrefix(nil, kg), tagState), state)
}

// mapKey is the key of a user key of the map (key, ns).
func mapKey(kg int, state, key, ns, userKey string) []byte {
	return appendEsc(entryKey(kg, state, key, ns), userKey)
}

// queuePrefix is the prefix of the timers of a service in a domain in key
// group kg.
func queuePrefix(kg int, service string, d timerqueue.Domain) []byte {
	b := appendEsc(append(kgPrefix(nil, kg), tagTimer), service)
	return append(b, byte(d))
}

func timerKey(kg int, service string, d timerqueue.Domain, key, ns string, ts int64) []byte {
	b := binary.BigEndian.AppendUint64(queuePrefix(kg, service, d), uint64(ts)^(1<<63))
	b = appendEsc(b, key)
	return appendEsc(b, ns)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // no upper bound
}

func kindKey(state string) []byte { return appendEsc(append(bytes.Clone(metaPrefix), tagKind), state) }

func infoKey(state string) []byte { return appendEsc(append(bytes.Clone(metaPrefix), tagInfo), state) }

func codecKey(service string) []byte {
	return appendEsc(append(bytes.Clone(metaPrefix), tagCodec), service)
}

// parsedKey is a database key of a key group, decoded.
type parsedKey struct {
	kg               int
	timer            bool
	name             string // state or service
	domain           timerqueue.Domain
	ts               int64
	key, ns, userKey string
	hasUserKey       bool
}

// parseKey decodes a key of a key group (not a registration).
func parseKey(k []byte) (p parsedKey, err error) {
	if len(k) < 3 {
		return p, fmt.Errorf("key of %d bytes", len(k))
	}
	p.kg = int(k[0])<<8 | int(k[1])
	tag, rest := k[2], k[3:]
	if p.name, rest, err = cutEsc(rest); err != nil {
		return p, err
	}
	switch tag {
	case tagState:
	case tagTimer:
		p.timer = true
		if len(rest) < 9 {
			return p, fmt.Errorf("timer key too short")
		}
		p.domain = timerqueue.Domain(rest[0])
		if p.domain != timerqueue.EventTime && p.domain != timerqueue.ProcessingTime {
			return p, fmt.Errorf("timer domain %d", rest[0])
		}
		p.ts = int64(binary.BigEndian.Uint64(rest[1:9]) ^ (1 << 63))
		rest = rest[9:]
	default:
		return p, fmt.Errorf("tag %#x", tag)
	}
	if p.key, rest, err = cutEsc(rest); err != nil {
		return p, err
	}
	if p.ns, rest, err = cutEsc(rest); err != nil {
		return p, err
	}
	if len(rest) > 0 && !p.timer {
		if p.userKey, rest, err = cutEsc(rest); err != nil {
			return p, err
		}
		p.hasUserKey = true
	}
	if len(rest) > 0 {
		return p, fmt.Errorf("%d bytes after the key", len(rest))
	}
	return p, nil
}

// encodeList encodes a list value.
func encodeList(elems []string) []byte {
	n := binary.MaxVarintLen64
	for _, e := range elems {
		n += binary.MaxVarintLen64 + len(e)
	}
	b := binary.AppendUvarint(make([]byte, 0, n), uint64(len(elems)))
	for _, e := range elems {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// decodeList decodes a list value; a count or length past the end of b is
// an error (no allocation beyond len(b)).
func decodeList(b []byte) ([]string, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("bad list count")
	}
	b = b[k:]
	out := make([]string, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("bad list element length")
		}
		out = append(out, string(b[k:k+int(l)]))
		b = b[k+int(l):]
	}
	if len(b) > 0 {
		return nil, fmt.Errorf("%d bytes after the list", len(b))
	}
	return out, nil
}

// keyGroupOfKey is the key group a database key starts with.
func keyGroupOfKey(k []byte) int { return int(k[0])<<8 | int(k[1]) }

// scan calls fn with every key (and its value) of it that has the prefix
// prefix(kg) for a key group kg of kgs, in key order. A seek that lands in
// a later key group skips the key groups in between, which hold nothing:
// O(key groups holding data + keys) seeks and steps, not O(key groups), so
// that a backend of many key groups and little data reads little.
func scan(it *pebble.Iterator, kgs statetable.KeyGroupRange, prefix func(kg int) []byte, fn func(k, v []byte) error) error {
	for kg := kgs.First; kg <= kgs.Last && !kgs.Empty(); {
		p := prefix(kg)
		ok := it.SeekGE(p)
		for ; ok && bytes.HasPrefix(it.Key(), p); ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if err := fn(it.Key(), v); err != nil {
				return err
			}
		}
		if err := it.Error(); err != nil || !ok {
			return err
		}
		if next := keyGroupOfKey(it.Key()); next > kg {
			kg = next
		} else {
			kg++
		}
	}
	return nil
}
