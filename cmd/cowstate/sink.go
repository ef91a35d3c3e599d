package main

import (
	"encoding/binary"
	"fmt"

	"github.com/cowstate/cowstate/statetable"
)

// digest is an order-independent fingerprint of a multiset of records: the
// number of records and the wrapping sum of their xxhash64s. Two runs that
// produce the same records in any order (two rescaled subtasks
// interleave theirs differently) have equal digests.
type digest struct {
	N   int64
	Sum uint64
}

func (d *digest) add(record []byte) {
	d.N++
	d.Sum += statetable.HashKey(record)
}

func (d *digest) merge(o digest) {
	d.N += o.N
	d.Sum += o.Sum
}

func (d digest) String() string { return fmt.Sprintf("%d records, fingerprint %016x", d.N, d.Sum) }

// appendSession encodes a session result for a digest.
func appendSession(dst []byte, r SessionResult) []byte {
	dst = append(dst, r.User...)
	dst = append(dst, 0)
	for _, v := range []int64{r.Start, r.End, r.Count, r.Sum} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

// resultSink is where the job's session results go, exactly once: by two
// phases, on the checkpoints. The pipeline emits into the open
// transaction, prepares it under each checkpoint it takes, commits the
// prepared ones when a checkpoint is confirmed, recovers after a restore
// and commits everything at the end of the stream. Writer goroutine of
// the pipeline.
type resultSink interface {
	// Emit adds a record to the open transaction.
	Emit(SessionResult)
	// Prepare closes the open transaction under checkpoint id.
	Prepare(id uint64) error
	// Commit commits the transactions prepared up to checkpoint id.
	Commit(id uint64) error
	// Recover commits the transactions prepared up to the restored
	// checkpoint id, before the crash, and aborts the later ones.
	Recover(id uint64) error
	// Finish commits everything: the end of a bounded stream.
	Finish() error
	// Committed returns the digest of every committed record.
	Committed() (digest, error)
}

var (
	_ resultSink = (*sessionSink)(nil)
	_ resultSink = (*dirSink)(nil)
)

// sessionSink is the demo's external output system, with exactly-once
// delivery by two-phase commit, as Flink's transactional sinks do: what
// the job emits goes into an open transaction; at a checkpoint the
// transaction is prepared under the checkpoint's id, and once the
// checkpoint is confirmed it is committed. After a crash the open
// transaction is lost (its records are emitted again by the replay), and
// recovery from checkpoint id commits the transactions prepared up to id
// and aborts the later ones. It keeps digests, not records.
type sessionSink struct {
	committed digest
	prepared  []preparedTxn
	open      digest
	buf       []byte
}

type preparedTxn struct {
	id uint64
	d  digest
}

// Emit adds a record to the open transaction.
func (s *sessionSink) Emit(r SessionResult) {
	s.buf = appendSession(s.buf[:0], r)
	s.open.add(s.buf)
}

// Prepare closes the open transaction under checkpoint id.
func (s *sessionSink) Prepare(id uint64) error {
	s.prepared = append(s.prepared, preparedTxn{id, s.open})
	s.open = digest{}
	return nil
}

// Commit commits the transactions prepared up to checkpoint id.
func (s *sessionSink) Commit(id uint64) error {
	i := 0
	for ; i < len(s.prepared) && s.prepared[i].id <= id; i++ {
		s.committed.merge(s.prepared[i].d)
	}
	s.prepared = s.prepared[i:]
	return nil
}

// Crash is what survives a crash of the job: the committed and prepared
// transactions, not the open one.
func (s *sessionSink) Crash() *sessionSink {
	return &sessionSink{committed: s.committed, prepared: append([]preparedTxn(nil), s.prepared...)}
}

// Recover commits the transactions prepared up to the restored checkpoint
// id and aborts the rest.
func (s *sessionSink) Recover(id uint64) error {
	s.Commit(id)
	s.prepared = nil
	s.open = digest{}
	return nil
}

// Finish commits everything: the end of a bounded stream.
func (s *sessionSink) Finish() error {
	for _, p := range s.prepared {
		s.committed.merge(p.d)
	}
	s.committed.merge(s.open)
	s.prepared, s.open = nil, digest{}
	return nil
}

// Committed returns the digest of the committed records.
func (s *sessionSink) Committed() (digest, error) { return s.committed, nil }
