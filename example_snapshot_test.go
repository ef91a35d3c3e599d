package cowstate_test

import (
	"fmt"
	"slices"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// Every (key, namespace) of a state at a snapshot, read on any goroutine
// while the writer goes on: PairsAt, then GetAt for each.
func ExampleValue_pairsAt() {
	b, _ := cowstate.New(cowstate.Config{})
	count, _ := cowstate.NamespacedValue(b, "count", statetable.String, statetable.String, statetable.Int64, 0)
	count.Put("alice", "page-1", 3)
	count.Put("bob", "page-2", 1)
	snap := b.Snapshot()
	defer snap.Release()
	count.Put("carol", "page-1", 7) // after the snapshot: not in it

	pairs, err := count.PairsAt(snap.State())
	if err != nil {
		panic(err)
	}
	var lines []string
	for user, page := range pairs {
		n, _ := count.GetAt(snap.State(), user, page)
		lines = append(lines, fmt.Sprintf("%s %s %d", user, page, n))
	}
	slices.Sort(lines) // PairsAt yields in entry-hash order
	fmt.Println(lines)
	// Output: [alice page-1 3 bob page-2 1]
}
