package cow

import (
	"testing"

	"pgregory.net/rapid"
)

// TestSamePrefixSuffix checks the word-by-word scans against counting
// equal entries one by one, on leaves that share a prefix and a suffix and
// differ in between in any field of an entry.
func TestSamePrefixSuffix(t *testing.T) {
	type wide struct{ a, b int64 } // an entry of four words
	entry := rapid.Custom(func(t *rapid.T) mapEntry[int64, wide] {
		return mapEntry[int64, wide]{
			hash: rapid.Uint64Range(0, 3).Draw(t, "hash"),
			key:  rapid.Int64Range(0, 3).Draw(t, "key"),
			val:  wide{rapid.Int64Range(0, 3).Draw(t, "a"), rapid.Int64Range(0, 3).Draw(t, "b")},
		}
	})
	entries := rapid.SliceOfN(entry, 0, 6)
	rapid.Check(t, func(t *rapid.T) {
		pre, suf := entries.Draw(t, "prefix"), entries.Draw(t, "suffix")
		x := append(append(append([]mapEntry[int64, wide]{}, pre...), entries.Draw(t, "x")...), suf...)
		y := append(append(append([]mapEntry[int64, wide]{}, pre...), entries.Draw(t, "y")...), suf...)
		n := min(len(x), len(y))
		wantPre, wantSuf := 0, 0
		for wantPre < n && x[wantPre] == y[wantPre] {
			wantPre++
		}
		for wantSuf < n && x[len(x)-1-wantSuf] == y[len(y)-1-wantSuf] {
			wantSuf++
		}
		if got := samePrefix(x, y); got != wantPre {
			t.Fatalf("samePrefix = %d, want %d", got, wantPre)
		}
		if got := sameSuffix(x, y); got != wantSuf {
			t.Fatalf("sameSuffix = %d, want %d", got, wantSuf)
		}
	})
}
