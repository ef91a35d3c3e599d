package statetable

import (
	"testing"

	"github.com/cowstate/cowstate/cow"
	"pgregory.net/rapid"
)

// PrefetchEncoded asks for the entry that a read of the same key and
// namespace will find: locateEncoded of their encodings is the entry hash
// and the map that locate gives for the typed key and namespace, for keys
// and namespaces of every length class (a composite key of 9 bytes with
// an 8-byte key, of at most 15 and 31 bytes, and longer ones, with keys
// past 127 bytes, whose length takes two bytes).
func TestLocateEncoded_IsLocateOfTheEncodings(t *testing.T) {
	tab, err := NewTable(cow.NewOwner(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(a, b int64) int64 { return a + b }
	byString, err := NewReducing(tab, "strings", String, String, Int64, sum)
	if err != nil {
		t.Fatal(err)
	}
	byInt, err := NewReducing(tab, "ints", Int64, String, Int64, sum)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		ns := rapid.StringN(0, 40, -1).Draw(t, "ns")
		check := func(what string, h uint64, ck string, key, enc string) {
			gotH, gotClass := locateEncoded(key, enc)
			if gotH != mapHash(h, ck) || gotClass != classOf(ck) {
				t.Fatalf("%s: locateEncoded = (%#x, %v), locate = (%#x, %v), map hash %#x", what, gotH, gotClass, h, classOf(ck), mapHash(h, ck))
			}
		}
		key := rapid.StringN(0, 200, -1).Draw(t, "key")
		h, ck, err := byString.cells.locate(key, ns)
		if err != nil {
			t.Fatal(err)
		}
		check("string key", h, ck, string(String.Append(nil, key)), string(String.Append(nil, ns)))

		n := rapid.Int64().Draw(t, "n")
		h, ck, err = byInt.cells.locate(n, ns)
		if err != nil {
			t.Fatal(err)
		}
		check("int64 key", h, ck, string(Int64.Append(nil, n)), string(String.Append(nil, ns)))
	})
}
