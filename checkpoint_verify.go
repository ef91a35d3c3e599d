package cowstate

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
)

// Damage is one problem VerifyStore found: the file it is in and what is
// wrong.
type Damage struct {
	File    string
	Problem string
}

func (d Damage) String() string { return d.File + ": " + d.Problem }

// VerifyStore checks a checkpoint store without restoring it: every
// manifest decodes, every segment it references exists with the size and
// xxhash64 the manifest records, and every segment opens as the format it
// claims (header, index and footer checks, and each delta's base and
// target). It reads every referenced byte once. It returns the damage
// found (empty when the store is intact); the error is for a storage that
// cannot be listed. Any goroutine; do not run it concurrently with writes
// to the same store if you want a consistent answer.
func VerifyStore(st Storage) ([]Damage, error) {
	names, err := st.List()
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrCheckpoint, err)
	}
	var damage []Damage
	checked := map[string]bool{}
	for _, n := range names {
		if !isManifest(n) {
			continue
		}
		m, err := readManifest(st, n)
		if err != nil {
			damage = append(damage, Damage{n, err.Error()})
			continue
		}
		for _, s := range m.Segments {
			if checked[s.Name] {
				continue
			}
			checked[s.Name] = true
			if p := verifySegment(st, s); p != "" {
				damage = append(damage, Damage{s.Name, fmt.Sprintf("%s (referenced by %s)", p, n)})
			}
		}
	}
	return damage, nil
}

// verifySegment returns what is wrong with one segment, or "".
func verifySegment(st Storage, s Segment) string {
	f, err := st.Open(s.Name)
	if err != nil {
		return fmt.Sprintf("cannot open: %v", err)
	}
	defer f.Close()
	if f.Size() != s.Size {
		return fmt.Sprintf("%d bytes, the manifest says %d", f.Size(), s.Size)
	}
	h := xxhash.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, f.Size())); err != nil {
		return fmt.Sprintf("read: %v", err)
	}
	if sumHex(h.Sum64()) != s.Sum {
		return fmt.Sprintf("xxhash64 %s, the manifest says %s", sumHex(h.Sum64()), s.Sum)
	}
	if s.Delta {
		r, err := delta.Open(f, f.Size())
		if err != nil {
			return err.Error()
		}
		if r.Base() != s.Base || r.Target() != s.Target {
			return fmt.Sprintf("holds delta %d->%d, the manifest says %d->%d", r.Base(), r.Target(), s.Base, s.Target)
		}
		if _, err := r.Read(context.Background(), r.Meta().KeyGroups); err != nil {
			return err.Error()
		}
		return ""
	}
	r, err := snapshot.Open(f, f.Size())
	if err != nil {
		return err.Error()
	}
	if err := r.Restore(context.Background(), discardSink{}, r.Meta().KeyGroups); err != nil && !errors.Is(err, context.Canceled) {
		return err.Error()
	}
	return ""
}

// discardSink decodes a snapshot's sections without keeping anything.
type discardSink struct{}

func (discardSink) EntryRestorer(string, int) (func(key, cell []byte) error, func() error, error) {
	return func([]byte, []byte) error { return nil }, func() error { return nil }, nil
}
func (discardSink) RestoreTimer(string, snapshot.Domain, int, int64, string, string) error {
	return nil
}
