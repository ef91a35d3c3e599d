package checkpoint

import (
	"context"
	"fmt"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/snapshot"
)

// CheckRestore reports what restoring src (a checkpoint or savepoint of a
// store, read without taking the store over) into b would do with each
// state and timer service its segments hold: restore it, migrate its
// values, restore it under another name, drop it, or refuse it and why
// (cowstate.Backend.CheckRestore). It reads the manifest and each
// segment's metadata, not their entries, and restores nothing: a deploy
// runs it with the new job's states registered (and its RestoreAs and
// DropOnRestore) to learn before the job starts what its restore will
// say. A state refused by any segment of a chain is refused; one that
// migrates in any segment migrates. Writer goroutine of b.
func CheckRestore(ctx context.Context, b *cowstate.Backend, src Source) ([]cowstate.RestoreCheck, error) {
	m, err := sourceManifest(ctx, src)
	if err != nil {
		return nil, err
	}
	type key struct {
		timers bool
		name   string
	}
	var out []cowstate.RestoreCheck
	at := map[key]int{}
	for i, seg := range m.Segments {
		meta, err := segmentMeta(ctx, src.Storage, seg.Name, i == 0)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", m.Kind, m.ID, err)
		}
		checks, err := b.CheckRestore(meta)
		if err != nil {
			return nil, fmt.Errorf("%s %d: segment %s: %w", m.Kind, m.ID, seg.Name, err)
		}
		for _, c := range checks {
			k := key{c.Timers, c.Name}
			j, seen := at[k]
			switch {
			case !seen:
				at[k] = len(out)
				out = append(out, c)
			case c.Verdict == cowstate.Refused && out[j].Verdict != cowstate.Refused,
				c.Verdict == cowstate.Migrates && out[j].Verdict == cowstate.Restores:
				out[j] = c
			}
		}
	}
	return out, nil
}

// segmentMeta reads the metadata of a segment (a full snapshot if full,
// else a delta) by ranged reads of its header, index and footer.
func segmentMeta(ctx context.Context, st Storage, name string, full bool) (snapshot.Meta, error) {
	r, err := st.Open(ctx, name)
	if err != nil {
		return snapshot.Meta{}, fmt.Errorf("%w: segment %s: %w", ErrStorage, name, err)
	}
	defer r.Close()
	if full {
		sr, err := snapshot.Open(r, r.Size())
		if err != nil {
			return snapshot.Meta{}, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, name, err)
		}
		return sr.Meta(), nil
	}
	dr, err := delta.Open(r, r.Size())
	if err != nil {
		return snapshot.Meta{}, fmt.Errorf("%w: segment %s: %w", ErrCorrupt, name, err)
	}
	return dr.Meta(), nil
}
