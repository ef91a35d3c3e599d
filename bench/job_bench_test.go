package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
)

// jobBatch is how many events a job processes between two checkpoint calls.
const jobBatch = 1024

// jobLoad is every key's count after the load.
const jobLoad = 1

// BenchmarkJob is a whole job: every event is a read-modify-write of a
// per-key int64 count (keys keys, random int64, drawn uniform or zipf as
// in BenchmarkCheckpointCadence), processed on the benchmark goroutine (the
// writer) in batches of jobBatch events, each followed by the
// implementation's checkpoint call, which takes a checkpoint if every has
// passed since the last one was taken and none is in flight. every=none
// takes none. An untimed load first sets every key's count to jobLoad. An
// op is one event.
//
//   - impl=cowstate: a value state of a cowstate.Backend, each batch's
//     events applied at its end by one ValueState.UpdateEach (a job that
//     reads its events a batch at a time, as from a broker's poll),
//     checkpointed by a checkpoint.Loop on a local directory (fsync on;
//     incremental checkpoints with the default policy).
//   - impl=cowstate-update: the same, each event applied as it comes by one
//     ValueState.Update (cowstateUpdate).
//   - impl=map: a map[int64]int64 (m[k]++). A checkpoint is a maps.Clone on
//     the writer, the clone then written on another goroutine to a file
//     (16 bytes a pair, fsync, rename over the previous one). At most one
//     write is in flight: while it runs, the checkpoint calls skip, as a
//     Loop does.
//   - impl=pebble: a Pebble database with its default options (keys and
//     values 8 bytes big-endian), each batch of events a Get and a Set per
//     event in an indexed batch committed with NoSync; a checkpoint is
//     DB.Checkpoint (WAL flushed) into a new directory, on the writer, the
//     previous one removed after. Its load is flushed and compacted.
//
// After the timed part each implementation takes a last checkpoint; its
// live state, and the last checkpoint restored into a fresh instance, must
// hold for every key the load's count plus the times the events drew it.
//
// Metrics: max-pause-ms, the longest batch of jobBatch events with its
// checkpoint call (wall ms); heap-peak-MB, the most memory the Go runtime
// held during the timed part (/memory/classes/total:bytes minus
// /memory/classes/heap/released:bytes, sampled every 50 ms and at the
// start and end, in 2^20 bytes), the benchmark's own keys and draws (8 bytes
// a key and 48 MB) included and Pebble's block cache and memtables not
// (built with cgo and without -race, Pebble allocates them with C's
// allocator); checkpoints, how many the checkpoint calls saw completed
// (not the last one forced after the timed part); cpu-per-s and
// steal-ms-per-s, as in BenchmarkCheckpointCadence.
//
// The targets use (in bench/)
//
//	go test -run '^$' -bench 'BenchmarkJob$/keys=(1000000|10000000)$/dist=uniform$/every=(none|1s)$/impl=(cowstate|map)$' -benchtime 5s -count 2
func BenchmarkJob(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		var keys []int64
		for _, dist := range []string{"uniform", "zipf"} {
			var s *jobStream
			for _, every := range []string{"none", "1s", "200ms"} {
				for _, impl := range []string{"cowstate", "cowstate-update", "map", "pebble"} {
					b.Run(fmt.Sprintf("keys=%d/dist=%s/every=%s/impl=%s", n, dist, every, impl), func(b *testing.B) {
						if keys == nil {
							keys = randomKeys(n)
						}
						if s == nil {
							s = newJobStream(keys, dist)
						}
						runJob(b, impl, keys, s, every)
					})
					debug.FreeOSMemory() // the next case's heap-peak-MB is its own
				}
			}
			s = nil
		}
		keys = nil
	}
}

// jobStream is the events of a job: cadenceDraws key indexes and their
// keys, in order.
type jobStream struct {
	idx  []uint32
	keys []int64 // keys[i] is the key of idx[i]
}

