// Cowstate runs the cowstate demo job and inspects and verifies checkpoint
// stores.
//
// Usage:
//
//	cowstate <command> [arguments]
//
// The commands are:
//
//	demo     run a keyed streaming job with checkpoints, a crash, a restore and a rescale
//	inspect  list the checkpoints and savepoints of a checkpoint store
//	verify   check every file of a checkpoint store
//
// Use "cowstate help <command>" for more information about a command.
//
// Cowstate demo runs per-user session windows (event-time timers, merging
// windows, a running count per user) over a generated stream of user
// events, checkpointing to a directory through cowstate.NewCheckpoints,
// crashes part-way, restores the newest checkpoint into a fresh backend and
// into two backends that split the key groups, replays the stream from the
// checkpoint's offset, and checks that the results equal those of an
// uninterrupted run:
//
//	go run ./cmd/cowstate demo
//	go run ./cmd/cowstate demo -keys 10000 -events 200000 -keep
//	go run ./cmd/cowstate inspect /tmp/cowstate-demo-123
//	go run ./cmd/cowstate verify /tmp/cowstate-demo-123
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

var commands = []*command{demoCmd, inspectCmd, verifyCmd}

var demoCmd = &command{
	name:      "demo",
	usageLine: "demo [-keys n] [-events n] [-checkpoint-every n] [-dir dir] [-keep] [flags]",
	short:     "run a keyed streaming job with checkpoints, a crash, a restore and a rescale",
	long: `Demo runs a keyed streaming job on the cowstate engine and checks that
recovery from its checkpoints is exact.

The job computes per-user session windows over a generated stream of user
events (event time mostly increasing, some events out of order, a few so
late that they are dropped and counted): each event extends or opens a
session window of the user, overlapping windows merge, an event-time timer
per window emits the session's count and sum when the watermark passes its
end, and a running count per user is kept. The stream is deterministic
(seeded), so every run of it gives the same results.

Demo runs the stream four times:

  uninterrupted  the whole stream on one backend, for reference;
  checkpointed   the same job checkpointing to -dir every -checkpoint-every
                 events through cowstate.NewCheckpoints (full or incremental,
                 as the default policy decides), until it crashes after
                 -crash-at events: its backend is dropped;
  restored       a fresh backend restores the newest checkpoint, replays the
                 stream from the checkpoint's offset (its id is the number
                 of events it covers) and finishes it, checkpointing on;
  rescaled       two backends restore the same checkpoint, each the key
                 groups statetable.RangeForOperator gives it, and finish
                 the stream with each event routed to the backend owning
                 its key's key group.

Session results go to an exactly-once sink (committed when a checkpoint is
confirmed, recovered to the restored checkpoint). At the end demo compares
the committed session results and the per-user counts of the restored and
the rescaled runs with the uninterrupted run's, prints a table of the
checkpoints (kind, entries changed, bytes written, capture and write time)
and of the restore times, and exits with status 1 if anything differs.

Progress goes to standard error every -progress, the summary to standard
output. The defaults finish in well under a minute on two cores; use
smaller -keys and -events for a quick look, and -keep (or -dir) to look at
the store afterwards with cowstate inspect and cowstate verify.
`,
}

var inspectCmd = &command{
	name:      "inspect",
	usageLine: "inspect [-v] [-json] dir",
	short:     "list the checkpoints and savepoints of a checkpoint store",
	long: `Inspect lists what the checkpoint store in directory dir holds, as its
newest intact manifest says (checkpoint.Inspect): the manifest, the owner
epoch that committed it and when, then for each checkpoint and savepoint
its id, kind (full, incremental or savepoint), commit time, the length of
its chain of segments, its size (all segments), its timers and key groups,
and the entries of each of its states. With -v it also lists each
checkpoint's segments; with -json it prints the listing as JSON.

A directory with no manifest is not a store: inspect says "no checkpoint
store at dir" and exits with status 1. A damaged newer manifest is
reported on standard error, after the listing of the newest intact one,
with exit status 1.

Inspect only reads manifests; cowstate verify checks the segments too.
`,
}

var verifyCmd = &command{
	name:      "verify",
	usageLine: "verify [-json] dir",
	short:     "check that every checkpoint of a store restores",
	long: `Verify checks the checkpoint store in directory dir without restoring it
or taking it over (checkpoint.Verify): the manifests decode, and every
segment each checkpoint and savepoint references exists, is a regular
file with the size and xxhash64 the manifest records, decodes as the
format it claims, and holds the delta and key groups the manifest says.

It prints, per checkpoint and savepoint, whether it restores, then each
damaged object with its problem. It exits with status 1 if anything is
damaged, if the store holds no checkpoint or savepoint, or if dir is not
a checkpoint store, and otherwise with 0 after "ok: N checkpoints and
savepoints, all restore". With -json it prints the report as JSON.
`,
}

func init() {
	demoCmd.setup = setupDemo
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
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "cowstate %s: unknown command\nRun 'cowstate help' for usage.\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { cmdUsage(stderr, cmd) }
	runCmd := cmd.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	err := runCmd(ctx, fs.Args(), stdout, stderr)
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
	fmt.Fprint(w, "Cowstate runs the cowstate demo job and inspects and verifies checkpoint stores.\n\nUsage:\n\n\tcowstate <command> [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.short)
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
