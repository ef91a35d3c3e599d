package checkpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
)

// TestStore_NewestManifestDeleted: deleting the newest manifests (by hand,
// or lost by the storage) would make the store an older commit; Verify
// reports it, Open and Restore refuse it naming the missing manifests, and
// Open with SkipDamaged takes over from the newest present.
func TestStore_NewestManifestDeleted(t *testing.T) {
	damagesStores(t)
	for _, deleted := range []int{1, 2, 3} {
		st := Memory()
		_, s := storeOf(t, st, 6)
		s.Close()
		l, err := Inspect(bg, st)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := Verify(bg, st); err != nil || !r.Intact() {
			t.Fatalf("verify before the delete: %v, %v", r, err)
		}
		newest, _ := manifestSeq(l.Manifest)
		for i := range deleted {
			if err := st.Remove(bg, manifestName(newest-uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		missing := manifestName(newest)
		r, err := Verify(bg, st)
		if err != nil {
			t.Fatal(err)
		}
		if r.Intact() || !strings.Contains(r.Damage[0].Problem, missing) {
			t.Fatalf("%d newest deleted: verify says %+v", deleted, r)
		}
		j2 := testjob.New(t, 16, nil)
		if _, err := Open(bg, j2.B, st, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("%d newest deleted: open: %v", deleted, err)
		}
		if _, _, err := restoreStore(t, st, 0, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("%d newest deleted: restore: %v", deleted, err)
		}
		s2, err := Open(bg, j2.B, st, Options{SkipDamaged: true})
		if err != nil || len(s2.Skipped()) == 0 {
			t.Fatalf("%d newest deleted: open skipping damage: %v, skipped %v", deleted, err, s2.Skipped())
		}
		if _, err := s2.Restore(bg, 0); err != nil {
			t.Fatal(err)
		}
		s2.Close()
	}
}