func newJobStream(keys []int64, dist string) *jobStream {
	s := &jobStream{idx: cadenceIndexes(len(keys), dist), keys: make([]int64, cadenceDraws)}
	for i, x := range s.idx {
		s.keys[i] = keys[x]
	}
	return s
}

// want returns the count of every key (by index) after the load and the
// first events events of s.
func (s *jobStream) want(n int, events int) []int64 {
	want := make([]int64, n)
	for i := range want {
		want[i] = jobLoad
	}
	mask := len(s.idx) - 1
	for i := range events {
		want[s.idx[i&mask]]++
	}
	return want
}

// jobImpl is one implementation of the job: its state and checkpoints.
type jobImpl interface {
	// load sets every key's count to jobLoad.
	load(keys []int64) error
	// update processes an event of key k.
	update(k int64) error
	// endBatch ends a batch of events: the checkpoint call. events is how
	// many events were processed so far.
	endBatch(events int) error
	// completed is how many checkpoints endBatch saw completed.
	completed() int
	// finish ends the run: it takes a last checkpoint of all events
	// processed and waits until it is durable.
	finish(events int) error
	// check checks the live state against want (by key index).
	check(b *testing.B, keys, want []int64)
	// checkRestored restores the last checkpoint into a fresh instance,
	// dropping the live one, and checks it against want and events.
	checkRestored(b *testing.B, keys, want []int64, events int)
	close()
}

// jobInterval returns the checkpoint interval a benchmark's every= names
// (0 for none).
func jobInterval(b *testing.B, every string) time.Duration {
	if every == "none" {
		return 0
	}
	d, err := time.ParseDuration(every)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func runJob(b *testing.B, impl string, keys []int64, s *jobStream, every string) {
	interval := jobInterval(b, every)
	var j jobImpl
	switch impl {
	case "cowstate":
		j = newCowstateJob(b, interval, true)
	case "cowstate-update":
		j = newCowstateJob(b, interval, false)
	case "map":
		j = newMapJob(b, interval)
	case "pebble":
		j = newPebbleJob(b, interval)
	default:
		b.Fatalf("unknown implementation %q", impl)
	}
	defer j.close()
	if err := j.load(keys); err != nil {
		b.Fatal(err)
	}
	debug.FreeOSMemory() // the load's garbage is not collected in the timed part

	var (
		mask     = len(s.keys) - 1
		events   int
		maxPause time.Duration
	)
	peak := startHeapSampler()
	cpu0, steal0 := cpuTime(), stealTime()
	wall0 := time.Now()
	batchFrom := wall0
	b.ReportAllocs()
	for b.Loop() {
		if err := j.update(s.keys[events&mask]); err != nil {
			b.Fatal(err)
		}
		events++
		if events%jobBatch != 0 {
			continue
		}
		if err := j.endBatch(events); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		maxPause = max(maxPause, now.Sub(batchFrom))
		batchFrom = now
	}
	wall, cpu, steal1 := time.Since(wall0), cpuTime()-cpu0, stealTime()
	heapPeak := peak.stop()
	completed := j.completed()

	if err := j.finish(events); err != nil {
		b.Fatal(err)
	}
	want := s.want(len(keys), events)
	j.check(b, keys, want)
	j.checkRestored(b, keys, want, events)

	b.ReportMetric(float64(maxPause)/float64(time.Millisecond), "max-pause-ms")
	b.ReportMetric(float64(heapPeak)/(1<<20), "heap-peak-MB")
	b.ReportMetric(float64(completed), "checkpoints")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-per-s")
	if steal0 >= 0 && steal1 >= 0 {
		b.ReportMetric(float64((steal1-steal0).Milliseconds())/wall.Seconds(), "steal-ms-per-s")
	}
}

// checkCount fails b if got is not key i's count in want.
func checkCount(b *testing.B, what string, keys []int64, i int, got int64, want []int64) {
	if got != want[i] {
		b.Fatalf("%s: key %d (index %d) holds %d, want %d", what, keys[i], i, got, want[i])
	}
}

// heapSampler samples the memory the Go runtime holds on a goroutine of
// its own and keeps the peak.
type heapSampler struct {
	stopc chan struct{}
	peak  chan uint64
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{make(chan struct{}), make(chan uint64)}
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	held := func() uint64 {
		metrics.Read(samples)
		return samples[0].Value.Uint64() - samples[1].Value.Uint64()
	}
	first := held()
	go func() {
		peak := first
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, held())
			case <-h.stopc:
				h.peak <- max(peak, held())
				return
			}
		}
	}()
	return h
}

