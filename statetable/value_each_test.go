package statetable

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate/cow"
	"pgregory.net/rapid"
)

// eachPair is one state kind on two tables fed the same operations: a
// with UpdateEach, b with one Update after another.
type eachPair[K comparable, N any] struct {
	name string
	a, b *ValueState[K, N, int64]
	ns   N
	key  func(int) K
}

// UpdateEach gives what Update of its keys in turn gives, on every path:
// int64 keys (the key8 map, prefetched), int32 keys (a key15, prefetched),
// namespaced string keys (prefetched as a state of prefetchFarCells cells
// is, or not as a smaller one) and a TTL state (int64 keys, prefetched
// through its TTL side); with keys repeated within a group, with f
// writing the state it updates, and with captures taken and released
// between batches, whose contents must stay what they were when taken.
func TestValueState_UpdateEachIsUpdateInTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		owner := cow.NewOwner()
		ta, err := NewTable(owner, Config{})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := NewTable(cow.NewOwner(), Config{})
		if err != nil {
			t.Fatal(err)
		}
		ttl := TTL{Duration: time.Hour}
		ints := eachPair[int64, VoidNamespace]{name: "ints", key: func(k int) int64 { return int64(k) * 7919 }}
		i32s := eachPair[int32, VoidNamespace]{name: "i32s", key: func(k int) int32 { return int32(k) - 50 }}
		strs := eachPair[string, string]{name: "strs", ns: "ns", key: padded}
		ttls := eachPair[int64, VoidNamespace]{name: "ttls", key: func(k int) int64 { return int64(k) }}
		for _, tab := range []*Table{ta, tb} {
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			v1, err := NewValue(tab, "ints", Int64, Void, Int64, -1)
			must(err)
			v2, err := NewValue(tab, "i32s", Int32, Void, Int64, -1)
			must(err)
			v3, err := NewValue(tab, "strs", String, String, Int64, -1)
			must(err)
			v4, err := NewValueWithTTL(tab, "ttls", Int64, Void, Int64, -1, ttl)
			must(err)
			if tab == ta {
				ints.a, i32s.a, strs.a, ttls.a = v1, v2, v3, v4
				if rapid.Bool().Draw(t, "prefetch strs") {
					v3.prefetchFrom = 0
				}
			} else {
				ints.b, i32s.b, strs.b, ttls.b = v1, v2, v3, v4
			}
		}
		keyspace := rapid.SampledFrom([]int{5, 100, 2000}).Draw(t, "keyspace")
		type frozen struct {
			snap *Snapshot
			want map[string][]int64
		}
		var live []frozen
		readers := map[string]func(side int, snap *Snapshot, k int) (int64, error){
			"ints": ints.read, "i32s": i32s.read, "strs": strs.read, "ttls": ttls.read,
		}
		// contents reads every key of every state of one side, live (snap
		// nil) or at a snapshot.
		contents := func(side int, snap *Snapshot) map[string][]int64 {
			m := map[string][]int64{}
			for name, read := range readers {
				for k := range keyspace {
					v, err := read(side, snap, k)
					if err != nil {
						t.Fatal(err)
					}
					m[name] = append(m[name], v)
				}
			}
			return m
		}
		for range rapid.IntRange(1, 12).Draw(t, "batches") {
			n := rapid.IntRange(0, 40).Draw(t, "n")
			ks := rapid.SliceOfN(rapid.IntRange(0, keyspace-1), n, n).Draw(t, "keys")
			adds := rapid.SliceOfN(rapid.Int64Range(-5, 5), n, n).Draw(t, "adds")
			reenter := rapid.IntRange(0, 4).Draw(t, "reenter") // f at i%5 == reenter writes another key
			eachBatch(t, ints, ks, adds, reenter)
			eachBatch(t, i32s, ks, adds, reenter)
			eachBatch(t, strs, ks, adds, reenter)
			eachBatch(t, ttls, ks, adds, reenter)
			if rapid.Bool().Draw(t, "capture") && len(live) < 3 {
				live = append(live, frozen{ta.View(owner.Capture()), contents(1, nil)})
			}
			if len(live) > 0 && rapid.Bool().Draw(t, "release") {
				live[0].snap.Capture().Release()
				live = live[1:]
			}
		}
		if got, want := contents(0, nil), contents(1, nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("UpdateEach gave %v\nUpdate in turn gave %v", got, want)
		}
		for _, f := range live {
			got := contents(0, f.snap)
			if fmt.Sprint(got) != fmt.Sprint(f.want) {
				t.Fatalf("a snapshot holds %v\nwant %v as captured", got, f.want)
			}
			f.snap.Capture().Release()
		}
	})
}

