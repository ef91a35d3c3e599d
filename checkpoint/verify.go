package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/cowstate/cowstate/delta"
	"github.com/cowstate/cowstate/internal/fileformat"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Listing is what a store holds, as its newest intact manifest says.
type Listing struct {
	Storage   string    `json:"storage"`
	Manifest  string    `json:"manifest"`  // the manifest read
	Epoch     uint64    `json:"epoch"`     // owner generation that committed it
	Committed time.Time `json:"committed"` // when
	// Checkpoints and Savepoints, each by ascending id.
	Checkpoints []*Manifest `json:"checkpoints"`
	Savepoints  []*Manifest `json:"savepoints"`
	// Skipped: newer manifests that are damaged, with what is wrong.
	Skipped []Damage `json:"skipped"`
}

// Inspect reads the newest intact manifest of a store, without taking
// ownership. A storage with no manifest at all is ErrNoCheckpoint ("no
// checkpoint store"); one whose manifests are all damaged, ErrCorrupt.
// Any goroutine.
func Inspect(ctx context.Context, st Storage) (*Listing, error) {
	h, err := readHead(ctx, st, true)
	if err != nil {
		return nil, err
	}
	l := &Listing{Storage: st.String()}
	for _, e := range h.damage {
		l.Skipped = append(l.Skipped, Damage{Object: "manifest", Problem: e.Error()})
	}
	if h.manifest == nil {
		if len(h.damage) > 0 {
			return l, fmt.Errorf("%w: every manifest of %s is damaged: %w", ErrCorrupt, st, errors.Join(h.damage...))
		}
		return nil, fmt.Errorf("%w: no checkpoint store at %s", ErrNoCheckpoint, st)
	}
	sm := h.manifest
	l.Manifest, l.Epoch, l.Committed = h.name, sm.Epoch, sm.Committed
	l.Checkpoints, l.Savepoints = sm.Checkpoints, sm.Savepoints
	return l, nil
}

// Damage is one problem Verify found: the object it is in and what is
// wrong.
type Damage struct {
	Object  string `json:"object"`
	Problem string `json:"problem"`
}

func (d Damage) String() string { return d.Object + ": " + d.Problem }

// Status says whether one checkpoint or savepoint restores.
type Status struct {
	ID        uint64    `json:"id"`
	Kind      Kind      `json:"kind"`
	Committed time.Time `json:"committed"`
	Restores  bool      `json:"restores"`
	Problems  []string  `json:"problems,omitempty"`
}

// Report is what Verify found.
type Report struct {
	Storage  string `json:"storage"`
	Manifest string `json:"manifest"` // the newest intact manifest
	// Checkpoints then savepoints, each by ascending id.
	Checkpoints []Status `json:"checkpoints"`
	// Damage: every problem, per object (a segment referenced by several
	// checkpoints is checked against each reference).
	Damage []Damage `json:"damage"`
}

// Intact reports whether nothing is damaged.
func (r *Report) Intact() bool { return len(r.Damage) == 0 }

// Verify checks a store without restoring it or taking ownership: the
// manifests decode, and every checkpoint's and savepoint's segments exist,
// are regular objects with the size and xxhash64 its manifest records,
// decode as the format they claim (header, index, footer, every section),
// hold the delta and the key groups the manifest says, and chain up. Each
// object is read once, however many checkpoints share it (one of more than
// 64 MiB twice, hashed and then decoded, so that memory stays bounded
// whatever size an object has); each reference is checked. A storage with no manifest is ErrNoCheckpoint; the error is
// otherwise for a storage that cannot be listed. Do not run it
// concurrently with writes to the store if you want a consistent answer.
// Any goroutine.
func Verify(ctx context.Context, st Storage) (*Report, error) {
	l, err := Inspect(ctx, st)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	r := &Report{Storage: st.String()}
	if l == nil {
		return nil, err
	}
	r.Damage = append(r.Damage, l.Skipped...)
	r.Manifest = l.Manifest
	facts := map[string]*objectFacts{}
	for _, m := range append(append([]*Manifest(nil), l.Checkpoints...), l.Savepoints...) {
		status := Status{ID: m.ID, Kind: m.Kind, Committed: m.Committed}
		for i, seg := range m.Segments {
			f := facts[seg.Name]
			if f == nil {
				f = readFacts(ctx, st, seg)
				facts[seg.Name] = f
			}
			if p := f.against(m, i); p != "" {
				status.Problems = append(status.Problems, seg.Name+": "+p)
				r.Damage = append(r.Damage, Damage{seg.Name, fmt.Sprintf("%s (referenced by %s %d)", p, m.Kind, m.ID)})
			}
		}
		status.Restores = len(status.Problems) == 0
		r.Checkpoints = append(r.Checkpoints, status)
	}
	return r, ctx.Err()
}

// objectFacts is what one read of a segment found.
type objectFacts struct {
	problem  string // cannot be read, or does not decode
	size     int64
	sum      string
	isDelta  bool
	base     uint64 // deltas
	target   uint64
	meta     snapshot.Meta
	hasMeta  bool
	skeleton string
}

