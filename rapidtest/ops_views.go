package rapidtest

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// This file holds the operations on views: Capture and Release, writing
// a view on its own goroutine, restoring what was written, whole or into
// the shares of a rescaled job.

func (m *machine) capture(t *rapid.T) {
	if len(m.live) < maxLive {
		m.live = append(m.live, pair{m.b.Capture(), m.m.Capture(), m.step})
		m.note(t, "Capture() -> view %d", len(m.live)-1)
	}
}

func (m *machine) release(t *rapid.T) {
	if len(m.live) == 0 {
		return
	}
	i := rapid.IntRange(0, len(m.live)-1).Draw(t, "view")
	m.note(t, "Release() of view %d (captured at step %d)", i, m.live[i].step)
	m.live[i].release()
	m.live = slices.Delete(m.live, i, i+1)
}

// startWrite captures a view and writes it on a new goroutine, which then
// reads the view and compares it with the model's: the writer goes on
// stepping meanwhile.
func (m *machine) startWrite(t *rapid.T) {
	if len(m.writes) >= maxWrites {
		return
	}
	w := &write{pair: pair{m.b.Capture(), m.m.Capture(), m.step}, schemas: m.schemas, done: make(chan struct{})}
	if err := w.m.WriteSnapshot(context.Background(), &w.modelBuf); err != nil {
		m.fatalf(t, "BUG: model WriteSnapshot: %v", err)
	}
	m.writes = append(m.writes, w)
	m.note(t, "Capture() and WriteSnapshot on a goroutine -> write %d", len(m.writes)-1)
	go func() {
		defer close(w.done)
		defer func() {
			if r := recover(); r != nil {
				w.err = fmt.Errorf("panic: %v", r)
			}
		}()
		w.err = w.b.WriteSnapshot(context.Background(), &w.buf)
		w.readErr = m.diff(w.b, w.m)
	}()
}

// finishWrite waits for write i, releases its views, and restores its
// bytes into a fresh backend of the machine's config, which must equal the
// model frozen at capture.
func (m *machine) finishWrite(t *rapid.T, i int) {
	w := m.writes[i]
	m.writes = slices.Delete(m.writes, i, i+1)
	<-w.done
	w.release()
	m.note(t, "finished the write of the view captured at step %d: %d bytes, error %v", w.step, w.buf.Len(), w.err)
	if w.err != nil {
		m.fatalf(t, "WriteSnapshot of the view captured at step %d: %v", w.step, w.err)
	}
	if w.readErr != nil {
		m.fatalf(t, "view captured at step %d, read on the writing goroutine: %v", w.step, w.readErr)
	}
	b, mod := m.restore(t, m.cfg, w.buf.Bytes(), w.modelBuf.Bytes(), w.schemas)
	if err := m.diff(b, mod); err != nil {
		m.fatalf(t, "restore of the snapshot captured at step %d and written on a goroutine: %v", w.step, err)
	}
}

// restore restores a snapshot into a fresh restore target and model, its
// states registered with the schemas the snapshot was written with.
func (m *machine) restore(t *rapid.T, cfg Config, data, modelData []byte, schemas map[string]contract.Schema) (Backend, *Model) {
	b, mod := m.freshWith(t, cfg, true, schemas)
	if err := b.RestoreSnapshot(context.Background(), bytes.NewReader(data), int64(len(data))); err != nil {
		m.fatalf(t, "RestoreSnapshot into key groups %v: %v", b.KeyGroups(), err)
	}
	if err := mod.RestoreSnapshot(context.Background(), bytes.NewReader(modelData), int64(len(modelData))); err != nil {
		m.fatalf(t, "BUG: model RestoreSnapshot: %v", err)
	}
	return b, mod
}

// rescale writes a snapshot and restores it into p backends owning the
// shares of p operators, compares each with the model's share, and probes
// each with a write and a timer of every key of the pool and every key
// held (owned or not).
func (m *machine) rescale(t *rapid.T) {
	maxPar := m.b.MaxParallelism()
	p := rapid.IntRange(1, min(5, maxPar)).Draw(t, "parallelism")
	m.note(t, "Rescale: Capture, WriteSnapshot, restore into %d operators' shares of %d key groups", p, maxPar)
	pr := pair{m.b.Capture(), m.m.Capture(), m.step}
	var buf, modelBuf bytes.Buffer
	err := pr.b.WriteSnapshot(context.Background(), &buf)
	pr.m.WriteSnapshot(context.Background(), &modelBuf)
	pr.release()
	if err != nil {
		m.fatalf(t, "WriteSnapshot: %v", err)
	}
	probes := append(slices.Clone(m.keys), m.heldKeys()...)
	slices.Sort(probes)
	probes = slices.Compact(probes)
	for i := range p {
		r := statetable.RangeForOperator(maxPar, p, i)
		cfg := m.cfg
		cfg.KeyGroups = &r
		b, mod := m.restore(t, cfg, buf.Bytes(), modelBuf.Bytes(), m.schemas)
		if g := b.KeyGroups(); g != r {
			m.fatalf(t, "rescaled backend owns key groups %v, configured %v", g, r)
		}
		if err := m.diff(b, mod); err != nil {
			m.fatalf(t, "restored into key groups %v of %d (operator %d of %d): %v", r, maxPar, i, p, err)
		}
		for _, k := range probes {
			op := fmt.Sprintf("after restoring into key groups %v: Add(\"list\", %q, \"\", \"probe\")", r, k)
			m.same(t, op, nil, nil, b.Add("list", k, "", "probe"), mod.Add("list", k, "", "probe"))
			if m.groups&GroupTimers != 0 {
				ga, gerr := b.RegisterTimer(services[0], timerqueue.EventTime, k, "", 0)
				wa, werr := mod.RegisterTimer(services[0], timerqueue.EventTime, k, "", 0)
				m.same(t, fmt.Sprintf("after restoring into key groups %v: RegisterTimer of %q", r, k), []any{ga}, []any{wa}, gerr, werr)
			}
		}
		if err := m.diff(b, mod); err != nil {
			m.fatalf(t, "restored into key groups %v, after probing every key: %v", r, err)
		}
	}
}
