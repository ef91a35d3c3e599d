package cowstate

import (
	"fmt"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Check verifies the backend's structures and returns the first broken
// invariant, as an error matching cow.ErrInvariant (and
// timerqueue.ErrInvariant for a timer queue's) that names the state or
// timer service, or nil: every state passes statetable.Table.Check, every
// timer queue passes timerqueue.Queue.Check, and every timer's key group is
// its key's and one the backend owns. O(n) in the entries and timers, with a
// set of the keys allocated; nothing is written. Tests run it after each
// test; a job may run it after a restore or before a savepoint it means to
// keep. Writer goroutine only.
func (b *Backend) Check() error {
	if err := b.table.Check(); err != nil {
		return err
	}
	maxPar, owned := b.table.MaxParallelism(), b.table.KeyGroups()
	for _, name := range b.names {
		ev, pr := b.services[name].queues()
		for _, q := range []*timerqueue.Queue{ev, pr} {
			if err := q.Check(); err != nil {
				return fmt.Errorf("timer service %q: %w", name, err)
			}
			for t, g := range q.All() {
				want := statetable.KeyGroupOf(statetable.HashKey([]byte(t.Key)), maxPar)
				if g != want || !owned.Contains(g) {
					return fmt.Errorf("%w: timer service %q: timer at %d in key group %d, its key's is %d, owned %v",
						cow.ErrInvariant, name, t.Timestamp, g, want, owned)
				}
			}
		}
	}
	return nil
}
