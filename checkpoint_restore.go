package cowstate

import (
	"context"
	"fmt"

	"github.com/cowstate/cowstate/snapshot"
)

// Restore restores checkpoint id, or the newest committed checkpoint if id
// is 0, into the store's backend: the full snapshot, then the chain of
// deltas, for the key groups the backend owns (a backend owning a part of
// the key groups restores that part: rescaling). States and timer services
// must be registered first, as for Backend.Restore, and the backend should
// hold nothing yet. A missing or damaged file is an error naming it; an
// earlier checkpoint may still restore. The restored checkpoint becomes the
// base of the next incremental checkpoint when the backend owns the same
// key groups as it. Writer goroutine only.
func (c *Checkpoints) Restore(ctx context.Context, id uint64) (*Manifest, error) {
	m, err := c.find(id, false)
	if err != nil {
		return nil, err
	}
	if err := c.restoreManifest(ctx, m); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastID = max(c.lastID, m.ID)
	if c.base != nil {
		c.base.retired = true
		c.releaseBase(c.base)
		c.base = nil
	}
	if m.KeyGroups == c.b.KeyGroups() {
		c.base = &checkpointBase{manifest: m, snap: c.b.Snapshot()}
	}
	return m, nil
}

// RestoreSavepoint restores savepoint id into the store's backend, like
// Restore.
func (c *Checkpoints) RestoreSavepoint(ctx context.Context, id uint64) (*Manifest, error) {
	m, err := c.find(id, true)
	if err != nil {
		return nil, err
	}
	return m, c.restoreManifest(ctx, m)
}

// find returns the manifest of checkpoint (or savepoint) id, 0 meaning the
// newest.
func (c *Checkpoints) find(id uint64, savepoint bool) (*Manifest, error) {
	if id != 0 {
		return readManifest(c.st, manifestName(id, savepoint))
	}
	ms, err := ListCheckpoints(c.st)
	var newest *Manifest
	for _, m := range ms {
		if (m.Kind == SavepointKind) == savepoint {
			newest = m
		}
	}
	if newest == nil {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the store holds no committed checkpoint", ErrCheckpoint)
	}
	return newest, nil
}

func (c *Checkpoints) restoreManifest(ctx context.Context, m *Manifest) error {
	if m.MaxParallelism != c.b.MaxParallelism() {
		return fmt.Errorf("%w: checkpoint %d has max parallelism %d, the backend %d", snapshot.ErrMismatch, m.ID, m.MaxParallelism, c.b.MaxParallelism())
	}
	full := m.Segments[0]
	f, err := c.st.Open(full.Name)
	if err != nil {
		return fmt.Errorf("%w: checkpoint %d: segment %s: %w", ErrCheckpoint, m.ID, full.Name, err)
	}
	defer f.Close()
	if f.Size() != full.Size {
		return fmt.Errorf("%w: checkpoint %d: segment %s has %d bytes, the manifest says %d", ErrCheckpoint, m.ID, full.Name, f.Size(), full.Size)
	}
	r, err := snapshot.Open(f, f.Size())
	if err == nil {
		err = c.b.Restore(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("%w: checkpoint %d: segment %s: %w", ErrCheckpoint, m.ID, full.Name, err)
	}
	base := full.Target
	for _, s := range m.Segments[1:] {
		d, err := c.readDeltaRange(ctx, s) // its errors name the segment
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", m.ID, err)
		}
		if err := c.b.ApplyDelta(ctx, base, d); err != nil {
			return fmt.Errorf("%w: checkpoint %d: segment %s: %w", ErrCheckpoint, m.ID, s.Name, err)
		}
		base = s.Target
	}
	return nil
}
