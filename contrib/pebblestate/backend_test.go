package pebblestate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/contrib/pebblestate"
	"github.com/cowstate/cowstate/rapidtest"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

func open(t testing.TB, cfg cowstate.Config, fs vfs.FS, dir string) *pebblestate.Backend {
	t.Helper()
	b, err := pebblestate.Open(pebblestate.Options{Config: cfg, Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// register registers one state of each kind, named after it, and a timer
// service "t".
func register(t testing.TB, b contract.Backend) {
	t.Helper()
	for _, k := range []statetable.Kind{statetable.KindValue, statetable.KindList, statetable.KindMap, statetable.KindReducing, statetable.KindAggregating} {
		must(t, b.RegisterState(k.String(), k))
	}
	must(t, b.RegisterTimerService("t"))
}

// fill writes n keys into every state and a timer per key, with keys and
// namespaces holding the bytes the key encoding escapes.
func fill(t testing.TB, b contract.Backend, n int) {
	t.Helper()
	for i := range n {
		k, ns := fmt.Sprintf("k\x00%d\xff", i), fmt.Sprintf("\x00ns%d", i%3)
		if !b.KeyGroups().Contains(statetable.KeyGroupOfKey([]byte(k), b.MaxParallelism())) {
			continue
		}
		must(t, b.Put("value", k, ns, "v"+k))
		must(t, b.Add("list", k, ns, "a"))
		must(t, b.Add("list", k, ns, ""))
		must(t, b.PutMapEntry("map", k, ns, "\x00u", "uv"))
		must(t, b.PutMapEntry("map", k, ns, "", ""))
		must(t, b.Add("reducing", k, ns, "r"))
		must(t, b.Add("aggregating", k, ns, "g"))
		_, err := b.RegisterTimer("t", timerqueue.EventTime, k, ns, int64(i)-int64(n)/2)
		must(t, err)
		_, err = b.RegisterTimer("t", timerqueue.ProcessingTime, k, ns, -1<<63+int64(i))
		must(t, err)
	}
}

// same compares every state and timer of two readers.
func same(t testing.TB, got, want contract.EntryReader) {
	t.Helper()
	for _, s := range []string{"value", "list", "map", "reducing", "aggregating"} {
		g, err := got.StateEntries(s)
		must(t, err)
		w, err := want.StateEntries(s)
		must(t, err)
		sortEntries(g)
		sortEntries(w)
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Fatalf("state %q:\n got %q\nwant %q", s, g, w)
		}
	}
	for _, d := range []timerqueue.Domain{timerqueue.EventTime, timerqueue.ProcessingTime} {
		g, err := got.TimerEntries("t", d)
		must(t, err)
		w, err := want.TimerEntries("t", d)
		must(t, err)
		if !slices.Equal(g, w) {
			t.Fatalf("timers of domain %d:\n got %v\nwant %v", d, g, w)
		}
	}
}

func sortEntries(es []contract.Entry) {
	slices.SortFunc(es, func(a, b contract.Entry) int {
		if c := bytes.Compare([]byte(a.Key), []byte(b.Key)); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.Namespace), []byte(b.Namespace))
	})
}

func snapshotOf(t testing.TB, b contract.Backend) []byte {
	t.Helper()
	v := b.Capture()
	defer v.Release()
	var buf bytes.Buffer
	must(t, v.WriteSnapshot(context.Background(), &buf))
	return buf.Bytes()
}

// TestBackend_MergeSourceTwice: a source namespace named twice is merged
// once (the first bug the suite found, see README.md).
func TestBackend_MergeSourceTwice(t *testing.T) {
	b := open(t, cowstate.Config{MaxParallelism: 1}, vfs.NewMem(), "db")
	register(t, b)
	must(t, b.Add("aggregating", "k", "w1", ""))
	must(t, b.MergeNamespaces("aggregating", "k", "", []string{"w1", "w1"}))
	agg := contract.Aggregate{}
	want := agg.Result(agg.Add("", agg.CreateAccumulator()))
	v, ok, err := b.Get("aggregating", "k", "")
	if err != nil || !ok || v != want {
		t.Fatalf("Get after merging w1 twice = %q, %v, %v; want %q", v, ok, err, want)
	}
}

