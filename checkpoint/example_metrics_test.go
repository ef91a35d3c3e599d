package checkpoint_test

import (
	"context"
	"expvar"
	"fmt"
	"sync"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// Export a backend's Stats and the store's checkpoint events as expvar
// variables (served as JSON at /debug/vars by net/http's default mux once
// expvar is imported). A Prometheus exporter sets gauges and observes
// histograms at the same two places.
func Example_metrics() {
	ctx := context.Background()
	b, err := cowstate.New(cowstate.Config{})
	if err != nil {
		panic(err)
	}
	count, err := cowstate.NamespacedValue(b, "count", statetable.String, statetable.Void, statetable.Int64, 0)
	if err != nil {
		panic(err)
	}

	// Checkpoint events arrive on the store's goroutines: a mutex guards
	// what they update. expvar's own types are safe for concurrent use.
	metrics := expvar.NewMap("cowstate")
	var mu sync.Mutex
	lastKind := new(expvar.String)
	metrics.Set("checkpoint_last_kind", lastKind)
	onCheckpoint := func(e checkpoint.CheckpointEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Err != nil {
			metrics.Add("checkpoint_failures", 1)
			return
		}
		metrics.Add("checkpoints_"+string(e.Kind), 1)
		metrics.Add("checkpoint_bytes", e.Bytes)
		metrics.AddFloat("checkpoint_write_seconds", e.Write.Seconds())
		lastKind.Set(string(e.Kind))
	}
	// Stats is for the backend's writer goroutine: it publishes gauges
	// there, say every few seconds, and expvar serves their last value.
	publishStats := func() {
		st := b.Stats()
		for _, s := range st.States {
			metrics.Set("state_entries_"+s.Name, intVar(int64(s.Entries)))
			metrics.Set("state_bytes_"+s.Name, intVar(s.Bytes))
		}
		metrics.Set("live_snapshots", intVar(int64(st.LiveSnapshots)))
	}

	store, err := checkpoint.Open(ctx, b, checkpoint.Memory(), checkpoint.Options{AutoConfirm: true, OnCheckpoint: onCheckpoint})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	for i := range 100 {
		if err := count.Put(fmt.Sprint("user-", i), statetable.VoidNamespace{}, 1); err != nil {
			panic(err)
		}
	}
	// Checkpoint 1 follows the load, which wrote every entry: it is full,
	// and not kept as a base (Policy.MaxChangeShare). Checkpoint 2, one
	// change later, is full and kept; checkpoint 3 is a delta from it.
	for id := uint64(1); id <= 3; id++ {
		if err := count.Put("user-7", statetable.VoidNamespace{}, int64(id)); err != nil {
			panic(err)
		}
		cp, err := store.Checkpoint(ctx, id)
		if err != nil {
			panic(err)
		}
		if err := cp.Wait(); err != nil { // here only to print settled figures
			panic(err)
		}
		store.Poll()
		publishStats()
	}
	for _, k := range []string{"checkpoints_full", "checkpoints_incremental", "checkpoint_last_kind", "state_entries_count", "live_snapshots"} {
		fmt.Println(k, metrics.Get(k))
	}
	fmt.Println("checkpoint_bytes > 0:", metrics.Get("checkpoint_bytes").(*expvar.Int).Value() > 0)
	// Output:
	// checkpoints_full 2
	// checkpoints_incremental 1
	// checkpoint_last_kind "incremental"
	// state_entries_count 100
	// live_snapshots 1
	// checkpoint_bytes > 0: true
}

// intVar returns an expvar.Int holding n.
func intVar(n int64) *expvar.Int {
	v := new(expvar.Int)
	v.Set(n)
	return v
}
