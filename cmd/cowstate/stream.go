package main

import (
	"math/rand/v2"
	"strconv"
)

// Event is one record of the demo's input stream: a user did something
// worth Amount at event time Time (milliseconds).
type Event struct {
	User   string
	Time   int64
	Amount int64
}

// streamConfig describes a generated stream; two streams with the same
// config yield the same events in the same order.
type streamConfig struct {
	Seed       uint64
	Keys       int   // distinct users
	Events     int64 // length of the stream
	OutOfOrder int64 // bound on ordinary lateness (ms), > 0
}

const (
	// streamStart is the event time of the first event (ms).
	streamStart = 1_700_000_000_000
	// eventSpacing is the event-time distance between consecutive events
	// before out-of-orderness (ms): five hundred events per second.
	eventSpacing = 2
	// stragglerFactor: the rare stragglers are delayed by up to this many
	// times the out-of-orderness bound, so that some arrive behind the
	// watermark and are counted as late.
	stragglerFactor = 12
)

// Stream is a deterministic, replayable generator of user events (seeded
// math/rand/v2): event time mostly increasing, 10% of events delayed by
// up to the out-of-orderness bound, 0.1% by up to stragglerFactor times
// it; 70% of the events
// come from users chosen uniformly, 30% from a Zipf-distributed set of
// heavy users. Like a partitioned log, it can be replayed from any offset
// (by regenerating and discarding the events before it), which is what a
// restored job does.
type Stream struct {
	cfg     streamConfig
	r       *rand.Rand
	zipf    *rand.Zipf
	pos     int64 // events yielded so far: the offset of the next event
	maxTime int64 // highest event time yielded
	name    []byte
}

// newStream returns a stream positioned at offset 0.
func newStream(cfg streamConfig) *Stream {
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	return &Stream{
		cfg:     cfg,
		r:       r,
		zipf:    rand.NewZipf(r, 1.1, 1, uint64(cfg.Keys-1)),
		maxTime: streamStart,
	}
}

// Pos returns the offset of the next event: the number of events yielded.
func (s *Stream) Pos() int64 { return s.pos }

// Done reports whether the stream is exhausted.
func (s *Stream) Done() bool { return s.pos >= s.cfg.Events }

// Watermark returns the event time up to which the stream promises no more
// (ordinary) events: the highest event time yielded minus the
// out-of-orderness bound.
func (s *Stream) Watermark() int64 { return s.maxTime - s.cfg.OutOfOrder }

// Next returns the next event; call it only while !Done().
func (s *Stream) Next() Event {
	user, t, amount := s.draw()
	s.name = strconv.AppendUint(append(s.name[:0], "user-"...), user, 10)
	return Event{User: string(s.name), Time: t, Amount: amount}
}

// draw draws the next event's user, time and amount and moves past it.
func (s *Stream) draw() (user uint64, t, amount int64) {
	if s.r.Float64() < 0.3 {
		user = s.zipf.Uint64()
	} else {
		user = s.r.Uint64N(uint64(s.cfg.Keys))
	}
	t = streamStart + s.pos*eventSpacing
	switch p := s.r.Float64(); {
	case p < 0.001:
		t -= s.r.Int64N(stragglerFactor * s.cfg.OutOfOrder)
	case p < 0.1:
		t -= s.r.Int64N(s.cfg.OutOfOrder)
	}
	amount = 1 + s.r.Int64N(100)
	s.pos++
	s.maxTime = max(s.maxTime, t)
	return user, t, amount
}

// Skip discards the next n events (a replay from offset pos+n).
func (s *Stream) Skip(n int64) {
	for ; n > 0 && !s.Done(); n-- {
		s.draw()
	}
}
