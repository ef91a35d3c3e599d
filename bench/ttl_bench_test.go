package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/statetable"
)

// ttlHour is the TTL of the benchmarks' states: long enough that nothing
// expires unless a benchmark makes it.
var ttlHour = cowstate.TTL{Duration: time.Hour}

// valueUpdate is BenchmarkValueUpdate's loop on v: get, add one, put, at
// random keys; every 1000 updates it calls batch (to pin the time, say).
func valueUpdate(b *testing.B, v *statetable.ValueState[int64, statetable.VoidNamespace, int64], keys []int64, batch func()) {
	for _, k := range keys {
		if err := v.Put(k, void, 1); err != nil {
			b.Fatal(err)
		}
	}
	p := newPicker(len(keys))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%1000 == 0 && batch != nil {
			batch()
		}
		i++
		k := keys[p.next()]
		n, err := v.Get(k, void)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Put(k, void, n+1); err != nil {
			b.Fatal(err)
		}
	}
}

// valueUpdateTTL runs BenchmarkValueUpdate's sub-benchmarks of the TTL:
// ttl=off is impl=cowstate's loop; ttl=on pins the processing time once
// per 1000 updates (Backend.PinProcessingTime, as a job processing records
// in batches does), so an update reads no clock; ttl=on/clock=wall reads
// the wall clock (time.Now) on each access, get and put, without pinning.
func valueUpdateTTL(b *testing.B, size int, keys []int64) {
	for _, c := range []struct {
		name string
		ttl  bool
		pin  bool
	}{{"ttl=off", false, false}, {"ttl=on", true, true}, {"ttl=on/clock=wall", true, false}} {
		b.Run(fmt.Sprintf("size=%d/%s", size, c.name), func(b *testing.B) {
			be := newBackend(b)
			v, err := int64Value(be, "count", c.ttl)
			if err != nil {
				b.Fatal(err)
			}
			var batch func()
			if c.pin {
				batch = func() { be.PinProcessingTime() }
			}
			valueUpdate(b, v, keys, batch)
		})
	}
}

// memoryTTL runs BenchmarkMemory's sub-benchmarks of the TTL: a value
// state of size int64 keys and values built by puts, with the TTL off and
// on, and the live heap it holds per entry: what the expiration timestamps
// cost.
func memoryTTL(b *testing.B, size int, keys []int64) {
	for _, ttl := range []bool{false, true} {
		b.Run(fmt.Sprintf("size=%d/impl=state/ttl=%s", size, onOff(ttl)), func(b *testing.B) {
			heapPerEntry(b, size, func() (int, any) {
				be, err := cowstate.New(cowstate.Config{Clock: func() int64 { return 0 }})
				if err != nil {
					b.Fatal(err)
				}
				v, err := int64Value(be, "v", ttl)
				if err != nil {
					b.Fatal(err)
				}
				for i, k := range keys {
					if err := v.Put(k, void, int64(i)); err != nil {
						b.Fatal(err)
					}
				}
				return v.Count(), be
			})
		})
	}
}

