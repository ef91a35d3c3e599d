// Cowstate runs the cowstate demo job, inspects and verifies checkpoint
// stores, and reads, checks, rewrites and writes savepoint files.
//
// Usage:
//
//	cowstate <command> [arguments]
//
// The commands are:
//
//	demo     run a keyed streaming job with checkpoints, a crash, a restore and a rescale
//	inspect  list the checkpoints and savepoints of a checkpoint store
//	verify   check that every checkpoint of a store restores
//	savepoint list, dump, check, rewrite and bootstrap savepoint files
//
// Use "cowstate help <command>" for more information about a command.
//
// Cowstate demo runs per-user session windows (event-time timers, merging
// windows, a running count per user) over a generated stream of user
// events, checkpointing through package checkpoint to a directory or to
// object storage (-store URL), crashes part-way, restores the newest
// checkpoint into a fresh backend and into backends that split the key
// groups, replays the stream from the checkpoint's offset, and checks that
// the results equal those of an uninterrupted run. With -instances n the
// checkpointed job runs as n processes, killed at the crash, and the
// restore rescales it to -rescale-to m processes:
//
//	go run -C cmd/cowstate . demo
//	go run -C cmd/cowstate . demo -keys 10000 -events 200000 -keep
//	go run -C cmd/cowstate . demo -instances 4 -rescale-to 3 -dir /tmp/job
//	go run -C cmd/cowstate . inspect /tmp/cowstate-demo-123
//	go run -C cmd/cowstate . verify -store 's3://bucket?prefix=job/&region=...'
//	go run -C cmd/cowstate . savepoint check -job job.schema savepoint-7
//
// The internal command demo-instance is one process of such a job; cowstate
// demo starts it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
)

// command is one subcommand, in the style of the go tool's.
type command struct {
	name      string
	usageLine string // after "cowstate "
	short     string
	long      string
	hidden    bool // internal: not in the list of commands
	// setup defines the command's flags on fs and returns the function
	// that runs the command with the arguments left after flag parsing;
	// an error of type usageError prints the usage.
	setup func(fs *flag.FlagSet) runFunc
}

type runFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// usageError is a mistake on the command line: it is reported with the
// command's usage and exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitError carries an exit status without a message of its own (the
// command printed what went wrong).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

var commands = []*command{demoCmd, inspectCmd, verifyCmd, savepointCmd, instanceCmd,
	savepointListCmd, savepointDumpCmd, savepointCheckCmd, savepointRewriteCmd, savepointBootstrapCmd}