// TestOpen_Dir: a database in a real directory keeps its entries and timers
// across Close and Open, refuses another max parallelism and a state
// registered with another kind.
func TestOpen_Dir(t *testing.T) {
	dir := t.TempDir()
	cfg := cowstate.Config{MaxParallelism: 16}
	b, err := pebblestate.Open(pebblestate.Options{Config: cfg, Dir: dir})
	must(t, err)
	register(t, b)
	fill(t, b, 40)
	want, err := rapidtest.NewModel(cfg)
	must(t, err)
	register(t, want)
	fill(t, want, 40)
	same(t, b, want)
	must(t, b.Close())
	must(t, b.Close())
	if err := b.Put("value", "k", "", "v"); !errors.Is(err, pebblestate.ErrClosed) {
		t.Fatalf("Put after Close: %v, want ErrClosed", err)
	}

	for _, bad := range []pebblestate.Options{{Config: cfg}, {Config: cowstate.Config{MaxParallelism: -1}, Dir: dir},
		{Config: cowstate.Config{MaxParallelism: 4, KeyGroups: &statetable.KeyGroupRange{First: 2, Last: 4}}, Dir: dir}} {
		if _, err := pebblestate.Open(bad); !errors.Is(err, cowstate.ErrConfig) {
			t.Errorf("Open(%+v): %v, want ErrConfig", bad, err)
		}
	}
	if _, err := pebblestate.Open(pebblestate.Options{Config: cowstate.Config{MaxParallelism: 8}, Dir: dir}); !errors.Is(err, pebblestate.ErrMismatch) {
		t.Fatalf("Open with another max parallelism: %v, want ErrMismatch", err)
	}
	b, err = pebblestate.Open(pebblestate.Options{Config: cfg, Dir: dir})
	must(t, err)
	defer b.Close()
	if err := b.RegisterState("value", statetable.KindList); !errors.Is(err, statetable.ErrStateMismatch) {
		t.Fatalf("RegisterState of a stored value state as a list: %v, want ErrStateMismatch", err)
	}
	register(t, b)
	same(t, b, want)
}

// TestRestore_Share: a share restores only its key groups, reading only
// their sections, and the shares together are the whole.
func TestRestore_Share(t *testing.T) {
	const maxPar = 32
	src := open(t, cowstate.Config{MaxParallelism: maxPar}, vfs.NewMem(), "db")
	register(t, src)
	fill(t, src, 300)
	data := snapshotOf(t, src)
	total := 0
	for i := range 4 {
		r := statetable.RangeForOperator(maxPar, 4, i)
		cfg := cowstate.Config{MaxParallelism: maxPar, KeyGroups: &r}
		b := open(t, cfg, vfs.NewMem(), "db")
		register(t, b)
		cr := &countingReader{r: bytes.NewReader(data)}
		must(t, b.RestoreSnapshot(context.Background(), cr, int64(len(data))))
		want, err := rapidtest.NewModel(cfg)
		must(t, err)
		register(t, want)
		fill(t, want, 300)
		same(t, b, want)
		if cr.n > int64(len(data))/2 {
			t.Errorf("restoring %v of %d read %d of %d bytes", r, maxPar, cr.n, len(data))
		}
		total += int(cr.n)
	}
	t.Logf("4 shares read %d bytes of a %d-byte snapshot", total, len(data))
}

