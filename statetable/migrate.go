package statetable

import (
	"encoding/binary"
	"fmt"
)

// CheckRestorable returns nil if the registered state name can restore
// the entries a state described by file wrote: the same kind, key and
// namespace codecs, and value codecs that are the same or that the
// registered ones read (Evolving: migration at restore); a file's state
// with a TTL needs one here too. Otherwise an error matching
// ErrStateMismatch (ErrIncompatible when only the values cannot be read)
// naming the state, the file's codecs and the registered ones. Writer
// goroutine only.
func (t *Table) CheckRestorable(name string, file StateInfo) error {
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	_, err := restorable(r, file)
	return err
}

// restorable implements CheckRestorable for registered state r, and
// returns the file's value codec ID if its values migrate ("" if not).
func restorable(r registered, file StateInfo) (string, error) {
	have := r.info()
	switch {
	case have.Kind != file.Kind || len(have.Codec) != len(file.Codec) || have.Codec[0] != file.Codec[0] || have.Codec[1] != file.Codec[1]:
		return "", fmt.Errorf("%w: file has %v, backend has %v (keys and namespaces never migrate: their bytes decide the key group)", ErrStateMismatch, file, have)
	case file.TTL && !have.TTL:
		return "", fmt.Errorf("%w: file has %v, backend has it without TTL: register it with one", ErrStateMismatch, file)
	}
	from, err := migrationOf(have, file)
	if err != nil || from == "" {
		return "", err
	}
	if _, err := r.transcoder(from); err != nil {
		return "", err
	}
	return from, nil
}

// migrationOf returns the file's value codec ID if the state's values
// were written by another codec ("" if by the registered one). The values'
// codec is the last of a state's codecs (a list's elements, a map's user
// values); a map's user keys, like keys and namespaces, never migrate:
// their bytes order the map's cells.
func migrationOf(have, file StateInfo) (string, error) {
	vi := len(have.Codec) - 1
	for i := 2; i < vi; i++ {
		if have.Codec[i] != file.Codec[i] {
			return "", fmt.Errorf("%w: state %q: file has %v, backend has %v (a map's user keys never migrate: their bytes order its cells)", ErrStateMismatch, have.Name, file, have)
		}
	}
	if have.Codec[vi] == file.Codec[vi] {
		return "", nil
	}
	return file.Codec[vi], nil
}

// RestoreRunOf is RestoreRun of entries written by the state file
// describes (see CheckRestorable): entries with TTL timestamps if it had
// a TTL, and, if the file's value codec differs from the registered one,
// values migrated: the run is rewritten in the registered codec's
// encoding first (each value decoded by the registered codec's decoder of
// the file's codec and encoded again; TTL timestamps, keys, namespaces and
// map user keys copied), then restored as any other. A migrated run costs
// a decode and an encode per value and a copy of the run. Writer goroutine
// only.
func (t *Table) RestoreRunOf(name string, file StateInfo, n int, b []byte) (int, error) {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	from, err := restorable(r, file)
	if err != nil {
		return 0, err
	}
	if from == "" {
		return t.RestoreRunFrom(name, file.TTL, n, b)
	}
	if n < 0 || n > len(b)/2 {
		return 0, fmt.Errorf("%w: state %q: %d entries cannot fit in %d bytes", ErrDecode, name, n, len(b))
	}
	tc, err := r.transcoder(from)
	if err != nil {
		return 0, err
	}
	run, used, err := transcodeRun(file, tc, n, b)
	if err != nil {
		return 0, fmt.Errorf("state %q: migrating values of %s: %w", name, from, err)
	}
	if _, err := t.RestoreRunFrom(name, file.TTL, n, run); err != nil {
		return 0, err
	}
	return used, nil
}

// ApplyEntriesOf is ApplyEntries of changes written by the state file
// describes, migrating values as RestoreRunOf does: whole cells and the
// values of list and map parts. Writer goroutine only.
func (t *Table) ApplyEntriesOf(name string, file StateInfo, ops []EntryOp) error {
	t.entryWrites++
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	from, err := restorable(r, file)
	if err != nil {
		return err
	}
	if from != "" {
		tc, err := r.transcoder(from)
		if err != nil {
			return err
		}
		if ops, err = transcodeOps(file, tc, ops); err != nil {
			return fmt.Errorf("state %q: migrating values of %s: %w", name, from, err)
		}
	}
	return t.ApplyEntriesFrom(name, file.TTL, ops)
}

// valueTranscoder appends to dst the registered codec's encoding of the
// value an earlier codec encoded as old.
type valueTranscoder func(dst, old []byte) ([]byte, error)

