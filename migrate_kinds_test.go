package cowstate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// visitor is what the migration tests need of a release's value type:
// userV1 (the old job) and userV2 and userV3 (the new ones).
type visitor interface{ userV1 | userV2 | userV3 }

// kinds are the five kinds of state, each holding values of V: a list
// of them, a map of them by user key, a reducing and an aggregating state
// whose values (accumulators) are V.
type kinds[V visitor] struct {
	value *cowstate.ValueState[string, V]
	list  *cowstate.ListState[string, V]
	m     *cowstate.MapState[string, string, V]
	red   *cowstate.ReducingState[string, V]
	agg   *cowstate.AggregatingState[string, int64, V, V]
}

// visits is V's visit count, and withVisits a V of a name and a count.
func visits[V visitor](v V) int64 {
	switch v := any(v).(type) {
	case userV1:
		return int64(v.Visits)
	case userV2:
		return v.Visits
	case userV3:
		return v.Visits
	}
	panic("unreachable")
}

func withVisits[V visitor](name string, n int64) V {
	var v V
	switch p := any(&v).(type) {
	case *userV1:
		*p = userV1{Name: name, Visits: int32(n), Admin: true}
	case *userV2:
		*p = userV2{Name: name, Visits: n}
	case *userV3:
		*p = userV3{Name: int64(len(name)), Visits: n}
	}
	return v
}

// countVisits is the aggregation of the aggregating state: its
// accumulator is a V counting visits, and its result the accumulator.
type countVisits[V visitor] struct{}

func (countVisits[V]) CreateAccumulator() V     { return withVisits[V]("", 0) }
func (countVisits[V]) Add(in int64, acc V) V    { return withVisits[V]("", visits(acc)+in) }
func (countVisits[V]) Result(acc V) V           { return acc }
func (countVisits[V]) Merge(a, b V) V           { return withVisits[V]("", visits(a)+visits(b)) }
func sumVisits[V visitor](acc, v V) V           { return withVisits[V]("", visits(acc)+visits(v)) }
func ttlOption(ttl time.Duration) *cowstate.TTL { return &cowstate.TTL{Duration: ttl} }

