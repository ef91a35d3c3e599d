package timerqueue

import "fmt"

// Check verifies every invariant of the queue and returns the first broken
// one (matching ErrInvariant), or nil:
//
//   - the tree passes cow.Tree.Check (order, fill, epochs; the error then
//     matches cow.ErrInvariant too);
//   - every key group is >= 0;
//   - outside Advance nothing is pending; inside, the pending timers ascend
//     strictly and all sort before the first timer of the tree.
//
// Cost O(n); writer goroutine only (also from an Advance callback). Under
// the invariants build tag, every mutation runs it and panics if it fails.
func (q *Queue) Check() error {
	if err := qtree(q).Check(); err != nil {
		return fmt.Errorf("%w: tree: %w", ErrInvariant, err)
	}
	i := 0
	for t, kg := range qtree(q).All() {
		if kg < 0 {
			return fmt.Errorf("%w: timer %d %+v has key group %d", ErrInvariant, i, t, kg)
		}
		i++
	}
	if q.head > len(q.pend) {
		return fmt.Errorf("%w: pending head %d past the buffer's %d timers", ErrInvariant, q.head, len(q.pend))
	}
	p := q.pending()
	if !q.firing && len(q.pend) != 0 {
		return fmt.Errorf("%w: %d timers pending outside Advance", ErrInvariant, len(q.pend))
	}
	for i, e := range p {
		if e.Val < 0 {
			return fmt.Errorf("%w: pending timer %d %+v has key group %d", ErrInvariant, i, e.Key, e.Val)
		}
		if i > 0 && compareTree(p[i-1].Key, e.Key) >= 0 {
			return fmt.Errorf("%w: pending timers %d %+v and %d %+v out of order", ErrInvariant, i-1, p[i-1].Key, i, e.Key)
		}
	}
	if len(p) > 0 {
		if first, _, ok := qtree(q).Min(); ok && compareTree(p[len(p)-1].Key, first) >= 0 {
			return fmt.Errorf("%w: last pending timer %+v does not sort before the first in the tree %+v", ErrInvariant, p[len(p)-1].Key, first)
		}
	}
	return nil
}
