package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"github.com/cowstate/cowstate/statetable"
)

// instanceConfig is the configuration of cowstate demo-instance: one
// process of the demo's job of several processes (see runProcesses).
type instanceConfig struct {
	demoConfig        // the job's flags, crashAt and the test hooks
	index, of  int    // this instance is index of of
	sinkDir    string // the job's sink (dirSink)
	attempt    int    // 1 for the first run of the job, 2 after a restore
	restore    uint64 // job checkpoint to restore first; 0: none
}

// setupInstance is "cowstate demo-instance", internal to cowstate demo.
func setupInstance(fs *flag.FlagSet) runFunc {
	c := &instanceConfig{}
	c.jobFlags(fs)
	fs.StringVar(&c.store, "store", "", "the job's checkpoint store `URL`")
	fs.IntVar(&c.index, "instance", 0, "this instance's `index`, from 0")
	fs.IntVar(&c.of, "of", 1, "the `number` of the job's instances")
	fs.StringVar(&c.sinkDir, "sink", "", "the sink's `directory`, shared by the job's instances")
	fs.IntVar(&c.attempt, "attempt", 1, "the job's `attempt`: 1 for its first run, one more for each restart")
	fs.Uint64Var(&c.restore, "restore", 0, "restore job checkpoint `id` first and replay the stream from its offset (0: start at the beginning)")
	fs.Int64Var(&c.crashAt, "crash-at", 0, "stop after `n` events once the checkpoints taken are written, report and wait to be killed (0: finish the stream)")
	fs.Int64Var(&c.skipOnRestore, "skip-on-restore", 0, "test hook: replay from `n` events after the restored checkpoint, as a broken restore would")
	fs.BoolVar(&c.waitCheckpoints, "wait-checkpoints", false, "test hook: confirm each checkpoint before processing goes on")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) > 0 {
			return usageError{"unexpected arguments: " + strings.Join(args, " ")}
		}
		if err := c.check(); err != nil {
			return usageError{err.Error()}
		}
		return runInstance(ctx, c, os.Stdin, stdout, stderr)
	}
}

func (c *instanceConfig) check() error {
	if err := c.checkJob(); err != nil {
		return err
	}
	switch {
	case c.store == "":
		return errors.New("need -store")
	case c.sinkDir == "":
		return errors.New("need -sink")
	case c.of < 1 || c.of > c.maxParallelism || c.index < 0 || c.index >= c.of:
		return fmt.Errorf("-instance %d -of %d: need 0 <= index < number <= -max-parallelism %d", c.index, c.of, c.maxParallelism)
	case c.attempt < 1:
		return fmt.Errorf("-attempt %d: attempts are numbered from 1", c.attempt)
	case c.crashAt < 0 || c.crashAt >= c.events:
		return fmt.Errorf("-crash-at %d: must be before the end of the stream (%d)", c.crashAt, c.events)
	}
	return nil
}

// args returns the command line of cowstate demo-instance for instance
// index of of.
func (c *instanceConfig) args() []string {
	args := append([]string{"demo-instance"}, c.jobArgs()...)
	args = append(args,
		"-store", c.store,
		"-instance", fmt.Sprint(c.index),
		"-of", fmt.Sprint(c.of),
		"-sink", c.sinkDir,
		"-attempt", fmt.Sprint(c.attempt),
	)
	if c.restore > 0 {
		args = append(args, "-restore", fmt.Sprint(c.restore))
	}
	if c.crashAt > 0 {
		args = append(args, "-crash-at", fmt.Sprint(c.crashAt))
	}
	if c.skipOnRestore != 0 {
		args = append(args, "-skip-on-restore", fmt.Sprint(c.skipOnRestore))
	}
	if c.waitCheckpoints {
		args = append(args, "-wait-checkpoints")
	}
	return args
}

// instanceCommand returns the command that runs this program with args:
// how cowstate demo starts its instances. The tests replace it (their
// binary is the test binary).
var instanceCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot start the instances: %w", err)
	}
	return exec.CommandContext(ctx, exe, args...), nil
}

// instanceReport is what an instance reports to cowstate demo: one line
// of JSON on its standard output, when it stops at its crash point or
// when it has finished the stream. Everything else it says goes to
// standard error.
type instanceReport struct {
	Instance  int                      `json:"instance"`
	KeyGroups statetable.KeyGroupRange `json:"key_groups"`
	// Crashed: stopped at -crash-at, waiting to be killed; else finished.
	Crashed     bool               `json:"crashed"`
	Pos         int64              `json:"pos"` // stream offset reached
	Checkpoints []checkpointReport `json:"checkpoints"`
	Restored    *restoreReport     `json:"restored,omitempty"`
	// Finished instances: the digest of the per-user counts in state, and
	// the windows left open.
	Counts digest `json:"counts"`
	Open   int    `json:"open_windows"`
}