// int64Value registers a value state of int64 keys and values, with the
// benchmarks' TTL or without one.
func int64Value(be *cowstate.Backend, name string, ttl bool) (*statetable.ValueState[int64, statetable.VoidNamespace, int64], error) {
	if ttl {
		return cowstate.NamespacedValueWithTTL(be, name, statetable.Int64, statetable.Void, statetable.Int64, 0, ttlHour)
	}
	return cowstate.NamespacedValue(be, name, statetable.Int64, statetable.Void, statetable.Int64, 0)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// ttlState returns a backend whose clock reads *now and its value state
// "v" with a TTL of an hour, holding keys 0 to size-1 written at *now.
func ttlState(b *testing.B, size int, now *int64) (*cowstate.Backend, *statetable.ValueState[int64, statetable.VoidNamespace, int64]) {
	be, err := cowstate.New(cowstate.Config{Clock: func() int64 { return *now }})
	if err != nil {
		b.Fatal(err)
	}
	v, err := int64Value(be, "v", true)
	if err != nil {
		b.Fatal(err)
	}
	for k := range int64(size) { // keys hash at random: their order does not matter
		if err := v.Put(k, void, k); err != nil {
			b.Fatal(err)
		}
	}
	return be, v
}

// BenchmarkTTLCleanup times the incremental cleanup of a value state of
// size entries of which 10% have expired: one op is the cleanup of all of
// them, by Backend.CleanupExpired steps of 1000 entries (the default of a
// processing-time advance), until a whole round is done. Before each op
// the expired tenth is written again (untimed) with timestamps that
// expire at the op's time. ns/op over the expired entries is the cost of
// an expiration; the sizes side by side say whether the cleanup scales
// with what expired or with the state. expired=1000 is the steady state
// of a job (ttlCleanupSteady): each op, the oldest thousand entries
// expire. expired=none is one cleanup step when nothing has expired.
func BenchmarkTTLCleanup(b *testing.B) {
	for _, size := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("size=%d/expired=10pct", size), func(b *testing.B) {
			var now int64
			be, v := ttlState(b, size, &now)
			ttl := time.Hour.Milliseconds()
			expired := size / 10
			visited, rounds := 0, 0
			for b.Loop() {
				b.StopTimer()
				now++          // a new time for this op
				at := now      // when the tenth expires
				now = at - ttl // written a TTL before it
				for k := range int64(expired) {
					if err := v.Put(k*10, void, k); err != nil {
						b.Fatal(err)
					}
				}
				now = at
				b.StartTimer()
				removed := 0
				for removed < expired {
					vi, r := be.CleanupExpired(cowstate.DefaultTTLCleanupPerAdvance)
					visited += vi
					removed += r
				}
				rounds++
			}
			if v.Count() != size-expired {
				b.Fatalf("%d entries after the cleanup, want %d", v.Count(), size-expired)
			}
			b.ReportMetric(float64(visited)/float64(rounds), "visited/op")
		})
	}
	for _, size := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("size=%d/expired=1000", size), func(b *testing.B) { ttlCleanupSteady(b, size, 1000) })
	}
	b.Run("size=1000000/expired=none", func(b *testing.B) {
		// A step of a processing-time advance when nothing has expired:
		// after one round, the state's floor (its least expiration) lets
		// every step return at once.
		var now int64
		be, _ := ttlState(b, 1_000_000, &now)
		now = 1
		for range 1000 { // a round
			be.CleanupExpired(cowstate.DefaultTTLCleanupPerAdvance)
		}
		visited := 0
		for b.Loop() { // the clock stays a millisecond after the writes
			vi, _ := be.CleanupExpired(cowstate.DefaultTTLCleanupPerAdvance)
			visited += vi
		}
		b.ReportMetric(float64(visited)/float64(b.N), "visited/op")
	})
}

// ttlCleanupSteady is BenchmarkTTLCleanup's steady state: a value state of
// size entries written in batches of batch entries, a millisecond apart,
// with a TTL of as many milliseconds as there are batches, so that each
// millisecond the oldest batch expires (at random hash positions). One op
// advances the clock a millisecond and runs CleanupExpired steps of 1000
// until the batch that expired is removed; then (untimed) the batch is
// written again, to expire a TTL later. The cleanup's cursor goes on from
// op to op as it would on a job's processing-time advances. The cost
// should follow the batch, not the state: the sizes side by side.
func ttlCleanupSteady(b *testing.B, size, batch int) {
	batches := size / batch
	var now int64
	be, err := cowstate.New(cowstate.Config{Clock: func() int64 { return now }})
	if err != nil {
		b.Fatal(err)
	}
	ttl := time.Duration(batches) * time.Millisecond
	v, err := cowstate.NamespacedValueWithTTL(be, "v", statetable.Int64, statetable.Void, statetable.Int64, 0, cowstate.TTL{Duration: ttl})
	if err != nil {
		b.Fatal(err)
	}
	put := func(i int) {
		for k := int64(i * batch); k < int64((i+1)*batch); k++ {
			if err := v.Put(k, void, k); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range batches {
		now = int64(i)
		put(i)
	}
	if _, r := be.CleanupExpired(1 << 30); r != 0 { // a round with nothing expired sets the cleanup's floors
		b.Fatalf("removed %d before anything expired", r)
	}
	visited, ops := 0, 0
	for b.Loop() {
		now = int64(batches + ops) // batch ops%batches expires now
		removed := 0
		for steps := 0; removed < batch && steps <= 2*size/cowstate.DefaultTTLCleanupPerAdvance+2; steps++ { // two rounds at most
			vi, r := be.CleanupExpired(cowstate.DefaultTTLCleanupPerAdvance)
			visited += vi
			removed += r
		}
		b.StopTimer()
		if removed != batch || v.Count() != size-batch {
			b.Fatalf("op %d: removed %d, %d entries left; want %d, %d", ops, removed, v.Count(), batch, size-batch)
		}
		put(ops % batches)
		ops++
		b.StartTimer()
	}
	b.ReportMetric(float64(visited)/float64(ops), "visited/op")
}
