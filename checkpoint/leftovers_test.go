package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
)

// TestStore_CleanupRemovesCrashTemporaries: the temporary files a crash
// leaves in a directory (a segment's, and a manifest's, under a number
// that was committed or that the next owner took) are removed by the next
// owner's cleanup once the numbers are among those cleanup removes; a
// temporary file of a number above the store's, which a newer owner may be
// writing, is left alone.
func TestStore_CleanupRemovesCrashTemporaries(t *testing.T) {
	dir := t.TempDir()
	st, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	j := testjob.New(t, 16, nil)
	j.Load(50, 1)
	s := open(t, j, st, Options{})
	if _, _, err := checkpoint(t, j, s, 1); err != nil {
		t.Fatal(err)
	}
	// What a kill -9 leaves: the temporaries of a segment and of the
	// manifest being committed, and of an older manifest's commit.
	leftovers := []string{
		fullName(1, 2) + tmpMarker + "0123456789ab",
		manifestName(3) + tmpMarker + "0123456789ab",
		manifestName(2) + tmpMarker + "ba9876543210",
	}
	for _, n := range leftovers {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	j2 := testjob.New(t, 16, nil)
	s2 := open(t, j2, st, Options{}) // manifest 3
	if _, err := s2.Restore(bg, 0); err != nil {
		t.Fatal(err)
	}
	future := manifestName(9) + tmpMarker + "00aa00aa00aa"
	if err := os.WriteFile(filepath.Join(dir, future), []byte("a newer owner's"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Manifests 4 to 7: cleanup removes manifests 3 and below, and the
	// temporary files of their numbers.
	for id := uint64(2); id <= 5; id++ {
		if _, _, err := checkpoint(t, j2, s2, id); err != nil {
			t.Fatal(err)
		}
	}
	names, err := st.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	var tmps []string
	for _, n := range names {
		if strings.Contains(n, tmpMarker) {
			tmps = append(tmps, n)
		}
	}
	if len(tmps) != 1 || tmps[0] != future {
		t.Fatalf("temporary files after the next owner's cleanup: %v, want only %s", tmps, future)
	}
}