// stop samples once more, ends the sampling and returns the peak.
func (h *heapSampler) stop() uint64 {
	close(h.stopc)
	return <-h.peak
}

// jobMeta is the job metadata of impl=cowstate's checkpoints.
type jobMeta struct {
	Events int // events processed before the checkpoint
}

type countState = cowstate.ValueState[int64, int64]

// cowstateUpdate is impl=cowstate's event: the read-modify-write of k's
// count.
func cowstateUpdate(v *countState, k int64) error { return v.Update(k, increment) }

type cowstateJob struct {
	dir   string
	every time.Duration
	batch []int64 // the batch's keys so far, when it is applied at its end
	v     *countState
	loop  *checkpoint.Loop[jobMeta]
	last  *checkpoint.Manifest // loop.Last() at the last endBatch
	done  int
}

// newCowstateJob makes impl=cowstate's job (byBatch: UpdateEach at the
// end of each batch) or impl=cowstate-update's.
func newCowstateJob(b *testing.B, every time.Duration, byBatch bool) *cowstateJob {
	j := &cowstateJob{dir: b.TempDir(), every: every}
	if byBatch {
		j.batch = make([]int64, 0, jobBatch)
	}
	start, err := j.open(every)
	if err != nil {
		b.Fatal(err)
	}
	if start.Restored {
		b.Fatal("a fresh directory restored a checkpoint")
	}
	return j
}

// open makes a backend with the count state and resumes a loop on j.dir.
func (j *cowstateJob) open(every time.Duration) (checkpoint.Start[jobMeta], error) {
	var start checkpoint.Start[jobMeta]
	be, err := cowstate.New(cowstate.Config{})
	if err != nil {
		return start, err
	}
	v, err := cowstate.Value[int64, int64](be, "count")
	if err != nil {
		return start, err
	}
	st, err := checkpoint.Dir(j.dir)
	if err != nil {
		return start, err
	}
	loop, start, err := checkpoint.Resume[jobMeta](context.Background(), be, st, checkpoint.LoopOptions{Interval: every})
	if err != nil {
		return start, err
	}
	j.v, j.loop = v, loop
	return start, nil
}

func (j *cowstateJob) load(keys []int64) error {
	for _, k := range keys {
		if err := j.v.Put(k, jobLoad); err != nil {
			return err
		}
	}
	return nil
}

func (j *cowstateJob) update(k int64) error {
	if j.batch == nil {
		return cowstateUpdate(j.v, k)
	}
	j.batch = append(j.batch, k)
	return nil
}

// applyBatch applies the batch's events, if they wait for its end.
func (j *cowstateJob) applyBatch() error {
	if len(j.batch) == 0 {
		return nil
	}
	err := j.v.UpdateEach(j.batch, incrementAt)
	j.batch = j.batch[:0]
	return err
}

func (j *cowstateJob) endBatch(events int) error {
	if err := j.applyBatch(); err != nil {
		return err
	}
	if j.every == 0 {
		return nil
	}
	if err := j.loop.Processed(context.Background(), jobBatch, jobMeta{events}); err != nil {
		return err
	}
	if m := j.loop.Last(); m != j.last {
		j.last = m
		j.done++
	}
	return nil
}

func (j *cowstateJob) completed() int { return j.done }

