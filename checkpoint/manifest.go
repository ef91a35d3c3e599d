package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/statetable"
)

// Kind says how a checkpoint's state is stored.
type Kind string

const (
	// KindFull: one snapshot segment holds the whole state.
	KindFull Kind = "full"
	// KindIncremental: the full snapshot of an earlier checkpoint plus a
	// chain of delta segments.
	KindIncremental Kind = "incremental"
	// KindSavepoint: a canonical, self-contained full snapshot that no
	// checkpoint depends on and retention never deletes.
	KindSavepoint Kind = "savepoint"
)

// Manifest describes one committed checkpoint or savepoint: the segments
// to restore it from, in order, and what it holds.
type Manifest struct {
	ID             uint64                   `json:"id"`
	Kind           Kind                     `json:"kind"`
	Version        uint64                   `json:"version"` // the backend version captured
	MaxParallelism int                      `json:"max_parallelism"`
	KeyGroups      statetable.KeyGroupRange `json:"key_groups"`
	// Segments: a full snapshot first, then deltas in order, each applying
	// to the checkpoint the previous one produces.
	Segments []Segment `json:"segments"`
	// What the checkpoint holds, for listings: entries per state and the
	// number of timers.
	States  map[string]int `json:"states"`
	Timers  int            `json:"timers"`
	Changed int            `json:"changed"` // entries and timers in its own delta (incremental)
	// Committed is when the checkpoint was committed; Epoch the owner
	// generation that committed it.
	Committed time.Time `json:"committed"`
	Epoch     uint64    `json:"epoch"`
	// UserMeta is what CheckpointWith was given.
	UserMeta []byte `json:"user_meta,omitempty"`
}

// Segment is one object of a checkpoint's chain. Restore and merges check
// an object's size and xxhash64 against these before using its content.
type Segment struct {
	Name   string `json:"name"`
	Delta  bool   `json:"delta,omitempty"`
	Base   uint64 `json:"base,omitempty"` // deltas: the checkpoint it applies to
	Target uint64 `json:"target"`         // the checkpoint it produces
	Size   int64  `json:"size"`
	Sum    string `json:"xxhash64"` // of the whole object, hex
	// Skeleton is the xxhash64 of what a reader reads before the sections
	// (header, index, footer): it lets a restore of some key groups read
	// only their sections, each checked against the index.
	Skeleton string `json:"skeleton_xxhash64,omitempty"`
}

// Size returns the bytes of all the manifest's segments.
func (m *Manifest) Size() int64 {
	var n int64
	for _, s := range m.Segments {
		n += s.Size
	}
	return n
}

// check validates a checkpoint's manifest as decoded: a chain that starts
// with a full snapshot and whose deltas follow one another, ending at the
// checkpoint itself, under names the store writes.
func (m *Manifest) check() error {
	switch m.Kind {
	case KindFull, KindIncremental, KindSavepoint:
	default:
		return fmt.Errorf("unknown kind %q", m.Kind)
	}
	if len(m.Segments) == 0 || m.Segments[0].Delta {
		return fmt.Errorf("%s %d: chain does not start with a full snapshot", m.Kind, m.ID)
	}
	if m.Kind != KindIncremental && len(m.Segments) != 1 {
		return fmt.Errorf("%s %d: %d segments, want 1", m.Kind, m.ID, len(m.Segments))
	}
	if m.MaxParallelism < 1 || m.MaxParallelism > statetable.MaxParallelismLimit ||
		m.KeyGroups.First < 0 || m.KeyGroups.Last >= m.MaxParallelism {
		return fmt.Errorf("%s %d: key groups %v of max parallelism %d", m.Kind, m.ID, m.KeyGroups, m.MaxParallelism)
	}
	for i, s := range m.Segments {
		if !validName(s.Name) || !isSegment(s.Name) || s.Size < 0 || len(s.Sum) != 16 || (s.Skeleton != "" && len(s.Skeleton) != 16) {
			return fmt.Errorf("%s %d: segment %d (%q) is not a segment reference", m.Kind, m.ID, i, s.Name)
		}
		if i > 0 && (!s.Delta || s.Base != m.Segments[i-1].Target) {
			return fmt.Errorf("%s %d: segment %s does not follow %s", m.Kind, m.ID, s.Name, m.Segments[i-1].Name)
		}
	}
	if last := m.Segments[len(m.Segments)-1]; last.Target != m.ID {
		return fmt.Errorf("%s %d: its chain ends at checkpoint %d", m.Kind, m.ID, last.Target)
	}
	return nil
}

// storeManifest is the content of one manifest object: the whole state of
// the store at one commit. The object with the highest sequence number is
// the store's current state; a commit creates the next one with a
// create-only write.
type storeManifest struct {
	Format    int       `json:"format"`
	Seq       uint64    `json:"seq"`
	Epoch     uint64    `json:"epoch"`  // owner generation that committed it
	Writer    string    `json:"writer"` // random id of the committing Store
	Committed time.Time `json:"committed"`
	Event     string    `json:"event"` // what this commit did, for people
	// The highest ids ever committed: new ones must be above them.
	LastCheckpoint uint64      `json:"last_checkpoint"`
	LastSavepoint  uint64      `json:"last_savepoint"`
	Checkpoints    []*Manifest `json:"checkpoints"` // retained, by ascending id
	Savepoints     []*Manifest `json:"savepoints"`  // by ascending id
}

