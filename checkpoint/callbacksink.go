package checkpoint

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// CallbackSink is a job's output handed to a function once per checkpoint,
// for a system downstream that takes idempotent writes keyed by checkpoint
// id (an upsert keyed by the id, a transaction id, an object named after
// it). It is a Sink (pass it as LoopOptions.Sink): the records the job
// emits before checkpoint id are staged, as one object of a Storage, when
// the checkpoint is taken, and once it is durable Deliver is called with
// id and them. After a crash, Resume delivers what was staged up to the
// restored checkpoint and drops the rest.
//
// Deliver is called in id order, on the writer goroutine, and at least
// once for each id with output: again after a crash that came after a
// delivery and before the next checkpoint, always with the same records.
// So the write downstream must be keyed by the id (a second delivery of
// an id replaces, or is ignored by, the first); then what it holds is
// exactly once. A Deliver that fails leaves its checkpoint's records
// staged; the next commit or recovery delivers them again.
//
// The staging Storage is the sink's own (a directory, or a bucket prefix
// other than the checkpoint store's): objects named staged-e<epoch>-<id>
// and recovered-e<epoch>, xxhash64-checked on reading. A fenced owner's
// staged records are never delivered by a later owner: a recovery drops
// the objects of owners older than the last one that recovered.
//
// Costs: Emit appends to a buffer in memory (the records of one
// checkpoint interval are held until it is taken); a checkpoint with
// output writes one object on the writer goroutine before its capture;
// a delivery removes it. All methods belong to the Loop's writer
// goroutine.
type CallbackSink struct {
	st      Storage
	deliver func(ctx context.Context, id uint64, records [][]byte) error
	epoch   uint64 // 0 until Recover
	open    [][]byte
	staged  []stagedTxn // prepared by this owner, not yet delivered, ascending
	lastID  uint64
}

type stagedTxn struct {
	id      uint64
	name    string
	records [][]byte
}

var _ Sink = (*CallbackSink)(nil)

// NewCallbackSink returns a sink that stages output in st and hands each
// checkpoint's records to deliver once the checkpoint is durable.
func NewCallbackSink(st Storage, deliver func(ctx context.Context, id uint64, records [][]byte) error) (*CallbackSink, error) {
	if st == nil || deliver == nil {
		return nil, fmt.Errorf("%w: a callback sink needs a staging storage and a deliver function", ErrInvalid)
	}
	return &CallbackSink{st: st, deliver: deliver}, nil
}

// Emit adds a copy of record to the output of the open checkpoint
// interval. Before the Loop recovers the sink it is an error.
func (s *CallbackSink) Emit(record []byte) error {
	if s.epoch == 0 {
		return fmt.Errorf("%w: callback sink on %s is not recovered: pass it as LoopOptions.Sink to Resume first", ErrInvalid, s.st)
	}
	s.open = append(s.open, slices.Clone(record))
	return nil
}

const (
	stagedPrefix    = "staged-e"
	recoveredPrefix = "recovered-e"
)

func stagedName(epoch, id uint64) string {
	return fmt.Sprintf("%s%020d-%020d", stagedPrefix, epoch, id)
}

func parseStaged(name string) (epoch, id uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, stagedPrefix)
	if !ok || len(rest) != 41 || rest[20] != '-' {
		return 0, 0, false
	}
	e, err1 := strconv.ParseUint(rest[:20], 10, 64)
	i, err2 := strconv.ParseUint(rest[21:], 10, 64)
	return e, i, err1 == nil && err2 == nil
}

func recoveredName(epoch uint64) string { return fmt.Sprintf("%s%020d", recoveredPrefix, epoch) }