var demoCmd = &command{
	name:      "demo",
	usageLine: "demo [-keys n] [-events n] [-checkpoint-every n] [-store url | -dir dir] [-keep] [-instances n] [-rescale-to m] [flags]",
	short:     "run a keyed streaming job with checkpoints, a crash, a restore and a rescale",
	long: `Demo runs a keyed streaming job on the cowstate engine and checks that
recovery from its checkpoints is exact.

The job computes per-user session windows over a generated stream of user
events (event time mostly increasing, some events out of order, a few so
late that they are dropped and counted): each event extends or opens a
session window of the user, overlapping windows merge, an event-time timer
per window emits the session's count and sum when the watermark passes its
end, and a running count per user is kept, forgotten after the user has
been idle for -state-ttl of processing time. The stream is deterministic
(seeded), so every run of it gives the same results.

Demo runs the stream four times:

  uninterrupted  the whole stream on one backend, for reference;
  checkpointed   the same job checkpointing to the store every
                 -checkpoint-every events through package checkpoint
                 (full or incremental, as the default policy decides),
                 until it crashes after -crash-at events: its backend is
                 dropped;
  restored       a fresh backend restores the newest checkpoint, replays the
                 stream from the checkpoint's offset (its id is the number
                 of events it covers) and finishes it, checkpointing on;
  rescaled       -rescale-to backends restore the same checkpoint, each the
                 key groups statetable.RangeForOperator gives it, and finish
                 the stream with each event routed to the backend owning
                 its key's key group.

With -instances n (more than 1) the job runs in processes of its own,
each owning an even share of the key groups, reading the whole stream and
processing the events of its keys:

  checkpointed   n processes checkpoint into the one store, each with
                 checkpoint.OpenInstance under a prefix naming its key
                 groups, at the same offsets (a checkpoint that falls due
                 while the last one is being written waits for it); each
                 stops after -crash-at events, once its checkpoints are
                 written, and demo kills them all (SIGKILL);
  rescaled       -rescale-to processes split the key groups anew, each
                 restores its own from the newest complete job checkpoint
                 (checkpoint.RestoreInstances), replays the stream from its
                 offset and finishes it, checkpointing on.

There is no restored run of the same parallelism then (-rescale-to n is
one). The processes are this program (cowstate demo-instance, internal);
each reports to demo on its standard output, and their progress and
errors come out on demo's standard error.

Session results go to an exactly-once sink (committed when a checkpoint is
confirmed, recovered to the restored checkpoint); with -instances, each
process's sink commits its own transactions, in files in a temporary
directory that outlives the processes, and every process of the rescaled
job recovers the crashed job's. At the end demo compares the committed
session results and the per-user counts of the restored and the rescaled
runs with the uninterrupted run's, prints a table of the checkpoints
(kind, entries changed, bytes written, capture and write time; with
-instances one row per job checkpoint, the kind "mixed" when its
instances chose differently) and of the restore times, and exits with
status 1 if anything differs.

The checkpoints go to -store, a URL: a directory (a path or
file:///path), s3://bucket?prefix=..., gs://, azblob:// or, in one
process only, mem://; the credentials come from the environment (for S3,
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), and messages name the store
without the URL's query but its prefix. For an S3-compatible server on
this machine:

  s3://bucket?prefix=demo/&endpoint=http://127.0.0.1:9000&region=us-east-1
    &use_path_style=true&disable_https=true
    &request_checksum_calculation=when_required   (one line)

The store must hold nothing: demo restores the newest checkpoint it finds
there. -dir dir is -store dir. Without either, demo uses a temporary
directory, removed at the end unless -keep.

Progress goes to standard error every -progress, the summary to standard
output. The defaults finish in well under a minute on two cores; use
smaller -keys and -events for a quick look, and -keep (or -store) to look
at the store afterwards with cowstate inspect and cowstate verify.
`,
}

var inspectCmd = &command{
	name:      "inspect",
	usageLine: "inspect [-v] [-json] (dir | -store url)",
	short:     "list the checkpoints and savepoints of a checkpoint store",
	long: `Inspect lists what the checkpoint store in directory dir, or at -store
url (see cowstate help demo), holds, as its newest intact manifest says
(checkpoint.Inspect): the manifest, the owner epoch that committed it and
when, then for each checkpoint and savepoint its id, kind (full,
incremental or savepoint), commit time, the length of its chain of
segments, its size (all segments), its timers and key groups, and the
entries of each of its states. With -v it also lists each checkpoint's
segments; with -json it prints the listing as JSON.

A job store, where each instance of a job keeps its store under a prefix
naming its key groups (checkpoint.OpenInstance, cowstate demo -instances),
is listed as its job checkpoints (checkpoint.ListJob: an id, the
instances that committed it, and whether they cover every key group),
then each instance's store as above.

A store with no manifest is not a store: inspect says "no checkpoint
store at dir" and exits with status 1. A damaged newer manifest is
reported on standard error, after the listing of the newest intact one,
with exit status 1.

Inspect only reads manifests; cowstate verify checks the segments too.
`,
}

var verifyCmd = &command{
	name:      "verify",
	usageLine: "verify [-json] (dir | -store url)",
	short:     "check that every checkpoint of a store restores",
	long: `Verify checks the checkpoint store in directory dir, or at -store url
(see cowstate help demo), without restoring it or taking it over
(checkpoint.Verify): the manifests decode, and every segment each
checkpoint and savepoint references exists, is a regular file with the
size and xxhash64 the manifest records, decodes as the format it claims,
and holds the delta and key groups the manifest says.

It prints, per checkpoint and savepoint, whether it restores, then each
damaged object with its problem. It exits with status 1 if anything is
damaged, if the store holds no checkpoint or savepoint, or if it is not
a checkpoint store, and otherwise with 0 after "ok: N checkpoints and
savepoints, all restore". With -json it prints the report as JSON.

A job store (see cowstate help inspect) is verified instance by
instance, and a job checkpoint restores if it is complete and each of its
instances' checkpoints restores; verify exits with status 1 if anything
is damaged or no complete job checkpoint restores.
`,
}

