package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
)

// cadenceDraws is how many key indexes a cadence benchmark draws up front
// (the writer cycles through them): drawing a zipf variate costs about as
// much as an update, so it is not done on the timed path.
const cadenceDraws = 1 << 22

// cadenceIndexes returns cadenceDraws indexes into n keys, uniform or zipf
// (s = 1.1, rank 0 the hottest; math/rand/v2 has no zipf, math/rand has).
// The keys are random, so hot ranks are spread over the whole key space.
func cadenceIndexes(n int, dist string) []uint32 {
	idx := make([]uint32, cadenceDraws)
	switch dist {
	case "uniform":
		r := randv2.New(randv2.NewPCG(uint64(n), 7))
		for i := range idx {
			idx[i] = uint32(r.IntN(n))
		}
	case "zipf":
		z := rand.NewZipf(rand.New(rand.NewSource(int64(n))), 1.1, 1, uint64(n-1))
		for i := range idx {
			idx[i] = uint32(z.Uint64())
		}
	default:
		panic("bench: unknown distribution " + dist)
	}
	return idx
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stealTime is the time the hypervisor ran something else while this
// machine's CPUs had work, all CPUs together (Linux's /proc/stat "steal",
// in USER_HZ ticks of 10 ms), or -1 where there is no such figure. On a
// VM no program can help it: a writer whose virtual CPU is taken away
// waits as long, whatever it was doing, so the cadence benchmark reports
// it beside its pauses (steal-ms-per-s, both CPUs counted).
func stealTime() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return -1
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// pauseBatch is how many updates the writer times together: reading the
// clock (time.Now, tsc: 65 ns on the 2-core VM) once per 64 updates of
// 300-550 ns costs 0.2-0.3% of the rate, where timing each update would
// cost 12-20%. So
// max-pause-us is an upper bound on the longest single update (the batch of
// 64 around it); Checkpoint and Poll calls are timed one by one.
const pauseBatch = 64

// BenchmarkCheckpointCadence is a job's throughput while it checkpoints:
// one value state of keys int64 keys, read-modify-write updates of keys
// drawn uniform or zipf on the benchmark goroutine (the writer), and a
// checkpoint store on a temporary directory (fsync on) with AutoConfirm,
// at most one checkpoint in flight. every=none takes no checkpoint;
// every=T takes one once T has passed since the last was taken and it is
// durable; every=busy takes the next as soon as the last is durable. An
// op is one update, so ns/op compares directly with every=none.
//
// Metrics: max-pause-us, the longest call on the writer goroutine (a batch
// of pauseBatch updates, a Checkpoint call, a Poll call); checkpoints taken
// and committed; incremental-share, the share of them that came out
// incremental; cpu-per-s, the process's CPU seconds per second of the run
// (about 1 with no checkpoints: the excess is the checkpoint goroutine and
// the garbage collector); steal-ms-per-s, the VM's steal time (stealTime);
// captures, for every=capture-1s.
//
// At 10M keys two more cases take a checkpoint apart:
// every=capture-1s takes a capture every second and holds it until the
// next, writing nothing, so the writer pays the copies of copy-on-write and
// nothing else; every=stream-beside takes no checkpoint while another
// goroutine copies 64 MB buffers, so the writer pays only for sharing the
// memory system with a neighbour that streams through memory, as a
// checkpoint's writer does.
//
// The checkpoints need a run of several seconds; the targets use
//
//	go test -run '^$' -bench 'BenchmarkCheckpointCadence$/keys=1000000$/dist=uniform$/' -benchtime 8s -count 2 .   (in bench/)
//
// and a fixed number of updates works as well (-benchtime 30000000x).
func BenchmarkCheckpointCadence(b *testing.B) {
	type run struct {
		keys  int
		dists []string
		every []string
	}
	for _, r := range []run{
		{1_000_000, []string{"uniform", "zipf"}, []string{"none", "1s", "200ms", "busy"}},
		{10_000_000, []string{"uniform"}, []string{"none", "1s", "capture-1s", "stream-beside"}},
	} {
		var keys []int64
		for _, dist := range r.dists {
			var idx []uint32
			for _, every := range r.every {
				b.Run(fmt.Sprintf("keys=%d/dist=%s/every=%s", r.keys, dist, every), func(b *testing.B) {
					if keys == nil {
						keys = randomKeys(r.keys)
					}
					if idx == nil {
						idx = cadenceIndexes(r.keys, dist)
					}
					cadence(b, keys, idx, every)
				})
			}
		}
	}
}

func cadence(b *testing.B, keys []int64, idx []uint32, every string) {
	var interval time.Duration // 0: busy
	switch every {
	case "none", "busy":
	case "capture-1s", "stream-beside": // see BenchmarkCheckpointCadence
	default:
		d, err := time.ParseDuration(every)
		if err != nil {
			b.Fatal(err)
		}
		interval = d
	}
	ctx := context.Background()
	c := newCounter(b, keys)
	st, err := checkpoint.Dir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	cps, err := checkpoint.Open(ctx, c.b, st, checkpoint.Options{AutoConfirm: true})
	if err != nil {
		b.Fatal(err)
	}
	defer cps.Close()
	if every == "stream-beside" {
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			// 1 MB a copy: a copy cannot be preempted, and a collection's
			// stop-the-world would otherwise wait on a 64 MB one,
			// stopping the writer with it.
			src, dst := make([]byte, 64<<20), make([]byte, 64<<20)
			for !isClosed(stop) {
				for off := 0; off < len(src); off += 1 << 20 {
					copy(dst[off:off+1<<20], src[off:])
				}
			}
		}()
		defer func() { close(stop); <-stopped }()
	}

	var (
		snap                       *cowstate.Snapshot     // every=capture-1s: the capture held
		captures                   int                    // every=capture-1s: how many taken
		cp                         *checkpoint.Checkpoint // the newest taken
		polled                     = true                 // cp's confirmation picked up
		id                         uint64
		taken                      time.Time
		committed                  int
		incremental                int
		maxPause                   time.Duration
		maxBatch, maxPoll, maxTake time.Duration
		done                       = func() bool { return cp == nil || isClosed(cp.Done()) }
		account                    = func() { // cp is done: count it
			if err := cp.Wait(); err != nil {
				b.Fatal(err)
			}
			committed++
			if cp.Manifest().Kind == checkpoint.KindIncremental {
				incremental++
			}
		}
		mask      = len(idx) - 1
		i         int
		batchFrom time.Time
		cpu0      time.Duration
		wall0     time.Time
		steal0    time.Duration
	)
	b.ReportAllocs()
	for b.Loop() {
		if i == 0 {
			batchFrom, cpu0, wall0, steal0 = time.Now(), cpuTime(), time.Now(), stealTime()
		}
		k := keys[idx[i&mask]]
		n, err := c.v.Get(k, void)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.v.Put(k, void, n+1); err != nil {
			b.Fatal(err)
		}
		i++
		if i%pauseBatch != 0 {
			continue
		}
		now := time.Now()
		maxPause = max(maxPause, now.Sub(batchFrom))
		maxBatch = max(maxBatch, now.Sub(batchFrom))
		batchFrom = now
		if every == "capture-1s" {
			if now.Sub(taken) >= time.Second {
				if snap != nil {
					snap.Release()
				}
				snap, taken = c.b.Snapshot(), now
				captures++
				after := time.Now()
				maxPause = max(maxPause, after.Sub(now))
				maxTake = max(maxTake, after.Sub(now))
				batchFrom = after
			}
			continue
		}
		if every == "none" || every == "stream-beside" || !done() {
			continue
		}
		if !polled { // confirm the last one now, not at the next Checkpoint
			account()
			cps.Poll()
			polled = true
			after := time.Now()
			maxPause = max(maxPause, after.Sub(now))
			maxPoll = max(maxPoll, after.Sub(now))
			now, batchFrom = after, after
		}
		if cp != nil && now.Sub(taken) < interval {
			continue
		}
		id++
		if cp, err = cps.Checkpoint(ctx, id); err != nil {
			b.Fatal(err)
		}
		polled = false
		after := time.Now()
		maxPause = max(maxPause, after.Sub(now))
		maxTake = max(maxTake, after.Sub(now))
		taken, batchFrom = now, after
	}
	wall, cpu, steal1 := time.Since(wall0), cpuTime()-cpu0, stealTime()
	if cp != nil && !polled && done() { // one still being written is not counted
		account()
	}
	if snap != nil {
		snap.Release()
		b.ReportMetric(float64(captures), "captures")
	}
	if testing.Verbose() { // which call was the longest
		b.Logf("longest batch of %d updates %v, Poll %v, Checkpoint %v", pauseBatch, maxBatch, maxPoll, maxTake)
	}
	b.ReportMetric(float64(maxPause)/float64(time.Microsecond), "max-pause-us")
	b.ReportMetric(float64(committed), "checkpoints")
	share := 0.0
	if committed > 0 {
		share = float64(incremental) / float64(committed)
	}
	b.ReportMetric(share, "incremental-share")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-per-s")
	if steal0 >= 0 && steal1 >= 0 {
		b.ReportMetric(float64((steal1-steal0).Milliseconds())/wall.Seconds(), "steal-ms-per-s")
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
