package statetable

import (
	"runtime"
	"testing"

	"github.com/cowstate/cowstate/internal/invariants"
)

// TestMapState_PutAllocatesLogN checks the persistence claim of map state: a
// put into a large map whose previous version a live snapshot pins copies a
// path (O(log n) bytes), never the map.
func TestMapState_PutAllocatesLogN(t *testing.T) {
	defer invariants.Suspend()() // a self-check would count as an allocation
	if invariants.Exhaustive {
		t.Skip("the invariants build checks every map after every write: allocation is not measurable, and 200K puts take quadratic time")
	}
	tb := newTestTable(t)
	ms, err := NewMapState(tb, "m", String, Void, Int64, Int64)
	if err != nil {
		t.Fatal(err)
	}
	const entries = 200_000
	for i := range int64(entries) {
		ms.Put("k", VoidNamespace{}, i, i)
	}
	var before, after runtime.MemStats
	const puts = 200
	runtime.ReadMemStats(&before)
	for i := range int64(puts) {
		c := tb.Owner().Capture() // every put copies: the worst case
		ms.Put("k", VoidNamespace{}, i*997%entries, -i)
		c.Release()
	}
	runtime.ReadMemStats(&after)
	perPut := float64(after.TotalAlloc-before.TotalAlloc) / puts
	// A full copy would be ~30 bytes per entry, 6 MB; a path copy is a few KB.
	if perPut > 16<<10 {
		t.Fatalf("a put into a %d-entry map state under a snapshot allocated %.0f bytes", entries, perPut)
	}
	t.Logf("%.0f bytes per put into a %d-entry map state under a snapshot", perPut, entries)
}
