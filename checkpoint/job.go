package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// A job of several instances (processes, or backends of one process), each
// owning a key-group range, keeps its checkpoints in one storage: each
// instance's store holds the objects whose names start with its range,
// "kg-<first>-<last>.". The instances checkpoint with the same ids; a job
// checkpoint is complete when the ranges that committed it cover every key
// group. Any key-group range restores from a complete job checkpoint by
// reading the intersecting parts of every instance's (rescaling N -> M).

// InstanceStorage returns the part of a job's storage where the instance
// owning key groups kgs keeps its store: open it with Open (or use
// OpenInstance). Names are prefixed with the range, so instances never
// meet, on a directory or a bucket alike.
func InstanceStorage(job Storage, kgs statetable.KeyGroupRange) Storage {
	return &prefixed{Storage: job, prefix: instancePrefix(kgs)}
}

// OpenInstance opens, and takes ownership of, the store of the instance
// that backend b is (its key groups) in a job's storage.
func OpenInstance(ctx context.Context, b *cowstate.Backend, job Storage, opts Options) (*Store, error) {
	return Open(ctx, b, InstanceStorage(job, b.KeyGroups()), opts)
}

func instancePrefix(kgs statetable.KeyGroupRange) string {
	return fmt.Sprintf("kg-%05d-%05d.", kgs.First, kgs.Last)
}

// parseInstance returns the range of an instance prefix at the start of an
// object name.
func parseInstance(name string) (statetable.KeyGroupRange, bool) {
	var r statetable.KeyGroupRange
	if len(name) < 15 || name[14] != '.' {
		return r, false
	}
	if n, err := fmt.Sscanf(name[:14], "kg-%05d-%05d", &r.First, &r.Last); err != nil || n != 2 || instancePrefix(r) != name[:15] {
		return r, false
	}
	return r, r.First >= 0 && r.First <= r.Last
}

// prefixed is the part of a storage whose names start with prefix.
type prefixed struct {
	Storage
	prefix string
}

func (p *prefixed) String() string { return p.Storage.String() + " (" + p.prefix + "*)" }

func (p *prefixed) Create(ctx context.Context, name string) (ObjectWriter, error) {
	return p.Storage.Create(ctx, p.prefix+name)
}

func (p *prefixed) Open(ctx context.Context, name string) (ObjectReader, error) {
	return p.Storage.Open(ctx, p.prefix+name)
}

func (p *prefixed) Remove(ctx context.Context, name string) error {
	return p.Storage.Remove(ctx, p.prefix+name)
}

