package statetable

import (
	"fmt"
	"math"

	"github.com/cowstate/cowstate/cow"
)

// Check verifies the table's structures and returns the first broken
// invariant, as an error matching cow.ErrInvariant that names the state, or
// nil: every state's maps pass cow.Map.Check (shape, hash order, cached
// hashes, counts, epochs), every entry's composite key splits into key and
// namespace bytes, and every key is of a key group the table owns. It reads
// each entry once and allocates a set of the keys, O(n) for n entries:
// tests run it after each test (and the structures check themselves under
// -race, see internal/invariants); a job may run it after a restore.
// Writer goroutine only.
func (t *Table) Check() error {
	for _, name := range t.names {
		if err := t.states[name].check(); err != nil {
			return fmt.Errorf("state %q: %w", name, err)
		}
	}
	return nil
}

// check is Table.Check of one state.
func (c *cells[K, N, C]) check() error {
	for _, err := range []error{c.m.k8.Check(), c.m.k15.Check(), c.m.k31.Check(), c.m.long.Check()} {
		if err != nil {
			return err
		}
	}
	var err error
	c.m.k8.ScanLive(0, math.MaxUint64, func(h uint64, _ *cow.NoKey, _ C) bool {
		err = c.checkKey(key8Str(cow.UnhashUint64(h)))
		return err == nil
	})
	if err != nil {
		return err
	}
	for k := range c.m.k15.All() {
		if err := c.checkKey(keyStr(&k)); err != nil {
			return err
		}
	}
	for k := range c.m.k31.All() {
		if err := c.checkKey(keyStr(&k)); err != nil {
			return err
		}
	}
	for k := range c.m.long.All() {
		if err := c.checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

// checkKey checks one composite key: it splits, and its key group is owned.
func (c *cells[K, N, C]) checkKey(ck string) error {
	kb, _, err := splitComposite(ck)
	if err != nil {
		return fmt.Errorf("%w: %w", cow.ErrInvariant, err)
	}
	if g := KeyGroupOf(HashKey(readOnlyBytes(kb)), c.t.maxPar); !c.t.owned.Contains(g) {
		return fmt.Errorf("%w: a key of key group %d, outside the owned %v", cow.ErrInvariant, g, c.t.owned)
	}
	return nil
}
