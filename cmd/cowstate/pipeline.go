package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// watermarkEvery is how often (in events) the pipeline advances the
// watermark; it also advances it where a checkpoint falls due (see
// watermarkDue). Both are positions in the stream, so every run,
// interrupted or not, with or without checkpoints, sees the same
// watermarks at the same offsets.
const watermarkEvery = 1000

// watermarkDue reports whether the pipeline advances the watermark after
// the event at offset pos-1: every watermarkEvery events, and every
// checkpoint interval (where a checkpoint falls due, so that one taken at
// once sees the watermark of its offset). Never where a checkpoint is
// actually taken: one that waits for the write in flight is taken at
// whatever event follows the end of that write, and a watermark advanced
// there would move with the timing of the writes, make events late that
// the uninterrupted run does not drop, and fire windows before events the
// uninterrupted run merges into them.
func (c *demoConfig) watermarkDue(pos int64) bool {
	return pos%watermarkEvery == 0 || pos%c.every == 0
}

// lastWatermark returns the last offset at or before offset where the
// watermark is advanced (see watermarkDue), 0 if none.
func (c *demoConfig) lastWatermark(offset int64) int64 {
	return max(offset-offset%watermarkEvery, offset-offset%c.every)
}

// task is one operator subtask: a backend owning a range of key groups and
// the job instance on it.
type task struct {
	b   *cowstate.Backend
	job *sessionJob
}

// pipeline runs the stream through one or more subtasks, routing each
// event to the subtask owning its key's key group, advancing watermarks,
// and (with a store) taking checkpoints and committing the sink when they
// are confirmed. Everything runs on the calling goroutine, the backends'
// single writer; checkpoints are written in the background by the store.
type pipeline struct {
	name   string
	cfg    *demoConfig
	tasks  []*task
	src    *Stream
	sink   resultSink
	store  *checkpoint.Store // nil: no checkpoints
	ctx    context.Context
	cancel context.CancelFunc
	// partial: the subtasks own only some key groups (one instance of a
	// job of several processes); the events of the others are skipped.
	partial bool
	// aligned: a checkpoint that falls due while another is being written
	// waits for that write, so that it is taken at its offset, as every
	// instance of a job takes it (their ids must match).
	aligned bool

	inflight []*checkpoint.Checkpoint
	due      bool // a checkpoint is due, waiting for the one in flight
	taken    int
	report   *report
	progress *progress
}

// newPipeline returns a pipeline of parallelism subtasks (the key groups
// split as statetable.RangeForOperator does) over a stream at offset 0.
func newPipeline(ctx context.Context, name string, cfg *demoConfig, parallelism int, sink resultSink, rep *report, prog *progress) (*pipeline, error) {
	return newPipelineOf(ctx, name, cfg, splitKeyGroups(cfg.maxParallelism, parallelism), sink, rep, prog)
}

// splitKeyGroups returns the key groups of each of n subtasks, as
// statetable.RangeForOperator assigns them.
func splitKeyGroups(maxParallelism, n int) []statetable.KeyGroupRange {
	rs := make([]statetable.KeyGroupRange, n)
	for i := range rs {
		rs[i] = statetable.RangeForOperator(maxParallelism, n, i)
	}
	return rs
}

// newPipelineOf returns a pipeline of one subtask per range of key groups
// over a stream at offset 0. Ranges that leave key groups out make a
// partial pipeline, which skips the events of those.
func newPipelineOf(ctx context.Context, name string, cfg *demoConfig, ranges []statetable.KeyGroupRange, sink resultSink, rep *report, prog *progress) (*pipeline, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &pipeline{name: name, cfg: cfg, src: newStream(cfg.stream()), sink: sink, ctx: ctx, cancel: cancel, report: rep, progress: prog}
	owned := 0
	for _, kgs := range ranges {
		owned += kgs.Len()
		b, err := cowstate.New(cowstate.Config{MaxParallelism: cfg.maxParallelism, KeyGroups: &kgs})
		if err != nil {
			return nil, err
		}
		job, err := newSessionJob(b, cfg.gap.Milliseconds(), cfg.stateTTL, sink.Emit)
		if err != nil {
			return nil, err
		}
		p.tasks = append(p.tasks, &task{b: b, job: job})
	}
	p.partial = owned < cfg.maxParallelism
	return p, nil
}

// route returns the subtask that owns the key of e; nil, in a partial
// pipeline, if none does.
func (p *pipeline) route(e Event) *task {
	if len(p.tasks) == 1 && !p.partial {
		return p.tasks[0]
	}
	g := statetable.KeyGroupOfKey([]byte(e.User), p.cfg.maxParallelism)
	for _, t := range p.tasks {
		if t.b.KeyGroups().Contains(g) {
			return t
		}
	}
	if p.partial {
		return nil
	}
	panic(fmt.Sprintf("no subtask owns key group %d", g))
}

