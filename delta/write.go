package delta

import (
	"context"
	"encoding/binary"
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
// if not nil, counts bytes and changes as they are written. Any goroutine;
// d must not be modified meanwhile.
func Write(ctx context.Context, w io.Writer, d *Delta, prog *snapshot.Progress) error {
	stateIndex := map[string]int{}
	for i, s := range sortedStates(d) {
		stateIndex[s] = i
	}
	serviceIndex := map[string]int{}
	for i, t := range sortedServices(d) {
		serviceIndex[t] = i
	}
	return writeSections(ctx, w, d, d.Groups(), func(g int) ([]byte, int) {
		return encodeGroup(d.groups[g], stateIndex, serviceIndex)
	}, prog)
}

// writeSections writes a delta file: the header of d, the section of each
// of groups in order (section returns its bytes, end tag included, and its
// number of changes), the index and the footer.
func writeSections(ctx context.Context, w io.Writer, d *Delta, groups []int, section func(g int) ([]byte, int), prog *snapshot.Progress) error {
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
		sec, n := section(g)
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

// encodeGroup encodes one key group's section; n counts its changes.
func encodeGroup(gr *group, stateIndex, serviceIndex map[string]int) (sec []byte, n int) {
	size := 1
	for _, ops := range gr.states {
		for ck, op := range ops {
			size += len(ck) + len(op.cell) + 8
		}
	}
	sec = make([]byte, 0, size+32*len(gr.timers))
	for _, state := range sortedKeys(gr.states) {
		ops := gr.states[state]
		if len(ops) == 0 {
			continue
		}
		sec = append(sec, tagState)
		sec = binary.AppendUvarint(sec, uint64(stateIndex[state]))
		sec = binary.AppendUvarint(sec, uint64(len(ops)))
		for _, ck := range sortedKeys(ops) {
			op := ops[ck]
			sec = appendEntry(sec, op.kind(), []byte(ck), op.cell, op.partList())
		}
		n += len(ops)
	}
	timers := make([]timerChange, 0, len(gr.timers))
	for t, present := range gr.timers {
		timers = append(timers, timerChange{service: serviceIndex[t.service], domain: t.domain, t: t.timer(), present: present})
	}
	sec = appendTimers(sec, timers)
	n += len(timers)
	return append(sec, tagEnd), n
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
