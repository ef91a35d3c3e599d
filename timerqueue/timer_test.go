package timerqueue

import (
	"testing"

	"pgregory.net/rapid"
)

// TestCompareTree is the specification of the tree's order: for every
// pair of timers, compareTree on what the tree holds is Compare on the
// timers, and what the tree holds gives the timer back. Keys are drawn
// from a small alphabet that includes zero bytes (the padding of a short
// key's head) and lengths around eight (the head's width), where a head
// that orders keys wrongly would show.
func TestCompareTree(t *testing.T) {
	key := rapid.Custom(func(t *rapid.T) string {
		b := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 0x7f, 0x80, 0xff}), 0, 12).Draw(t, "bytes")
		return string(b)
	})
	timer := rapid.Custom(func(t *rapid.T) Timer {
		return Timer{
			Timestamp: rapid.Int64Range(-2, 2).Draw(t, "ts"),
			Key:       key.Draw(t, "key"),
			Namespace: key.Draw(t, "ns"),
		}
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := timer.Draw(t, "a"), timer.Draw(t, "b")
		if got, want := compareTree(inTree(a), inTree(b)), Compare(a, b); got != want {
			t.Fatalf("compareTree(%+v, %+v) = %d, Compare = %d", a, b, got, want)
		}
		if got := inTree(a).timer(); got != a {
			t.Fatalf("inTree(%+v).timer() = %+v", a, got)
		}
	})
}

// TestCompareTree_Edges pins the cases a head of eight bytes must get
// right: a key that is a prefix of another (with and without zero bytes
// after it), keys equal in their first eight bytes, and the top bit.
func TestCompareTree_Edges(t *testing.T) {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\x00\x01", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefgi", "\x80", "\xff\xff\xff\xff\xff\xff\xff\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\x00"}
	for _, ka := range keys {
		for _, kb := range keys {
			a, b := Timer{7, ka, "n"}, Timer{7, kb, "m"}
			if got, want := compareTree(inTree(a), inTree(b)), Compare(a, b); got != want {
				t.Errorf("compareTree(%q, %q) = %d, Compare = %d", ka, kb, got, want)
			}
		}
	}
}