// seek positions the stream at offset (a replay after a restore) and
// brings the subtasks' watermarks to where they were at that offset: the
// watermark advanced at the last position due at or before it (see
// watermarkDue), which is not the stream's watermark at offset when the
// checkpoint restored was taken late. The watermark is not part of a
// checkpoint (see the report): it is a function of the stream position,
// so the replay recomputes it.
func (p *pipeline) seek(offset int64) error {
	at := p.cfg.lastWatermark(offset)
	p.src.Skip(at)
	wm := p.src.Watermark()
	p.src.Skip(offset - at)
	if at == 0 {
		return nil // no watermark yet
	}
	return p.advance(wm)
}

// advance advances every subtask's watermark.
func (p *pipeline) advance(wm int64) error {
	for _, t := range p.tasks {
		if err := t.job.AdvanceWatermark(wm); err != nil {
			return err
		}
	}
	return nil
}

// run processes events until the stream's offset is until. On an error
// (or cancellation) it stops the checkpoints in flight first, so that
// nothing writes to the store any more.
func (p *pipeline) run(until int64) error {
	err := p.loop(until)
	if err != nil {
		p.stop()
	}
	return err
}

// ttlBatch is the number of events processed at one processing time: the
// clock is read once per batch (Backend.PinProcessingTime), and the TTL
// cleanup visits as many entries as the batch has events.
const ttlBatch = 1024

// ttlStep pins each subtask's processing time for the next batch of events
// and runs its incremental TTL cleanup.
func (p *pipeline) ttlStep() {
	for _, t := range p.tasks {
		t.b.PinProcessingTime()
		t.b.CleanupExpired(ttlBatch)
	}
}

// stop cancels the checkpoints in flight and waits for them.
func (p *pipeline) stop() {
	p.cancel()
	if p.store != nil {
		p.store.Close()
	}
	for _, cp := range p.inflight {
		cp.Wait()
	}
	p.inflight = nil
}

func (p *pipeline) loop(until int64) error {
	until = min(until, p.cfg.events)
	p.progress.begin(p.name, p.src.Pos())
	for p.src.Pos() < until {
		if p.src.Pos()%ttlBatch == 0 {
			p.ttlStep()
		}
		e := p.src.Next()
		if t := p.route(e); t != nil {
			if err := t.job.Process(e); err != nil {
				return fmt.Errorf("%s: event %d: %w", p.name, p.src.Pos()-1, err)
			}
		}
		pos := p.src.Pos()
		if pos%p.cfg.every == 0 && p.store != nil {
			p.due = true
		}
		checkpoint := false
		if p.due {
			// At most one checkpoint in flight, as Flink does by default: a
			// checkpoint taken while the last one is still being written
			// would diff against an older confirmed base. It waits for the
			// next event after that write ends; processing does not wait,
			// unless the checkpoints are aligned.
			if err := p.poll(p.aligned); err != nil {
				return err
			}
			checkpoint = len(p.inflight) == 0
		}
		if p.cfg.watermarkDue(pos) {
			if err := p.advance(p.src.Watermark()); err != nil {
				return fmt.Errorf("%s: watermark at event %d: %w", p.name, pos, err)
			}
		}
		if checkpoint {
			p.due = false
			if err := p.checkpoint(uint64(pos)); err != nil {
				return err
			}
		}
		if pos%1024 == 0 {
			if err := p.poll(false); err != nil {
				return err
			}
			if err := p.ctx.Err(); err != nil {
				return err
			}
			p.progress.tick(p.name, pos, p.cfg.events, p.taken)
		}
	}
	return nil
}

// checkpoint takes checkpoint id (the number of events processed: the
// offset to replay from) and prepares the sink's open transaction under
// it.
func (p *pipeline) checkpoint(id uint64) error {
	if err := p.sink.Prepare(id); err != nil {
		return fmt.Errorf("%s: checkpoint %d: %w", p.name, id, err)
	}
	cp, err := p.store.Checkpoint(p.ctx, id)
	if err != nil {
		return fmt.Errorf("%s: checkpoint %d: %w", p.name, id, err)
	}
	p.inflight = append(p.inflight, cp)
	p.taken++
	if p.cfg.waitCheckpoints {
		return p.poll(true)
	}
	return nil
}

