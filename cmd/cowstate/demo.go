package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// demoConfig is the demo's configuration, from its flags.
type demoConfig struct {
	keys           int
	events         int64
	every          int64 // checkpoint interval, in events
	crashAt        int64 // 0: part-way, between two checkpoints
	gap            time.Duration
	stateTTL       time.Duration // per-user state's time-to-live; 0: none
	outOfOrder     time.Duration
	maxParallelism int
	seed           uint64
	dir            string // alias of store, for a directory
	store          string // URL of the checkpoint store (storeurl.Open)
	keep           bool
	progress       time.Duration
	instances      int // processes of the checkpointed job; 1: in this process
	rescaleTo      int // backends, or processes, of the rescaled restore

	// skipOnRestore is a test hook: the restored runs skip this many more
	// events than the checkpoint says, as a broken restore would lose
	// them, so that verification must fail.
	skipOnRestore int64
	// waitCheckpoints is a test hook: each checkpoint is confirmed before
	// processing goes on, so that the policy's choices (full or
	// incremental) do not depend on timing.
	waitCheckpoints bool
}

func (c *demoConfig) stream() streamConfig {
	return streamConfig{Seed: c.seed, Keys: c.keys, Events: c.events, OutOfOrder: c.outOfOrder.Milliseconds()}
}

func (c *demoConfig) flags(fs *flag.FlagSet) {
	c.jobFlags(fs)
	fs.Int64Var(&c.crashAt, "crash-at", 0, "crash after `n` events (default: between two checkpoints, 70% through the stream)")
	fs.StringVar(&c.store, "store", "", "the checkpoint store's `URL` (a directory, s3://, gs://, azblob://; credentials from the environment); must hold nothing (default: a temporary directory, removed at the end)")
	fs.StringVar(&c.dir, "dir", "", "checkpoint `directory`, the same as -store dir; must be empty or new")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary checkpoint directory, for cowstate inspect and verify")
	fs.IntVar(&c.instances, "instances", 1, "run the checkpointed job as `n` processes, each owning an even share of the key groups (1: in this process)")
	fs.IntVar(&c.rescaleTo, "rescale-to", 2, "restore the checkpoint rescaled into `m` backends (with -instances: m processes)")
}

// jobFlags defines the flags of the job itself, which cowstate demo
// passes on to its instances (cowstate demo-instance).
func (c *demoConfig) jobFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.keys, "keys", 1_000_000, "`n` distinct users (keys)")
	fs.Int64Var(&c.events, "events", 2_000_000, "the stream's length: `n` events")
	fs.Int64Var(&c.every, "checkpoint-every", 25_000, "take a checkpoint every `n` events")
	fs.DurationVar(&c.gap, "gap", 10*time.Second, "session gap, in event time")
	fs.DurationVar(&c.stateTTL, "state-ttl", 24*time.Hour, "time-to-live of the per-user count and late events, in processing time: a user idle this long starts over (0: kept forever)")
	fs.DurationVar(&c.outOfOrder, "out-of-orderness", 5*time.Second, "bound on the out-of-orderness of event time: the watermark trails the highest event time by this much")
	fs.IntVar(&c.maxParallelism, "max-parallelism", 128, "number of key groups")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the generated stream")
	fs.DurationVar(&c.progress, "progress", time.Second, "interval of the progress lines on standard error (0: none)")
}

// jobArgs returns the command line of the flags of jobFlags.
func (c *demoConfig) jobArgs() []string {
	return []string{
		"-keys", fmt.Sprint(c.keys),
		"-events", fmt.Sprint(c.events),
		"-checkpoint-every", fmt.Sprint(c.every),
		"-gap", c.gap.String(),
		"-state-ttl", c.stateTTL.String(),
		"-out-of-orderness", c.outOfOrder.String(),
		"-max-parallelism", fmt.Sprint(c.maxParallelism),
		"-seed", fmt.Sprint(c.seed),
		"-progress", c.progress.String(),
	}
}

// checkJob validates the flags of jobFlags.
func (c *demoConfig) checkJob() error {
	switch {
	case c.keys < 1:
		return fmt.Errorf("-keys %d: need at least 1 key", c.keys)
	case c.every < 1:
		return fmt.Errorf("-checkpoint-every %d: need a positive interval", c.every)
	case c.events < 2*c.every:
		return fmt.Errorf("-events %d: need at least two checkpoint intervals (-checkpoint-every %d) of events", c.events, c.every)
	case c.gap < time.Millisecond:
		return fmt.Errorf("-gap %v: need at least 1ms", c.gap)
	case c.stateTTL != 0 && c.stateTTL < time.Millisecond:
		return fmt.Errorf("-state-ttl %v: need 0 (none) or at least 1ms", c.stateTTL)
	case c.outOfOrder < time.Millisecond:
		return fmt.Errorf("-out-of-orderness %v: need at least 1ms", c.outOfOrder)
	case c.maxParallelism < 1 || c.maxParallelism > statetable.MaxParallelismLimit:
		return fmt.Errorf("-max-parallelism %d: need 1 to %d", c.maxParallelism, statetable.MaxParallelismLimit)
	}
	return nil
}

