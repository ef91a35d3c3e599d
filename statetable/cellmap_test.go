package statetable

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/cow"
)

// compositeKey encodes a key with an empty namespace as cells do.
func compositeKey(key string) string {
	return string(binary.AppendUvarint(nil, uint64(len(key)))) + key
}

type hashedEntry struct {
	h    uint64
	ck   string
	cell int64
}

// sortedByHash returns the model's entries in entry-hash order.
func sortedByHash(m map[string]int64) []hashedEntry {
	var out []hashedEntry
	for ck, v := range m {
		out = append(out, hashedEntry{compositeHash(ck), ck, v})
	}
	slices.SortFunc(out, func(a, b hashedEntry) int { return cmp.Or(cmp.Compare(a.h, b.h), strings.Compare(a.ck, b.ck)) })
	return out
}

// sameByHash reports whether got lists want's entries in hash order (the
// order of equal hashes is free).
func sameByHash(got, want []hashedEntry) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].h != want[i].h || i > 0 && got[i].h < got[i-1].h {
			return false
		}
	}
	slices.SortFunc(got, func(a, b hashedEntry) int { return cmp.Or(cmp.Compare(a.h, b.h), strings.Compare(a.ck, b.ck)) })
	return slices.Equal(got, want)
}

// TestCellMap_ShortAndLongKeys drives a cellMap with keys of all four
// classes against a Go map: lookups, iteration and scans in hash order
// across the maps, views frozen at capture, diffs and restored runs.
func TestCellMap_ShortAndLongKeys(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		owner := cow.NewOwner()
		m := newCellMap(owner, func(a, b int64) bool { return a == b })
		model := map[string]int64{}
		type frozen struct {
			view  cellView[int64]
			model map[string]int64
			c     *cow.Capture
		}
		var snaps []frozen
		// Composite keys (one length byte more) on both sides of each
		// class's limit.
		// Keys of 8 bytes go to the key8 map, and 7 and 9 bytes beside.
		keys := rapid.SampledFrom([]string{"", "a", "bb", strings.Repeat("k", 7), "abcdefgh", "hgfedcba",
			"stuvwxyz", strings.Repeat("m", 9), strings.Repeat("g", 13), strings.Repeat("h", 14),
			strings.Repeat("i", 15), strings.Repeat("c", 29), strings.Repeat("d", 30),
			strings.Repeat("e", 31), strings.Repeat("f", 40), longKey, longKey + "2"})
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			ck := compositeKey(keys.Draw(rt, "key"))
			h := compositeHash(ck)
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0, 1:
				v := rapid.Int64Range(0, 3).Draw(rt, "v")
				m.set(h, strings.Clone(ck), v, false)
				model[ck] = v
			case 2:
				m.delete(h, ck)
				delete(model, ck)
			case 3:
				c := owner.Capture()
				snaps = append(snaps, frozen{m.view(c), maps.Clone(model), c})
			case 4:
				got, ok := m.get(h, ck)
				want, wok := model[ck]
				if ok != wok || got != want {
					rt.Fatalf("get %q = %d %v, want %d %v", ck, got, ok, want, wok)
				}
			}
			if err := m.check(); err != nil {
				rt.Fatal(err)
			}
		}
		var all []hashedEntry
		m.all(func(ck string, cell int64) bool {
			all = append(all, hashedEntry{compositeHash(ck), strings.Clone(ck), cell})
			return true
		})
		if want := sortedByHash(model); !sameByHash(all, want) || m.len() != len(model) {
			rt.Fatalf("all = %v, want %v", all, want)
		}
		for i, s := range snaps {
			lo := rapid.Uint64().Draw(rt, "lo")
			hi := rapid.Uint64Min(lo).Draw(rt, "hi")
			var got, want []hashedEntry
			s.view.scan(lo, hi, func(h uint64, ck string, cell int64) bool {
				got = append(got, hashedEntry{h, ck, cell})
				return true
			})
			for _, e := range sortedByHash(s.model) {
				if e.h >= lo && e.h <= hi {
					want = append(want, e)
				}
			}
			if !sameByHash(got, want) || s.view.len() != len(s.model) {
				rt.Fatalf("snapshot %d: scan [%x, %x] = %v, want %v", i, lo, hi, got, want)
			}
			// Diff against the live map frozen now.
			c := owner.Capture()
			changes := map[string]cow.Change[string, int64]{}
			var last uint64
			m.view(c).diff(s.view, func(ch cow.Change[string, int64]) bool {
				if h := compositeHash(ch.Key); h < last {
					rt.Fatalf("diff out of hash order at %q", ch.Key)
				} else {
					last = h
				}
				changes[ch.Key] = ch
				return true
			})
			c.Release()
			for ck := range mergedKeys(s.model, model) {
				old, inOld := s.model[ck]
				cur, inCur := model[ck]
				ch, ok := changes[ck]
				switch {
				case inOld && inCur && old == cur:
					if ok {
						rt.Fatalf("diff reports unchanged %q", ck)
					}
				case !ok:
					rt.Fatalf("diff misses %q (%d %v -> %d %v)", ck, old, inOld, cur, inCur)
				case ch.Old != old || ch.New != cur:
					rt.Fatalf("diff of %q = %+v, want %d -> %d", ck, ch, old, cur)
				}
			}
		}
		// A restored run holds the same entries.
		// Shuffled or not: done sorts a run that came out of order.
		ents := sortedByHash(model)
		if rapid.Bool().Draw(rt, "shuffle") {
			slices.Reverse(ents)
		}
		r := newCellMap(cow.NewOwner(), func(a, b int64) bool { return a == b })
		run := cellRun[int64]{n: len(ents)}
		for _, e := range ents {
			run.add(e.h, e.ck, e.cell)
		}
		r.storeRun(&run)
		if r.len() != len(model) {
			rt.Fatalf("restored %d entries, want %d", r.len(), len(model))
		}
		if err := r.check(); err != nil {
			rt.Fatal(err)
		}
		for ck, v := range model {
			if got, ok := r.get(compositeHash(ck), ck); !ok || got != v {
				rt.Fatalf("restored %q = %d %v, want %d", ck, got, ok, v)
			}
		}
		for _, s := range snaps {
			s.c.Release()
		}
	})
}

