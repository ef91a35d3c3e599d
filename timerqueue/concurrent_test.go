package timerqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/cow"
)

// TestQueue_ConcurrentReaders has the writer register, delete and fire
// timers (its callbacks register and delete too) while reader goroutines
// check snapshots against the model frozen at their capture and release
// them. Run under -race: the race detector must stay silent, and the content
// checks prove the writer never touched what a live snapshot sees.
func TestQueue_ConcurrentReaders(t *testing.T) {
	owner := cow.NewOwner()
	q := New(owner)
	q.batch = 16
	model := map[Timer]int{}
	r := rand.New(rand.NewPCG(1, 2))

	type job struct {
		snap   *Snapshot
		frozen []entry
	}
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	const readers = 4
	jobs := make(chan job)
	errs := make(chan error, rounds)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				errs <- readSnapshot(j.snap, j.frozen)
				j.snap.Release()
			}
		}()
	}

	register := func(ts int64) {
		tm := Timer{ts, fmt.Sprintf("k%d", r.IntN(50)), []string{"", "w"}[r.IntN(2)]}
		q.Register(tm, keyGroupOf(tm.Key))
		model[tm] = keyGroupOf(tm.Key)
	}
	watermark := int64(0)
	for round := range rounds {
		for range 50 {
			register(watermark + int64(r.IntN(100)))
		}
		for range 5 {
			if es := sortedModel(model); len(es) > 0 {
				tm := es[r.IntN(len(es))].t
				q.Delete(tm)
				delete(model, tm)
			}
		}
		watermark += 10
		q.Advance(watermark, func(tm Timer, _ int) {
			delete(model, tm)
			if r.IntN(4) == 0 {
				register(watermark - int64(r.IntN(5))) // due now
			}
			if r.IntN(4) == 0 {
				register(watermark + int64(r.IntN(50)))
			}
			if r.IntN(8) == 0 {
				if es := sortedModel(model); len(es) > 0 {
					tm := es[0].t
					q.Delete(tm)
					delete(model, tm)
				}
			}
		})
		if round%2 == 0 {
			c := owner.Capture()
			jobs <- job{q.View(c), sortedModel(model)}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkQueue(t, q, sortedModel(model))
	if n := owner.LiveCaptures(); n != 0 {
		t.Fatalf("%d captures still live", n)
	}
}

// readSnapshot checks s against the frozen model from a reader goroutine.
func readSnapshot(s *Snapshot, frozen []entry) error {
	if s.Len() != len(frozen) {
		return fmt.Errorf("snapshot epoch %d: Len %d, want %d", s.Epoch(), s.Len(), len(frozen))
	}
	i := 0
	for tm, kg := range s.All() {
		if i >= len(frozen) || (entry{tm, kg}) != frozen[i] {
			return fmt.Errorf("snapshot epoch %d: entry %d is %+v", s.Epoch(), i, entry{tm, kg})
		}
		i++
	}
	if i != len(frozen) {
		return fmt.Errorf("snapshot epoch %d: %d entries, want %d", s.Epoch(), i, len(frozen))
	}
	want := inGroups(frozen, 2, 5)
	i = 0
	for tm, kg := range s.InKeyGroups(2, 5) {
		if i >= len(want) || (entry{tm, kg}) != want[i] {
			return fmt.Errorf("snapshot epoch %d: InKeyGroups(2, 5) entry %d is %+v", s.Epoch(), i, entry{tm, kg})
		}
		i++
	}
	if i != len(want) {
		return fmt.Errorf("snapshot epoch %d: InKeyGroups(2, 5) has %d entries, want %d", s.Epoch(), i, len(want))
	}
	for _, e := range frozen[:min(len(frozen), 20)] {
		if !s.Contains(e.t) {
			return fmt.Errorf("snapshot epoch %d: Contains(%+v) = false", s.Epoch(), e.t)
		}
	}
	return nil
}