// check validates the flags and fills in the defaults that depend on
// others.
func (c *demoConfig) check() error {
	if err := c.checkJob(); err != nil {
		return err
	}
	switch {
	case c.instances < 1 || c.instances > maxInstances:
		return fmt.Errorf("-instances %d: need 1 to %d", c.instances, maxInstances)
	case c.rescaleTo < 1 || c.rescaleTo > maxInstances:
		return fmt.Errorf("-rescale-to %d: need 1 to %d", c.rescaleTo, maxInstances)
	case c.maxParallelism < max(c.instances, c.rescaleTo):
		return fmt.Errorf("-max-parallelism %d: need at least as many key groups as instances (-instances %d, -rescale-to %d)", c.maxParallelism, c.instances, c.rescaleTo)
	case c.dir != "" && c.store != "":
		return fmt.Errorf("-dir %s and -store %s: give one (-dir dir is -store dir)", c.dir, storeName(c.store))
	}
	if c.crashAt == 0 {
		// Three quarters into the interval after the checkpoint at 70%:
		// that checkpoint has usually committed, the next one not begun.
		c.crashAt = c.events*7/10/c.every*c.every + c.every*3/4
		c.crashAt = max(c.crashAt, c.every+c.every*3/4)
	}
	if c.crashAt <= c.every || c.crashAt >= c.events {
		return fmt.Errorf("-crash-at %d: must be after the first checkpoint (event %d) and before the end of the stream (%d)", c.crashAt, c.every, c.events)
	}
	return nil
}

// errVerify is returned when the restored runs' results differ from the
// uninterrupted run's.
var errVerify = errors.New("verification failed")

// maxInstances bounds -instances and -rescale-to.
const maxInstances = 64