// Prepare implements Sink: the open interval's records, if any, are
// written as the staged object of checkpoint id.
func (s *CallbackSink) Prepare(ctx context.Context, id uint64) error {
	if s.epoch == 0 {
		return fmt.Errorf("%w: callback sink on %s is not recovered", ErrInvalid, s.st)
	}
	if id <= s.lastID {
		return fmt.Errorf("%w: callback sink on %s: prepare of checkpoint %d after %d", ErrInvalid, s.st, id, s.lastID)
	}
	s.lastID = id
	if len(s.open) == 0 {
		return nil
	}
	name := stagedName(s.epoch, id)
	w, err := s.st.Create(ctx, name)
	if err == nil {
		if _, err = w.Write(encodeStaged(s.open)); err == nil {
			err = w.Commit()
		}
		if err != nil {
			w.Abort()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: callback sink: staging checkpoint %d as %s on %s: %w", ErrSink, id, name, s.st, err)
	}
	crashPoint("callback.staged")
	s.staged = append(s.staged, stagedTxn{id, name, s.open})
	s.open = nil
	return nil
}

// Commit implements Sink: the staged records of every checkpoint up to id
// are delivered, in id order, and their objects removed.
func (s *CallbackSink) Commit(ctx context.Context, id uint64) error {
	n := 0
	defer func() { s.staged = s.staged[n:] }()
	for _, t := range s.staged {
		if t.id > id {
			break
		}
		if err := s.deliverOne(ctx, t); err != nil {
			return err
		}
		n++
	}
	return nil
}

func (s *CallbackSink) deliverOne(ctx context.Context, t stagedTxn) error {
	if err := s.deliver(ctx, t.id, t.records); err != nil {
		return fmt.Errorf("%w: callback sink: delivering checkpoint %d: %w", ErrSink, t.id, err)
	}
	crashPoint("callback.delivered")
	if err := s.st.Remove(ctx, t.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: callback sink: removing %s from %s after its delivery: %w", ErrSink, t.name, s.st, err)
	}
	return nil
}

// Recover implements Sink: it delivers what earlier owners staged up to
// at.Checkpoint, drops the rest and the objects of owners older than the
// last one that recovered (fenced owners), and records this owner's
// recovery.
func (s *CallbackSink) Recover(ctx context.Context, at Recovery) error {
	if s.epoch != 0 {
		return fmt.Errorf("%w: callback sink on %s is recovered already", ErrInvalid, s.st)
	}
	names, err := s.st.List(ctx)
	if err != nil {
		return fmt.Errorf("%w: callback sink: listing %s: %w", ErrSink, s.st, err)
	}
	var lastRecovered uint64 // the newest earlier owner that recovered
	var markers []string
	for _, name := range names {
		if rest, ok := strings.CutPrefix(name, recoveredPrefix); ok && baseName(name) == name {
			e, err := strconv.ParseUint(rest, 10, 64)
			if err != nil || len(rest) != 20 {
				continue
			}
			if e >= at.Epoch {
				return fmt.Errorf("%w: callback sink on %s: owner epoch %d recovered it, and this owner is epoch %d", ErrFenced, s.st, e, at.Epoch)
			}
			lastRecovered = max(lastRecovered, e)
			markers = append(markers, name)
		}
	}
	var deliver []stagedTxn
	for _, name := range names {
		if base := baseName(name); base != name {
			// A temporary file of a write a crash interrupted (a
			// DirStorage's): of an owner that is dead or fenced.
			if e, _, ok := parseStaged(base); ok && e < at.Epoch || strings.HasPrefix(base, recoveredPrefix) {
				if err := s.st.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("%w: callback sink: removing %s from %s: %w", ErrSink, name, s.st, err)
				}
			}
			continue
		}
		e, id, ok := parseStaged(name)
		switch {
		case !ok:
			continue
		case e >= at.Epoch:
			return fmt.Errorf("%w: callback sink on %s: %s is of owner epoch %d, and this owner is epoch %d", ErrFenced, s.st, name, e, at.Epoch)
		case e >= lastRecovered && id <= at.Checkpoint:
			deliver = append(deliver, stagedTxn{id: id, name: name})
			continue
		}
		// Above the restored checkpoint (the replay emits it again), or
		// staged by an owner fenced before the last recovery.
		if err := s.st.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: callback sink: removing %s from %s: %w", ErrSink, name, s.st, err)
		}
	}
	slices.SortStableFunc(deliver, func(a, b stagedTxn) int { return cmp.Compare(a.id, b.id) })
	for _, t := range deliver {
		if t.records, err = s.readStaged(ctx, t.name); err != nil {
			return err
		}
		if err := s.deliverOne(ctx, t); err != nil {
			return err
		}
	}
	w, err := s.st.Create(ctx, recoveredName(at.Epoch))
	if err == nil {
		if err = w.Commit(); err != nil {
			w.Abort()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: callback sink: recording the recovery of epoch %d on %s: %w", ErrSink, at.Epoch, s.st, err)
	}
	for _, m := range markers {
		if err := s.st.Remove(ctx, m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: callback sink: removing %s from %s: %w", ErrSink, m, s.st, err)
		}
	}
	s.epoch, s.lastID = at.Epoch, at.Checkpoint
	return nil
}

// stagedMaxRecords bounds the record count a staged object may claim, so
// that a damaged count is an error rather than a huge allocation.
const stagedMaxRecords = 1 << 28

// encodeStaged encodes records as a staged object: a uvarint count, each
// record as a uvarint length and its bytes, then the xxhash64 of all that,
// big-endian.
func encodeStaged(records [][]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(records)))
	for _, r := range records {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	return binary.BigEndian.AppendUint64(b, xxhash.Sum64(b))
}

func (s *CallbackSink) readStaged(ctx context.Context, name string) ([][]byte, error) {
	r, err := s.st.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: callback sink: opening %s on %s: %w", ErrSink, name, s.st, err)
	}
	defer r.Close()
	size := r.Size()
	if size < 9 {
		return nil, fmt.Errorf("%w: callback sink: staged object %s on %s has %d bytes", ErrCorrupt, name, s.st, size)
	}
	if limit := memoryLimit(); size > limit {
		return nil, fmt.Errorf("%w: callback sink: staged object %s on %s has %d bytes, more than the %d this process may use", ErrMismatch, name, s.st, size, limit)
	}
	b := make([]byte, size)
	if _, err := r.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: callback sink: reading %s on %s: %w", ErrSink, name, s.st, err)
	}
	body := b[:len(b)-8]
	if xxhash.Sum64(body) != binary.BigEndian.Uint64(b[len(b)-8:]) {
		return nil, fmt.Errorf("%w: callback sink: staged object %s on %s fails its xxhash64", ErrCorrupt, name, s.st)
	}
	n, k := binary.Uvarint(body)
	if k <= 0 || n > stagedMaxRecords || n > uint64(len(body)) {
		return nil, fmt.Errorf("%w: callback sink: staged object %s on %s has a bad record count", ErrCorrupt, name, s.st)
	}
	body = body[k:]
	records := make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, fmt.Errorf("%w: callback sink: staged object %s on %s has a bad record length", ErrCorrupt, name, s.st)
		}
		records = append(records, body[k:k+int(l)])
		body = body[k+int(l):]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: callback sink: staged object %s on %s has %d bytes after its records", ErrCorrupt, name, s.st, len(body))
	}
	return records, nil
}
