package cowstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/cowstate/cowstate/statetable"
)

// ErrCheckpoint: a checkpoint store problem: an unknown or uncommitted
// checkpoint, a damaged or missing file (the message names it), a store
// that does not fit the backend.
var ErrCheckpoint = errors.New("cowstate: checkpoint")

// CheckpointKind says how a checkpoint's state is stored.
type CheckpointKind string

const (
	// Full: one snapshot file holds the whole state.
	Full CheckpointKind = "full"
	// Incremental: a full snapshot of an earlier checkpoint plus a chain of
	// delta files.
	Incremental CheckpointKind = "incremental"
	// Savepoint: a canonical, self-contained full snapshot that no
	// checkpoint depends on and retention never deletes.
	SavepointKind CheckpointKind = "savepoint"
)

// Manifest describes one committed checkpoint or savepoint: the segment
// files to restore it from, in order, and what it holds. A checkpoint
// exists once its manifest is committed.
type Manifest struct {
	ID             uint64                   `json:"id"`
	Kind           CheckpointKind           `json:"kind"`
	Version        uint64                   `json:"version"` // the backend version captured
	MaxParallelism int                      `json:"max_parallelism"`
	KeyGroups      statetable.KeyGroupRange `json:"key_groups"`
	// Segments: a full snapshot first, then deltas in order.
	Segments []Segment `json:"segments"`
	// What the checkpoint holds, for listings: entries per state and the
	// number of timers.
	States  map[string]int `json:"states"`
	Timers  int            `json:"timers"`
	Changed int            `json:"changed"` // entries and timers in its own delta (incremental)
	// UserMeta is what CheckpointWith was given.
	UserMeta []byte `json:"user_meta,omitempty"`
}

// Segment is one file of a checkpoint's chain.
type Segment struct {
	Name   string `json:"name"`
	Delta  bool   `json:"delta,omitempty"`
	Base   uint64 `json:"base,omitempty"` // deltas: the checkpoint it applies to
	Target uint64 `json:"target"`         // the checkpoint it produces
	Size   int64  `json:"size"`
	Sum    string `json:"xxhash64"` // of the whole file, hex
}

// Size returns the bytes of all the manifest's segments.
func (m *Manifest) Size() int64 {
	var n int64
	for _, s := range m.Segments {
		n += s.Size
	}
	return n
}

const manifestSumPrefix = "\nxxhash64 "

// encodeManifest renders m as JSON followed by a checksum line.
func encodeManifest(m *Manifest) []byte {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return append(body, manifestSumPrefix+sumHex(xxhash.Sum64(body))+"\n"...)
}

// decodeManifest parses and checks a manifest file's bytes.
func decodeManifest(name string, b []byte) (*Manifest, error) {
	i := bytes.LastIndex(b, []byte(manifestSumPrefix))
	if i < 0 {
		return nil, fmt.Errorf("%w: manifest %s: no checksum line (truncated?)", ErrCheckpoint, name)
	}
	body, sumHex := b[:i], strings.TrimSpace(string(b[i+len(manifestSumPrefix):]))
	want, err := strconv.ParseUint(sumHex, 16, 64)
	if err != nil || len(sumHex) != 16 || xxhash.Sum64(body) != want {
		return nil, fmt.Errorf("%w: manifest %s: checksum does not match", ErrCheckpoint, name)
	}
	m := &Manifest{}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCheckpoint, name, err)
	}
	if len(m.Segments) == 0 || m.Segments[0].Delta {
		return nil, fmt.Errorf("%w: manifest %s: chain does not start with a full snapshot", ErrCheckpoint, name)
	}
	return m, nil
}

// File names in a store. Every file the store writes matches one of these
// patterns; anything else in the storage is left alone.
func manifestName(id uint64, savepoint bool) string {
	if savepoint {
		return fmt.Sprintf("savepoint-%020d.manifest", id)
	}
	return fmt.Sprintf("checkpoint-%020d.manifest", id)
}

func fullName(id uint64, savepoint bool) string {
	if savepoint {
		return fmt.Sprintf("savepoint-%020d.cws", id)
	}
	return fmt.Sprintf("full-%020d.cws", id)
}

func deltaName(base, target uint64) string {
	return fmt.Sprintf("delta-%020d-%020d.cwd", base, target)
}

const tmpSuffix = ".tmp"

// ours reports whether a storage name is one of the store's files (a
// leftover temporary included).
func ours(name string) bool {
	name = strings.TrimSuffix(name, tmpSuffix)
	for _, p := range []string{"checkpoint-", "savepoint-", "full-", "delta-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// writeAtomically writes a file under a temporary name, syncs it, closes
// it, renames it into place and syncs the directory: after a crash the name
// holds all of it or nothing. It returns the size and xxhash64 of what was
// written.
func writeAtomically(st Storage, name string, write func(io.Writer) error) (int64, uint64, error) {
	tmp := name + tmpSuffix
	f, err := st.Create(tmp)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: create %s: %w", ErrCheckpoint, tmp, err)
	}
	h := xxhash.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = write(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = st.Rename(tmp, name)
	}
	if err == nil {
		err = st.SyncDir()
	}
	if err != nil {
		st.Remove(tmp) // best effort; Cleanup removes leftovers
		return 0, 0, fmt.Errorf("%w: write %s: %w", ErrCheckpoint, name, err)
	}
	return cw.n, h.Sum64(), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// sumHex renders a checksum as the manifests do.
func sumHex(h uint64) string { return fmt.Sprintf("%016x", h) }
