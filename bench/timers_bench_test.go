package bench

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cowstate/cowstate/cow"
	"github.com/cowstate/cowstate/timerqueue"
)

// benchTimer is a timer and the key group of its key, precomputed so that
// both implementations register the same timers and pay nothing to make
// them.
type benchTimer struct {
	t        timerqueue.Timer
	keyGroup int
}

// randomTimers returns n timers at random timestamps with random 8-byte
// keys and the namespace "w", the same for every run, and the largest
// timestamp.
func randomTimers(n int) ([]benchTimer, int64) {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	out := make([]benchTimer, n)
	var maxTS int64
	for i := range out {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], r.Uint64())
		ts := r.Int64N(1_000_000_000)
		maxTS = max(maxTS, ts)
		out[i] = benchTimer{
			t:        timerqueue.Timer{Timestamp: ts, Key: string(k[:]), Namespace: "w"},
			keyGroup: int(k[0]) % 128, // a fixed function of the key, as a backend's is
		}
	}
	return out, maxTS
}

// BenchmarkTimers registers n timers at random timestamps and then fires
// them all, one b.Loop iteration per register-all + fire-all, starting from
// an empty queue each time: impl=cowstate is timerqueue.Queue (Register,
// then one Advance to the largest timestamp), impl=heap is Flink's
// HeapPriorityQueueSet design in Go (a container/heap of timer elements that
// know their heap index, ordered by timerqueue.Compare, plus a dedup map from
// timer to element for registration and deletion; firing pops the heap and
// removes the element from the map). Both count the timers they fire.
func BenchmarkTimers(b *testing.B) {
	for _, n := range []int{1_000_000} {
		timers, maxTS := randomTimers(n)
		for _, impl := range []string{"cowstate", "heap"} {
			b.Run(fmt.Sprintf("timers=%d/impl=%s", n, impl), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var fired int
					switch impl {
					case "cowstate":
						fired = cowstateTimers(timers, maxTS)
					case "heap":
						fired = heapTimers(timers, maxTS)
					}
					if fired != n {
						b.Fatalf("fired %d timers, want %d", fired, n)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "timers/s")
			})
		}
	}
}

func cowstateTimers(timers []benchTimer, upTo int64) int {
	q := timerqueue.New(cow.NewOwner())
	for _, bt := range timers {
		q.Register(bt.t, bt.keyGroup)
	}
	fired := 0
	q.Advance(upTo, func(timerqueue.Timer, int) { fired++ })
	if q.Len() != 0 {
		return -q.Len()
	}
	return fired
}

func heapTimers(timers []benchTimer, upTo int64) int {
	q := newHeapTimers()
	for _, bt := range timers {
		q.Register(bt.t, bt.keyGroup)
	}
	fired := 0
	q.Advance(upTo, func(timerqueue.Timer, int) { fired++ })
	if q.Len() != 0 {
		return -q.Len()
	}
	return fired
}

// heapTimers is Flink's HeapPriorityQueueSet: a binary heap of elements
// that record their own heap index (so Delete is O(log n)), and a
// deduplication map from timer to element.
type heapTimerSet struct {
	heap  timerHeap
	dedup map[timerqueue.Timer]*heapTimer
}

type heapTimer struct {
	t        timerqueue.Timer
	keyGroup int
	index    int // position in the heap
}

func newHeapTimers() *heapTimerSet {
	return &heapTimerSet{dedup: map[timerqueue.Timer]*heapTimer{}}
}

func (q *heapTimerSet) Len() int { return len(q.heap) }

// Register adds t unless it is present, like HeapPriorityQueueSet.add.
func (q *heapTimerSet) Register(t timerqueue.Timer, keyGroup int) bool {
	if _, ok := q.dedup[t]; ok {
		return false
	}
	e := &heapTimer{t: t, keyGroup: keyGroup}
	q.dedup[t] = e
	heap.Push(&q.heap, e)
	return true
}

// Delete removes t if present, like HeapPriorityQueueSet.remove.
func (q *heapTimerSet) Delete(t timerqueue.Timer) bool {
	e, ok := q.dedup[t]
	if !ok {
		return false
	}
	delete(q.dedup, t)
	heap.Remove(&q.heap, e.index)
	return true
}

// Advance fires every timer with Timestamp <= upTo, removing each first, as
// Flink's InternalTimerServiceImpl.advanceWatermark does (peek, poll, fire).
func (q *heapTimerSet) Advance(upTo int64, fire func(timerqueue.Timer, int)) int {
	n := 0
	for len(q.heap) > 0 && q.heap[0].t.Timestamp <= upTo {
		e := heap.Pop(&q.heap).(*heapTimer)
		delete(q.dedup, e.t)
		fire(e.t, e.keyGroup)
		n++
	}
	return n
}

// timerHeap is the container/heap of a heapTimerSet, ordered by
// timerqueue.Compare.
type timerHeap []*heapTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return timerqueue.Compare(h[i].t, h[j].t) < 0
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	e := x.(*heapTimer)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	e.index = -1
	return e
}

// TestTimers_PeersAgree checks the heap peer against timerqueue on timers
// with many ties: the same registrations, deletions and fire order.
func TestTimers_PeersAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	q, h := timerqueue.New(cow.NewOwner()), newHeapTimers()
	draw := func() timerqueue.Timer {
		return timerqueue.Timer{Timestamp: r.Int64N(100), Key: string(rune('a' + r.IntN(5))), Namespace: string(rune('w' + r.IntN(2)))}
	}
	var fq, fh []timerqueue.Timer
	for round := range 50 {
		for range 20 {
			tm := draw()
			if a, b := q.Register(tm, 1), h.Register(tm, 1); a != b {
				t.Fatalf("round %d: Register(%+v) = %v (cowstate), %v (heap)", round, tm, a, b)
			}
			tm = draw()
			if a, b := q.Delete(tm), h.Delete(tm); a != b {
				t.Fatalf("round %d: Delete(%+v) = %v (cowstate), %v (heap)", round, tm, a, b)
			}
		}
		upTo := int64(round * 2)
		q.Advance(upTo, func(tm timerqueue.Timer, _ int) { fq = append(fq, tm) })
		h.Advance(upTo, func(tm timerqueue.Timer, _ int) { fh = append(fh, tm) })
		if q.Len() != h.Len() || len(fq) != len(fh) {
			t.Fatalf("round %d: Len %d vs %d, fired %d vs %d", round, q.Len(), h.Len(), len(fq), len(fh))
		}
	}
	for i := range fq {
		if fq[i] != fh[i] {
			t.Fatalf("fired timer %d: %+v (cowstate), %+v (heap)", i, fq[i], fh[i])
		}
	}
}
