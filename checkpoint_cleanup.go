package cowstate

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
)

// Cleanup applies the retention: it removes the manifests of the
// checkpoints no longer retained (see Retention), then every file of the
// store that no remaining manifest references and no checkpoint in progress
// uses: segments of dropped checkpoints, files of failed or aborted ones,
// temporary files a crash left behind. Savepoints and their files are
// never removed here. If a manifest cannot be read, no segment is removed
// (it might need them) and the error names it. Files that are not the
// store's are left alone. Writer goroutine only (Confirm, Abort and
// SetRetention call it).
func (c *Checkpoints) Cleanup() error {
	c.mu.Lock()
	inUse := maps.Clone(c.inUse) // before listing: see take
	keep := map[uint64]bool{}
	for _, id := range c.retention.Pinned {
		keep[id] = true
	}
	if c.base != nil {
		keep[c.base.manifest.ID] = true
	}
	for id := range c.pending {
		keep[id] = true
	}
	keepLast := max(c.retention.KeepLast, 1)
	c.mu.Unlock()

	names, err := c.st.List()
	if err != nil {
		return fmt.Errorf("%w: cleanup: list: %w", ErrCheckpoint, err)
	}
	var errs []error
	var checkpoints, savepoints []*Manifest
	for _, n := range names {
		if !isManifest(n) {
			continue
		}
		m, err := readManifest(c.st, n)
		switch {
		case err != nil:
			errs = append(errs, err)
		case m.Kind == SavepointKind:
			savepoints = append(savepoints, m)
		default:
			checkpoints = append(checkpoints, m)
		}
	}
	slices.SortFunc(checkpoints, func(a, b *Manifest) int { return cmp.Compare(b.ID, a.ID) })
	referenced := map[string]bool{}
	dropped := false
	for i, m := range checkpoints {
		name := manifestName(m.ID, false)
		if i < keepLast || keep[m.ID] || inUse[name] > 0 {
			referenced[name] = true
			for _, s := range m.Segments {
				referenced[s.Name] = true
			}
			continue
		}
		if err := c.st.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%w: cleanup: remove %s: %w", ErrCheckpoint, name, err))
			referenced[name] = true
			for _, s := range m.Segments {
				referenced[s.Name] = true
			}
			continue
		}
		dropped = true
	}
	for _, m := range savepoints {
		referenced[manifestName(m.ID, true)] = true
		for _, s := range m.Segments {
			referenced[s.Name] = true
		}
	}
	if dropped {
		// The manifests must be gone for good before their files go.
		if err := c.st.SyncDir(); err != nil {
			return fmt.Errorf("%w: cleanup: sync: %w", ErrCheckpoint, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	removed := false
	for _, n := range names {
		switch base := strings.TrimSuffix(n, tmpSuffix); {
		case !ours(n), referenced[n], inUse[base] > 0:
			continue // not ours, still needed, or being written (n or its temporary)
		case n == base && isManifest(n):
			continue // retained: dropped manifests are gone already
		}
		if err := c.st.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%w: cleanup: remove %s: %w", ErrCheckpoint, n, err))
		}
		removed = true
	}
	if removed {
		if err := c.st.SyncDir(); err != nil {
			errs = append(errs, fmt.Errorf("%w: cleanup: sync: %w", ErrCheckpoint, err))
		}
	}
	return errors.Join(errs...)
}
