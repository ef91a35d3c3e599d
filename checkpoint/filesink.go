package checkpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FileSink is a job's output as files in a directory, committed exactly
// once by two phases on a Loop's checkpoints (a Sink: pass it as
// LoopOptions.Sink). The job writes records with Write on the writer
// goroutine; what it wrote before checkpoint id becomes, once id is
// durable, the file <prefix>-<id> (id in 20 decimal digits, so names sort
// by id), appearing whole by an atomic rename. A downstream reader lists
// the directory and reads the files named so, in name order, and nothing
// else: the rest of what a FileSink keeps is under .pending-<prefix>.
//
// Layout, for prefix "part":
//
//	part-00000000000000000007            committed: the output up to checkpoint 7
//	.pending-part/e<epoch>/open.tmp      the open transaction of the store's owner
//	.pending-part/e<epoch>/<id>          prepared under checkpoint id, not yet committed
//
// Prepare syncs the open file, renames it to its id and syncs the
// directory; Commit renames prepared files into place and syncs the
// directory; Recover (at Resume) commits what an earlier owner prepared up
// to the restored checkpoint and removes the rest. Each owner epoch has a
// directory of its own, which Recover creates and the recovery by a later
// owner removes, so a fenced owner still running cannot prepare into it
// (its rename finds the directory gone) nor have its transactions
// committed.
//
// A checkpoint with no output since the previous one commits no file.
// Sinks of several loops may share a directory under distinct prefixes.
// If a part above the restored checkpoint is already committed (Resume
// fell back past a damaged newer checkpoint, or the store was replaced),
// Recover fails with ErrMismatch: the replay would emit those records
// twice.
//
// Costs: Write is a buffered append; Prepare an fsync of the
// transaction's file and one of its directory, on the writer goroutine
// before the checkpoint's capture; Commit a rename per transaction and an
// fsync of the directory. All methods belong to the Loop's writer
// goroutine.
type FileSink struct {
	dir, prefix string
	pendingRoot string // dir/.pending-<prefix>
	epochDir    string // pendingRoot/e<epoch>; "" until Recover
	open        *os.File
	w           *bufio.Writer
	prepared    []uint64 // prepared and not committed, ascending
	lastID      uint64   // the last id prepared
	err         error    // the first write error: the open transaction is lost
	closed      bool
}

var _ Sink = (*FileSink)(nil)

