package delta

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/timerqueue"
)

const (
	headerMagic = "CWDELTA\x01"
	footerMagic = "CWDELTND"
	// formatVersion is the version written: 2 carries the metadata of
	// snapshot format 2 (states with a TTL, whose cells and parts carry
	// expiration timestamps); minFormatVersion the oldest read.
	formatVersion    = 2
	minFormatVersion = 1

	tagEnd    = fileformat.TagEnd
	tagState  = fileformat.TagState
	tagTimers = fileformat.TagTimers

	opPut      = 1
	opDelete   = 2
	opPatch    = 3
	opPutPatch = 4
)

// Write encodes d to w in the delta format (see doc.go): header, one
// section per changed key group, index, footer. The encoding is canonical:
// equal deltas give equal bytes. ctx is checked between sections; prog,
// if not nil, counts bytes and changes as they are written. A change of a
// state or timer service d.Meta does not list is an error matching
// ErrMismatch. Any goroutine; d must not be modified meanwhile.
func Write(ctx context.Context, w io.Writer, d *Delta, prog *snapshot.Progress) error {
	ix := indexesOf(d)
	return writeSections(ctx, w, d, d.Groups(), func(g int) ([]byte, int, error) {
		return encodeGroup(d.groups[g], ix)
	}, prog)
}

// writeSections writes a delta file: the header of d, the section of each
// of groups in order (section returns its bytes, end tag included, and its
// number of changes, or an error that ends the write), the index and the
// footer.
func writeSections(ctx context.Context, w io.Writer, d *Delta, groups []int, section func(g int) ([]byte, int, error), prog *snapshot.Progress) error {
	meta := snapshot.AppendMeta(nil, d.Meta)
	buf := append([]byte(headerMagic), 0, formatVersion)
	buf = binary.BigEndian.AppendUint64(buf, d.Base)
	buf = binary.BigEndian.AppendUint64(buf, d.Target)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(meta)))
	buf = append(buf, meta...)
	buf = binary.BigEndian.AppendUint64(buf, xxhash.Sum64(buf))
	off := int64(0)
	emit := func(b []byte) error {
		n, err := w.Write(b)
		off += int64(n)
		if prog != nil {
			prog.Bytes.Add(int64(n))
		}
		return err
	}
	if err := emit(buf); err != nil {
		return err
	}
	index := binary.AppendUvarint(nil, uint64(len(groups)))
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		sec, n, err := section(g)
		if err != nil {
			return err
		}
		index = fileformat.AppendSection(index, fileformat.Section{Group: g, Off: off, Length: int64(len(sec)), Sum: xxhash.Sum64(sec)})
		if err := emit(sec); err != nil {
			return err
		}
		if prog != nil {
			prog.Entries.Add(int64(n))
		}
	}
	indexOff := off
	if err := emit(index); err != nil {
		return err
	}
	return emit(fileformat.AppendFooter(nil, indexOff, index, footerMagic))
}

// sortedStates and sortedServices return the names the metadata lists, in
// the order AppendMeta writes them (by name): a section refers to them by
// position.
func sortedStates(d *Delta) []string {
	names := make(map[string]bool, len(d.Meta.States))
	for _, s := range d.Meta.States {
		names[s.Name] = true
	}
	return sortedKeys(names)
}

func sortedServices(d *Delta) []string {
	names := make(map[string]bool, len(d.Meta.Timers))
	for _, t := range d.Meta.Timers {
		names[t.Name] = true
	}
	return sortedKeys(names)
}

// indexes numbers the states and timer services of a delta's metadata as
// a section refers to them: by position in name order (see sortedStates).
type indexes struct{ states, services map[string]int }

func indexesOf(d *Delta) indexes {
	ix := indexes{states: map[string]int{}, services: map[string]int{}}
	for i, s := range sortedStates(d) {
		ix.states[s] = i
	}
	for i, t := range sortedServices(d) {
		ix.services[t] = i
	}
	return ix
}

// keyedOp is one entry change of a section: its composite key and op.
type keyedOp struct {
	ck string
	op entryOp
}

// encodeGroup encodes one key group's section of a Delta; n counts its
// changes.
func encodeGroup(gr *group, ix indexes) (sec []byte, n int, err error) {
	states := make(map[string][]keyedOp, len(gr.states))
	for state, ops := range gr.states {
		run := make([]keyedOp, 0, len(ops))
		for _, ck := range sortedKeys(ops) {
			run = append(run, keyedOp{ck, *ops[ck]})
		}
		states[state] = run
	}
	return encodeSection(states, gr.timers, ix)
}

// encodeSection encodes a key group's section: each state's entries (runs
// sorted by composite key, each key once) as one state record, states and
// timer services numbered by ix, timers in firing order. n counts the
// changes. A state or service ix does not number is an error matching
// ErrMismatch.
func encodeSection(states map[string][]keyedOp, timers map[timerKey]bool, ix indexes) (sec []byte, n int, err error) {
	size := 1
	for _, ops := range states {
		for _, o := range ops {
			size += len(o.ck) + len(o.op.cell) + 8
		}
	}
	sec = make([]byte, 0, size+32*len(timers))
	for _, state := range sortedKeys(states) {
		ops := states[state]
		if len(ops) == 0 {
			continue
		}
		si, ok := ix.states[state]
		if !ok {
			return nil, 0, fmt.Errorf("%w: state %q is not in the delta's metadata", ErrMismatch, state)
		}
		sec = append(sec, tagState)
		sec = binary.AppendUvarint(sec, uint64(si))
		sec = binary.AppendUvarint(sec, uint64(len(ops)))
		for _, o := range ops {
			sec = appendEntry(sec, o.op.kind(), []byte(o.ck), o.op.cell, o.op.partList())
		}
		n += len(ops)
	}
	sec, nt, err := appendTimerChanges(sec, timers, ix)
	if err != nil {
		return nil, 0, err
	}
	return append(sec, tagEnd), n + nt, nil
}

// appendTimerChanges appends a key group's timer changes as timer records
// (see appendTimers) and returns their number. A service ix does not
// number is an error matching ErrMismatch.
func appendTimerChanges(sec []byte, timers map[timerKey]bool, ix indexes) ([]byte, int, error) {
	if len(timers) == 0 {
		return sec, 0, nil
	}
	changes := make([]timerChange, 0, len(timers))
	for t, present := range timers {
		si, ok := ix.services[t.service]
		if !ok {
			return nil, 0, fmt.Errorf("%w: timer service %q is not in the delta's metadata", ErrMismatch, t.service)
		}
		changes = append(changes, timerChange{service: si, domain: t.domain, t: t.timer(), present: present})
	}
	return appendTimers(sec, changes), len(changes), nil
}

// kind returns the op code an entry op is written with.
func (op *entryOp) kind() byte {
	switch {
	case op.deleted:
		return opDelete
	case op.put && len(op.parts) > 0:
		return opPutPatch
	case op.put:
		return opPut
	}
	return opPatch
}

// timer returns the timer a timer key names.
func (t timerKey) timer() timerqueue.Timer {
	return timerqueue.Timer{Timestamp: t.ts, Key: t.key, Namespace: t.ns}
}
