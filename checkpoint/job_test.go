package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cowstate/cowstate/internal/testjob"
	"github.com/cowstate/cowstate/statetable"
)

// split divides maxPar key groups into n ranges as even as can be.
func split(maxPar, n int) []statetable.KeyGroupRange {
	var rs []statetable.KeyGroupRange
	for i := range n {
		rs = append(rs, statetable.KeyGroupRange{First: i * maxPar / n, Last: (i+1)*maxPar/n - 1})
	}
	return rs
}

// jobRun is a job of several instances, each a backend owning a range and
// its store in one job storage, and a reference backend owning every key
// group that receives the same writes.
type jobRun struct {
	t         *testing.T
	st        Storage
	ref       *testjob.Job
	instances []*testjob.Job
	stores    []*Store
}

func (r *jobRun) start(ranges []statetable.KeyGroupRange) {
	r.instances, r.stores = nil, nil
	for _, kgs := range ranges {
		j := testjob.New(r.t, 16, &kgs)
		s, err := OpenInstance(bg, j.B, r.st, Options{AutoConfirm: true, Retention: Retention{KeepLast: 2},
			Policy: Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}}) // every key changes each round
		if err != nil {
			r.t.Fatal(err)
		}
		r.instances, r.stores = append(r.instances, j), append(r.stores, s)
	}
}

// round writes the same workload to the instances (each keeps the keys it
// owns) and the reference, then checkpoints every instance as id.
func (r *jobRun) round(id uint64, savepoint bool) {
	r.ref.Load(60, int(id))
	for i, j := range r.instances {
		j.Load(60, int(id))
		take := r.stores[i].Checkpoint
		if savepoint {
			take = r.stores[i].Savepoint
		}
		cp, err := take(bg, id)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := cp.Wait(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// union returns the dump of every instance, merged.
func (r *jobRun) union() []string {
	var all []string
	for _, j := range r.instances {
		all = append(all, j.Dump(r.t, nil)...)
	}
	slices.Sort(all)
	return all
}

// rescale stops the instances and restores job checkpoint id (0: newest)
// into new instances owning ranges.
func (r *jobRun) rescale(id uint64, savepoint bool, ranges []statetable.KeyGroupRange) {
	for _, s := range r.stores {
		s.Close()
	}
	r.start(ranges)
	for _, j := range r.instances {
		if _, err := RestoreInstances(bg, j.B, r.st, id, savepoint); err != nil {
			r.t.Fatalf("restore of key groups %v: %v", j.B.KeyGroups(), err)
		}
	}
}

// TestJob_Rescale: jobs of N instances checkpoint into one storage and
// restore into M, exactly, for checkpoints and savepoints, even and uneven
// ranges, and go on checkpointing (incrementally) after the rescale.
func TestJob_Rescale(t *testing.T) {
	uneven := []statetable.KeyGroupRange{{First: 0, Last: 0}, {First: 1, Last: 12}, {First: 13, Last: 15}}
	for name, storage := range storages {
		t.Run(name, func(t *testing.T) {
			r := &jobRun{t: t, st: storage(t), ref: testjob.New(t, 16, nil)}
			steps := []struct {
				from, to []statetable.KeyGroupRange
			}{
				{split(16, 1), split(16, 5)},
				{split(16, 5), uneven},
				{uneven, split(16, 4)},
				{split(16, 4), split(16, 3)},
				{split(16, 3), split(16, 4)},
				{split(16, 4), split(16, 2)},
				{split(16, 2), split(16, 1)},
			}
			r.start(steps[0].from)
			id := uint64(0)
			for _, step := range steps {
				// Two checkpoints: a full one, then a delta.
				for range 2 {
					id++
					r.round(id, false)
				}
				for _, s := range r.stores {
					if k := s.Checkpoints()[len(s.Checkpoints())-1].Kind; k != KindIncremental {
						t.Fatalf("%d instances: the second checkpoint after a restore is %s", len(r.stores), k)
					}
				}
				want := r.ref.Dump(t, nil)
				if got := r.union(); !slices.Equal(got, want) {
					t.Fatalf("the instances hold %d lines, the reference %d", len(got), len(want))
				}
				jcs, err := ListJob(bg, r.st)
				if err != nil {
					t.Fatal(err)
				}
				newest := jcs[len(jcs)-1]
				if newest.ID != id || !newest.Complete || !slices.Equal(newest.KeyGroups(), step.from) {
					t.Fatalf("newest job checkpoint %d complete %v of %v", newest.ID, newest.Complete, newest.KeyGroups())
				}
				r.rescale(0, false, step.to)
				if got := r.union(); !slices.Equal(got, want) {
					t.Fatalf("%d -> %d instances: restored %d lines, want %d", len(step.from), len(step.to), len(got), len(want))
				}
			}
			// A savepoint of the 1-instance job restores into 3.
			id++
			r.round(id, true)
			want := r.ref.Dump(t, nil)
			r.ref.Load(60, 999) // after the savepoint: not restored
			r.round(id+1, false)
			r.rescale(id, true, split(16, 3))
			if got := r.union(); !slices.Equal(got, want) {
				t.Fatal("the savepoint restores differently into 3 instances")
			}
			// An incomplete job checkpoint is not restored: one instance
			// of three did not commit id+5.
			for i, s := range r.stores[:2] {
				r.instances[i].Load(5, 7)
				cp, _ := s.Checkpoint(bg, id+5)
				cp.Wait()
			}
			j := testjob.New(t, 16, nil)
			if _, err := RestoreInstances(bg, j.B, r.st, id+5, false); !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("restore of an incomplete job checkpoint: %v", err)
			}
			for _, s := range r.stores {
				s.Close()
			}
		})
	}
}

// TestJob_InstanceNames: an instance's objects carry its range; parsing
// gives it back, and names of other stores are not taken for instances.
func TestJob_InstanceNames(t *testing.T) {
	for _, r := range []statetable.KeyGroupRange{{First: 0, Last: 0}, {First: 7, Last: 32767}} {
		got, ok := parseInstance(instancePrefix(r) + manifestName(3))
		if !ok || got != r {
			t.Fatalf("%v: parsed %v %v", r, got, ok)
		}
	}
	for _, n := range []string{manifestName(1), "kg-1-2.manifest", "kg-00005-00001.x", fmt.Sprintf("kg-%05d-%05d", 1, 2)} {
		if _, ok := parseInstance(n); ok {
			t.Fatalf("%q parsed as an instance", n)
		}
	}
}
