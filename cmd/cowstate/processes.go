package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/checkpoint/storeurl"
	"github.com/cowstate/cowstate/statetable"
)

// runProcesses runs the checkpointed job as cfg.instances processes
// (cowstate demo-instance, see runInstance), each owning an even share of
// the key groups and checkpointing into the one store, kills them all
// (SIGKILL) once each has stopped at the crash point, restores the newest
// complete job checkpoint into cfg.rescaleTo processes that split the key
// groups anew, and lets those finish the stream. The instances share a
// sink (dirSink) in a temporary directory. It records in rep their
// checkpoints, restores and combined results: the session results the
// sink committed and the per-user counts of the rescaled processes.
func runProcesses(ctx context.Context, cfg *demoConfig, st checkpoint.Storage, storeURL string, rep *report, log io.Writer) (err error) {
	if dir, ok := storeurl.LocalDir(storeURL); ok {
		if storeURL, err = filepath.Abs(dir); err != nil {
			return err
		}
	}
	sinkDir, err := os.MkdirTemp("", "cowstate-demo-sink-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(sinkDir); err == nil {
			err = rerr
		}
	}()
	job := instanceConfig{demoConfig: *cfg, of: cfg.instances, sinkDir: sinkDir, attempt: 1}
	job.store = storeURL
	rep.processes = true

	// 2. The job with checkpoints, in processes, until they are killed.
	crashed, err := runInstances(ctx, job, log)
	if err != nil {
		return err
	}
	rep.addJobCheckpoints(fmt.Sprintf("checkpointed (%d processes)", job.of), crashed)

	// 3. The newest complete job checkpoint.
	jcs, err := checkpoint.ListJob(ctx, st)
	var restored *checkpoint.JobCheckpoint
	for _, jc := range jcs {
		if jc.Complete && !jc.Savepoint {
			restored = jc
		}
	}
	if restored == nil {
		return fmt.Errorf("no complete job checkpoint in %s after the crash (%d incomplete): %v", st, len(jcs), err)
	}
	rep.restoredJob = restored

	// 4. Restore it into cfg.rescaleTo processes, which finish the stream.
	job.of, job.attempt, job.restore, job.crashAt = cfg.rescaleTo, 2, restored.ID, 0
	finished, err := runInstances(ctx, job, log)
	if err != nil {
		return err
	}
	run := fmt.Sprintf("rescaled %d -> %d", cfg.instances, cfg.rescaleTo)
	rep.addJobCheckpoints(run, finished)
	res := resultRow{run: fmt.Sprintf("%s (%d processes)", run, cfg.rescaleTo)}
	for _, r := range finished {
		if r.Restored == nil || r.Restored.ID != restored.ID {
			return fmt.Errorf("instance %d (key groups %v) did not restore job checkpoint %d", r.Instance, r.KeyGroups, restored.ID)
		}
		rep.restores = append(rep.restores, restoreRow{cfg.rescaleTo, r.KeyGroups, r.Restored.Took})
		res.counts.merge(r.Counts)
		res.open += r.Open
	}
	if res.sessions, err = committedRecords(sinkDir); err != nil {
		return err
	}
	rep.results = append(rep.results, res)
	return nil
}

// instanceProc is one running instance.
type instanceProc struct {
	cfg    instanceConfig
	kgs    statetable.KeyGroupRange
	stdin  io.Closer
	stderr *lineLog
	report *instanceReport
	killed bool
}

// instanceEvent is what an instance's reader goroutine passes on: a
// report, or the instance's exit.
type instanceEvent struct {
	i      int
	report *instanceReport
	exited bool
	err    error // a report that does not decode, or the exit status
}

