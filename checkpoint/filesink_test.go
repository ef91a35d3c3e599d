package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cowstate/cowstate"
)

// The tests here run a job whose output goes to a FileSink in other
// processes (this test binary again, with sinkChildEnv set to its
// directory) and kill it with SIGKILL: at the n-th time it reaches a named
// point of a checkpoint's commit (sinkCrashEnv), or at a random moment.
// Whatever the kills, the committed output is the uninterrupted run's,
// every record once.

const (
	sinkChildEnv = "COWSTATE_SINK_CHILD"
	sinkCrashEnv = "COWSTATE_SINK_CRASH" // point:n
	sinkKindEnv  = "COWSTATE_SINK_KIND"  // "callback" for a CallbackSink, else a FileSink
)

// sinkJobRecords is how many records the job reads; a checkpoint is due
// every sinkJobEvery, and it syncs one every sinkJobSync.
const (
	sinkJobRecords = 3000
	sinkJobEvery   = 97
	sinkJobSync    = 250
)

// TestSinkChildProcess is the body of a child process; it does nothing in
// a normal test run.
func TestSinkChildProcess(t *testing.T) {
	dir := os.Getenv(sinkChildEnv)
	if dir == "" {
		return
	}
	if at := os.Getenv(sinkCrashEnv); at != "" {
		point, nth, _ := strings.Cut(at, ":")
		n, _ := strconv.Atoi(nth)
		crashPoint = func(p string) {
			if p == point {
				if n--; n == 0 {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}
	}
	if err := runSinkJob(dir, os.Getenv(sinkKindEnv) == "callback", os.Getenv("COWSTATE_SINK_SLOW") != ""); err != nil {
		fmt.Fprintln(os.Stderr, "sink job:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// runSinkJob is the job: for each record i, a read-modify-write of the
// count of key i%7 and an output line of the record, its key and the
// count after it, so that output emitted twice or lost, or output that
// disagrees with the restored state, shows. Its output goes to a FileSink
// in dir/out, or with callback to a CallbackSink staging in dir/staging
// whose deliveries write dir/out/part-<id> (idempotently: a temporary
// file renamed over it). slow makes each record take a little time, for
// kills at random moments.
func runSinkJob(dir string, callback, slow bool) error {
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 16})
	if err != nil {
		return err
	}
	counts, err := cowstate.Value[int64, int64](b, "counts")
	if err != nil {
		return err
	}
	st, err := Dir(filepath.Join(dir, "store"))
	if err != nil {
		return err
	}
	var (
		sink Sink
		emit func([]byte) error
	)
	if callback {
		staging, err := Dir(filepath.Join(dir, "staging"))
		if err != nil {
			return err
		}
		cs, err := NewCallbackSink(staging, deliverToDir(filepath.Join(dir, "out")))
		if err != nil {
			return err
		}
		sink, emit = cs, cs.Emit
	} else {
		fs, err := NewFileSink(filepath.Join(dir, "out"), "")
		if err != nil {
			return err
		}
		defer fs.Close()
		sink, emit = fs, func(b []byte) error { _, err := fs.Write(b); return err }
	}
	loop, start, err := Resume[int](bg, b, st, LoopOptions{Records: sinkJobEvery, Sink: sink})
	if err != nil {
		return err
	}
	var line []byte
	for i := start.Meta; i < sinkJobRecords; i++ {
		k := int64(i % 7)
		if err := counts.Update(k, func(c int64) int64 { return c + 1 }); err != nil {
			return err
		}
		c, err := counts.Get(k)
		if err != nil {
			return err
		}
		line = fmt.Appendf(line[:0], "%d %d %d\n", i, k, c)
		if err := emit(line); err != nil {
			return err
		}
		if err := loop.Processed(bg, 1, i+1); err != nil {
			return err
		}
		if (i+1)%sinkJobSync == 0 { // so that a quick run checkpoints too
			if _, err := loop.Sync(bg, i+1); err != nil {
				return err
			}
		}
		if slow && i%10 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := loop.Sync(bg, sinkJobRecords); err != nil {
		return err
	}
	return loop.Close()
}

// deliverToDir is a downstream system with idempotent writes keyed by
// checkpoint id: the records of checkpoint id become the file
// dir/part-<id>, written to a temporary file and renamed over it. A
// second delivery of an id with other records is what a sink must never
// do (a downstream that keeps the first would keep the wrong ones): the
// process then exits with status 3, which fails the test.
func deliverToDir(dir string) func(ctx context.Context, id uint64, records [][]byte) error {
	return func(ctx context.Context, id uint64, records [][]byte) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		part, content := filepath.Join(dir, fmt.Sprintf("part-%020d", id)), bytes.Join(records, nil)
		if old, err := os.ReadFile(part); err == nil && !bytes.Equal(old, content) {
			fmt.Fprintf(os.Stderr, "checkpoint %d delivered again with other records\n", id)
			os.Exit(3)
		}
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, part)
	}
}

// wantSinkOutput is the output of an uninterrupted run.
func wantSinkOutput() []byte {
	var out []byte
	counts := map[int64]int64{}
	for i := range sinkJobRecords {
		k := int64(i % 7)
		counts[k]++
		out = fmt.Appendf(out, "%d %d %d\n", i, k, counts[k])
	}
	return out
}

// runSinkChild runs the job in a child process; crash is sinkCrashEnv's
// value ("" for none). It reports whether the child was killed.
func runSinkChild(t *testing.T, dir, kind, crash string, slow bool, killAfter time.Duration) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSinkChildProcess$")
	cmd.Env = append(os.Environ(), sinkChildEnv+"="+dir, sinkCrashEnv+"="+crash, sinkKindEnv+"="+kind)
	if slow {
		cmd.Env = append(cmd.Env, "COWSTATE_SINK_SLOW=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() { cmd.Process.Kill() })
		defer timer.Stop()
	}
	err := cmd.Wait()
	if err == nil {
		return false
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	t.Fatalf("the job (crash %q) failed: %v\n%s", crash, err, stderr.Bytes())
	return false
}

// checkSinkOutput checks the committed output in dir against an
// uninterrupted run's, and that nothing is left pending but the last
// owner's empty directory (FileSink) or its recovery marker
// (CallbackSink).
func checkSinkOutput(t *testing.T, dir string) {
	t.Helper()
	out := filepath.Join(dir, "out")
	parts, err := FileSinkParts(out, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, p := range parts {
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	if want := wantSinkOutput(); !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		i := 0
		for i < len(gl) && i < len(wl) && bytes.Equal(gl[i], wl[i]) {
			i++
		}
		t.Fatalf("committed output (%d parts, %d lines) differs from an uninterrupted run's (%d lines) at line %d: %q, want %q",
			len(parts), len(gl)-1, len(wl)-1, i+1, lineAt(gl, i), lineAt(wl, i))
	}
	if staged, _ := os.ReadDir(filepath.Join(dir, "staging")); len(staged) > 1 {
		t.Fatalf("after the last run the callback sink still stages %d objects", len(staged))
	}
	pending, _ := os.ReadDir(filepath.Join(out, ".pending-part"))
	for _, e := range pending {
		left, _ := os.ReadDir(filepath.Join(out, ".pending-part", e.Name()))
		if len(pending) != 1 || len(left) != 0 {
			t.Fatalf("after the last run the sink still holds %d owner directories, %s with %d files", len(pending), e.Name(), len(left))
		}
	}
}

func lineAt(lines [][]byte, i int) []byte {
	if i < len(lines) {
		return lines[i]
	}
	return nil
}

// fileSinkCrashPoints are the points of a checkpoint's commit a job with
// a FileSink can die at: after its output is prepared and before the
// checkpoint is taken; after the checkpoint is durable and before the
// output is committed; in Prepare, after the transaction is synced and
// after it is renamed; in Commit and Recover, after a part is renamed and
// after the directory is synced; in Recover, after an owner's directory
// is settled. callbackSinkCrashPoints are those of a CallbackSink: the
// loop's two, after the records are staged, after a delivery and before
// its staged object is removed.
var (
	fileSinkCrashPoints = []string{
		"loop.prepared", "loop.durable",
		"sink.synced", "sink.prepared", "sink.renamed", "sink.committed", "sink.recovered-epoch",
	}
	callbackSinkCrashPoints = []string{"loop.prepared", "loop.durable", "callback.staged", "callback.delivered"}
)

// TestFileSink_KilledAtEveryPoint kills the job at each point of the
// commit, at its first, second and fifth passage (a recovery's at its
// first), three runs in a row (so a recovery is killed too), then lets it
// finish: the committed output is exactly an uninterrupted run's.
func TestFileSink_KilledAtEveryPoint(t *testing.T) {
	killAtEveryPoint(t, "file", fileSinkCrashPoints)
}

// TestCallbackSink_KilledAtEveryPoint: the same for a CallbackSink whose
// deliveries are idempotent writes keyed by checkpoint id.
func TestCallbackSink_KilledAtEveryPoint(t *testing.T) {
	killAtEveryPoint(t, "callback", callbackSinkCrashPoints)
}

func killAtEveryPoint(t *testing.T, kind string, points []string) {
	for _, point := range points {
		for _, nth := range []int{1, 2, 5} {
			if point == "sink.recovered-epoch" && nth > 1 {
				continue // a recovery settles one earlier owner here
			}
			t.Run(fmt.Sprintf("%s:%d", point, nth), func(t *testing.T) {
				dir := t.TempDir()
				crashes := []string{point, point, point}
				if point == "sink.recovered-epoch" { // a recovery needs something to recover
					crashes[0] = "sink.prepared"
				}
				killed := 0
				for _, p := range crashes {
					if runSinkChild(t, dir, kind, fmt.Sprintf("%s:%d", p, nth), false, 0) {
						killed++
					}
				}
				if killed < 2 {
					t.Fatalf("the job never reached %s %d times", point, nth)
				}
				if runSinkChild(t, dir, kind, "", false, 0) {
					t.Fatal("the last run was killed")
				}
				checkSinkOutput(t, dir)
			})
		}
	}
}

// TestSinks_KilledAtRandom kills a slowed job with SIGKILL from outside
// at random moments, then lets it finish, with each kind of sink.
func TestSinks_KilledAtRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for _, kind := range []string{"file", "callback"} {
		for trial := range 3 {
			t.Run(fmt.Sprintf("%s/%d", kind, trial), func(t *testing.T) {
				dir := t.TempDir()
				killed := 0
				for range 6 {
					if runSinkChild(t, dir, kind, "", true, time.Duration(20+rng.IntN(250))*time.Millisecond) {
						killed++
					}
				}
				if runSinkChild(t, dir, kind, "", true, 0) {
					t.Fatal("the last run was killed")
				}
				if killed == 0 {
					t.Fatal("no run was killed: the kills came too late to test anything")
				}
				checkSinkOutput(t, dir)
			})
		}
	}
}

// sinkLoop resumes a job of one value state whose output is a FileSink in
// dir, on st.
func sinkLoop(t *testing.T, st Storage, dir string) (*Loop[int], *FileSink, Start[int]) {
	t.Helper()
	b, err := cowstate.New(cowstate.Config{MaxParallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cowstate.Value[int64, int64](b, "counts"); err != nil {
		t.Fatal(err)
	}
	sink, err := NewFileSink(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	loop, start, err := Resume[int](bg, b, st, LoopOptions{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	return loop, sink, start
}

func readParts(t *testing.T, dir string) string {
	t.Helper()
	parts, err := FileSinkParts(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, p := range parts {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return string(all)
}

// A FileSink commits what was written before a checkpoint once the
// checkpoint is durable, and nothing before; a checkpoint with no output
// commits no part.
func TestFileSink_CommitsAtDurableCheckpoints(t *testing.T) {
	st, dir := Memory(), t.TempDir()
	loop, sink, _ := sinkLoop(t, st, dir)
	defer loop.Close()
	sink.WriteString("a\n")
	if got := readParts(t, dir); got != "" {
		t.Fatalf("before any checkpoint the output is %q", got)
	}
	if _, err := loop.Sync(bg, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Sync(bg, 1); err != nil { // nothing written since
		t.Fatal(err)
	}
	sink.WriteString("b\n")
	if _, err := loop.Sync(bg, 2); err != nil {
		t.Fatal(err)
	}
	parts, _ := sink.Parts()
	if got := readParts(t, dir); got != "a\nb\n" || len(parts) != 2 {
		t.Fatalf("committed %q in %v, want a, b in two parts", got, parts)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("c")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a write after Close: %v, want ErrInvalid", err)
	}
}

// A sink is usable only once recovered, with a prefix that names files in
// its directory, and prepares ids that go up.
func TestFileSink_Misuse(t *testing.T) {
	for _, prefix := range []string{".hidden", "a/b"} {
		if _, err := NewFileSink(t.TempDir(), prefix); !errors.Is(err, ErrInvalid) {
			t.Errorf("prefix %q: %v, want ErrInvalid", prefix, err)
		}
	}
	sink, err := NewFileSink(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("x")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not recovered") {
		t.Fatalf("a write before recovery: %v", err)
	}
	if err := sink.Recover(bg, Recovery{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Recover(bg, Recovery{Epoch: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second recovery: %v, want ErrInvalid", err)
	}
	sink.WriteString("x")
	if err := sink.Prepare(bg, 3); err != nil {
		t.Fatal(err)
	}
	if err := sink.Prepare(bg, 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("preparing checkpoint 3 twice: %v, want ErrInvalid", err)
	}
}

// An owner the store fenced cannot prepare output any more, and its
// prepared transactions are never committed; the new owner's output is
// the job's.
func TestFileSink_FencedOwner(t *testing.T) {
	st, dir := Memory(), t.TempDir()
	old, oldSink, _ := sinkLoop(t, st, dir)
	defer old.Close()
	oldSink.WriteString("kept\n")
	if _, err := old.Sync(bg, 1); err != nil {
		t.Fatal(err)
	}
	oldSink.WriteString("prepared by the old owner\n")
	if err := oldSink.Prepare(bg, 5); err != nil {
		t.Fatal(err)
	}
	oldSink.WriteString("open in the old owner\n")

	loop, sink, start := sinkLoop(t, st, dir) // takes the store over
	defer loop.Close()
	if start.Meta != 1 {
		t.Fatalf("resumed at %d, want 1", start.Meta)
	}
	if err := oldSink.Prepare(bg, 6); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's prepare after the takeover: %v, want ErrFenced", err)
	}
	sink.WriteString("new\n")
	if _, err := loop.Sync(bg, 2); err != nil {
		t.Fatal(err)
	}
	if got := readParts(t, dir); got != "kept\nnew\n" {
		t.Fatalf("committed %q, want the first owner's checkpointed output and the new owner's", got)
	}
}

// A resume from a checkpoint older than committed output (a newer
// checkpoint damaged) fails rather than commit that output twice.
func TestFileSink_OutputAheadOfCheckpoint(t *testing.T) {
	damagesStores(t)
	stDir, dir := t.TempDir(), t.TempDir()
	st, err := Dir(stDir)
	if err != nil {
		t.Fatal(err)
	}
	loop, sink, _ := sinkLoop(t, st, dir)
	sink.WriteString("one\n")
	loop.Sync(bg, 1)
	sink.WriteString("two\n")
	m, err := loop.Sync(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	loop.Close()
	sink.Close()
	seg := filepath.Join(stDir, m.Segments[len(m.Segments)-1].Name)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	os.WriteFile(seg, b, 0o644)

	bk, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	cowstate.Value[int64, int64](bk, "counts")
	sink2, _ := NewFileSink(dir, "")
	_, _, err = Resume[int](bg, bk, st, LoopOptions{Sink: sink2})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "committed twice") {
		t.Fatalf("resuming behind committed output: %v, want ErrMismatch", err)
	}
}

// failingSink records the Loop's calls and fails the ones it is told to.
type failingSink struct {
	calls       []string
	failPrepare bool
	failCommit  bool
}

func (s *failingSink) Recover(_ context.Context, at Recovery) error {
	s.calls = append(s.calls, fmt.Sprintf("recover %d", at.Checkpoint))
	return nil
}

func (s *failingSink) Prepare(_ context.Context, id uint64) error {
	s.calls = append(s.calls, fmt.Sprintf("prepare %d", id))
	if s.failPrepare {
		return errors.New("downstream refused")
	}
	return nil
}

func (s *failingSink) Commit(_ context.Context, id uint64) error {
	s.calls = append(s.calls, fmt.Sprintf("commit %d", id))
	if s.failCommit {
		return errors.New("downstream unavailable")
	}
	return nil
}

// A sink's failure is an ErrSink naming the checkpoint: a failed prepare
// takes no checkpoint; a failed commit leaves the checkpoint durable, and
// the next one's commit covers it.
func TestLoop_SinkFailures(t *testing.T) {
	b, _ := cowstate.New(cowstate.Config{MaxParallelism: 16})
	sink := &failingSink{failPrepare: true}
	loop, _, err := Resume[int](bg, b, Memory(), LoopOptions{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	if _, err := loop.Sync(bg, 1); !errors.Is(err, ErrSink) || !strings.Contains(err.Error(), "checkpoint 1 not taken") {
		t.Fatalf("a failed prepare: %v, want ErrSink naming checkpoint 1", err)
	}
	if st := loop.Stats(); st.Taken != 0 || st.Failed != 1 {
		t.Fatalf("after a failed prepare: %+v", st)
	}
	sink.failPrepare, sink.failCommit = false, true
	if _, err := loop.Sync(bg, 2); !errors.Is(err, ErrSink) || !strings.Contains(err.Error(), "checkpoint 2 is durable") {
		t.Fatalf("a failed commit: %v, want ErrSink saying checkpoint 2 is durable", err)
	}
	if loop.Last() == nil || loop.Last().ID != 2 {
		t.Fatalf("after a failed commit the last checkpoint is %v, want 2", loop.Last())
	}
	sink.failCommit = false
	if _, err := loop.Sync(bg, 3); err != nil {
		t.Fatal(err)
	}
	want := []string{"recover 0", "prepare 1", "prepare 2", "commit 2", "prepare 3", "commit 3"}
	if !slices.Equal(sink.calls, want) {
		t.Fatalf("calls %q, want %q", sink.calls, want)
	}
}