func (p *prefixed) List(ctx context.Context) ([]string, error) {
	all, err := p.Storage.List(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range all {
		if rest, ok := strings.CutPrefix(n, p.prefix); ok {
			names = append(names, rest)
		}
	}
	return names, nil
}

// JobCheckpoint is one checkpoint (or savepoint) id of a job: the
// instances that committed it and whether their ranges cover every key
// group.
type JobCheckpoint struct {
	ID        uint64
	Savepoint bool
	// Instances, by first key group: each one's range and manifest.
	Instances []*Manifest
	Complete  bool
}

// KeyGroups returns the ranges of the instances that committed it.
func (jc *JobCheckpoint) KeyGroups() []statetable.KeyGroupRange {
	r := make([]statetable.KeyGroupRange, len(jc.Instances))
	for i, m := range jc.Instances {
		r[i] = m.KeyGroups
	}
	return r
}

// ListJob lists the checkpoints and savepoints of a job's instances, by
// kind (checkpoints first) and ascending id, complete or not, reading
// each instance's newest manifest without taking ownership. Instances
// whose ranges overlap for one id (which a job does not do) make that id
// incomplete. Any goroutine.
func ListJob(ctx context.Context, job Storage) ([]*JobCheckpoint, error) {
	names, err := job.List(ctx)
	if err != nil {
		return nil, storageErr(listWhat(job, err), err)
	}
	var ranges []statetable.KeyGroupRange
	for _, n := range names {
		if r, ok := parseInstance(n); ok && !slices.Contains(ranges, r) {
			if _, isManifest := manifestSeq(n[15:]); isManifest {
				ranges = append(ranges, r)
			}
		}
	}
	type key struct {
		id        uint64
		savepoint bool
	}
	found := map[key]*JobCheckpoint{}
	var errs []error
	for _, r := range ranges {
		l, err := Inspect(ctx, InstanceStorage(job, r))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range append(slices.Clone(l.Checkpoints), l.Savepoints...) {
			if m.KeyGroups != r {
				errs = append(errs, fmt.Errorf("%w: %s %d of instance %v holds key groups %v", ErrCorrupt, m.Kind, m.ID, r, m.KeyGroups))
				continue
			}
			k := key{m.ID, m.Kind == KindSavepoint}
			jc := found[k]
			if jc == nil {
				jc = &JobCheckpoint{ID: m.ID, Savepoint: k.savepoint}
				found[k] = jc
			}
			jc.Instances = append(jc.Instances, m)
		}
	}
	var out []*JobCheckpoint
	for _, jc := range found {
		slices.SortFunc(jc.Instances, func(a, b *Manifest) int { return a.KeyGroups.First - b.KeyGroups.First })
		jc.Complete = covers(jc.Instances)
		out = append(out, jc)
	}
	slices.SortFunc(out, func(a, b *JobCheckpoint) int {
		if a.Savepoint != b.Savepoint {
			return boolInt(a.Savepoint) - boolInt(b.Savepoint)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// covers reports whether ranges sorted by first key group tile every key
// group of their max parallelism, with no overlap.
func covers(ms []*Manifest) bool {
	next := 0
	for _, m := range ms {
		if m.KeyGroups.First != next || m.MaxParallelism != ms[0].MaxParallelism {
			return false
		}
		next = m.KeyGroups.Last + 1
	}
	return len(ms) > 0 && next == ms[0].MaxParallelism
}

// RestoreInstances restores into b, which must be empty, the key groups b owns
// from job checkpoint id (0: the newest complete one), or from savepoint
// id: it reads the intersecting part of every instance's checkpoint (only
// their sections, by ranged reads), all or nothing, as RestoreFrom does.
// The checkpoint must be complete (else ErrNoCheckpoint). It returns the
// job checkpoint restored. Writer goroutine of b.
func RestoreInstances(ctx context.Context, b *cowstate.Backend, job Storage, id uint64, savepoint bool) (*JobCheckpoint, error) {
	jcs, err := ListJob(ctx, job)
	if err != nil && len(jcs) == 0 {
		return nil, err
	}
	var jc *JobCheckpoint
	for _, c := range jcs {
		if c.Savepoint == savepoint && c.Complete && (id == 0 || c.ID == id) {
			jc = c
		}
	}
	if jc == nil {
		what := "checkpoint"
		if savepoint {
			what = "savepoint"
		}
		if id == 0 {
			return nil, fmt.Errorf("%w: %s holds no complete job %s", ErrNoCheckpoint, job, what)
		}
		return nil, fmt.Errorf("%w: %s holds no complete job %s %d", ErrNoCheckpoint, job, what, id)
	}
	var srcs []source
	for _, m := range jc.Instances {
		if !intersect(m.KeyGroups, b.KeyGroups()).Empty() {
			srcs = append(srcs, source{InstanceStorage(job, m.KeyGroups), m})
		}
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%w: job %s %d has no key group of %v", ErrMismatch, kindWord(savepoint), jc.ID, b.KeyGroups())
	}
	if err := restoreAll(ctx, b, srcs, nil); err != nil {
		return nil, err
	}
	return jc, nil
}

func kindWord(savepoint bool) string {
	if savepoint {
		return "savepoint"
	}
	return "checkpoint"
}
