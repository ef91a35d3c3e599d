package cow

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
)

const concurrentWritesMsg = "cowstate: concurrent writes"

// mustPanicConcurrent runs f and fails unless it panics with the
// concurrent-writes message.
func mustPanicConcurrent(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s during another write did not panic", what)
		} else if msg := fmt.Sprint(r); !strings.HasPrefix(msg, concurrentWritesMsg) {
			t.Errorf("%s during another write: panic %q, want the prefix %q", what, msg, concurrentWritesMsg)
		}
	}()
	f()
}

// TestOwner_ConcurrentWrites plays the second writer of a race
// deterministically: with the owner marked as writing (another goroutine's
// mutation in progress), every mutation of every structure of the owner
// panics on entry, and a mutation whose mark another writer cleared panics
// on exit. Reads do not look at the mark.
func TestOwner_ConcurrentWrites(t *testing.T) {
	o := NewOwner()
	m := NewMap[int, int](o, hashInt, nil)
	tr := NewTree[int, int](o, cmp.Compare[int], nil)
	for i := range 100 {
		m.Set(i, i)
		tr.Set(i, i)
	}
	mroot, troot := m.Root(), tr.Root()
	o.beginWrite() // another writer's mutation, in progress
	for _, c := range []struct {
		what string
		f    func()
	}{
		{"Map.Set of a present key", func() { m.Set(1, 2) }},
		{"Map.Set of a new key", func() { m.Set(1000, 1) }},
		{"Map.Delete", func() { m.Delete(1) }},
		{"Map.Clear", func() { m.Clear() }},
		{"Map.SetRoot", func() { m.SetRoot(mroot) }},
		{"Map.SetRun", func() { m.SetRun([]MapEntry[int, int]{{Hash: hashInt(2000), Key: 2000, Val: 1}}) }},
		{"Map.Snapshot", func() { m.Snapshot() }},
		{"Tree.Set", func() { tr.Set(1, 2) }},
		{"Tree.Delete", func() { tr.Delete(1) }},
		{"Tree.DeleteMin", func() { tr.DeleteMin() }},
		{"Tree.PopMinUntil", func() { tr.PopMinUntil(10, 5, nil) }},
		{"Tree.DeleteRange", func() { tr.DeleteRange(0, 10) }},
		{"Tree.SetRoot", func() { tr.SetRoot(troot) }},
		{"Owner.Capture", func() { o.Capture() }},
	} {
		mustPanicConcurrent(t, c.what, c.f)
	}
	if v, ok := m.Get(1); !ok || v != 1 {
		t.Fatalf("Map.Get(1) = %d, %v during another write; the panicking writes must have written nothing", v, ok)
	}
	if v, ok := tr.Get(1); !ok || v != 1 {
		t.Fatalf("Tree.Get(1) = %d, %v during another write", v, ok)
	}
	o.endWrite()

	// The other way round: a writer whose mark is gone when it ends (the
	// other writer's end cleared it) panics too.
	o.beginWrite()
	o.writing = false // the other writer's endWrite
	mustPanicConcurrent(t, "endWrite with the mark cleared", o.endWrite)

	// Single-goroutine use never trips it, nested structures included:
	// the map state's pattern of a cursor written between the cell's
	// read and write.
	cursor := NewMap[int, int](o, hashInt, nil)
	cursor.Set(1, 1)
	inner := cursor.Root()
	cursor.SetRoot(MapRoot[int, int]{})
	m.Set(5000, inner.Len())
	snap := m.Snapshot()
	m.Set(5000, 2)
	snap.Release()
}