// padded is the string key of k, 5 to 41 bytes long, so that the
// composite keys of a state of them fall in every map of cellMap but the
// key8 one.
func padded(k int) string { return fmt.Sprint("key-", k, strings.Repeat("x", k%37)) }

// read reads key k on side 0 (a) or 1 (b), live when snap is nil.
func (p eachPair[K, N]) read(side int, snap *Snapshot, k int) (int64, error) {
	s := p.a
	if side == 1 {
		s = p.b
	}
	if snap != nil {
		return s.GetAt(snap, p.key(k), p.ns)
	}
	return s.Get(p.key(k), p.ns)
}

// eachBatch applies one batch to both tables of p: f(i, old) adds adds[i]
// to old times two, and at indexes i%5 == reenter first puts i into the
// next key of the state, so that f writes the state it is updating.
func eachBatch[K comparable, N any](t *rapid.T, p eachPair[K, N], ks []int, adds []int64, reenter int) {
	keys := make([]K, len(ks))
	for i, k := range ks {
		keys[i] = p.key(k)
	}
	f := func(s *ValueState[K, N, int64]) func(i int, old int64) int64 {
		return func(i int, old int64) int64 {
			if i%5 == reenter {
				if err := s.Put(p.key(ks[i]+1), p.ns, int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			if i%7 == reenter { // a batch inside a batch, of a key of the outer one too
				nested := []K{p.key(ks[i] + 2), p.key(ks[(i+1)%len(ks)])}
				if err := s.UpdateEach(nested, p.ns, func(_ int, old int64) int64 { return old + 3 }); err != nil {
					t.Fatal(err)
				}
			}
			return old*2 + adds[i]
		}
	}
	if err := p.a.UpdateEach(keys, p.ns, f(p.a)); err != nil {
		t.Fatalf("%s: UpdateEach: %v", p.name, err)
	}
	fb := f(p.b)
	for i, k := range keys {
		if err := p.b.Update(k, p.ns, func(old int64) int64 { return fb(i, old) }); err != nil {
			t.Fatalf("%s: Update: %v", p.name, err)
		}
	}
}

// UpdateEach stops at the first key in a key group the table does not
// own: the keys before it are updated, the rest not, and the error
// matches ErrKeyGroupNotOwned and names the index; on the prefetched
// paths (int64 and int32 keys) as on the general one.
func TestValueState_UpdateEachStopsAtAKeyGroupNotOwned(t *testing.T) {
	ints, strs, owned := halfOwnedValues(t)
	t.Run("int64", func(t *testing.T) {
		updateEachStops(t, ints, Int64, owned, func(i int) int64 { return int64(i) })
	})
	t.Run("string", func(t *testing.T) {
		updateEachStops(t, strs, String, owned, func(i int) string { return fmt.Sprint("k", i) })
	})
}

// updateEachStops runs UpdateEach on keys 0-39 of s (named by key, with
// codec kc), on a table of 16 key groups that owns those of owned, and
// checks it stops at the first key it does not own.
func updateEachStops[K any](t *testing.T, s *ValueState[K, VoidNamespace, int64], kc Codec[K], owned KeyGroupRange, key func(int) K) {
	keys, stop, owns := keysToNotOwned(t, kc, owned, key)
	n := len(keys)
	err := s.UpdateEach(keys, VoidNamespace{}, func(i int, old int64) int64 { return old + int64(i) + 1 })
	if !errors.Is(err, ErrKeyGroupNotOwned) {
		t.Fatalf("UpdateEach = %v; want an error matching ErrKeyGroupNotOwned", err)
	}
	if want := fmt.Sprintf("keys[%d]", stop); !strings.Contains(err.Error(), want) {
		t.Fatalf("UpdateEach = %v; want it to name %s", err, want)
	}
	for i := range n {
		if !owns(i) {
			continue
		}
		want := int64(0)
		if i < stop {
			want = int64(i) + 1
		}
		if got, err := s.Get(key(i), VoidNamespace{}); err != nil || got != want {
			t.Fatalf("key %d (stopped at %d) = %d, %v; want %d", i, stop, got, err, want)
		}
	}
}

// keysToNotOwned returns keys 0-39 (named by key, with codec kc) on a
// table of 16 key groups that owns those of owned, the index of the first
// of them in a group it does not own, and which of them it owns.
func keysToNotOwned[K any](t *testing.T, kc Codec[K], owned KeyGroupRange, key func(int) K) (keys []K, stop int, owns func(int) bool) {
	const n = 40
	owns = func(i int) bool { return owned.Contains(KeyGroupOf(HashKey(kc.Append(nil, key(i))), 16)) }
	stop = -1
	keys = make([]K, n)
	for i := range keys {
		keys[i] = key(i)
		if stop < 0 && !owns(i) {
			stop = i
		}
	}
	if stop < 0 {
		t.Fatalf("no key of %d in a group not owned", n)
	}
	return keys, stop, owns
}

// ReducingState.AddEach and AggregatingState.AddEach give what Add of
// their keys in turn gives: int64 keys (prefetched), namespaced string
// keys (prefetched as in a state of prefetchFarCells cells) and a TTL
// state (prefetched through its TTL side), batches of every size up to
// three groups, keys repeated within them, with a capture live across
// some batches.
func TestAddEachIsAddInTurn(t *testing.T) {
	sum := func(a, b int64) int64 { return a*2 + b } // order matters: a wrong order shows
	type states struct {
		ints *ReducingState[int64, VoidNamespace, int64]
		strs *ReducingState[string, string, int64]
		ttls *ReducingState[int64, VoidNamespace, int64]
		aggs *AggregatingState[int64, VoidNamespace, int64, [2]int64, string]
	}
	var st [2]states
	var tabs [2]*Table
	for i := range st {
		tab, err := NewTable(cow.NewOwner(), Config{})
		if err != nil {
			t.Fatal(err)
		}
		tabs[i] = tab
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		st[i].ints, err = NewReducing(tab, "ints", Int64, Void, Int64, sum)
		must(err)
		st[i].strs, err = NewReducing(tab, "strs", String, String, Int64, sum)
		must(err)
		st[i].strs.prefetchFrom = 0
		st[i].ttls, err = NewReducingWithTTL(tab, "ttls", Int64, Void, Int64, sum, TTL{Duration: time.Hour})
		must(err)
		st[i].aggs, err = NewAggregating(tab, "aggs", Int64, Void, accCodec, AggregateFunction[int64, [2]int64, string](sumAgg{}))
		must(err)
	}
	const keyspace = 300
	var snap *Snapshot
	for round := range 40 {
		n := round % 25
		keys := make([]int64, n)
		names := make([]string, n)
		for i := range keys {
			keys[i] = int64((round*131 + i*i*7%13) % keyspace) // 13 keys a round: repeats within groups
			names[i] = padded(int(keys[i]))
		}
		value := func(i int) int64 { return int64(round*100 + i) }
		a, b := &st[0], &st[1]
		for _, err := range []error{
			a.ints.AddEach(keys, VoidNamespace{}, value),
			a.strs.AddEach(names, "ns", value),
			a.ttls.AddEach(keys, VoidNamespace{}, value),
			a.aggs.AddEach(keys, VoidNamespace{}, value),
		} {
			if err != nil {
				t.Fatalf("round %d: AddEach: %v", round, err)
			}
		}
		for i := range keys {
			for _, err := range []error{
				b.ints.Add(keys[i], VoidNamespace{}, value(i)),
				b.strs.Add(names[i], "ns", value(i)),
				b.ttls.Add(keys[i], VoidNamespace{}, value(i)),
				b.aggs.Add(keys[i], VoidNamespace{}, value(i)),
			} {
				if err != nil {
					t.Fatalf("round %d: Add: %v", round, err)
				}
			}
		}
		switch round % 10 {
		case 3:
			snap = tabs[0].View(tabs[0].Owner().Capture())
		case 7:
			snap.Capture().Release()
		}
	}
	for k := range int64(keyspace) {
		name := padded(int(k))
		var got, want [4]string
		for i, out := range []*[4]string{&got, &want} {
			s := &st[i]
			v1, ok1, err1 := s.ints.Get(k, VoidNamespace{})
			v2, ok2, err2 := s.strs.Get(name, "ns")
			v3, ok3, err3 := s.ttls.Get(k, VoidNamespace{})
			v4, ok4, err4 := s.aggs.Get(k, VoidNamespace{})
			*out = [4]string{fmt.Sprint(v1, ok1, err1), fmt.Sprint(v2, ok2, err2), fmt.Sprint(v3, ok3, err3), fmt.Sprint(v4, ok4, err4)}
		}
		if got != want {
			t.Fatalf("key %d: AddEach gave %q, Add in turn %q (ints, strs, ttls, aggs)", k, got, want)
		}
	}
}

// ListState.AddEach gives what Add of its keys in turn gives: int64 keys
// (prefetched inline), namespaced string keys of every composite length
// (prefetched as in a state of prefetchFarCells cells) and a list with a
// TTL (prefetched through its TTL side); lists growing past the small
// slice into a tree, keys repeated within a group, a capture live across
// some batches whose contents must stay as they were when taken.
func TestListState_AddEachIsAddInTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type lists struct {
			ints *ListState[int64, VoidNamespace, int64]
			strs *ListState[string, string, int64]
			ttls *ListState[int64, VoidNamespace, int64]
		}
		var st [2]lists
		var tabs [2]*Table
		for i := range st {
			tab, err := NewTable(cow.NewOwner(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			tabs[i] = tab
			var err1, err2, err3 error
			st[i].ints, err1 = NewList(tab, "ints", Int64, Void, Int64)
			st[i].strs, err2 = NewList(tab, "strs", String, String, Int64)
			st[i].ttls, err3 = NewListWithTTL(tab, "ttls", Int64, Void, Int64, TTL{Duration: time.Hour})
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			st[i].strs.prefetchFrom = 0
		}
		keyspace := rapid.IntRange(1, 60).Draw(t, "keyspace")
		// contents reads every list of one side, live (snap nil) or at a
		// snapshot.
		contents := func(side int, snap *Snapshot) string {
			s := &st[side]
			var out strings.Builder
			for k := range keyspace {
				for _, read := range []func() (iter.Seq[int64], error){
					func() (iter.Seq[int64], error) { return listAt(s.ints, snap, int64(k), VoidNamespace{}) },
					func() (iter.Seq[int64], error) { return listAt(s.strs, snap, padded(k), "ns") },
					func() (iter.Seq[int64], error) { return listAt(s.ttls, snap, int64(k), VoidNamespace{}) },
				} {
					seq, err := read()
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprint(&out, slices.Collect(seq), " ")
				}
				out.WriteString("\n")
			}
			return out.String()
		}
		var snap *Snapshot
		var atSnap string
		for batch := range rapid.IntRange(1, 10).Draw(t, "batches") {
			n := rapid.IntRange(0, 30).Draw(t, "n")
			ks := rapid.SliceOfN(rapid.IntRange(0, keyspace-1), n, n).Draw(t, "keys")
			keys := make([]int64, n)
			names := make([]string, n)
			for i, k := range ks {
				keys[i], names[i] = int64(k), padded(k)
			}
			e := func(i int) int64 { return int64(batch*1000 + i) }
			a, b := &st[0], &st[1]
			if err := errors.Join(a.ints.AddEach(keys, VoidNamespace{}, e), a.strs.AddEach(names, "ns", e), a.ttls.AddEach(keys, VoidNamespace{}, e)); err != nil {
				t.Fatalf("batch %d: AddEach: %v", batch, err)
			}
			for i := range keys {
				if err := errors.Join(b.ints.Add(keys[i], VoidNamespace{}, e(i)), b.strs.Add(names[i], "ns", e(i)), b.ttls.Add(keys[i], VoidNamespace{}, e(i))); err != nil {
					t.Fatalf("batch %d: Add: %v", batch, err)
				}
			}
			if snap == nil && rapid.Bool().Draw(t, "capture") {
				snap = tabs[0].View(tabs[0].Owner().Capture())
				atSnap = contents(1, nil)
			}
		}
		if got, want := contents(0, nil), contents(1, nil); got != want {
			t.Fatalf("AddEach gave\n%s\nAdd in turn gave\n%s", got, want)
		}
		if snap != nil {
			if got := contents(0, snap); got != atSnap {
				t.Fatalf("the snapshot holds\n%s\nwant, as captured\n%s", got, atSnap)
			}
			snap.Capture().Release()
		}
	})
}

// listAt reads the list of (key, ns) live (snap nil) or at a snapshot.
func listAt[K, N any](s *ListState[K, N, int64], snap *Snapshot, key K, ns N) (iter.Seq[int64], error) {
	if snap == nil {
		return s.Get(key, ns)
	}
	return s.GetAt(snap, key, ns)
}

// A batch add of fixed-width keys with no namespace, in a table that owns
// every key group, locates each key once (updateEachDirect); what it
// gives is still that of AddCreating of each key in turn: the values, and
// for AddEachCreating each key's created flag, reported once the add has
// landed (added reads the value it made). int64 and int32 keys, reducing
// and aggregating states, keys repeated within a group, clears and
// captures between batches.
func TestAddEach_FixedKeysAreAddCreatingInTurn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sum := func(a, b int64) int64 { return a*2 + b } // order matters: a wrong order shows
		type states struct {
			tab  *Table
			r64  *ReducingState[int64, VoidNamespace, int64]
			r32  *ReducingState[int32, VoidNamespace, int64]
			a64  *AggregatingState[int64, VoidNamespace, int64, [2]int64, string]
			a32  *AggregatingState[int32, VoidNamespace, int64, [2]int64, string]
			seen []string // what added reported, or AddCreating returned, in turn
		}
		var st [2]*states
		for i := range st {
			tab, err := NewTable(cow.NewOwner(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			s := &states{tab: tab}
			s.r64, err = NewReducing(tab, "r64", Int64, Void, Int64, sum)
			if err == nil {
				s.r32, err = NewReducing(tab, "r32", Int32, Void, Int64, sum)
			}
			if err == nil {
				s.a64, err = NewAggregating(tab, "a64", Int64, Void, accCodec, AggregateFunction[int64, [2]int64, string](sumAgg{}))
			}
			if err == nil {
				s.a32, err = NewAggregating(tab, "a32", Int32, Void, accCodec, AggregateFunction[int64, [2]int64, string](sumAgg{}))
			}
			if err != nil {
				t.Fatal(err)
			}
			st[i] = s
		}
		batch, single := st[0], st[1]
		var capture *cow.Capture
		for round := range rapid.IntRange(1, 30).Draw(t, "rounds") {
			keys := rapid.SliceOfN(rapid.Int64Range(-20, 20), 0, 3*prefetchGroup).Draw(t, "keys")
			k32 := make([]int32, len(keys))
			for i, k := range keys {
				k32[i] = int32(k)
			}
			value := func(i int) int64 { return int64(round*100 + i) }
			creating := rapid.Bool().Draw(t, "creating")
			var errs []error
			if creating {
				report := func(name string, get func(i int) string) func(int, bool) {
					return func(i int, created bool) {
						batch.seen = append(batch.seen, fmt.Sprint(name, i, created, get(i)))
					}
				}
				errs = []error{
					batch.r64.AddEachCreating(keys, VoidNamespace{}, value, report("r64", func(i int) string { return fmt.Sprint(batch.r64.Get(keys[i], VoidNamespace{})) })),
					batch.r32.AddEachCreating(k32, VoidNamespace{}, value, report("r32", func(i int) string { return fmt.Sprint(batch.r32.Get(k32[i], VoidNamespace{})) })),
					batch.a64.AddEachCreating(keys, VoidNamespace{}, value, report("a64", func(i int) string { return fmt.Sprint(batch.a64.Get(keys[i], VoidNamespace{})) })),
					batch.a32.AddEachCreating(k32, VoidNamespace{}, value, report("a32", func(i int) string { return fmt.Sprint(batch.a32.Get(k32[i], VoidNamespace{})) })),
				}
			} else {
				errs = []error{
					batch.r64.AddEach(keys, VoidNamespace{}, value),
					batch.r32.AddEach(k32, VoidNamespace{}, value),
					batch.a64.AddEach(keys, VoidNamespace{}, value),
					batch.a32.AddEach(k32, VoidNamespace{}, value),
				}
			}
			for _, err := range errs {
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			s := single
			for _, name := range []string{"r64", "r32", "a64", "a32"} {
				for i := range keys {
					var c bool
					var got string
					var err error
					switch name {
					case "r64":
						c, err = s.r64.AddCreating(keys[i], VoidNamespace{}, value(i))
						got = fmt.Sprint(s.r64.Get(keys[i], VoidNamespace{}))
					case "r32":
						c, err = s.r32.AddCreating(k32[i], VoidNamespace{}, value(i))
						got = fmt.Sprint(s.r32.Get(k32[i], VoidNamespace{}))
					case "a64":
						c, err = s.a64.AddCreating(keys[i], VoidNamespace{}, value(i))
						got = fmt.Sprint(s.a64.Get(keys[i], VoidNamespace{}))
					case "a32":
						c, err = s.a32.AddCreating(k32[i], VoidNamespace{}, value(i))
						got = fmt.Sprint(s.a32.Get(k32[i], VoidNamespace{}))
					}
					if err != nil {
						t.Fatalf("round %d: %s AddCreating: %v", round, name, err)
					}
					if creating {
						s.seen = append(s.seen, fmt.Sprint(name, i, c, got))
					}
				}
			}
			if !slices.Equal(batch.seen, single.seen) {
				t.Fatalf("round %d: AddEachCreating reported\n%q\nAddCreating in turn\n%q", round, batch.seen, single.seen)
			}
			switch rapid.IntRange(0, 3).Draw(t, "then") {
			case 0: // a key cleared in both: its next add creates it again
				k := rapid.Int64Range(-20, 20).Draw(t, "cleared")
				for _, s := range st {
					for _, err := range []error{s.r64.Clear(k, VoidNamespace{}), s.r32.Clear(int32(k), VoidNamespace{}), s.a64.Clear(k, VoidNamespace{}), s.a32.Clear(int32(k), VoidNamespace{})} {
						if err != nil {
							t.Fatal(err)
						}
					}
				}
			case 1: // the batch's table captured, or its capture released
				if capture != nil {
					capture.Release()
					capture = nil
				} else {
					capture = batch.tab.Owner().Capture()
				}
			}
		}
		for k := range int64(41) {
			k -= 20
			var got, want [4]string
			for i, out := range []*[4]string{&got, &want} {
				s := st[i]
				*out = [4]string{
					fmt.Sprint(s.r64.Get(k, VoidNamespace{})), fmt.Sprint(s.r32.Get(int32(k), VoidNamespace{})),
					fmt.Sprint(s.a64.Get(k, VoidNamespace{})), fmt.Sprint(s.a32.Get(int32(k), VoidNamespace{})),
				}
			}
			if got != want {
				t.Fatalf("key %d: the batches gave %q, Add in turn %q (r64, r32, a64, a32)", k, got, want)
			}
		}
	})
}
