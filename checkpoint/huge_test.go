package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
)

// growSegment makes the full segment of checkpoint 1 of the store in dir a
// sparse file of size bytes (its real bytes first) and edits the newest
// manifest to say so, as a crafted store would. It returns the segment's
// name.
func growSegment(t *testing.T, dir string, st Storage, size int64) string {
	t.Helper()
	l, err := Inspect(bg, st)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, l.Manifest)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sm, err := decodeManifest(l.Manifest, b)
	if err != nil {
		t.Fatal(err)
	}
	seg := &sm.Checkpoints[0].Segments[0]
	seg.Size = size
	if err := os.Truncate(filepath.Join(dir, seg.Name), size); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, sm.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	return seg.Name
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStore_HugeSegment: a manifest that claims a huge segment, whose
// object really has that size (sparse), makes a restore fail with an
// ErrCorrupt naming it, and a verify report it, without allocating its
// size.
func TestStore_HugeSegment(t *testing.T) {
	damagesStores(t)
	for _, size := range []int64{512 << 20, 64 << 30} {
		dir := t.TempDir()
		st, err := Dir(dir)
		if err != nil {
			t.Fatal(err)
		}
		j := testjob.New(t, 16, nil)
		j.Load(200, 1)
		s := open(t, j, st, Options{})
		if _, _, err := checkpoint(t, j, s, 1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		name := growSegment(t, dir, st, size)

		var rerr error
		if n := allocated(func() { _, _, rerr = restoreStore(t, st, 1, nil) }); n > 64<<20 {
			t.Errorf("%d-byte segment: restore allocated %d bytes", size, n)
		}
		if !errors.Is(rerr, ErrCorrupt) || !strings.Contains(rerr.Error(), name) {
			t.Errorf("%d-byte segment: restore: %v, want an ErrCorrupt naming %s", size, rerr, name)
		}
		if size > 1<<30 {
			continue // verify reads every byte: the small one shows its memory
		}
		var rep *Report
		if n := allocated(func() { rep, err = Verify(bg, st) }); n > 64<<20 {
			t.Errorf("%d-byte segment: verify allocated %d bytes", size, n)
		}
		if err != nil || rep.Intact() || !strings.Contains(rep.Damage[0].Object, name) {
			t.Errorf("%d-byte segment: verify: %+v, %v", size, rep, err)
		}
	}
}