const manifestFormat = 1

// maxManifestSize bounds what a manifest read allocates.
const maxManifestSize = 1 << 26

const manifestSumPrefix = "\nxxhash64 "

func (sm *storeManifest) clone() *storeManifest {
	c := *sm
	c.Checkpoints = slices.Clone(sm.Checkpoints)
	c.Savepoints = slices.Clone(sm.Savepoints)
	return &c
}

func (sm *storeManifest) checkpoint(id uint64) *Manifest {
	for _, m := range sm.Checkpoints {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (sm *storeManifest) savepoint(id uint64) *Manifest {
	for _, m := range sm.Savepoints {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// encode renders a manifest as JSON followed by a checksum line.
func (sm *storeManifest) encode() []byte {
	body, err := json.MarshalIndent(sm, "", "  ")
	if err != nil {
		panic("checkpoint: BUG: manifest does not encode: " + err.Error()) // plain data
	}
	return append(body, manifestSumPrefix+sumHex(xxhash.Sum64(body))+"\n"...)
}

// decodeManifest parses and checks a manifest object's bytes; errors match
// ErrCorrupt and name the object.
func decodeManifest(name string, b []byte) (*storeManifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest %s: %s", ErrCorrupt, name, fmt.Sprintf(format, args...))
	}
	i := bytes.LastIndex(b, []byte(manifestSumPrefix))
	if i < 0 {
		return nil, bad("no checksum line (truncated?)")
	}
	body, sum := b[:i], strings.TrimSpace(string(b[i+len(manifestSumPrefix):]))
	want, err := strconv.ParseUint(sum, 16, 64)
	if err != nil || len(sum) != 16 || xxhash.Sum64(body) != want {
		return nil, bad("checksum does not match")
	}
	sm := &storeManifest{}
	if err := json.Unmarshal(body, sm); err != nil {
		return nil, bad("%v", err)
	}
	if sm.Format != manifestFormat {
		return nil, bad("format %d, this version reads %d", sm.Format, manifestFormat)
	}
	if seq, ok := manifestSeq(name); ok && seq != sm.Seq {
		return nil, bad("holds sequence number %d", sm.Seq)
	}
	for _, list := range []struct {
		ms        []*Manifest
		savepoint bool
		last      uint64
	}{{sm.Checkpoints, false, sm.LastCheckpoint}, {sm.Savepoints, true, sm.LastSavepoint}} {
		for i, m := range list.ms {
			if m == nil {
				return nil, bad("empty checkpoint entry")
			}
			if err := m.check(); err != nil {
				return nil, bad("%v", err)
			}
			if (m.Kind == KindSavepoint) != list.savepoint || m.ID > list.last || (i > 0 && m.ID <= list.ms[i-1].ID) {
				return nil, bad("%s %d is out of place", m.Kind, m.ID)
			}
		}
	}
	return sm, nil
}

// Object names. Every object the store writes matches one of these;
// anything else in the storage is left alone. Segments carry the epoch of
// the owner that wrote them, so that two owners never write one name.
func manifestName(seq uint64) string { return fmt.Sprintf("manifest-%020d", seq) }

func fullName(epoch, id uint64) string { return fmt.Sprintf("e%010d-full-%020d.cws", epoch, id) }

func savepointName(epoch, id uint64) string {
	return fmt.Sprintf("e%010d-savepoint-%020d.cws", epoch, id)
}

func deltaName(epoch, base, target uint64) string {
	return fmt.Sprintf("e%010d-delta-%020d-%020d.cwd", epoch, base, target)
}

// manifestSeq parses a manifest object's name.
func manifestSeq(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, "manifest-")
	if !ok || len(rest) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	return seq, err == nil
}

// segmentEpoch parses the owner epoch out of a segment's name (or of a
// temporary file's).
func segmentEpoch(name string) (uint64, bool) {
	name = baseName(name)
	if len(name) < 12 || name[0] != 'e' || name[11] != '-' {
		return 0, false
	}
	e, err := strconv.ParseUint(name[1:11], 10, 64)
	return e, err == nil
}

// isSegment reports whether name is a segment's name.
func isSegment(name string) bool {
	if _, ok := segmentEpoch(name); !ok {
		return false
	}
	rest := name[12:]
	for _, p := range []string{"full-", "savepoint-", "delta-"} {
		if strings.HasPrefix(rest, p) {
			return true
		}
	}
	return false
}

// ours reports whether a storage name is one of the store's objects (a
// leftover temporary file included).
func ours(name string) bool {
	name = baseName(name)
	_, isManifest := manifestSeq(name)
	return isManifest || isSegment(name)
}

// sumHex renders a checksum as the manifests do.
func sumHex(h uint64) string { return fmt.Sprintf("%016x", h) }
