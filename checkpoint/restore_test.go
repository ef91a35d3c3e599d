package checkpoint

import (
	"errors"
	"slices"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/statetable"
)

// TestRestore_RangeReadsOnlyItsSections: a backend owning a quarter of the
// key groups reads the skeletons and its quarter's sections, not the
// segments whole, and gets exactly its share; a damaged section it reads
// is ErrCorrupt, one it does not read is not its concern.
func TestRestore_RangeReadsOnlyItsSections(t *testing.T) {
	damagesStores(t)
	st := Memory()
	j := testjob.New(t, 16, nil)
	j.Load(4000, 1)
	s := open(t, j, st, Options{Policy: Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}})
	for id := uint64(1); id <= 3; id++ {
		if _, _, err := checkpoint(t, j, s, id); err != nil {
			t.Fatal(err)
		}
		s.Confirm(id)
		j.Load(400, int(id)+1)
	}
	m := s.Checkpoints()[len(s.Checkpoints())-1]
	if len(m.Segments) != 3 {
		t.Fatalf("checkpoint 3 has %d segments", len(m.Segments))
	}
	want := map[statetable.KeyGroupRange][]string{}
	var total []string
	for _, kgs := range []statetable.KeyGroupRange{{First: 0, Last: 3}, {First: 4, Last: 7}, {First: 8, Last: 11}, {First: 12, Last: 15}} {
		part := testjob.New(t, 16, &kgs)
		_, fetched, err := restoreCounting(bg, part.B, Source{Storage: st, ID: 3})
		if err != nil {
			t.Fatal(err)
		}
		if share := float64(fetched) / float64(m.Size()); share > 0.3 {
			t.Errorf("key groups %v: fetched %d of %d bytes (%.2f)", kgs, fetched, m.Size(), share)
		}
		want[kgs] = part.Dump(t, nil)
		total = append(total, want[kgs]...)
	}
	slices.Sort(total)
	whole := testjob.New(t, 16, nil)
	_, fetched, err := restoreCounting(bg, whole.B, Source{Storage: st, ID: 3})
	if err != nil || fetched != m.Size() {
		t.Fatalf("whole restore: fetched %d of %d: %v", fetched, m.Size(), err)
	}
	if !slices.Equal(whole.Dump(t, nil), total) {
		t.Fatal("the quarters do not add up to the whole")
	}
	// Flip a byte in the middle of the full segment: the quarter whose
	// section holds it fails, ErrCorrupt; the backend stays empty.
	name := m.Segments[0].Name
	b := st.get(name)
	b[len(b)/3] ^= 0x20
	st.put(name, b)
	failed := 0
	for kgs := range want {
		part := testjob.New(t, 16, &kgs)
		_, err := RestoreFrom(bg, part.B, Source{Storage: st, ID: 3})
		switch {
		case errors.Is(err, ErrCorrupt):
			failed++
			if !part.B.Empty() {
				t.Fatal("a failed ranged restore left state")
			}
		case err != nil:
			t.Fatal(err)
		case !slices.Equal(part.Dump(t, nil), want[kgs]):
			t.Fatalf("key groups %v restore differently", kgs)
		}
	}
	if failed == 0 {
		t.Fatal("no ranged restore saw the damaged section")
	}
}