func (j *cowstateJob) finish(events int) error {
	if err := j.applyBatch(); err != nil {
		return err
	}
	_, err := j.loop.Sync(context.Background(), jobMeta{events})
	return err
}

func (j *cowstateJob) check(b *testing.B, keys, want []int64) {
	checkCowstate(b, "live state", j.v, keys, want)
}

func (j *cowstateJob) checkRestored(b *testing.B, keys, want []int64, events int) {
	if err := j.loop.Close(); err != nil {
		b.Fatal(err)
	}
	j.v, j.loop = nil, nil
	debug.FreeOSMemory()
	start, err := j.open(0)
	if err != nil {
		b.Fatal(err)
	}
	if !start.Restored || start.Meta.Events != events {
		b.Fatalf("restored: %v, with %d events, want a checkpoint of %d events", start.Restored, start.Meta.Events, events)
	}
	checkCowstate(b, "restored checkpoint", j.v, keys, want)
}

func checkCowstate(b *testing.B, what string, v *countState, keys, want []int64) {
	if v.Count() != len(keys) {
		b.Fatalf("%s: %d keys, want %d", what, v.Count(), len(keys))
	}
	for i, k := range keys {
		n, err := v.Get(k)
		if err != nil {
			b.Fatal(err)
		}
		checkCount(b, what, keys, i, n, want)
	}
}

func (j *cowstateJob) close() {
	if j.loop != nil {
		j.loop.Close()
	}
}

// mapCheckpointFile is impl=map's checkpoint, in its directory: the count
// of pairs and of events (8 bytes each, little-endian), then each pair's
// key and count.
const mapCheckpointFile = "checkpoint"

type mapJob struct {
	dir     string
	every   time.Duration
	m       map[int64]int64
	taken   time.Time  // when the last checkpoint was taken (or the job started)
	writing chan error // the write in flight; nil if none
	done    int
}

func newMapJob(b *testing.B, every time.Duration) *mapJob {
	return &mapJob{dir: b.TempDir(), every: every, m: map[int64]int64{}, taken: time.Now()}
}

func (j *mapJob) load(keys []int64) error {
	for _, k := range keys {
		j.m[k] = jobLoad
	}
	return nil
}

func (j *mapJob) update(k int64) error {
	j.m[k]++
	return nil
}

func (j *mapJob) endBatch(events int) error {
	if j.every == 0 {
		return nil
	}
	if j.writing != nil {
		select {
		case err := <-j.writing:
			j.writing = nil
			if err != nil {
				return err
			}
			j.done++
		default:
			return nil
		}
	}
	if time.Since(j.taken) < j.every {
		return nil
	}
	clone := maps.Clone(j.m)
	w := make(chan error, 1)
	go func() { w <- writeMapCheckpoint(j.dir, clone, events) }()
	j.writing, j.taken = w, time.Now()
	return nil
}

func (j *mapJob) completed() int { return j.done }

func (j *mapJob) finish(events int) error {
	if j.writing != nil {
		err := <-j.writing
		j.writing = nil
		if err != nil {
			return err
		}
	}
	return writeMapCheckpoint(j.dir, j.m, events) // nothing changes m meanwhile
}

func (j *mapJob) check(b *testing.B, keys, want []int64) {
	checkMap(b, "live state", j.m, keys, want)
}

func (j *mapJob) checkRestored(b *testing.B, keys, want []int64, events int) {
	j.m = nil
	debug.FreeOSMemory()
	m, n, err := readMapCheckpoint(filepath.Join(j.dir, mapCheckpointFile))
	if err != nil {
		b.Fatal(err)
	}
	if n != events {
		b.Fatalf("restored a checkpoint of %d events, want %d", n, events)
	}
	checkMap(b, "restored checkpoint", m, keys, want)
}

