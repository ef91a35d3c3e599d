package statetable

import "fmt"

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
	if _, err := r.migrator(from); err != nil {
		return "", err
	}
	return from, nil
}

// migrationOf returns the file's value codec ID if the state's values
// were written by another codec ("" if by the registered one): only value,
// reducing and aggregating states without a TTL migrate.
func migrationOf(have, file StateInfo) (string, error) {
	same := true
	for i := 2; i < len(have.Codec); i++ {
		same = same && have.Codec[i] == file.Codec[i]
	}
	switch {
	case same:
		return "", nil
	case have.Kind == KindList || have.Kind == KindMap || have.TTL || file.TTL:
		return "", fmt.Errorf("%w: state %q: file has %v, backend has %v: values migrate in value, reducing and aggregating states without a TTL only", ErrIncompatible, have.Name, file, have)
	}
	return file.Codec[2], nil
}

// RestoreRunOf is RestoreRun of entries written by the state file
// describes (see CheckRestorable): entries with TTL timestamps if it had
// a TTL, and values decoded by the registered codec's decoder of the
// file's codec if that differs (migration: they are re-encoded by the
// registered codec when next written out). Writer goroutine only.
func (t *Table) RestoreRunOf(name string, file StateInfo, n int, b []byte) (int, error) {
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
	return r.restoreRun(false, from, n, b)
}

// ApplyEntriesOf is ApplyEntries of changes written by the state file
// describes, migrating values as RestoreRunOf does. Writer goroutine only.
func (t *Table) ApplyEntriesOf(name string, file StateInfo, ops []EntryOp) error {
	r, ok := t.states[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownState, name)
	}
	from, err := restorable(r, file)
	if err != nil {
		return err
	}
	if from == "" {
		return t.ApplyEntriesFrom(name, file.TTL, ops)
	}
	return r.apply(false, from, ops)
}

// migrator implements registered.migrator.
func (c *cells[K, N, C]) migrator(from string) (any, error) { return c.migrated(from) }

// migrated returns the decoder of cells written by value codec from,
// built once per codec.
func (c *cells[K, N, C]) migrated(from string) (func([]byte) (C, error), error) {
	if d, ok := c.migrations[from]; ok {
		return d, nil
	}
	if c.migrate == nil {
		return nil, fmt.Errorf("%w: state %q: its value codec %s is not Evolving and cannot read values of %s", ErrIncompatible, c.info.Name, c.info.Codec[2], from)
	}
	d, err := c.migrate(from)
	if err != nil {
		return nil, fmt.Errorf("state %q: %w", c.info.Name, err)
	}
	if c.migrations == nil {
		c.migrations = map[string]func([]byte) (C, error){}
	}
	c.migrations[from] = d
	return d, nil
}