// poll confirms the checkpoints written so far, oldest first, and commits
// the sink up to them; with wait, it waits for all of them.
func (p *pipeline) poll(wait bool) error {
	for len(p.inflight) > 0 {
		cp := p.inflight[0]
		if !wait {
			select {
			case <-cp.Done():
			default:
				return nil
			}
		}
		err := cp.Wait()
		p.inflight = p.inflight[1:]
		p.report.addCheckpoint(p.name, cp, "confirmed", true)
		if err != nil {
			return fmt.Errorf("%s: checkpoint %d: %w", p.name, cp.ID(), err)
		}
		if err := p.store.Confirm(cp.ID()); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if err := p.sink.Commit(cp.ID()); err != nil {
			return fmt.Errorf("%s: checkpoint %d: %w", p.name, cp.ID(), err)
		}
	}
	return nil
}

// finish ends the stream: a final watermark fires every open window, the
// checkpoints in flight are confirmed and the sink commits everything.
func (p *pipeline) finish() error {
	if err := p.advance(math.MaxInt64); err != nil {
		return fmt.Errorf("%s: final watermark: %w", p.name, err)
	}
	if p.store != nil {
		if err := p.poll(true); err != nil {
			p.stop()
			return err
		}
	}
	if err := p.sink.Finish(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.progress.done(p.name, p.src.Pos(), p.taken)
	p.cancel()
	return nil
}

// crash simulates the death of the process: checkpoint writes in flight
// are cancelled (one that already committed its manifest stays
// restorable, as it would on disk), and the backends are dropped.
func (p *pipeline) crash() {
	p.cancel()
	if p.store != nil {
		p.store.Close()
	}
	for _, cp := range p.inflight {
		status := "committed, unconfirmed at the crash"
		if cp.Wait() != nil {
			status = "lost in the crash"
		}
		p.report.addCheckpoint(p.name, cp, status, false)
	}
	p.progress.done(p.name, p.src.Pos(), p.taken)
	p.inflight, p.tasks, p.store = nil, nil, nil
}

// halt stops the pipeline at a crash point without confirming anything
// more: the checkpoints in flight finish their writes, so that every
// instance of a job has committed every checkpoint it took (an error if
// one fails), and the pipeline waits there to be killed. See
// runInstance.
func (p *pipeline) halt() error {
	var err error
	for _, cp := range p.inflight {
		werr := cp.Wait()
		p.report.addCheckpoint(p.name, cp, "committed, unconfirmed at the crash", true)
		if werr != nil && err == nil {
			err = fmt.Errorf("%s: checkpoint %d: %w", p.name, cp.ID(), werr)
		}
	}
	p.inflight = nil
	p.progress.done(p.name, p.src.Pos(), p.taken)
	return err
}

// counts returns the digest of the per-user results held in state: each
// user's running count and late events.
func (p *pipeline) counts() (digest, error) {
	var d digest
	var buf []byte
	for _, t := range p.tasks {
		for user := range t.job.count.Keys() {
			n, err := t.job.count.Get(user)
			if err != nil {
				return d, err
			}
			late, _, err := t.job.late.Get(user)
			if err != nil {
				return d, err
			}
			buf = fmt.Appendf(buf[:0], "%s %d %d", user, n, late)
			d.add(buf)
		}
	}
	return d, nil
}

// openWindows returns the windows still open in state (0 after finish).
func (p *pipeline) openWindows() int {
	n := 0
	for _, t := range p.tasks {
		n += t.job.sessions.Open()
	}
	return n
}

// progress prints a line to w at most every interval while a run goes on.
type progress struct {
	w        io.Writer
	interval time.Duration
	last     time.Time
	lastPos  int64
	phase    string
	start    time.Time
	startPos int64
}

// begin starts timing a run from offset pos.
func (pr *progress) begin(phase string, pos int64) {
	now := time.Now()
	pr.phase, pr.last, pr.lastPos, pr.start, pr.startPos = phase, now, pos, now, pos
}

// tick prints a progress line if the interval has passed since the last.
func (pr *progress) tick(phase string, pos, total int64, checkpoints int) {
	if pr.w == nil || pr.interval <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(pr.last) < pr.interval {
		return
	}
	rate := float64(pos-pr.lastPos) / now.Sub(pr.last).Seconds()
	fmt.Fprintf(pr.w, "cowstate demo: %-13s %9d/%d events %9.0f events/s %4d checkpoints\n", phase, pos, total, rate, checkpoints)
	pr.last, pr.lastPos = now, pos
}

// done prints the totals of the run.
func (pr *progress) done(phase string, pos int64, checkpoints int) {
	if pr.w == nil || pr.interval <= 0 {
		return
	}
	el := time.Since(pr.start)
	fmt.Fprintf(pr.w, "cowstate demo: %-13s %9d events in %v (%.0f events/s), %d checkpoints\n",
		phase, pos-pr.startPos, el.Round(time.Millisecond), float64(pos-pr.startPos)/el.Seconds(), checkpoints)
}