var instanceCmd = &command{
	name:      "demo-instance",
	usageLine: "demo-instance -store url -instance i -of n -sink dir [flags]",
	short:     "internal: one process of cowstate demo -instances",
	hidden:    true,
	long: `Demo-instance is internal to cowstate demo, which starts it: it is one
process of the demo's job when that runs as several (cowstate demo
-instances n -rescale-to m). Its flags and its output may change
without notice.

It owns the key groups statetable.RangeForOperator gives instance i of
n, reads the whole generated stream and processes the events of its
keys, checkpointing with checkpoint.OpenInstance into the job's store
-store at the offsets every instance checkpoints at, its session results
going to the job's sink in directory -sink. With -restore id it first
restores its key groups from job checkpoint id (checkpoint.RestoreInstances)
and replays the stream from there. With -crash-at n it stops after n
events, once its checkpoints are written, and waits to be killed. It
reports to cowstate demo as one line of JSON on standard output, and
prints progress and errors on standard error.
`,
}

func init() {
	demoCmd.setup = setupDemo
	instanceCmd.setup = setupInstance
	inspectCmd.setup = setupInspect
	verifyCmd.setup = setupVerify
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		mainUsage(stderr)
		return 2
	}
	switch args[0] {
	case "help":
		return help(args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		mainUsage(stdout)
		return 0
	}
	args = subcommand(args)
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "cowstate %s: unknown command\nRun 'cowstate help' for usage.\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { cmdUsage(stderr, cmd) }
	runCmd := cmd.setup(fs)
	rest, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	err = runCmd(ctx, rest, stdout, stderr)
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "cowstate %s: %s\n", cmd.name, ue.msg)
		cmdUsage(stderr, cmd)
		return 2
	case errors.As(err, &ee):
		return int(ee)
	default:
		fmt.Fprintf(stderr, "cowstate %s: %v\n", cmd.name, err)
		return 1
	}
}

// parseInterspersed parses the flags of args wherever they stand, before or
// after the arguments ("inspect DIR -json" as "inspect -json DIR"), and
// returns the arguments in order; everything after "--" is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// Parse stops at the first argument that is no flag, or just
		// after a "--".
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// subcommand joins a command and its subcommand ("savepoint list") into
// the one name the command is registered under.
func subcommand(args []string) []string {
	if len(args) > 1 && lookup(args[0]+" "+args[1]) != nil {
		return append([]string{args[0] + " " + args[1]}, args[2:]...)
	}
	return args
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// mainUsage prints the list of commands.
func mainUsage(w io.Writer) {
	fmt.Fprint(w, "Cowstate runs the cowstate demo job, inspects and verifies checkpoint stores,\nand reads, checks, rewrites and writes savepoint files.\n\nUsage:\n\n\tcowstate <command> [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "\t%-9s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, "\nUse \"cowstate help <command>\" for more information about a command.\n")
}

// cmdUsage prints a command's usage line and where to read more, as the go
// command does after a mistake on its command line.
func cmdUsage(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "usage: cowstate %s\nRun 'cowstate help %s' for details.\n", cmd.usageLine, cmd.name)
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// help implements "cowstate help [command]".
func help(args []string, stdout, stderr io.Writer) int {
	args = subcommand(args)
	switch len(args) {
	case 0:
		mainUsage(stdout)
		return 0
	case 1:
	default:
		fmt.Fprintf(stderr, "usage: cowstate help command\n\nToo many arguments given.\n")
		return 2
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "cowstate help %s: unknown help topic. Run 'cowstate help'.\n", args[0])
		return 2
	}
	fmt.Fprintf(stdout, "usage: cowstate %s\n\n%s", cmd.usageLine, cmd.long)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cmd.setup(fs)
	if hasFlags(fs) {
		fmt.Fprintln(stdout, "\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	return 0
}

// setupDemo is "cowstate demo".
func setupDemo(fs *flag.FlagSet) runFunc {
	cfg := &demoConfig{}
	cfg.flags(fs)
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) > 0 {
			return usageError{"unexpected arguments: " + strings.Join(args, " ")}
		}
		if err := cfg.check(); err != nil {
			return usageError{err.Error()}
		}
		// The demo's state is millions of small heap objects: a higher GC
		// target trades memory (about 450 MB at the defaults) for a sixth
		// less CPU. GOGC in the environment wins.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(200)
		}
		return runDemo(ctx, cfg, stdout, stderr)
	}
}