// checkpointReport is one checkpointRow of an instance.
type checkpointReport struct {
	ID       uint64        `json:"id"`
	Kind     string        `json:"kind"`
	Changed  int           `json:"changed"`
	Segments int           `json:"segments"`
	Bytes    int64         `json:"bytes"`
	Capture  time.Duration `json:"capture"`
	Write    time.Duration `json:"write"`
	Status   string        `json:"status"`
}

// restoreReport is an instance's restore of a job checkpoint.
type restoreReport struct {
	ID   uint64        `json:"id"`
	Took time.Duration `json:"took"`
}

// runInstance runs one instance of the demo's job: a backend owning the
// key groups of instance c.index of c.of, processing the events of its
// keys in the whole stream, checkpointing with checkpoint.OpenInstance
// into the job's store at the stream offsets every instance checkpoints
// at (ids = offsets), its results going to the job's sink. With c.restore
// it first restores its key groups from that job checkpoint
// (checkpoint.RestoreInstances), recovers the sink to it and replays from its
// offset.
//
// With c.crashAt it stops there: the checkpoints in flight finish their
// writes (they are not confirmed), it reports, and it waits for cowstate
// demo to kill it (SIGKILL), or for its standard input to close (cowstate
// demo went away; an error). So every instance of the job has committed
// every checkpoint taken before the crash point when the job dies, and
// the newest complete job checkpoint is the last one taken: the crash is
// deterministic. That is also what makes its sink exactly-once: an
// instance commits its transactions when its own checkpoint is confirmed,
// which, since every instance commits each checkpoint, only ever precedes
// the completion of that job checkpoint. (A job whose instances can die at
// any point commits on the job checkpoint's completion instead, as Flink's
// notifyCheckpointComplete does.)
func runInstance(ctx context.Context, c *instanceConfig, stdin io.Reader, stdout, stderr io.Writer) error {
	st, err := storeurl.Open(ctx, c.store)
	if err != nil {
		return err
	}
	kgs := statetable.RangeForOperator(c.maxParallelism, c.of, c.index)
	sink, err := openDirSink(c.sinkDir, c.attempt, kgs)
	if err != nil {
		return err
	}
	phase := "checkpointed"
	if c.restore > 0 {
		phase = "rescaled"
	}
	rep := &report{}
	prog := &progress{w: stderr, interval: c.progress}
	p, err := newPipelineOf(ctx, fmt.Sprintf("%s %v", phase, kgs), &c.demoConfig, []statetable.KeyGroupRange{kgs}, sink, rep, prog)
	if err != nil {
		return err
	}
	p.aligned = true
	b := p.tasks[0].b
	var opts checkpoint.Options
	if c.restore > 0 {
		// An instance whose key groups are those of an instance before the
		// rescale takes over that one's store: keep the job checkpoint the
		// other instances may still be restoring from.
		opts.Retention.Pinned = []uint64{c.restore}
	}
	if p.store, err = checkpoint.OpenInstance(ctx, b, st, opts); err != nil {
		return err
	}
	defer p.stop()
	out := instanceReport{Instance: c.index, KeyGroups: kgs}
	if c.restore > 0 {
		t0 := time.Now()
		jc, err := checkpoint.RestoreInstances(ctx, b, st, c.restore, false)
		if err != nil {
			return fmt.Errorf("%s: restore of job checkpoint %d: %w", p.name, c.restore, err)
		}
		out.Restored = &restoreReport{ID: jc.ID, Took: time.Since(t0)}
		if err := p.sink.Recover(jc.ID); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := p.seek(int64(jc.ID) + c.skipOnRestore); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	until := c.events
	if c.crashAt > 0 {
		until = c.crashAt
	}
	if err := p.run(until); err != nil {
		return err
	}
	if c.crashAt > 0 {
		if err := p.halt(); err != nil {
			return err
		}
		out.Crashed = true
	} else {
		if err := p.finish(); err != nil {
			return err
		}
		if out.Counts, err = p.counts(); err != nil {
			return err
		}
		out.Open = p.openWindows()
	}
	out.Pos = p.src.Pos()
	for _, r := range rep.checkpoints {
		out.Checkpoints = append(out.Checkpoints, checkpointReport{
			ID: r.id, Kind: r.kind, Changed: r.changed, Segments: r.segments, Bytes: r.bytes,
			Capture: r.capture, Write: r.write, Status: r.status,
		})
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		return err
	}
	if !out.Crashed {
		return nil
	}
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(done)
	}()
	select {
	case <-done:
		return errors.New("stopped at the crash point, and cowstate demo went away before killing this instance")
	case <-ctx.Done():
		return ctx.Err()
	}
}
