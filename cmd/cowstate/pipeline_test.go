package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cowstate/cowstate/checkpoint"
)

// gatedStorage holds every file a checkpoint writes until gate is closed,
// so that a test decides when the checkpoint in flight ends.
type gatedStorage struct {
	checkpoint.Storage
	gate chan struct{}
}

func (s gatedStorage) Create(ctx context.Context, name string) (checkpoint.ObjectWriter, error) {
	if _, isManifest := strings.CutPrefix(name, "manifest-"); !isManifest {
		<-s.gate // manifests pass: opening the store commits one
	}
	return s.Storage.Create(ctx, name)
}

// TestWatermarksIgnoreCheckpointTiming checks that a pipeline's watermarks
// are a function of the stream position alone, as the uninterrupted run's
// are: a checkpoint that falls due while another is being written is taken
// at a later event (at an offset no other run advances the watermark at),
// and neither taking it nor restoring it and replaying from its offset may
// move the watermark there. An off-schedule watermark makes an event late
// that is not late in the uninterrupted run, and the results differ.
func TestWatermarksIgnoreCheckpointTiming(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.waitCheckpoints = false
	cfg.crashAt = 2*cfg.every + cfg.every*3/4
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir, err := checkpoint.Dir(cfg.dir)
	if err != nil {
		t.Fatal(err)
	}
	st := gatedStorage{dir, make(chan struct{})}
	var open sync.Once
	openGate := func() { open.Do(func() { close(st.gate) }) }

	ref, err := newPipeline(ctx, "uninterrupted", cfg, 1, &sessionSink{}, &report{}, &progress{})
	if err != nil {
		t.Fatal(err)
	}
	sink := &sessionSink{}
	live, err := newPipeline(ctx, "checkpointed", cfg, 1, sink, &report{}, &progress{})
	if err != nil {
		t.Fatal(err)
	}
	// The first checkpoint (at cfg.every) is still being written when the
	// second falls due (at 2*cfg.every); its write ends half an interval
	// later, and the second is taken at the next event.
	release := 2*cfg.every + cfg.every/2 + 7
	deferred := uint64(release + 1)
	if live.store, err = checkpoint.Open(ctx, live.tasks[0].b, st, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the removal of cfg.dir: nothing writes there any more
		openGate()
		live.stop()
	})

	refWatermarks := make([]int64, cfg.crashAt+1) // by offset
	for pos := int64(1); pos <= cfg.crashAt; pos++ {
		if err := ref.run(pos); err != nil {
			t.Fatal(err)
		}
		if err := live.run(pos); err != nil {
			t.Fatal(err)
		}
		refWatermarks[pos] = ref.tasks[0].job.sessions.Watermark()
		if got := live.tasks[0].job.sessions.Watermark(); got != refWatermarks[pos] {
			t.Fatalf("checkpointed run: watermark %d after event offset %d, uninterrupted run %d", got, pos, refWatermarks[pos])
		}
		if pos == release {
			if len(live.inflight) != 1 || live.inflight[0].ID() != uint64(cfg.every) || !live.due {
				t.Fatalf("at offset %d: want checkpoint %d in flight and the next one due", pos, cfg.every)
			}
			openGate()
			if err := live.inflight[0].Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The deferred checkpoint commits, then the job crashes.
	if err := live.poll(true); err != nil {
		t.Fatal(err)
	}
	if live.taken != 2 || live.report.checkpoints[1].id != deferred {
		t.Fatalf("checkpoints taken: %+v, want the second at offset %d", live.report.checkpoints, deferred)
	}
	live.crash()

	// Restore the deferred checkpoint and replay from its offset: the
	// watermark is the one the uninterrupted run had there, and the
	// results are the uninterrupted run's.
	restored, err := newPipeline(ctx, "restored", cfg, 1, sink.Crash(), &report{}, &progress{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.RestoreFrom(ctx, restored.tasks[0].b, checkpoint.Source{Storage: dir, ID: deferred}); err != nil {
		t.Fatal(err)
	}
	if err := restored.sink.Recover(deferred); err != nil {
		t.Fatal(err)
	}
	if err := restored.seek(int64(deferred)); err != nil {
		t.Fatal(err)
	}
	if got, want := restored.tasks[0].job.sessions.Watermark(), refWatermarks[deferred]; got != want {
		t.Fatalf("restored run: watermark %d at offset %d, uninterrupted run %d", got, deferred, want)
	}
	for _, p := range []*pipeline{ref, restored} {
		if err := p.run(cfg.events); err != nil {
			t.Fatal(err)
		}
		if err := p.finish(); err != nil {
			t.Fatal(err)
		}
	}
	refCounts, err := ref.counts()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := restored.counts()
	if err != nil {
		t.Fatal(err)
	}
	sessions, _ := restored.sink.Committed()
	refSessions, _ := ref.sink.Committed()
	if sessions != refSessions || counts != refCounts {
		t.Errorf("restored run: sessions %v, counts %v; uninterrupted run: sessions %v, counts %v",
			sessions, counts, refSessions, refCounts)
	}
}