func mergedKeys(a, b map[string]int64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestCellView_ScanMergesInPieces: a scan of maps big enough to be merged
// in many pieces yields every entry of the range once, in hash order, and
// stops where yield says.
func TestCellView_ScanMergesInPieces(t *testing.T) {
	owner := cow.NewOwner()
	m := newCellMap(owner, func(a, b int64) bool { return a == b })
	model := map[string]int64{}
	for i := range 3000 {
		for _, key := range []string{fmt.Sprint(i), fmt.Sprint("twenty-byte-key-", i), fmt.Sprint(longKey, i)} {
			ck := compositeKey(key)
			m.set(compositeHash(ck), ck, int64(i), true)
			model[ck] = int64(i)
		}
	}
	c := owner.Capture()
	defer c.Release()
	v := m.view(c)
	all := sortedByHash(model)
	for _, r := range [][2]uint64{{0, math.MaxUint64}, {0, 0}, {1 << 60, 1<<60 + 1<<50}, {math.MaxUint64 - 1<<40, math.MaxUint64}} {
		var got, want []hashedEntry
		v.scan(r[0], r[1], func(h uint64, ck string, cell int64) bool {
			got = append(got, hashedEntry{h, ck, cell})
			return true
		})
		for _, e := range all {
			if e.h >= r[0] && e.h <= r[1] {
				want = append(want, e)
			}
		}
		if !sameByHash(got, want) {
			t.Fatalf("scan [%x, %x]: %d entries, want %d", r[0], r[1], len(got), len(want))
		}
	}
	for _, stop := range []int{1, 700, 4000} {
		n := 0
		v.all(func(h uint64, ck string, _ int64) bool {
			if h != all[n].h {
				t.Fatalf("entry %d has hash %x, want %x", n, h, all[n].h)
			}
			n++
			return n < stop
		})
		if n != stop {
			t.Fatalf("stopped after %d entries, want %d", n, stop)
		}
	}
}

// An 8-byte key with no namespace is held in the key8 map as its hash
// alone: key8Of, putKey8 and key8Str turn its composite key into the key's
// word and back, key8Hash of the word is the key's hash, which
// cow.UnhashUint64 turns back into the word and whose fixedEntryHash is the composite
// key's entry hash, compareKey8 orders words as their composite keys, and
// locate8 gives the hash of a typed key that key8Hash gives of the word
// key8Of reads from the composite key its codec encodes.
func TestKey8_IsTheCompositeKey(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 15))
	tab, err := NewTable(cow.NewOwner(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(tab, "v", Int64, Void, Int64, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := v.cells
	var strs key8Strings
	prev := ""
	for range 1000 {
		x := int64(r.Uint64())
		h := c.locate8(x)
		k := cow.UnhashUint64(h)
		hb, ck, err := c.locate(x, VoidNamespace{})
		if err != nil {
			t.Fatal(err)
		}
		if !isKey8(ck) || key8Of(ck) != k || fixedEntryHash(h) != hb || key8Hash(k) != h || hb != compositeHash(ck) || h != HashKey([]byte(ck[1:])) {
			t.Fatalf("key %d: locate8 gives hash %#x, word %#x; the composite key %q reads as %#x (entry hash %#x)", x, h, k, ck, key8Of(ck), hb)
		}
		if s := key8Str(k); s != ck || strs.of(k) != ck {
			t.Fatalf("key %d: the word %#x reads back as %q / %q, want %q", x, k, s, strs.of(k), ck)
		}
		if prev != "" && compareKey8(key8Of(prev), k) != strings.Compare(prev, ck) {
			t.Fatalf("compareKey8 orders %q and %q unlike their bytes", prev, ck)
		}
		prev = ck
	}
	for _, ck := range []string{"\x08abcdefg", "\x07abcdefgh", "\x08abcdefgh\x00", ""} {
		if isKey8(ck) {
			t.Fatalf("isKey8(%q) = true", ck)
		}
	}
}

// key15Of8 builds the same key as makeKey does from the composite key's
// bytes (length byte 8, then the key), in registers on a little-endian
// machine and through memory otherwise; both ways are checked here, and
// the key's length and bytes read back as the composite key.
func TestKey15Of8_IsTheCompositeKey(t *testing.T) {
	native := littleEndian
	defer func() { littleEndian = native }()
	r := rand.New(rand.NewPCG(8, 15))
	for range 1000 {
		be := r.Uint64()
		var kb [8]byte
		binary.LittleEndian.PutUint64(kb[:], be)
		ck := "\x08" + string(kb[:])
		want := makeKey[key15](ck)
		for _, le := range []bool{native, false} {
			littleEndian = le
			k := key15Of8(be)
			if k != want {
				t.Fatalf("key15Of8(%#x), littleEndian=%v: %#v, want %#v", be, le, k, want)
			}
			if got := keyStr(&k); got != ck || inlineLen(&k) != 9 {
				t.Fatalf("key15Of8(%#x): reads as %q (length %d), want %q", be, got, inlineLen(&k), ck)
			}
		}
	}
}
