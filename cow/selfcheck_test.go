//go:build race || invariants

package cow

import (
	"fmt"
	"strings"
	"testing"
)

// Under -race (the tests' build) and the invariants tag the structures check
// themselves as they are written: a corruption planted in a map is caught
// within a map's size of later writes, with a panic naming the broken
// invariant.
func TestMap_SelfCheckCatchesPlantedCorruption(t *testing.T) {
	m := newIntMap(hashInt)
	const n = 1000
	for i := range n {
		m.Set(i, i)
	}
	m.len++ // planted: Len no longer counts the entries
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "invariant broken") {
			t.Fatalf("writes after a planted corruption: recovered %v, want an invariant panic", r)
		}
		t.Log(r)
	}()
	// The next check comes within the size at the last one (at most 2n)
	// and 64 writes.
	for i := n; i < 3*n+64; i++ {
		m.Set(i, i)
	}
}
