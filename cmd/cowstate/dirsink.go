package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/cowstate/cowstate/statetable"
)

// dirSink is the external output system of a job of several processes: a
// directory that outlives them and that the job's instances share, with
// each transaction a file. A transaction prepared under checkpoint id is
// the file prepared/<name>, written whole (to a temporary name, then
// renamed); a commit renames it into committed/, an abort removes it.
// Renames and removes are atomic, so of two instances that settle the same
// transaction one does it and the other finds it gone.
//
// Each run of the job is an attempt, numbered from 1. A transaction's name
// says its attempt, the key groups of the instance that prepared it and
// its checkpoint id (a1-kg-00000-00031-00000000000000028000.json), and a
// recovery settles the transactions of the earlier attempts only: those
// prepared up to the restored checkpoint are committed, the later ones
// aborted. Every instance of the new attempt recovers, whatever key groups
// it owns, and all decide alike; none touches the new attempt's own.
//
// The open transaction lives in the process: a crash (SIGKILL) loses it,
// as it loses an external system's uncommitted transaction, and the replay
// emits its records again. The files are not synced: the demo kills
// processes, not the machine. One instance's sink belongs to that
// instance's pipeline goroutine.
type dirSink struct {
	dir      string
	attempt  int
	kgs      statetable.KeyGroupRange
	open     digest
	prepared []uint64 // this instance's prepared transactions, ascending
	buf      []byte
}

// txnFile is the content of a transaction's file.
type txnFile struct {
	Attempt int    `json:"attempt"`
	ID      uint64 `json:"id"` // checkpoint id; 0 for the end of the stream
	Records digest `json:"records"`
}

const (
	preparedDir  = "prepared"
	committedDir = "committed"
)

// openDirSink returns the sink of the instance owning key groups kgs in
// attempt of a job whose sink is directory dir (created if needed).
func openDirSink(dir string, attempt int, kgs statetable.KeyGroupRange) (*dirSink, error) {
	if attempt < 1 {
		return nil, fmt.Errorf("sink attempt %d: attempts are numbered from 1", attempt)
	}
	for _, sub := range []string{preparedDir, committedDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("sink: %w", err)
		}
	}
	return &dirSink{dir: dir, attempt: attempt, kgs: kgs}, nil
}

// name is the file name of this instance's transaction id (0: the end).
func (s *dirSink) name(id uint64) string {
	n := fmt.Sprintf("a%d-kg-%05d-%05d-", s.attempt, s.kgs.First, s.kgs.Last)
	if id == 0 {
		return n + "end.json"
	}
	return fmt.Sprintf("%s%020d.json", n, id)
}

// write writes a transaction's file whole into sub.
func (s *dirSink) write(sub, name string, t txnFile) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, sub, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, sub, name)); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	return nil
}

// Emit adds a record to the open transaction.
func (s *dirSink) Emit(r SessionResult) {
	s.buf = appendSession(s.buf[:0], r)
	s.open.add(s.buf)
}

// Prepare writes the open transaction as prepared under checkpoint id.
func (s *dirSink) Prepare(id uint64) error {
	if id == 0 || (len(s.prepared) > 0 && id <= s.prepared[len(s.prepared)-1]) {
		panic(fmt.Sprintf("sink: BUG: prepare of checkpoint %d after %v", id, s.prepared))
	}
	if err := s.write(preparedDir, s.name(id), txnFile{Attempt: s.attempt, ID: id, Records: s.open}); err != nil {
		return err
	}
	s.prepared = append(s.prepared, id)
	s.open = digest{}
	return nil
}

// settle commits (renames into committed/) or aborts (removes) the
// prepared transaction file name; one that is gone was settled already.
func (s *dirSink) settle(name string, commit bool) error {
	from := filepath.Join(s.dir, preparedDir, name)
	var err error
	if commit {
		err = os.Rename(from, filepath.Join(s.dir, committedDir, name))
	} else {
		err = os.Remove(from)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sink: %w", err)
	}
	return nil
}

// Commit commits this instance's transactions prepared up to checkpoint
// id.
func (s *dirSink) Commit(id uint64) error {
	for len(s.prepared) > 0 && s.prepared[0] <= id {
		if err := s.settle(s.name(s.prepared[0]), true); err != nil {
			return err
		}
		s.prepared = s.prepared[1:]
	}
	return nil
}

// Recover settles the transactions the earlier attempts prepared: those
// up to the restored checkpoint id are committed, the later ones
// aborted.
func (s *dirSink) Recover(id uint64) error {
	ents, err := os.ReadDir(filepath.Join(s.dir, preparedDir))
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue // a transaction whose write a crash cut short
		}
		b, err := os.ReadFile(filepath.Join(s.dir, preparedDir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // settled by another instance meanwhile
		}
		if err != nil {
			return fmt.Errorf("sink: %w", err)
		}
		var t txnFile
		if err := json.Unmarshal(b, &t); err != nil {
			return fmt.Errorf("sink: transaction %s: %w", e.Name(), err)
		}
		if t.Attempt >= s.attempt {
			continue
		}
		if err := s.settle(e.Name(), t.ID <= id); err != nil {
			return err
		}
	}
	s.prepared, s.open = nil, digest{}
	return nil
}

// Finish commits this instance's prepared transactions and its open one.
func (s *dirSink) Finish() error {
	if err := s.Commit(math.MaxUint64); err != nil {
		return err
	}
	if err := s.write(committedDir, s.name(0), txnFile{Attempt: s.attempt, Records: s.open}); err != nil {
		return err
	}
	s.open = digest{}
	return nil
}

// Committed returns the digest of every committed transaction of the
// job, every instance's.
func (s *dirSink) Committed() (digest, error) { return committedRecords(s.dir) }

// committedRecords returns the digest of the committed transactions in
// the sink directory dir.
func committedRecords(dir string) (digest, error) {
	var d digest
	ents, err := os.ReadDir(filepath.Join(dir, committedDir))
	if err != nil {
		return d, fmt.Errorf("sink: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, committedDir, e.Name()))
		if err != nil {
			return d, fmt.Errorf("sink: %w", err)
		}
		var t txnFile
		if err := json.Unmarshal(b, &t); err != nil {
			return d, fmt.Errorf("sink: transaction %s: %w", e.Name(), err)
		}
		d.merge(t.Records)
	}
	return d, nil
}
