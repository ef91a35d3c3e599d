package statetable

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cowstate/cowstate/cow"
)

// BenchmarkReadModifyWrite is the read-modify-write of a per-key int64
// count in a value state of size random int64 keys, uniform draws, no
// capture live, three ways on the state's own map: op=get is the lookup
// alone, the floor; op=find-store is cow.Map.Find then Store, carrying
// the Place between them; op=update is the state's Update (one
// cow.Map.UpdateHashed). op=get-put is Get then Put, and op=ttl-get-put
// the same on a state with a TTL (its time pinned, as a job pins it for a
// batch), as BenchmarkValueUpdate in bench/ does at 1M keys;
// op=reduce-add and op=ttl-reduce-add are a reducing state's Add (a sum)
// without and with a TTL. The states
// are built once per size and the ops run one after another on them,
// twice: compare them within one run. An op is one key.
//
// At size=1000 every access hits the cache: what is left is the work of
// the code, which callgrind counts (decision 0041), the difference of a
// run of N and one of 3N events over 2N:
//
//	go test -c && GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind ./statetable.test -test.run '^$' -test.bench 'ReadModifyWrite/size=1000/op=update$' -test.benchtime 100000x
func BenchmarkReadModifyWrite(b *testing.B) {
	for _, size := range []int{1000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) { benchmarkReadModifyWrite(b, size) })
	}
}

func benchmarkReadModifyWrite(b *testing.B, size int) {
	r := rand.New(rand.NewPCG(uint64(size), 2))
	keys := make([]int64, size)
	for i := range keys {
		keys[i] = r.Int64()
	}
	draws := make([]int64, 1<<22) // read in order: no miss of their own
	for i := range draws {
		draws[i] = keys[r.IntN(size)]
	}
	mask := len(draws) - 1
	t, err := NewTable(cow.NewOwner(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewValue(t, "v", Int64, Void, Int64, 0)
	if err != nil {
		b.Fatal(err)
	}
	vt, err := NewValueWithTTL(t, "vt", Int64, Void, Int64, 0, TTL{Duration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	sum := func(a, b int64) int64 { return a + b }
	rd, err := NewReducing(t, "r", Int64, Void, Int64, sum)
	if err != nil {
		b.Fatal(err)
	}
	rdt, err := NewReducingWithTTL(t, "rt", Int64, Void, Int64, sum, TTL{Duration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	t.PinTime(0)
	for _, k := range keys {
		v.Put(k, VoidNamespace{}, 1)
		vt.Put(k, VoidNamespace{}, 1)
		rd.Add(k, VoidNamespace{}, 1)
		rdt.Add(k, VoidNamespace{}, 1)
	}
	inc := func(x int64) int64 { return x + 1 }
	c := v.cells
	ops := []string{"get", "find-store", "update", "get-put", "ttl-get-put", "reduce-add", "ttl-reduce-add"}
	for _, op := range append(ops, ops...) {
		b.Run("op="+op, func(b *testing.B) {
			var sum int64
			for i := 0; i < b.N; i++ {
				k := draws[i&mask]
				switch op {
				case "get":
					x, _ := v.Get(k, VoidNamespace{})
					sum += x
				case "find-store":
					h := c.locate8(k)
					old, p, _ := c.m.k8.Find(h, cow.NoKey{})
					c.m.k8.Store(&p, h, cow.NoKey{}, old+1, nil)
				case "update":
					v.Update(k, VoidNamespace{}, inc)
				case "get-put":
					x, _ := v.Get(k, VoidNamespace{})
					v.Put(k, VoidNamespace{}, x+1)
				case "ttl-get-put":
					x, _ := vt.Get(k, VoidNamespace{})
					vt.Put(k, VoidNamespace{}, x+1)
				case "reduce-add":
					rd.Add(k, VoidNamespace{}, 1)
				case "ttl-reduce-add":
					rdt.Add(k, VoidNamespace{}, 1)
				}
			}
		})
	}
}