// registerKinds registers the five states, with a TTL if ttl is not nil,
// and opts (a value codec or a migration) given to each.
func registerKinds[V visitor](t *testing.T, b *cowstate.Backend, ttl *cowstate.TTL, opts ...cowstate.StateOption) kinds[V] {
	t.Helper()
	var k kinds[V]
	var err error
	if ttl == nil {
		k.value = must(cowstate.Value[string, V](b, "value", opts...))(t)
		k.list = must(cowstate.List[string, V](b, "list", opts...))(t)
		k.m = must(cowstate.Map[string, string, V](b, "map", opts...))(t)
		k.red = must(cowstate.Reducing[string, V](b, "reducing", sumVisits[V], opts...))(t)
		k.agg, err = cowstate.Aggregating[string, int64, V, V](b, "aggregating", countVisits[V]{}, opts...)
	} else {
		k.value = must(cowstate.ValueWithTTL[string, V](b, "value", *ttl, opts...))(t)
		k.list = must(cowstate.ListWithTTL[string, V](b, "list", *ttl, opts...))(t)
		k.m = must(cowstate.MapWithTTL[string, string, V](b, "map", *ttl, opts...))(t)
		k.red = must(cowstate.ReducingWithTTL[string, V](b, "reducing", sumVisits[V], *ttl, opts...))(t)
		k.agg, err = cowstate.AggregatingWithTTL[string, int64, V, V](b, "aggregating", countVisits[V]{}, *ttl, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// write is one round of the old job: every state of each key written
// once; the map under user key uk.
func (k kinds[V]) write(t *testing.T, keys []string, uk string, base int64) {
	t.Helper()
	for i, key := range keys {
		v := withVisits[V](key, base+int64(i))
		for _, err := range []error{k.value.Put(key, v), k.list.Add(key, v), k.m.Put(key, uk, v),
			k.red.Add(key, v), k.agg.Add(key, base+int64(i))} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dump renders what the five states hold for keys, as text to compare:
// the visit counts and names (as V holds them) of every value.
func (k kinds[V]) dump(t *testing.T, keys []string) string {
	t.Helper()
	var out strings.Builder
	for _, key := range keys {
		if v, ok, err := k.value.Lookup(key); err != nil {
			t.Fatal(err)
		} else if ok {
			fmt.Fprintf(&out, "value %s %+v\n", key, v)
		}
		for e := range must(k.list.Get(key))(t) {
			fmt.Fprintf(&out, "list %s %+v\n", key, e)
		}
		entries := must(k.m.Iterate(key))(t)
		var uks []string
		for uk, uv := range entries {
			uks = append(uks, fmt.Sprintf("map %s %s %+v\n", key, uk, uv))
		}
		slices.Sort(uks)
		out.WriteString(strings.Join(uks, ""))
		if v, ok, err := k.red.Get(key); err != nil {
			t.Fatal(err)
		} else if ok {
			fmt.Fprintf(&out, "reducing %s %d\n", key, visits(v))
		}
		if v, ok, err := k.agg.Get(key); err != nil {
			t.Fatal(err)
		} else if ok {
			fmt.Fprintf(&out, "aggregating %s %d\n", key, visits(v))
		}
	}
	return out.String()
}

// oldJob runs the old release on a clock: at 1000 ms it writes every key
// (checkpoint 1, full), at 2000 ms the first half again (checkpoint 2, a
// delta whose lists and maps are patches), and returns the store's
// storage and the keys.
func oldJob(t *testing.T, ttl *cowstate.TTL) (checkpoint.Storage, []string) {
	t.Helper()
	ctx := context.Background()
	now := int64(1000)
	b := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return now }})
	old := registerKinds[userV1](t, b, ttl)
	st := checkpoint.Memory()
	store := must(checkpoint.Open(ctx, b, st, checkpoint.Options{Policy: checkpoint.Policy{MaxChangeShare: 1, MaxDeltaShare: 10, MaxChainShare: 100}}))(t)
	defer store.Close()
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("user%02d", i)
	}
	for round, write := range [][]string{keys, keys[:20]} {
		now = int64(1000 * (round + 1))
		old.write(t, write, []string{"a", "b"}[round], int64(100*round))
		cp := must(store.Checkpoint(ctx, uint64(round+1)))(t)
		if err := cp.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := store.Confirm(uint64(round + 1)); err != nil {
			t.Fatal(err)
		}
	}
	if m := store.Checkpoints()[1]; len(m.Segments) != 2 {
		t.Fatalf("checkpoint 2 has %d segments, want a full and a delta", len(m.Segments))
	}
	return st, keys
}

// Every kind of state migrates its values across an incremental chain,
// with and without a TTL: the base's cells and the delta's cells and
// list and map patches are all read through the new codec, and a TTL
// state's values keep the expiration timestamps the old job gave them.
func TestMigration_EveryKind(t *testing.T) {
	for _, ttl := range []*cowstate.TTL{nil, ttlOption(10 * time.Second)} {
		t.Run(fmt.Sprintf("ttl=%v", ttl != nil), func(t *testing.T) {
			ctx := context.Background()
			st, keys := oldJob(t, ttl)

			// What the old job's states hold, as the new types read them:
			// a run of the new types through the same writes.
			wantB := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return 0 }})
			want := registerKinds[userV2](t, wantB, nil)
			want.write(t, keys, "a", 0)
			want.write(t, keys[:20], "b", 100)
			wantAll := want.dump(t, keys)

			now := int64(11500) // the first round's values expire at 11000, the second's at 12000
			b := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return now }})
			got := registerKinds[userV2](t, b, ttl)
			checks := must(checkpoint.CheckRestore(ctx, b, checkpoint.Source{Storage: st}))(t)
			for _, c := range checks {
				if c.Verdict != cowstate.Migrates {
					t.Errorf("CheckRestore: %s: %v (%v), want it to migrate", c.Name, c.Verdict, c.Err)
				}
			}
			if len(checks) != 5 {
				t.Errorf("CheckRestore gave %d verdicts, want 5", len(checks))
			}
			if _, err := checkpoint.RestoreFrom(ctx, b, checkpoint.Source{Storage: st}); err != nil {
				t.Fatal(err)
			}
			if ttl == nil {
				if d := got.dump(t, keys); d != wantAll {
					t.Fatalf("after the migration:\n%s\nwant:\n%s", d, wantAll)
				}
				return
			}
			// At 11500 what the first round wrote and the second did not
			// refresh has expired (restamped at the restore, it would
			// not): the second round's values, list elements and map
			// entries, and the first half's reducing and aggregating
			// states, which the second round's writes refreshed.
			liveB := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return 0 }})
			live := registerKinds[userV2](t, liveB, nil)
			live.write(t, keys[:20], "b", 100)
			for i, key := range keys[:20] {
				if err := errors.Join(live.red.Add(key, withVisits[userV2](key, int64(i))), live.agg.Add(key, int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			if d, w := got.dump(t, keys), live.dump(t, keys); d != w {
				t.Fatalf("at 11500 after the migration:\n%s\nwant:\n%s", d, w)
			}
			now = 12000
			if d := got.dump(t, keys); d != "" {
				t.Fatalf("at 12000, when the second round's values expire, the states still hold:\n%s", d)
			}
		})
	}
}