type countingReader struct {
	r interface {
		ReadAt([]byte, int64) (int, error)
	}
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// TestRestore_Errors: a snapshot that does not match, a backend that is not
// empty and a cancelled restore are errors naming what, and leave the
// backend as it was.
func TestRestore_Errors(t *testing.T) {
	src := open(t, cowstate.Config{MaxParallelism: 8}, vfs.NewMem(), "db")
	register(t, src)
	fill(t, src, 20)
	data := snapshotOf(t, src)
	restore := func(b *pebblestate.Backend) error {
		return b.RestoreSnapshot(context.Background(), bytes.NewReader(data), int64(len(data)))
	}

	other := open(t, cowstate.Config{MaxParallelism: 16}, vfs.NewMem(), "db")
	register(t, other)
	if err := restore(other); !errors.Is(err, pebblestate.ErrMismatch) || !errors.Is(err, snapshot.ErrMismatch) {
		t.Errorf("restore into another max parallelism: %v, want ErrMismatch", err)
	}

	partial := open(t, cowstate.Config{MaxParallelism: 8}, vfs.NewMem(), "db")
	must(t, partial.RegisterState("value", statetable.KindValue))
	must(t, partial.RegisterTimerService("t"))
	if err := restore(partial); !errors.Is(err, pebblestate.ErrMismatch) {
		t.Errorf("restore with states not registered: %v, want ErrMismatch", err)
	}

	full := open(t, cowstate.Config{MaxParallelism: 8}, vfs.NewMem(), "db")
	register(t, full)
	must(t, restore(full))
	if err := restore(full); !errors.Is(err, cowstate.ErrNotEmpty) {
		t.Errorf("restore into a backend with data: %v, want ErrNotEmpty", err)
	}

	cancelled := open(t, cowstate.Config{MaxParallelism: 8}, vfs.NewMem(), "db")
	register(t, cancelled)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cancelled.RestoreSnapshot(ctx, bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled restore: %v, want context.Canceled", err)
	}
	empty, err := rapidtest.NewModel(cowstate.Config{MaxParallelism: 8})
	must(t, err)
	register(t, empty)
	same(t, cancelled, empty)
	if es, err := partial.StateEntries("value"); err != nil || len(es) > 0 {
		t.Errorf("after a refused restore: %v, %v; want no entry", es, err)
	}
}

// TestRestore_Corrupt: every byte of a snapshot flipped, and every
// truncation, is an error matching ErrCorrupt or ErrMismatch (never a
// panic or a wrong restore), and leaves the backend empty.
func TestRestore_Corrupt(t *testing.T) {
	src := open(t, cowstate.Config{MaxParallelism: 4}, vfs.NewMem(), "db")
	register(t, src)
	fill(t, src, 4)
	data := snapshotOf(t, src)
	empty, err := rapidtest.NewModel(cowstate.Config{MaxParallelism: 4})
	must(t, err)
	register(t, empty)
	b := open(t, cowstate.Config{MaxParallelism: 4}, vfs.NewMem(), "db")
	register(t, b)
	check := func(what string, bad []byte) {
		t.Helper()
		err := b.RestoreSnapshot(context.Background(), bytes.NewReader(bad), int64(len(bad)))
		if !errors.Is(err, snapshot.ErrCorrupt) && !errors.Is(err, snapshot.ErrMismatch) {
			t.Fatalf("%s: %v, want ErrCorrupt or ErrMismatch", what, err)
		}
		same(t, b, empty)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		check(fmt.Sprintf("byte %d of %d flipped", i, len(data)), bad)
	}
	for n := range len(data) {
		check(fmt.Sprintf("first %d of %d bytes", n, len(data)), data[:n])
	}
	// Committing after every section: a bad byte in a later section is
	// found after earlier ones were written, which are taken back.
	defer pebblestate.SetRestoreBatchBytes(1)()
	for i := len(data) / 2; i < len(data)-24; i += 7 {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		check(fmt.Sprintf("byte %d of %d flipped, committing every section", i, len(data)), bad)
	}
}

// FuzzRestoreSnapshot: any bytes restore or fail with an error.
func FuzzRestoreSnapshot(f *testing.F) {
	src := open(f, cowstate.Config{MaxParallelism: 2}, vfs.NewMem(), "db")
	register(f, src)
	fill(f, src, 3)
	f.Add(snapshotOf(f, src))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := open(t, cowstate.Config{MaxParallelism: 2}, vfs.NewMem(), "db")
		register(t, b)
		if err := b.RestoreSnapshot(context.Background(), bytes.NewReader(data), int64(len(data))); err == nil {
			if _, err := b.StateEntries("list"); err != nil {
				t.Fatalf("restored, then: %v", err)
			}
		}
	})
}
