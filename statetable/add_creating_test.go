package statetable

import (
	"errors"
	"testing"
	"time"

	"github.com/cowstate/cowstate/cow"
	"pgregory.net/rapid"
)

// AddCreating reports created exactly when (key, ns) had no value (or,
// with a TTL, its value had expired), and AddEachCreating reports for
// each key what AddCreating would have, in turn, for reducing and
// aggregating states, with and without a TTL, across clears and
// captures. A key in a key group the table does not own stops a batch
// with the keys before it added and reported.
func TestAddCreating_ReportsTheAddThatCreatesTheValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		owned := KeyGroupRange{First: 0, Last: 11}
		tab, err := NewTable(cow.NewOwner(), Config{MaxParallelism: 16, KeyGroups: &owned})
		if err != nil {
			t.Fatal(err)
		}
		now := int64(1_000_000)
		tab.PinTime(now)
		sum := func(a, b int64) int64 { return a + b }
		red, err := NewReducing(tab, "red", String, Int64, Int64, sum)
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := NewReducingWithTTL(tab, "ttl", String, Int64, Int64, sum, TTL{Duration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		agg, err := NewAggregating(tab, "agg", String, Int64, accCodec, AggregateFunction[int64, [2]int64, string](sumAgg{}))
		if err != nil {
			t.Fatal(err)
		}
		type cell struct {
			key string
			ns  int64
		}
		written := map[cell]int64{} // when each cell was last written (all three states alike)
		isNew := func(c cell, expires bool) bool {
			at, ok := written[c]
			return !ok || expires && now-at >= time.Hour.Milliseconds()
		}
		owns := func(key string) bool { return owned.Contains(KeyGroupOfKey([]byte(key), 16)) }
		var capture *cow.Capture
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			ns := rapid.Int64Range(0, 2).Draw(t, "ns")
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // clear
				c := cell{rapid.SampledFrom(keys).Draw(t, "key"), ns}
				if owns(c.key) {
					for _, err := range []error{red.Clear(c.key, ns), ttl.Clear(c.key, ns), agg.Clear(c.key, ns)} {
						if err != nil {
							t.Fatal(err)
						}
					}
					delete(written, c)
				}
			case 1: // time passes: TTL values written two hours ago expire
				now += rapid.SampledFrom([]int64{0, 2 * time.Hour.Milliseconds()}).Draw(t, "later")
				tab.PinTime(now)
			case 2: // a capture taken or released
				if capture != nil {
					capture.Release()
					capture = nil
				} else {
					capture = tab.Owner().Capture()
				}
			case 3: // one add
				c := cell{rapid.SampledFrom(keys).Draw(t, "key"), ns}
				want, wantTTL := isNew(c, false), isNew(c, true)
				gotR, errR := red.AddCreating(c.key, ns, 1)
				gotT, errT := ttl.AddCreating(c.key, ns, 1)
				gotA, errA := agg.AddCreating(c.key, ns, 1)
				if !owns(c.key) {
					for _, err := range []error{errR, errT, errA} {
						if !errors.Is(err, ErrKeyGroupNotOwned) {
							t.Fatalf("step %d: add of %q, a key group not owned: %v, want ErrKeyGroupNotOwned", step, c.key, err)
						}
					}
					continue
				}
				if errR != nil || errT != nil || errA != nil {
					t.Fatal(errR, errT, errA)
				}
				if gotR != want || gotA != want || gotT != wantTTL {
					t.Fatalf("step %d: add of %v created %v, %v (TTL), %v (aggregating), want %v, %v, %v", step, c, gotR, gotT, gotA, want, wantTTL, want)
				}
				written[c] = now
			default: // a batch
				batch := rapid.SliceOfN(rapid.SampledFrom(keys), 0, 12).Draw(t, "batch")
				stop := len(batch)
				for i, k := range batch {
					if !owns(k) {
						stop = i
						break
					}
				}
				var want, wantTTL []bool
				var adds []cell
				for _, k := range batch[:stop] {
					c := cell{k, ns}
					want, wantTTL = append(want, isNew(c, false)), append(wantTTL, isNew(c, true))
					written[c] = now
					adds = append(adds, c)
				}
				for _, s := range []struct {
					name string
					add  func(added func(i int, created bool)) error
					want []bool
				}{
					{"reducing", func(added func(int, bool)) error {
						return red.AddEachCreating(batch, ns, func(int) int64 { return 1 }, added)
					}, want},
					{"TTL", func(added func(int, bool)) error {
						return ttl.AddEachCreating(batch, ns, func(int) int64 { return 1 }, added)
					}, wantTTL},
					{"aggregating", func(added func(int, bool)) error {
						return agg.AddEachCreating(batch, ns, func(int) int64 { return 1 }, added)
					}, want},
				} {
					var got []bool
					err := s.add(func(i int, created bool) {
						if i != len(got) {
							t.Fatalf("step %d: %s: added(%d) after %d keys", step, s.name, i, len(got))
						}
						got = append(got, created)
					})
					if stop < len(batch) != errors.Is(err, ErrKeyGroupNotOwned) || stop == len(batch) && err != nil {
						t.Fatalf("step %d: %s: %v with a key group not owned at %d of %d", step, s.name, err, stop, len(batch))
					}
					if len(got) != len(s.want) {
						t.Fatalf("step %d: %s: %d keys reported added of %v, want %d", step, s.name, len(got), adds, len(s.want))
					}
					for i := range got {
						if got[i] != s.want[i] {
							t.Fatalf("step %d: %s: keys[%d] %v created %v, want %v", step, s.name, i, adds[i], got[i], s.want[i])
						}
					}
				}
			}
		}
		if capture != nil {
			capture.Release()
		}
	})
}