func readFacts(ctx context.Context, st Storage, seg Segment) *objectFacts {
	f := &objectFacts{}
	obj, err := st.Open(ctx, seg.Name)
	if err != nil {
		f.problem = fmt.Sprintf("cannot open: %v", err)
		return f
	}
	defer obj.Close()
	f.size = obj.Size()
	kind := Segment{Name: seg.Name, Delta: isDeltaName(seg.Name)}
	var src io.ReaderAt
	if f.size <= wholeReadMax {
		b := make([]byte, 0, f.size)
		h := xxhash.New()
		w := io.MultiWriter(h, &sliceWriter{&b})
		if _, err := io.Copy(w, io.NewSectionReader(obj, 0, f.size)); err != nil {
			f.problem = fmt.Sprintf("read: %v", err)
			return f
		}
		f.sum = sumHex(h.Sum64())
		f.skeleton, _ = skeletonSum(ctx, nil, kind, b)
		src = bytes.NewReader(b)
	} else {
		// Streamed, in bounded memory: hashed in chunks, then decoded
		// through ranged reads, whatever size the object has.
		if f.sum, err = hashObject(ctx, obj); err != nil {
			f.problem = fmt.Sprintf("read: %v", err)
			return f
		}
		f.skeleton, _ = skeletonSum(ctx, st, kind, nil)
		src = storageReaderAt{f: obj, name: seg.Name}
	}
	if kind.Delta {
		f.isDelta = true
		r, err := delta.Open(src, f.size)
		if err != nil {
			f.problem = err.Error()
			return f
		}
		f.base, f.target, f.meta, f.hasMeta = r.Base(), r.Target(), r.Meta(), true
		if _, err := r.Read(ctx, r.Meta().KeyGroups); err != nil {
			f.problem = err.Error()
		}
		return f
	}
	r, err := snapshot.Open(src, f.size)
	if err != nil {
		f.problem = err.Error()
		return f
	}
	f.meta, f.hasMeta = r.Meta(), true
	if err := r.Restore(ctx, discardSink{}, r.Meta().KeyGroups); err != nil && !errors.Is(err, context.Canceled) {
		f.problem = err.Error()
	}
	return f
}

// hashObject returns the xxhash64 of a whole object, read readChunk bytes
// at a time.
func hashObject(ctx context.Context, obj ObjectReader) (string, error) {
	h := xxhash.New()
	buf := make([]byte, readChunk)
	size := obj.Size()
	for off := int64(0); off < size; off += readChunk {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		want := min(readChunk, size-off)
		n, err := obj.ReadAt(buf[:want], off)
		h.Write(buf[:n])
		if int64(n) < want {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return "", fmt.Errorf("at %d of %d bytes: %w", off+int64(n), size, err)
		}
	}
	return sumHex(h.Sum64()), nil
}

type sliceWriter struct{ b *[]byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

func isDeltaName(name string) bool {
	return isSegment(name) && bytes.HasPrefix([]byte(name[12:]), []byte("delta-"))
}

// against returns what is wrong with segment i of m given what the object
// holds, or "".
func (f *objectFacts) against(m *Manifest, i int) string {
	seg := m.Segments[i]
	switch {
	case f.problem != "" && f.size == 0 && f.sum == "":
		return f.problem
	case f.size != seg.Size:
		return fmt.Sprintf("%d bytes, the manifest says %d", f.size, seg.Size)
	case f.sum != seg.Sum:
		return fmt.Sprintf("xxhash64 %s, the manifest says %s", f.sum, seg.Sum)
	case f.problem != "":
		return f.problem
	case seg.Skeleton != "" && f.skeleton != seg.Skeleton:
		return fmt.Sprintf("skeleton xxhash64 %s, the manifest says %s", f.skeleton, seg.Skeleton)
	case f.isDelta != seg.Delta:
		return fmt.Sprintf("a delta is %v, the manifest says %v", f.isDelta, seg.Delta)
	case f.isDelta && (f.base != seg.Base || f.target != seg.Target):
		return fmt.Sprintf("holds delta %d->%d, the manifest says %d->%d", f.base, f.target, seg.Base, seg.Target)
	case f.hasMeta && f.meta.MaxParallelism != m.MaxParallelism:
		return fmt.Sprintf("max parallelism %d, the manifest says %d", f.meta.MaxParallelism, m.MaxParallelism)
	case f.hasMeta && f.meta.KeyGroups != m.KeyGroups:
		return fmt.Sprintf("key groups %v, the manifest says %v", f.meta.KeyGroups, m.KeyGroups)
	case !f.isDelta && f.meta.Savepoint != (m.Kind == KindSavepoint):
		return fmt.Sprintf("savepoint flag %v in a %s", f.meta.Savepoint, m.Kind)
	}
	return ""
}

// discardSink decodes a snapshot's sections without keeping anything.
type discardSink struct{}

// RestoreEntries checks that the n entries' blobs are within b.
func (discardSink) RestoreEntries(state string, n int, b []byte) (int, error) {
	d := fileformat.Decoder{B: b, What: fmt.Sprintf("entries of state %q", state), Corrupt: statetable.ErrDecode}
	for range 2 * n {
		d.Bytes()
	}
	return d.Off, d.Err
}

func (discardSink) RestoreTimer(string, timerqueue.Domain, int, int64, string, string) error {
	return nil
}