// A TTL state's incremental chain restores after its base's entries
// expired, with no migration: a delta that patches a list or map the base
// wrote, or refreshes a value, applies to the base's entries whether or
// not they are still live, and expiry is judged once the whole chain is
// in (the entries the second round did not touch are gone, the rest live).
func TestTTLChain_RestoresAfterTheBaseExpired(t *testing.T) {
	ctx := context.Background()
	ttl := ttlOption(10 * time.Second)
	st, keys := oldJob(t, ttl)

	now := int64(11500)
	b := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return now }})
	got := registerKinds[userV1](t, b, ttl)
	if _, err := checkpoint.RestoreFrom(ctx, b, checkpoint.Source{Storage: st}); err != nil {
		t.Fatal(err)
	}
	liveB := newBackend(t, cowstate.Config{MaxParallelism: 32, Clock: func() int64 { return 0 }})
	live := registerKinds[userV1](t, liveB, nil)
	live.write(t, keys[:20], "b", 100)
	for i, key := range keys[:20] {
		if err := errors.Join(live.red.Add(key, withVisits[userV1](key, int64(i))), live.agg.Add(key, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if d, w := got.dump(t, keys), live.dump(t, keys); d != w {
		t.Fatalf("at 11500:\n%s\nwant:\n%s", d, w)
	}
}

// A change no codec reads by itself (Name from string to int64) restores
// through the job's migration function, for every kind of state and
// across the chain; a function that fails fails the restore naming the
// state, and one converting to another type than the state's is refused
// at registration.
func TestMigration_MigrateFrom(t *testing.T) {
	ctx := context.Background()
	st, keys := oldJob(t, nil)
	toV3 := cowstate.MigrateFrom(func(u userV1) (userV3, error) {
		return userV3{Name: int64(len(u.Name)), Visits: int64(u.Visits)}, nil
	})

	// Without the function the change is refused before anything restores.
	b := newBackend(t, cowstate.Config{MaxParallelism: 32})
	registerKinds[userV3](t, b, nil)
	if _, err := checkpoint.RestoreFrom(ctx, b, checkpoint.Source{Storage: st}); !errors.Is(err, statetable.ErrIncompatible) {
		t.Fatalf("restore of userV1 into userV3 without a migration: %v, want ErrIncompatible", err)
	}

	want := registerKinds[userV3](t, newBackend(t, cowstate.Config{MaxParallelism: 32}), nil)
	want.write(t, keys, "a", 0)
	want.write(t, keys[:20], "b", 100)
	b = newBackend(t, cowstate.Config{MaxParallelism: 32})
	got := registerKinds[userV3](t, b, nil, toV3)
	for _, c := range must(checkpoint.CheckRestore(ctx, b, checkpoint.Source{Storage: st}))(t) {
		if c.Verdict != cowstate.Migrates {
			t.Errorf("CheckRestore: %s: %v (%v), want it to migrate", c.Name, c.Verdict, c.Err)
		}
	}
	if _, err := checkpoint.RestoreFrom(ctx, b, checkpoint.Source{Storage: st}); err != nil {
		t.Fatal(err)
	}
	if d, w := got.dump(t, keys), want.dump(t, keys); d != w {
		t.Fatalf("after the migration:\n%s\nwant:\n%s", d, w)
	}

	errBad := errors.New("no name")
	b = newBackend(t, cowstate.Config{MaxParallelism: 32})
	must(cowstate.Value[string, userV3](b, "value", cowstate.MigrateFrom(func(u userV1) (userV3, error) {
		return userV3{}, errBad
	})))(t)
	for _, name := range []string{"list", "map", "reducing", "aggregating"} {
		b.DropOnRestore(name)
	}
	_, err := checkpoint.RestoreFrom(ctx, b, checkpoint.Source{Storage: st})
	if !errors.Is(err, errBad) || !strings.Contains(err.Error(), `"value"`) {
		t.Fatalf("restore through a failing migration: %v, want its error naming the state", err)
	}

	_, err = cowstate.Value[string, userV2](newBackend(t, cowstate.Config{MaxParallelism: 32}), "value", toV3)
	if !errors.Is(err, cowstate.ErrConfig) {
		t.Fatalf("a migration to userV3 on a state of userV2: %v, want ErrConfig", err)
	}
}
