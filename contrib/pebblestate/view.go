package pebblestate

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// view is a Capture: a Pebble snapshot, with the states and services
// registered at capture. Pebble snapshots may be read from any goroutine,
// so a view may too.
type view struct {
	b        *Backend // kept reachable while the view is
	snap     *pebble.Snapshot
	maxPar   int
	owned    statetable.KeyGroupRange
	kinds    map[string]statetable.Kind
	services []string // sorted
	infos    map[string]statetable.StateInfo
	codecs   map[string][2]string
	ttls     map[string]statetable.TTL
	now      int64 // the clock at capture: what has expired by then is left out
	release  sync.Once
}

// Capture implements contract.Backend.Capture with a Pebble snapshot:
// O(number of states and services); the database keeps the versions the
// view reads until it is released.
func (b *Backend) Capture() contract.View {
	return &view{b: b, snap: b.db.NewSnapshot(), maxPar: b.maxPar, owned: b.owned, kinds: maps.Clone(b.kinds),
		services: slices.Sorted(maps.Keys(b.services)), infos: maps.Clone(b.infos), codecs: maps.Clone(b.codecs), ttls: maps.Clone(b.ttls), now: b.clock()}
}

func (v *view) StateEntries(state string) ([]contract.Entry, error) {
	kind, ok := v.kinds[state]
	if !ok {
		return nil, fmt.Errorf("%w %q in the view", statetable.ErrUnknownState, state)
	}
	_, ttl := v.ttls[state]
	return stateEntries(v.snap, v.owned, state, kind, ttl, v.now)
}

func (v *view) TimerEntries(service string, d timerqueue.Domain) ([]contract.Timer, error) {
	if !slices.Contains(v.services, service) {
		return nil, fmt.Errorf("%w: no timer service %q in the view", contract.ErrUnknownTimerService, service)
	}
	return timerEntries(v.snap, v.owned, service, d)
}

// Release closes the Pebble snapshot. Idempotent; any goroutine.
func (v *view) Release() { v.release.Do(func() { v.snap.Close() }) }

// The snapshot format (all integers little-endian unless said otherwise):
//
//	file    = magic section* index footer
//	magic   = "PBSTATE1"
//	section = record*                     the keys of one key group, ascending
//	record  = uvarint(len k) k uvarint(len v) v   a database key (keys.go) and its value
//	index   = uvarint(max parallelism)
//	          uvarint(n) n * (uvarint(len name) name kind:1)      the states;
//	                                       kind | 0x80: a state with a TTL
//	          uvarint(n) n * (uvarint(len name) name)             the timer services
//	          uvarint(n) n * (uvarint(kg) uvarint(offset) uvarint(length) crc:4)
//	                                       the sections, by key group ascending;
//	                                       crc is the CRC-32C of the section
//	footer  = indexOffset:8 indexLength:4 indexCRC:4 "PBSTATE1"   (24 bytes)
//
// A restore reads the footer, the index, and the sections of the key
// groups it owns: O(index + owned data).
const (
	magic      = "PBSTATE1"
	footerSize = 8 + 4 + 4 + len(magic)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// countingWriter counts what it writes and its CRC since the last reset.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	crc uint32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

type sectionEntry struct {
	kg          int
	off, length int64
	crc         uint32
}

// WriteSnapshot writes every entry and timer of the view's key groups in
// the format above, but what had expired at the capture. O(data); any goroutine; ctx is checked between key
// groups.
func (v *view) WriteSnapshot(ctx context.Context, w io.Writer) error {
	cw := &countingWriter{w: bufio.NewWriterSize(w, 64<<10)}
	if _, err := io.WriteString(cw, magic); err != nil {
		return err
	}
	it, err := v.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var sections []sectionEntry
	var rec []byte
	cur := sectionEntry{kg: -1}
	err = scan(it, v.owned, func(kg int) []byte { return kgPrefix(nil, kg) }, func(k, val []byte) error {
		if kg := keyGroupOfKey(k); kg != cur.kg {
			if err := ctx.Err(); err != nil {
				return err
			}
			if cur.kg >= 0 {
				cur.length, cur.crc = cw.n-cur.off, cw.crc
				sections = append(sections, cur)
			}
			cur, cw.crc = sectionEntry{kg: kg, off: cw.n}, 0
		}
		if len(v.ttls) > 0 {
			// What has expired at the capture is left out.
			pk, err := parseKey(k)
			if err != nil {
				return fmt.Errorf("%w: key %x: %v", ErrCorrupt, k, err)
			}
			if _, ttl := v.ttls[pk.name]; ttl && !pk.timer {
				live, keep, err := liveStored(v.kinds[pk.name], val, v.now)
				if err != nil {
					return fmt.Errorf("%w: (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, pk.name, err)
				}
				if !keep {
					return nil
				}
				val = live
			}
		}
		rec = binary.AppendUvarint(rec[:0], uint64(len(k)))
		rec = append(rec, k...)
		rec = binary.AppendUvarint(rec, uint64(len(val)))
		rec = append(rec, val...)
		_, err := cw.Write(rec)
		return err
	})
	if err != nil {
		return err
	}
	if cur.kg >= 0 {
		cur.length, cur.crc = cw.n-cur.off, cw.crc
		sections = append(sections, cur)
	}
	idx := binary.AppendUvarint(nil, uint64(v.maxPar))
	idx = binary.AppendUvarint(idx, uint64(len(v.kinds)))
	for _, name := range slices.Sorted(maps.Keys(v.kinds)) {
		idx = binary.AppendUvarint(idx, uint64(len(name)))
		kb := byte(v.kinds[name])
		if _, ttl := v.ttls[name]; ttl {
			kb |= ttlFlag
		}
		idx = append(append(idx, name...), kb)
	}
	idx = binary.AppendUvarint(idx, uint64(len(v.services)))
	for _, name := range v.services {
		idx = binary.AppendUvarint(idx, uint64(len(name)))
		idx = append(idx, name...)
	}
	idx = binary.AppendUvarint(idx, uint64(len(sections)))
	for _, s := range sections {
		idx = binary.AppendUvarint(idx, uint64(s.kg))
		idx = binary.AppendUvarint(idx, uint64(s.off))
		idx = binary.AppendUvarint(idx, uint64(s.length))
		idx = binary.LittleEndian.AppendUint32(idx, s.crc)
	}
	foot := binary.LittleEndian.AppendUint64(nil, uint64(cw.n))
	foot = binary.LittleEndian.AppendUint32(foot, uint32(len(idx)))
	foot = binary.LittleEndian.AppendUint32(foot, crc32.Checksum(idx, castagnoli))
	foot = append(foot, magic...)
	if _, err := cw.Write(idx); err != nil {
		return err
	}
	if _, err := cw.Write(foot); err != nil {
		return err
	}
	return cw.w.Flush()
}