// runDemo runs the demo: an uninterrupted run for reference, a
// checkpointed run that crashes part-way, a restore into one backend and
// one into -rescale-to (a rescale), each replaying the stream from the
// restored checkpoint to the end, and the comparison of their results;
// with -instances, the checkpointed and the rescaled runs are processes
// of their own (see runProcesses). It prints the summary to out and
// progress to log.
func runDemo(ctx context.Context, cfg *demoConfig, out, log io.Writer) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	storeURL := cmp.Or(cfg.store, cfg.dir)
	temp := storeURL == ""
	if temp {
		if storeURL, err = os.MkdirTemp("", "cowstate-demo-"); err != nil {
			return err
		}
		if !cfg.keep {
			defer func() {
				if rerr := os.RemoveAll(storeURL); err == nil {
					err = rerr
				}
			}()
		}
	}
	if u, perr := url.Parse(storeURL); perr == nil && u.Scheme == "mem" && cfg.instances > 1 {
		return fmt.Errorf("-store %s: a store in memory cannot be shared by -instances %d processes", storeURL, cfg.instances)
	}
	st, err := openEmpty(ctx, storeURL)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cowstate demo: %d users, %d events, session gap %v, out-of-orderness %v, checkpoint every %d events, crash after %d, %d key groups\n",
		cfg.keys, cfg.events, cfg.gap, cfg.outOfOrder, cfg.every, cfg.crashAt, cfg.maxParallelism)
	if cfg.instances > 1 {
		fmt.Fprintf(out, "the checkpointed job runs as %d processes, the rescaled one as %d\n", cfg.instances, cfg.rescaleTo)
	}
	switch {
	case !temp:
		fmt.Fprintf(out, "checkpoints in %s\n", st)
	case cfg.keep:
		fmt.Fprintf(out, "checkpoints in %s (kept: try cowstate inspect %[1]s)\n", st)
	default:
		fmt.Fprintf(out, "checkpoints in %s (removed at the end; -keep keeps it)\n", st)
	}
	start := time.Now()
	rep := &report{}
	prog := &progress{w: log, interval: cfg.progress}

	// 1. The reference: the whole stream, no checkpoint, no crash.
	ref, err := newPipeline(ctx, "uninterrupted", cfg, 1, &sessionSink{}, rep, prog)
	if err != nil {
		return err
	}
	if err := ref.run(cfg.events); err != nil {
		return err
	}
	if err := ref.finish(); err != nil {
		return err
	}
	if err := rep.addResult(ref); err != nil {
		return err
	}
	ref = nil // done with its backend: give the memory back before the next run
	runtime.GC()

	if cfg.instances > 1 {
		err = runProcesses(ctx, cfg, st, storeURL, rep, log)
	} else {
		err = runInProcess(ctx, cfg, st, rep, prog)
	}
	if err != nil {
		return err
	}

	fmt.Fprintln(out)
	rep.write(out)
	fmt.Fprintln(out)
	if bad := rep.mismatches(); len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(out, "MISMATCH:", b)
		}
		return errVerify
	}
	what := "the restored and the rescaled runs match"
	if cfg.instances > 1 {
		what = "the rescaled run matches"
	}
	fmt.Fprintf(out, "ok: %s the uninterrupted run (%v in all)\n", what, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// runInProcess runs the checkpointed job in this process until it
// crashes, restores its newest checkpoint into one backend and into
// -rescale-to, and finishes the stream on each.
func runInProcess(ctx context.Context, cfg *demoConfig, st checkpoint.Storage, rep *report, prog *progress) error {
	// 2. The same job with checkpoints, until it crashes.
	sink := &sessionSink{}
	live, err := newPipeline(ctx, "checkpointed", cfg, 1, sink, rep, prog)
	if err != nil {
		return err
	}
	if live.store, err = checkpoint.Open(ctx, live.tasks[0].b, st, checkpoint.Options{}); err != nil {
		return err
	}
	if err := live.run(cfg.crashAt); err != nil {
		return err
	}
	live.crash()
	live = nil
	runtime.GC()

	// 3. Restore the newest checkpoint into a fresh backend and finish the
	// stream from there, checkpointing on.
	restored, err := newPipeline(ctx, "restored", cfg, 1, sink.Crash(), rep, prog)
	if err != nil {
		return err
	}
	// A restarted job takes ownership of the store: the crashed one, were it
	// still running, could no longer commit.
	if restored.store, err = checkpoint.Open(ctx, restored.tasks[0].b, st, checkpoint.Options{}); err != nil {
		return err
	}
	t0 := time.Now()
	m, err := restored.store.Restore(ctx, 0)
	if err != nil {
		return fmt.Errorf("restore after the crash: %w", err)
	}
	rep.restored = m
	rep.restores = append(rep.restores, restoreRow{1, restored.tasks[0].b.KeyGroups(), time.Since(t0)})
	// Keep the restored checkpoint for the rescale below.
	if err := restored.store.SetRetention(ctx, checkpoint.Retention{Pinned: []uint64{m.ID}}); err != nil {
		return err
	}
	if err := replay(restored, m.ID); err != nil {
		return err
	}
	restored = nil
	runtime.GC()

	// 4. Restore the same checkpoint into -rescale-to backends that split
	// the key groups (a rescale from parallelism 1) and finish the stream.
	rescaled, err := newPipeline(ctx, "rescaled", cfg, cfg.rescaleTo, sink.Crash(), rep, prog)
	if err != nil {
		return err
	}
	for _, t := range rescaled.tasks {
		t0 := time.Now()
		// Read-only restores: the restored job still owns the store.
		if _, err := checkpoint.RestoreFrom(ctx, t.b, checkpoint.Source{Storage: st, ID: m.ID}); err != nil {
			return fmt.Errorf("rescaled restore of key groups %v: %w", t.b.KeyGroups(), err)
		}
		rep.restores = append(rep.restores, restoreRow{cfg.rescaleTo, t.b.KeyGroups(), time.Since(t0)})
	}
	return replay(rescaled, m.ID)
}

// replay finishes the stream on a pipeline restored from checkpoint id:
// the sink recovers to id, the stream is replayed from offset id, and the
// results are recorded.
func replay(p *pipeline, id uint64) error {
	if err := p.sink.Recover(id); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if err := p.seek(int64(id) + p.cfg.skipOnRestore); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if err := p.run(p.cfg.events); err != nil {
		return err
	}
	if err := p.finish(); err != nil {
		return err
	}
	return p.report.addResult(p)
}

// addResult records the results of a finished pipeline.
func (r *report) addResult(p *pipeline) error {
	counts, err := p.counts()
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	name := p.name
	if len(p.tasks) > 1 {
		name = fmt.Sprintf("%s (%d backends)", name, len(p.tasks))
	}
	sessions, err := p.sink.Committed()
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	r.results = append(r.results, resultRow{run: name, sessions: sessions, counts: counts, open: p.openWindows()})
	return nil
}
