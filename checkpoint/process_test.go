package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cowstate/cowstate/internal/testjob"
)

// The tests here run the store in other operating-system processes (this
// test binary, started again with childEnv set to a store directory), kill
// them with SIGKILL and race them against each other on one directory.

const childEnv = "COWSTATE_CHECKPOINT_CHILD"

// TestChildProcess is the body of a child process; it does nothing in a
// normal test run.
func TestChildProcess(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return
	}
	runChild(t, dir)
	os.Exit(0)
}

// loadFor is the work between checkpoints: the state committed as
// checkpoint id is, whoever took it, that of loadFor(1) ... loadFor(id).
func loadFor(j *testjob.Job, id uint64) { j.Load(40, int(id)) }

// runChild owns the store in dir and checkpoints forever: it restores the
// newest checkpoint n (or starts fresh), then loads and checkpoints n+1,
// n+2, ..., printing "committed <id>" once each is durable. When another
// process takes the store over (ErrFenced) it takes it back and goes on
// from the newest checkpoint.
func runChild(t *testing.T, dir string) {
	st, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for {
		j := testjob.New(t, 16, nil)
		s, err := Open(bg, j.B, st, Options{AutoConfirm: true, Retention: Retention{KeepLast: 3}})
		if err != nil {
			fmt.Fprintln(out, "open:", err)
			out.Flush()
			continue
		}
		var last uint64
		if m, err := s.Restore(bg, 0); err == nil {
			last = m.ID
		} else if !errors.Is(err, ErrNoCheckpoint) {
			fmt.Fprintln(out, "restore:", err)
			out.Flush()
			continue
		}
		for id := last + 1; ; id++ {
			loadFor(j, id)
			cp, err := s.Checkpoint(bg, id)
			if err == nil {
				err = cp.Wait()
			}
			if err != nil {
				fmt.Fprintln(out, "checkpoint:", err)
				out.Flush()
				break
			}
			fmt.Fprintln(out, "committed", id)
			out.Flush()
		}
		s.Close()
	}
}

// child is a running child process and the ids it reported committed.
type child struct {
	cmd       *exec.Cmd
	mu        sync.Mutex
	committed []uint64
	other     []string
	done      chan struct{}
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			if id, ok := strings.CutPrefix(line, "committed "); ok {
				n, _ := strconv.ParseUint(id, 10, 64)
				c.committed = append(c.committed, n)
			} else {
				c.other = append(c.other, line)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// waitFor waits until cond (called with c.mu held) holds, for at most 30
// seconds.
func (c *child) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
	}
	c.kill()
	t.Fatalf("the child process did not get there in 30s: committed %v, said %q", c.committed, c.other)
}

// kill sends SIGKILL and waits for the child's output to end.
func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.done
	c.cmd.Wait()
}

// wantState returns the dump of the state committed as checkpoint id.
func wantState(t *testing.T, id uint64) []string {
	j := testjob.New(t, 16, nil)
	for k := uint64(1); k <= id; k++ {
		loadFor(j, k)
	}
	return j.Dump(t, nil)
}

// checkStore checks what a store holds after its writers died: every
// retained checkpoint restores to the state committed under its id, and
// the newest is at least the newest any writer reported committed.
func checkStore(t *testing.T, dir string, reported uint64) uint64 {
	t.Helper()
	st, _ := Dir(dir)
	l, err := Inspect(bg, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Checkpoints) == 0 {
		if reported > 0 {
			t.Fatalf("checkpoint %d was reported committed, the store holds none", reported)
		}
		return 0
	}
	newest := l.Checkpoints[len(l.Checkpoints)-1].ID
	if newest < reported {
		t.Fatalf("checkpoint %d was reported committed, the store's newest is %d", reported, newest)
	}
	for _, m := range l.Checkpoints {
		got, _, err := restoreStore(t, st, m.ID, nil)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", m.ID, err)
		}
		if !slices.Equal(got.Dump(t, nil), wantState(t, m.ID)) {
			t.Fatalf("checkpoint %d restores to another state", m.ID)
		}
	}
	rep, err := Verify(bg, st)
	if err != nil || !rep.Intact() {
		t.Fatalf("verify after the kill: %v %+v", err, rep.Damage)
	}
	return newest
}

// TestStore_KilledProcesses kills a checkpointing process with SIGKILL at
// random moments and restarts it on the same directory: no checkpoint it
// reported committed is ever lost, every retained one restores exactly,
// and the restarted process goes on from the newest.
func TestStore_KilledProcesses(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var reported uint64
	for trial := range 6 {
		c := startChild(t, dir)
		// Once it has committed (a slow machine, -race: it may take a
		// while), kill it at a random moment.
		c.waitFor(t, func() bool { return len(c.committed) > 0 })
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		c.kill()
		c.mu.Lock()
		if n := len(c.committed); n > 0 {
			reported = max(reported, c.committed[n-1])
		}
		other := c.other
		c.mu.Unlock()
		if len(other) > 0 {
			t.Fatalf("trial %d: the process reported %q", trial, other)
		}
		checkStore(t, dir, reported)
	}
	if reported == 0 {
		t.Fatal("no checkpoint was committed in any trial")
	}
}

// TestStore_TwoProcessesRacing runs two processes that keep taking the
// store from each other, then kills both: no checkpoint id was committed
// by both, none reported committed is lost, every retained one restores to
// the state committed under its id, and the losers were told (ErrFenced).
func TestStore_TwoProcessesRacing(t *testing.T) {
	dir := t.TempDir()
	a, b := startChild(t, dir), startChild(t, dir)
	time.Sleep(time.Second)
	for _, c := range []*child{a, b} {
		c.waitFor(t, func() bool { return len(c.committed) > 0 && len(c.other) > 0 })
	}
	a.kill()
	b.kill()
	seen := map[uint64]bool{}
	var reported uint64
	fenced := 0
	for _, c := range []*child{a, b} {
		for _, id := range c.committed {
			if seen[id] {
				t.Fatalf("checkpoint %d committed twice (a: %v, b: %v)", id, a.committed, b.committed)
			}
			seen[id] = true
			reported = max(reported, id)
		}
		for _, line := range c.other {
			if !strings.Contains(line, ErrFenced.Error()) {
				t.Fatalf("a process reported %q", line)
			}
			fenced++
		}
	}
	if len(a.committed) == 0 || len(b.committed) == 0 || fenced == 0 {
		t.Fatalf("the processes did not race: %d and %d commits, %d fenced", len(a.committed), len(b.committed), fenced)
	}
	checkStore(t, dir, reported)
}