// runInstances runs job.of instances of the job and returns their
// reports, by index. With job.crashAt it kills them all (SIGKILL) once
// every one has reported from its crash point; otherwise each must finish
// the stream, report and exit with status 0. If one fails, the others are
// killed, and the error says which failed and its last words.
func runInstances(ctx context.Context, job instanceConfig, log io.Writer) ([]*instanceReport, error) {
	var logMu sync.Mutex
	events := make(chan instanceEvent, 2*job.of)
	procs := make([]*instanceProc, 0, job.of)
	var kill []func()
	killAll := func() {
		for i, k := range kill {
			procs[i].killed = true
			k()
		}
	}
	var failure error
	fail := func(p *instanceProc, err error) {
		if failure == nil {
			failure = fmt.Errorf("instance %d of %d (key groups %v): %w%s", p.cfg.index, p.cfg.of, p.kgs, err, p.stderr.tail())
		}
	}
	for i := range job.of {
		c := job
		c.index = i
		p := &instanceProc{cfg: c, kgs: statetable.RangeForOperator(c.maxParallelism, c.of, i), stderr: &lineLog{w: log, mu: &logMu}}
		cmd, err := instanceCommand(ctx, c.args())
		if err == nil {
			cmd.Stderr = p.stderr
			var stdout io.ReadCloser
			if stdout, err = cmd.StdoutPipe(); err == nil {
				var stdin io.WriteCloser
				if stdin, err = cmd.StdinPipe(); err == nil {
					p.stdin = stdin
					err = cmd.Start()
				}
			}
			if err == nil {
				procs = append(procs, p)
				kill = append(kill, func() { cmd.Process.Kill() })
				go func() {
					sc := bufio.NewScanner(stdout)
					sc.Buffer(nil, 64<<20)
					for sc.Scan() {
						r := &instanceReport{}
						if err := json.Unmarshal(sc.Bytes(), r); err != nil {
							events <- instanceEvent{i: i, err: fmt.Errorf("report %.200q: %w", sc.Bytes(), err)}
							continue
						}
						events <- instanceEvent{i: i, report: r}
					}
					events <- instanceEvent{i: i, exited: true, err: cmd.Wait()}
				}()
			}
		}
		if err != nil {
			fail(p, fmt.Errorf("cannot start %s: %w", strings.Join(c.args(), " "), err))
			killAll()
			break
		}
	}

	reported := 0
	for exited := 0; exited < len(procs); {
		ev := <-events
		p := procs[ev.i]
		switch {
		case ev.report != nil && p.report == nil && ev.report.Crashed == (job.crashAt > 0):
			p.report = ev.report
			if reported++; reported == job.of && job.crashAt > 0 {
				killAll() // the crash: every instance has stopped at its crash point
			}
		case ev.report != nil:
			fail(p, fmt.Errorf("unexpected report %+v", *ev.report))
			killAll()
		case !ev.exited:
			fail(p, ev.err)
			killAll()
		default:
			exited++
			p.stdin.Close()
			switch {
			case p.killed && job.crashAt > 0 && p.report != nil:
				// killed at its crash point, as planned
			case p.killed:
				// killed because another failed, or interrupted
			case ev.err != nil:
				fail(p, ev.err)
				killAll()
			case p.report == nil:
				fail(p, fmt.Errorf("exited without a report"))
				killAll()
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if failure != nil {
		return nil, failure
	}
	reports := make([]*instanceReport, len(procs))
	for i, p := range procs {
		reports[i] = p.report
	}
	return reports, nil
}

// lineLog passes an instance's standard error on to the demo's log, whole
// lines at a time (the instances write concurrently), and keeps its last
// lines for error messages.
type lineLog struct {
	w       io.Writer
	mu      *sync.Mutex // shared by the instances' lineLogs
	partial []byte
	last    []string
}

const tailLines = 8

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i+1]
		if l.w != nil {
			l.w.Write(line)
		}
		l.last = append(l.last, string(line[:i]))
		if len(l.last) > tailLines {
			l.last = l.last[1:]
		}
		l.partial = l.partial[i+1:]
	}
	l.partial = append([]byte(nil), l.partial...)
	return len(b), nil
}

// tail returns the last lines written, for an error message.
func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.last
	if len(l.partial) > 0 {
		lines = append(lines, string(l.partial))
	}
	if len(lines) == 0 {
		return ""
	}
	return "; its last words:\n\t" + strings.Join(lines, "\n\t")
}