func checkMap(b *testing.B, what string, m map[int64]int64, keys, want []int64) {
	if len(m) != len(keys) {
		b.Fatalf("%s: %d keys, want %d", what, len(m), len(keys))
	}
	for i, k := range keys {
		n, ok := m[k]
		if !ok {
			b.Fatalf("%s: key %d (index %d) missing", what, k, i)
		}
		checkCount(b, what, keys, i, n, want)
	}
}

func (j *mapJob) close() {
	if j.writing != nil {
		<-j.writing
	}
}

// writeMapCheckpoint writes m, after events events, to dir's
// mapCheckpointFile durably: a temporary file, synced, renamed over it.
func writeMapCheckpoint(dir string, m map[int64]int64, events int) (err error) {
	f, err := os.CreateTemp(dir, mapCheckpointFile+"-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], uint64(len(m)))
	binary.LittleEndian.PutUint64(buf[8:], uint64(events))
	w.Write(buf[:])
	for k, n := range m {
		binary.LittleEndian.PutUint64(buf[:8], uint64(k))
		binary.LittleEndian.PutUint64(buf[8:], uint64(n))
		w.Write(buf[:])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, mapCheckpointFile)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// readMapCheckpoint reads what writeMapCheckpoint wrote: the map and the
// count of events.
func readMapCheckpoint(path string) (map[int64]int64, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var buf [16]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return nil, 0, err
	}
	n, events := binary.LittleEndian.Uint64(buf[:8]), int(binary.LittleEndian.Uint64(buf[8:]))
	m := make(map[int64]int64, n)
	for range n {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		m[int64(binary.LittleEndian.Uint64(buf[:8]))] = int64(binary.LittleEndian.Uint64(buf[8:]))
	}
	if len(m) != int(n) {
		return nil, 0, fmt.Errorf("%s: %d pairs of %d distinct keys", path, n, len(m))
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, 0, fmt.Errorf("%s: bytes after %d pairs", path, n)
	}
	return m, events, nil
}

// pebbleLoadBatch is how many keys a batch of impl=pebble's load sets.
const pebbleLoadBatch = 100_000

type pebbleJob struct {
	dir      string // the database in db/, checkpoints in checkpoint-N/
	every    time.Duration
	db       *pebble.DB
	batch    *pebble.Batch // the events of the batch being processed
	key, val [8]byte
	taken    time.Time // when the last checkpoint was taken (or the job started)
	cp       string    // the newest checkpoint's directory
	cps      int       // checkpoints taken
	done     int       // of them, in endBatch
}

func newPebbleJob(b *testing.B, every time.Duration) *pebbleJob {
	j := &pebbleJob{dir: b.TempDir(), every: every, taken: time.Now()}
	db, err := openPebble(filepath.Join(j.dir, "db"))
	if err != nil {
		b.Fatal(err)
	}
	j.db = db
	return j
}

func openPebble(dir string) (*pebble.DB, error) {
	return pebble.Open(dir, &pebble.Options{Logger: quietPebbleLogger{}})
}

// quietPebbleLogger drops Pebble's informational messages.
type quietPebbleLogger struct{}

func (quietPebbleLogger) Infof(string, ...any) {}
func (quietPebbleLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietPebbleLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

func (j *pebbleJob) load(keys []int64) error {
	binary.BigEndian.PutUint64(j.val[:], jobLoad)
	for from := 0; from < len(keys); from += pebbleLoadBatch {
		wb := j.db.NewBatch()
		for _, k := range keys[from:min(from+pebbleLoadBatch, len(keys))] {
			binary.BigEndian.PutUint64(j.key[:], uint64(k))
			if err := wb.Set(j.key[:], j.val[:], nil); err != nil {
				return err
			}
		}
		if err := wb.Commit(pebble.NoSync); err != nil {
			return err
		}
		wb.Close()
	}
	if err := j.db.Flush(); err != nil {
		return err
	}
	// Every 8-byte key sorts below nine 0xff bytes.
	end := slices.Repeat([]byte{0xff}, 9)
	if err := j.db.Compact(context.Background(), nil, end, true); err != nil {
		return err
	}
	j.batch = j.db.NewIndexedBatch()
	return nil
}

func (j *pebbleJob) update(k int64) error {
	binary.BigEndian.PutUint64(j.key[:], uint64(k))
	var n int64
	v, closer, err := j.batch.Get(j.key[:])
	switch err {
	case nil:
		if len(v) != 8 {
			closer.Close()
			return fmt.Errorf("key %d holds %d bytes", k, len(v))
		}
		n = int64(binary.BigEndian.Uint64(v))
		closer.Close()
	case pebble.ErrNotFound:
	default:
		return err
	}
	binary.BigEndian.PutUint64(j.val[:], uint64(n+1))
	return j.batch.Set(j.key[:], j.val[:], nil)
}

// commit commits the batch of events and starts the next.
func (j *pebbleJob) commit() error {
	if err := j.batch.Commit(pebble.NoSync); err != nil {
		return err
	}
	j.batch.Close()
	j.batch = j.db.NewIndexedBatch()
	return nil
}

func (j *pebbleJob) endBatch(int) error {
	if err := j.commit(); err != nil {
		return err
	}
	if j.every == 0 || time.Since(j.taken) < j.every {
		return nil
	}
	if err := j.checkpoint(); err != nil {
		return err
	}
	j.done++
	j.taken = time.Now()
	return nil
}

// checkpoint checkpoints the database into a new directory and removes the
// previous checkpoint.
func (j *pebbleJob) checkpoint() error {
	j.cps++
	dir := filepath.Join(j.dir, fmt.Sprintf("checkpoint-%d", j.cps))
	if err := j.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return err
	}
	if j.cp != "" {
		if err := os.RemoveAll(j.cp); err != nil {
			return err
		}
	}
	j.cp = dir
	return nil
}

func (j *pebbleJob) completed() int { return j.done }

func (j *pebbleJob) finish(int) error {
	if err := j.commit(); err != nil {
		return err
	}
	return j.checkpoint()
}

func (j *pebbleJob) check(b *testing.B, keys, want []int64) {
	checkPebble(b, "live state", j.db, keys, want)
}

func (j *pebbleJob) checkRestored(b *testing.B, keys, want []int64, _ int) {
	j.close()
	db, err := openPebble(j.cp)
	if err != nil {
		b.Fatal(err)
	}
	j.db = db
	checkPebble(b, "restored checkpoint", db, keys, want)
}

// checkPebble checks db against want in one pass over db in key order.
func checkPebble(b *testing.B, what string, db *pebble.DB, keys, want []int64) {
	type keyIndex struct {
		k uint64 // the key as Pebble orders it
		i int
	}
	order := make([]keyIndex, len(keys))
	for i, k := range keys {
		order[i] = keyIndex{uint64(k), i}
	}
	slices.SortFunc(order, func(x, y keyIndex) int { return cmp.Compare(x.k, y.k) })
	it, err := db.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n == len(order) {
			b.Fatalf("%s: more than %d keys", what, len(order))
		}
		ki := order[n]
		if k := it.Key(); len(k) != 8 || binary.BigEndian.Uint64(k) != ki.k {
			b.Fatalf("%s: key %x where key %d (index %d) was due", what, k, keys[ki.i], ki.i)
		}
		v := it.Value()
		if len(v) != 8 {
			b.Fatalf("%s: key %d (index %d) holds %d bytes", what, keys[ki.i], ki.i, len(v))
		}
		checkCount(b, what, keys, ki.i, int64(binary.BigEndian.Uint64(v)), want)
		n++
	}
	if err := it.Error(); err != nil {
		b.Fatal(err)
	}
	if n != len(order) {
		b.Fatalf("%s: %d keys, want %d", what, n, len(order))
	}
}

func (j *pebbleJob) close() {
	if j.batch != nil {
		j.batch.Close()
		j.batch = nil
	}
	if j.db != nil {
		j.db.Close()
		j.db = nil
	}
}
