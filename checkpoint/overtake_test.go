package checkpoint

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
)

// overtakingStorage runs overtake once, when the first manifest write on
// it has created its temporary file and not yet committed it.
type overtakingStorage struct {
	Storage
	once     sync.Once
	overtake func()
}

func (s *overtakingStorage) Create(ctx context.Context, name string) (ObjectWriter, error) {
	w, err := s.Storage.Create(ctx, name)
	if _, ok := manifestSeq(name); ok && err == nil {
		s.once.Do(s.overtake)
	}
	return w, err
}

// TestStore_OpenOvertakenBeforeItsManifestCommits: while a process taking
// the store writes its first manifest, another takes the store under the
// same number and commits far enough past it that its cleanup removes the
// first one's temporary file. The first process's Open then takes the
// store after all (it starts over from the newest manifest), and the
// other is fenced at its next commit.
func TestStore_OpenOvertakenBeforeItsManifestCommits(t *testing.T) {
	dir, err := Dir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var other *Store
	j2 := testjob.New(t, 16, nil)
	j2.Load(100, 2)
	st := &overtakingStorage{Storage: dir, overtake: func() {
		other = open(t, j2, dir, Options{})
		for id := uint64(1); id <= 8; id++ {
			if _, _, err := checkpoint(t, j2, other, id); err != nil {
				t.Fatal(err)
			}
			if err := other.Confirm(id); err != nil {
				t.Fatal(err)
			}
		}
	}}
	j1 := testjob.New(t, 16, nil)
	j1.Load(100, 1)
	s, err := Open(bg, j1.B, st, Options{})
	if err != nil {
		t.Fatalf("Open, overtaken while writing its manifest: %v", err)
	}
	if _, _, err := checkpoint(t, j1, s, 9); err != nil {
		t.Fatalf("the store that took over last: checkpoint 9: %v", err)
	}
	if _, _, err := checkpoint(t, j2, other, 9); !errors.Is(err, ErrFenced) {
		t.Fatalf("the store taken over: checkpoint 9: %v, want ErrFenced", err)
	}
}
