//go:build !race

// Not under -race: the race detector reports these races itself, first.

package cowstate

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cowstate/cowstate/statetable"
)

// TestBackend_ConcurrentWrites: two goroutines writing one backend is a
// misuse the backend detects, like the builtin map does: a writer panics
// with "cowstate: concurrent writes" (a panic the test recovers, not a
// fatal error) instead of both corrupting the state in silence. Detection
// is best effort, so the writers go on until it fires; it must within 2
// seconds of contention. The writers may write different structures: every
// state and timer of a backend shares one flag.
func TestBackend_ConcurrentWrites(t *testing.T) {
	type writers struct {
		name string
		a, b func(i int64)
	}
	newCase := func(name string) writers {
		b, err := New(Config{Clock: func() int64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := NamespacedValue(b, "v", statetable.Int64, statetable.Void, statetable.Int64, 0)
		l, _ := NamespacedList(b, "l", statetable.Int64, statetable.Void, statetable.Int64)
		tm, _ := NamespacedTimers(b, "t", statetable.Int64, statetable.Void)
		ns := statetable.VoidNamespace{}
		put := func(i int64) { v.Put(i%5000, ns, i) }
		add := func(i int64) {
			if i%64 == 63 {
				l.Clear(i%100, ns)
			} else {
				l.Add(i%100, ns, i)
			}
		}
		timer := func(i int64) {
			tm.RegisterEventTime(i%5000, ns, i)
			if i%256 == 255 {
				tm.AdvanceWatermark(i-128, func(int64, statetable.VoidNamespace, int64) error { return nil })
			}
		}
		switch name {
		case "value+value":
			return writers{name, put, func(i int64) { put(i + 2500) }}
		case "list+list":
			return writers{name, add, func(i int64) { add(i + 50) }}
		case "value+timers":
			return writers{name, put, timer}
		}
		panic(name)
	}
	for _, name := range []string{"value+value", "list+list", "value+timers"} {
		t.Run(name, func(t *testing.T) {
			w := newCase(name)
			var stop atomic.Bool
			panics := make(chan string, 2)
			var wg sync.WaitGroup
			for _, write := range []func(int64){w.a, w.b} {
				wg.Go(func() {
					defer func() {
						if r := recover(); r != nil {
							panics <- fmt.Sprint(r)
						}
					}()
					for i := int64(0); !stop.Load(); i++ {
						write(i)
					}
				})
			}
			var got string
			select {
			case got = <-panics:
			case <-time.After(2 * time.Second):
			}
			stop.Store(true)
			wg.Wait()
			switch {
			case got == "":
				t.Fatal("two goroutines wrote one backend for 2 s and neither panicked with cowstate: concurrent writes")
			case !strings.HasPrefix(got, "cowstate: concurrent writes"):
				t.Fatalf("a writer panicked with %q, not with cowstate: concurrent writes", got)
			}
		})
	}
}
