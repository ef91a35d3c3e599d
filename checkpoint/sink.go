package checkpoint

import "context"

// A Sink is a job's output made exactly once by two phases on the Loop's
// checkpoints, as Flink's two-phase commit sinks are: what the job emits
// between two checkpoints is one transaction; when the Loop takes
// checkpoint id it first prepares the open transaction under id (durably:
// a crash afterwards must not lose it), and once checkpoint id is durable
// it commits every transaction prepared up to id. After a crash, Resume
// restores checkpoint r and recovers the sink at r: the transactions
// prepared up to r are committed (their records are in no later replay),
// the later ones and the open one are dropped (the replay from r emits
// their records again). So every record is committed once, whatever
// point of a checkpoint the process dies at.
//
// What the system downstream must provide: a transaction that can be
// prepared durably and committed later by another process, idempotently
// (a commit may be repeated after a crash), and readers that see only
// committed output (Kafka's transactions with read_committed readers, an
// atomic rename into a directory readers list, a table with a checkpoint
// id column and an upsert). FileSink is the one for files.
//
// The Loop calls a Sink on its writer goroutine only: Recover in Resume,
// Prepare in Processed or Sync before it takes a checkpoint, Commit when it
// settles a durable checkpoint; the job writes its output on the same
// goroutine between them.
type Sink interface {
	// Recover settles what an earlier owner of the store left: it commits
	// the transactions prepared up to at.Checkpoint and drops the later
	// ones and any open one. It is called once, before any Prepare, and
	// again never. An error fails Resume.
	Recover(ctx context.Context, at Recovery) error
	// Prepare closes the open transaction as the transaction of checkpoint
	// id, durably. Ids only go up. An error fails the checkpoint, which is
	// then not taken.
	Prepare(ctx context.Context, id uint64) error
	// Commit commits every transaction prepared up to id: checkpoint id is
	// durable. A transaction whose commit fails stays prepared, and the
	// next Commit (or a Recover) commits it.
	Commit(ctx context.Context, id uint64) error
}

// Recovery is where a Loop resumed, for Sink.Recover.
type Recovery struct {
	// Checkpoint is the id of the checkpoint restored, 0 for a fresh
	// start.
	Checkpoint uint64
	// Epoch is the owner epoch of the store now: higher than that of every
	// earlier owner, which the store has fenced. A sink that keeps the
	// transactions of each owner apart can refuse those of a fenced owner
	// still running.
	Epoch uint64
}

// crashPoint is called at each step of a checkpoint's commit that a crash
// could interrupt, named; the tests that kill the process at every point
// set it. It does nothing otherwise.
var crashPoint = func(point string) {}