// NewFileSink returns a sink writing parts named <prefix>-<id> into dir,
// created if needed; prefix "" means "part". It may hold no path separator
// and may not start with a dot. Nothing is read or removed until a Loop
// recovers it.
func NewFileSink(dir, prefix string) (*FileSink, error) {
	if prefix == "" {
		prefix = "part"
	}
	if strings.ContainsAny(prefix, `/\`) || strings.HasPrefix(prefix, ".") {
		return nil, fmt.Errorf("%w: file sink prefix %q: no path separators, no leading dot", ErrInvalid, prefix)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: file sink directory: %w", ErrSink, err)
	}
	return &FileSink{dir: dir, prefix: prefix, pendingRoot: filepath.Join(dir, ".pending-"+prefix)}, nil
}

// Write appends p to the open transaction. Before the Loop recovers the
// sink, after Close, or after an earlier write failed, it returns an
// error and writes nothing (a failed write loses the open transaction:
// Prepare then fails, and the job must restart from its last checkpoint).
func (s *FileSink) Write(p []byte) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if s.open == nil {
		f, err := os.OpenFile(filepath.Join(s.epochDir, "open.tmp"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			s.err = fmt.Errorf("%w: file sink %s: opening the open transaction: %w", ErrSink, s.dir, err)
			return 0, s.err
		}
		s.open = f
		if s.w == nil {
			s.w = bufio.NewWriterSize(f, 64<<10)
		} else {
			s.w.Reset(f)
		}
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = fmt.Errorf("%w: file sink %s: %w", ErrSink, s.dir, err)
	}
	return n, s.err
}

// WriteString appends str to the open transaction, as Write.
func (s *FileSink) WriteString(str string) (int, error) {
	if err := s.usable(); err != nil || s.open == nil {
		return s.Write([]byte(str))
	}
	n, err := s.w.WriteString(str)
	if err != nil {
		s.err = fmt.Errorf("%w: file sink %s: %w", ErrSink, s.dir, err)
	}
	return n, s.err
}

func (s *FileSink) usable() error {
	switch {
	case s.closed:
		return fmt.Errorf("%w: file sink %s is closed", ErrInvalid, s.dir)
	case s.epochDir == "":
		return fmt.Errorf("%w: file sink %s is not recovered: pass it as LoopOptions.Sink to Resume first", ErrInvalid, s.dir)
	}
	return s.err
}

// Prepare implements Sink: the open transaction, if anything was written,
// becomes the prepared transaction of checkpoint id.
func (s *FileSink) Prepare(ctx context.Context, id uint64) error {
	if err := s.usable(); err != nil {
		return err
	}
	if id <= s.lastID {
		return fmt.Errorf("%w: file sink %s: prepare of checkpoint %d after %d", ErrInvalid, s.dir, id, s.lastID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.lastID = id
	if s.open == nil {
		return nil // nothing written since the last one
	}
	f := s.open
	s.open = nil
	fail := func(err error) error {
		s.err = fmt.Errorf("%w: file sink %s: preparing checkpoint %d: %w", ErrSink, s.dir, id, err)
		return s.err
	}
	if err := s.w.Flush(); err != nil {
		f.Close()
		return fail(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fail(err)
	}
	crashPoint("sink.synced")
	if err := os.Rename(f.Name(), filepath.Join(s.epochDir, idName(id))); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A later owner recovered the sink and removed this owner's
			// directory: the store has fenced this one.
			return fmt.Errorf("%w: file sink %s: another owner recovered it", ErrFenced, s.dir)
		}
		return fail(err)
	}
	if err := syncDir(s.epochDir); err != nil {
		return fail(err)
	}
	crashPoint("sink.prepared")
	s.prepared = append(s.prepared, id)
	return nil
}

// Commit implements Sink: every transaction prepared up to id becomes its
// part, in id order.
func (s *FileSink) Commit(ctx context.Context, id uint64) error {
	if s.closed {
		return fmt.Errorf("%w: file sink %s is closed", ErrInvalid, s.dir)
	}
	n := 0
	for _, p := range s.prepared {
		if p > id {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.commitOne(s.epochDir, p); err != nil {
			s.prepared = s.prepared[n:]
			return err
		}
		n++
	}
	s.prepared = s.prepared[n:]
	if n == 0 {
		return nil
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("%w: file sink %s: committing up to checkpoint %d: %w", ErrSink, s.dir, id, err)
	}
	crashPoint("sink.committed")
	return nil
}

// commitOne renames the transaction of checkpoint id, prepared in from,
// into its part. A part that exists already is never overwritten: each
// checkpoint id is committed once, so it would be another sink's output.
func (s *FileSink) commitOne(from string, id uint64) error {
	part := filepath.Join(s.dir, s.partName(id))
	if _, err := os.Lstat(part); err == nil {
		return fmt.Errorf("%w: file sink %s: part %s exists already, and checkpoint %d has another transaction prepared in %s",
			ErrMismatch, s.dir, s.partName(id), id, from)
	}
	if err := os.Rename(filepath.Join(from, idName(id)), part); err != nil {
		return fmt.Errorf("%w: file sink %s: committing checkpoint %d: %w", ErrSink, s.dir, id, err)
	}
	crashPoint("sink.renamed")
	return nil
}

// Recover implements Sink: it commits the transactions earlier owners
// prepared up to at.Checkpoint, removes the rest with their directories,
// and makes this owner's directory.
func (s *FileSink) Recover(ctx context.Context, at Recovery) error {
	if s.closed {
		return fmt.Errorf("%w: file sink %s is closed", ErrInvalid, s.dir)
	}
	if s.epochDir != "" {
		return fmt.Errorf("%w: file sink %s is recovered already", ErrInvalid, s.dir)
	}
	fail := func(err error) error {
		return fmt.Errorf("%w: file sink %s: recovering at checkpoint %d: %w", ErrSink, s.dir, at.Checkpoint, err)
	}
	if err := os.MkdirAll(s.pendingRoot, 0o755); err != nil {
		return fail(err)
	}
	ents, err := os.ReadDir(s.pendingRoot)
	if err != nil {
		return fail(err)
	}
	var epochs []uint64
	for _, e := range ents {
		ep, ok := parseEpochDir(e.Name())
		if !ok || !e.IsDir() {
			return fmt.Errorf("%w: file sink %s: %s holds %s, which no file sink wrote", ErrMismatch, s.dir, s.pendingRoot, e.Name())
		}
		if ep >= at.Epoch {
			return fmt.Errorf("%w: file sink %s: owner epoch %d has a directory, and this owner is epoch %d", ErrFenced, s.dir, ep, at.Epoch)
		}
		epochs = append(epochs, ep)
	}
	slices.Sort(epochs)
	committed := false
	for _, ep := range epochs {
		from := filepath.Join(s.pendingRoot, epochDirName(ep))
		ids, err := preparedIDs(from)
		if err != nil {
			return fail(err)
		}
		for _, id := range ids {
			if id > at.Checkpoint {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.commitOne(from, id); err != nil {
				return err
			}
			committed = true
		}
		if committed {
			if err := syncDir(s.dir); err != nil {
				return fail(err)
			}
			committed = false
		}
		// What is left is above the restored checkpoint, or the open
		// transaction: the replay emits it again.
		if err := os.RemoveAll(from); err != nil {
			return fail(err)
		}
		crashPoint("sink.recovered-epoch")
	}
	if err := s.checkNotAhead(at.Checkpoint); err != nil {
		return err
	}
	dir := filepath.Join(s.pendingRoot, epochDirName(at.Epoch))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := syncDir(s.pendingRoot); err != nil {
		return fail(err)
	}
	s.epochDir, s.lastID = dir, at.Checkpoint
	return nil
}

// checkNotAhead fails if a part above checkpoint r is committed.
func (s *FileSink) checkNotAhead(r uint64) error {
	parts, err := s.Parts()
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return nil
	}
	if last, _ := strconv.ParseUint(strings.TrimPrefix(parts[len(parts)-1], s.prefix+"-"), 10, 64); last > r {
		return fmt.Errorf("%w: file sink %s: the output of checkpoint %d is committed (%s), and the job resumed from checkpoint %d: its records would be committed twice",
			ErrMismatch, s.dir, last, parts[len(parts)-1], r)
	}
	return nil
}

// Parts returns the names of the committed parts, in id order: what a
// reader downstream reads. Any goroutine.
func (s *FileSink) Parts() ([]string, error) { return FileSinkParts(s.dir, s.prefix) }

// FileSinkParts returns the names of the parts a FileSink with prefix
// ("" for "part") committed in dir, in id order: what a reader downstream
// reads, from any process.
func FileSinkParts(dir, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = "part"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: file sink %s: %w", ErrSink, dir, err)
	}
	var parts []string
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), prefix+"-"); ok && len(rest) == 20 && !e.IsDir() {
			if _, err := strconv.ParseUint(rest, 10, 64); err == nil {
				parts = append(parts, e.Name())
			}
		}
	}
	slices.Sort(parts)
	return parts, nil
}

// Close drops the open transaction (the replay from the last checkpoint
// emits its records again) and makes the sink unusable. What is prepared
// stays for the next owner's recovery.
func (s *FileSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.open == nil {
		return nil
	}
	name := s.open.Name()
	return errors.Join(s.open.Close(), os.Remove(name))
}

func (s *FileSink) partName(id uint64) string { return s.prefix + "-" + idName(id) }

func idName(id uint64) string { return fmt.Sprintf("%020d", id) }

func epochDirName(epoch uint64) string { return "e" + strconv.FormatUint(epoch, 10) }

func parseEpochDir(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, "e")
	if !ok {
		return 0, false
	}
	ep, err := strconv.ParseUint(rest, 10, 64)
	return ep, err == nil && epochDirName(ep) == name
}

// preparedIDs returns the ids of the transactions prepared in dir,
// ascending, ignoring the open transaction.
func preparedIDs(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, e := range ents {
		if id, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