// valueMigration returns, for a state's value codec vc, what its cells'
// migrate field holds: the transcoder of values an earlier codec wrote,
// built from vc's decoder of them (Evolving.DecoderFor); nil if vc is
// not Evolving.
func valueMigration[V any](vc Codec[V]) func(from string) (valueTranscoder, error) {
	e, ok := vc.(Evolving[V])
	if !ok {
		return nil
	}
	return func(from string) (valueTranscoder, error) {
		dec, err := e.DecoderFor(from)
		if err != nil {
			return nil, err
		}
		return func(dst, old []byte) ([]byte, error) {
			v, err := dec(old)
			if err != nil {
				return nil, err
			}
			return vc.Append(dst, v), nil
		}, nil
	}
}

// transcodeValue appends the migrated encoding of one value of a cell:
// its expiration timestamp first, copied, if the file's state had a TTL.
func transcodeValue(dst, old []byte, stamped bool, tc valueTranscoder) ([]byte, error) {
	if stamped {
		if len(old) < 8 {
			return nil, fmt.Errorf("%w: expiration timestamp: %d bytes, want at least 8", ErrDecode, len(old))
		}
		dst = append(dst, old[:8]...)
		old = old[8:]
	}
	return tc(dst, old)
}

// transcodeCell appends the migrated encoding of a cell of kind (see the
// cell encodings in package snapshot): a value, or a list's elements, or
// a map's user values, each transcoded; counts and user keys copied.
func transcodeCell(dst, cell []byte, kind Kind, stamped bool, tc valueTranscoder) ([]byte, error) {
	if kind != KindList && kind != KindMap {
		return transcodeValue(dst, cell, stamped, tc)
	}
	per := 1
	if kind == KindMap {
		per = 2
	}
	n, rest, err := readCount(cell, per)
	if err != nil {
		return nil, err
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	var blob, v []byte
	for range n {
		if kind == KindMap {
			if blob, rest, err = readBlob(rest); err != nil {
				return nil, err
			}
			dst = appendBlob(dst, blob)
		}
		if blob, rest, err = readBlob(rest); err != nil {
			return nil, err
		}
		if v, err = transcodeValue(v[:0], blob, stamped, tc); err != nil {
			return nil, err
		}
		dst = appendBlob(dst, v)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the cell's %d elements", ErrDecode, len(rest), n)
	}
	return dst, nil
}

// transcodeRun returns a run of n entries of b (as RestoreRun reads them)
// with every cell migrated, and how many bytes of b the run took. The new
// run is a fresh buffer, since a restore may keep the bytes it restores.
func transcodeRun(file StateInfo, tc valueTranscoder, n int, b []byte) (run []byte, used int, err error) {
	run = make([]byte, 0, len(b)+len(b)/4)
	var cell []byte
	for i := range n {
		var key, old []byte
		rest := b[used:]
		if key, rest, err = readBlob(rest); err == nil {
			old, rest, err = readBlob(rest)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("entry %d of %d at offset %d: %w", i, n, used, err)
		}
		if cell, err = transcodeCell(cell[:0], old, file.Kind, file.TTL, tc); err != nil {
			return nil, 0, fmt.Errorf("entry %d of %d at offset %d: %w", i, n, used, err)
		}
		run = appendBlob(appendBlob(run, key), cell)
		used = len(b) - len(rest)
	}
	return run, used, nil
}

// transcodeOps returns ops with their cells and the values of their parts
// migrated (a list's or map's changed elements; deleted parts carry
// none), in fresh buffers.
func transcodeOps(file StateInfo, tc valueTranscoder, ops []EntryOp) ([]EntryOp, error) {
	out := make([]EntryOp, len(ops))
	for i, op := range ops {
		out[i] = op
		var err error
		if op.Put {
			if out[i].Cell, err = transcodeCell(nil, op.Cell, file.Kind, file.TTL, tc); err != nil {
				return nil, fmt.Errorf("change %d: %w", i, err)
			}
		}
		if len(op.Parts) == 0 {
			continue
		}
		out[i].Parts = make([]Part, len(op.Parts))
		for j, p := range op.Parts {
			if !p.Deleted {
				if p.Value, err = transcodeValue(nil, p.Value, file.TTL, tc); err != nil {
					return nil, fmt.Errorf("change %d, part %d: %w", i, j, err)
				}
			}
			out[i].Parts[j] = p
		}
	}
	return out, nil
}

// transcoder implements registered.transcoder, building a codec's
// transcoder once.
func (c *cells[K, N, C]) transcoder(from string) (valueTranscoder, error) {
	if tc, ok := c.migrations[from]; ok {
		return tc, nil
	}
	if c.migrate == nil {
		return nil, fmt.Errorf("%w: state %q: its value codec %s is not Evolving and cannot read values of %s", ErrIncompatible, c.info.Name, c.info.Codec[len(c.info.Codec)-1], from)
	}
	tc, err := c.migrate(from)
	if err != nil {
		return nil, fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	if c.migrations == nil {
		c.migrations = map[string]valueTranscoder{}
	}
	c.migrations[from] = tc
	return tc, nil
}
