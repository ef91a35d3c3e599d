package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contrib/protocodec"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/statetable"
)

// The savepoint commands read, check, rewrite and write savepoint files
// (package savepoint): "cowstate savepoint <subcommand>".
var savepointCmd = &command{
	name:      "savepoint",
	usageLine: "savepoint <list | dump | check | rewrite | bootstrap> [arguments]",
	short:     "list, dump, check, rewrite and bootstrap savepoint files",
	long: `Savepoint works on savepoint files outside a running job (package
savepoint). A savepoint is a file cowstate.WriteSavepoint (or a checkpoint
store's savepoint, or a full checkpoint segment) wrote; these commands
read it from a local path. The subcommands are:

  list       the states and timer services, with their kinds, codec IDs
             (schemas) and entry counts
  dump       states and timers (all, or some states, key groups or a key
             range) as JSON lines
  check      what restoring it into a job would do with each state, from
             the job's schema, before the job is deployed
  rewrite    a new savepoint with states dropped or renamed, keys
             filtered, or another max parallelism
  bootstrap  a savepoint from JSON lines, for a new job to start with

Use "cowstate help savepoint <subcommand>" for more about one.
`,
}

var savepointListCmd = &command{
	name:      "savepoint list",
	usageLine: "savepoint list [-json] file",
	short:     "list a savepoint's states and timer services",
	hidden:    true,
	long: `List prints the savepoint's max parallelism and key groups, then per
state its name, kind, whether it has a TTL, its number of entries and its
codec IDs (key, namespace, then the values'; a struct codec's ID is its
schema), then per timer service its codecs and its event-time and
processing-time timers. It reads the whole file, checking every section's
checksum. With -json it prints the listing as JSON.
`,
}

var savepointDumpCmd = &command{
	name:      "savepoint dump",
	usageLine: "savepoint dump [-states a,b] [-timers t] [-key-groups first-last] [-key-from k] [-key-to k] file",
	short:     "write a savepoint's states and timers as JSON lines",
	hidden:    true,
	long: `Dump writes what the savepoint holds as JSON lines on standard output:
a header line (max parallelism, states with their kinds and codec IDs,
timer services), then one line per entry and per timer, in file order
(package savepoint, "The dump format"). Values of the built-in codecs and
of struct codecs are JSON values; others are base64 with their codec ID.
cowstate savepoint bootstrap reads the same lines back.

-states and -timers select (both empty: everything); -key-groups limits
the read to a range of key groups; -key-from and -key-to to the keys whose
encoding k has from <= k < to, as bytes (for a string key, the string).
`,
}

var savepointCheckCmd = &command{
	name:      "savepoint check",
	usageLine: "savepoint check -job schema [-rename old=new,...] [-drop name,...] [-json] file",
	short:     "say what a restore of a savepoint into a job would do",
	hidden:    true,
	long: `Check says, per state and timer service of the savepoint, what a restore
into the job would do: restore it as written, migrate its values, drop it,
or refuse it and why (savepoint.Check), judged from codec IDs alone. It
exits with status 1 if anything is refused, so that a deploy stops before
the job starts.

-job is the job's schema: the line savepoint.WriteSchema writes of
savepoint.HeaderOf(cowstate.SavepointMeta(snapshot)) once the job has
registered its states, or a savepoint the new job wrote. -rename and -drop
say what the job says with Backend.RestoreAs and Backend.DropOnRestore.

Keys, namespaces and map user keys never migrate; a struct value whose
fields were added, removed or widened migrates; so does a protocol buffer
message (contrib/protocodec) whose fields changed by protobuf's rules
without narrowing a value. Another change of a value codec is refused
here, since only the job's code can tell whether it reads the old values
(an Evolving codec, cowstate.MigrateFrom): the job's own
checkpoint.CheckRestore judges those.
`,
}

var savepointRewriteCmd = &command{
	name:      "savepoint rewrite",
	usageLine: "savepoint rewrite -o out [-drop name,...] [-rename old=new,...] [-key-groups first-last] [-max-parallelism n] file",
	short:     "write a changed copy of a savepoint",
	hidden:    true,
	long: `Rewrite writes to -o a savepoint of the file's content with states and
timer services dropped (-drop) or renamed (-rename), only the entries and
timers of some key groups kept (-key-groups), and the key groups computed
anew for another max parallelism (-max-parallelism). The output is
canonical: byte for byte what a job holding that content writes. Values
are migrated through a Go function with savepoint.File.Rewrite.

The output is written next to -o and renamed into place once complete and
synced; an existing -o is not replaced.
`,
}

var savepointBootstrapCmd = &command{
	name:      "savepoint bootstrap",
	usageLine: "savepoint bootstrap -o out [file | -]",
	short:     "write a savepoint from JSON lines",
	hidden:    true,
	long: `Bootstrap writes to -o the savepoint that JSON lines describe, read from
the file or standard input: the header line first, then entry and timer
lines in any order (the format cowstate savepoint dump writes; package
savepoint, BootstrapJSON). A line that does not fit is an error naming its
number. Every entry is held in memory until the file is written.

The output is written next to -o and renamed into place once complete and
synced; an existing -o is not replaced.
`,
}

func init() {
	savepointCmd.setup = func(fs *flag.FlagSet) runFunc {
		return func(_ context.Context, args []string, _, _ io.Writer) error {
			if len(args) == 0 {
				return usageError{"need a subcommand: list, dump, check, rewrite or bootstrap"}
			}
			return usageError{fmt.Sprintf("unknown subcommand %q: list, dump, check, rewrite or bootstrap", args[0])}
		}
	}
	savepointListCmd.setup = setupSavepointList
	savepointDumpCmd.setup = setupSavepointDump
	savepointCheckCmd.setup = setupSavepointCheck
	savepointRewriteCmd.setup = setupSavepointRewrite
	savepointBootstrapCmd.setup = setupSavepointBootstrap
}

// openSavepoint opens the one file argument as a savepoint.
func openSavepoint(args []string) (*savepoint.File, func(), error) {
	if len(args) != 1 {
		return nil, nil, usageError{fmt.Sprintf("need one savepoint file, got %d arguments", len(args))}
	}
	return openSavepointFile(args[0])
}

func openSavepointFile(path string) (*savepoint.File, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	var sp *savepoint.File
	if err == nil {
		sp, err = savepoint.Open(f, fi.Size())
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return sp, func() { f.Close() }, nil
}

func setupSavepointList(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the listing as JSON")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		f, done, err := openSavepoint(args)
		if err != nil {
			return err
		}
		defer done()
		l, err := f.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			type stateJSON struct {
				Name    string   `json:"name"`
				Kind    string   `json:"kind"`
				TTL     bool     `json:"ttl,omitempty"`
				Entries int64    `json:"entries"`
				Codecs  []string `json:"codecs"`
			}
			type listingJSON struct {
				Savepoint      bool                     `json:"savepoint"`
				MaxParallelism int                      `json:"max_parallelism"`
				KeyGroups      statetable.KeyGroupRange `json:"key_groups"`
				States         []stateJSON              `json:"states"`
				Timers         []savepoint.TimerSummary `json:"timers"`
			}
			lj := listingJSON{Savepoint: l.Savepoint, MaxParallelism: l.MaxParallelism, KeyGroups: l.KeyGroups, States: []stateJSON{}, Timers: l.Timers}
			for _, s := range l.States {
				lj.States = append(lj.States, stateJSON{s.Name, s.Kind.String(), s.TTL, s.Entries, s.Codecs})
			}
			return writeJSON(stdout, lj)
		}
		what := "savepoint"
		if !l.Savepoint {
			what = "full snapshot (not a savepoint)"
		}
		fmt.Fprintf(stdout, "%s: max parallelism %d, key groups %d-%d, %d with data\n\n", what, l.MaxParallelism, l.KeyGroups.First, l.KeyGroups.Last, l.Sections)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STATE\tKIND\tTTL\tENTRIES\tCODECS")
		for _, s := range l.States {
			ttl := "-"
			if s.TTL {
				ttl = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Name, s.Kind, ttl, s.Entries, strings.Join(s.Codecs, " "))
		}
		if len(l.Timers) > 0 {
			fmt.Fprintln(tw, "\nTIMERS\tEVENT\tPROCESSING\tCODECS")
			for _, t := range l.Timers {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s %s\n", t.Name, t.EventTime, t.ProcessingTime, t.Codecs[0], t.Codecs[1])
			}
		}
		return tw.Flush()
	}
}

// keyGroupsFlag parses "first-last" (or one key group) into a range.
func keyGroupsFlag(s string) (*statetable.KeyGroupRange, error) {
	if s == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return nil, usageError{fmt.Sprintf("-key-groups %q: want first-last, 0 <= first <= last", s)}
	}
	return &statetable.KeyGroupRange{First: first, Last: last}, nil
}

// listFlag splits a comma-separated list.
func listFlag(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// renameFlag parses "old=new,...".
func renameFlag(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		old, name, ok := strings.Cut(p, "=")
		if !ok || old == "" || name == "" {
			return nil, usageError{fmt.Sprintf("-rename %q: want old=new,...", s)}
		}
		m[old] = name
	}
	return m, nil
}

func setupSavepointDump(fs *flag.FlagSet) runFunc {
	states := fs.String("states", "", "the states to dump, comma-separated (default: all, if -timers is empty too)")
	timers := fs.String("timers", "", "the timer services to dump, comma-separated")
	kgs := fs.String("key-groups", "", "only the key groups `first-last`")
	from := fs.String("key-from", "", "only keys whose encoding is at least `k`")
	to := fs.String("key-to", "", "only keys whose encoding is below `k`")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		sel := savepoint.Select{States: listFlag(*states), Timers: listFlag(*timers)}
		var err error
		if sel.KeyGroups, err = keyGroupsFlag(*kgs); err != nil {
			return err
		}
		if *from != "" {
			sel.KeyFrom = []byte(*from)
		}
		if *to != "" {
			sel.KeyTo = []byte(*to)
		}
		f, done, err := openSavepoint(args)
		if err != nil {
			return err
		}
		defer done()
		w := bufio.NewWriterSize(stdout, 1<<16)
		if err := f.Dump(ctx, w, sel); err != nil {
			return err
		}
		return w.Flush()
	}
}

// readJobSchema reads -job: a schema line, or a savepoint the job wrote.
func readJobSchema(path string) (savepoint.Header, error) {
	b, err := os.Open(path)
	if err != nil {
		return savepoint.Header{}, err
	}
	defer b.Close()
	r := bufio.NewReader(b)
	if first, err := r.Peek(1); err == nil && first[0] == '{' {
		h, err := savepoint.ReadSchema(r)
		if err != nil {
			return h, fmt.Errorf("-job %s: %w", path, err)
		}
		return h, nil
	}
	f, done, err := openSavepointFile(path)
	if err != nil {
		return savepoint.Header{}, fmt.Errorf("-job %s is neither a schema line nor a savepoint: %w", path, err)
	}
	defer done()
	return savepoint.HeaderOf(f.Meta()), nil
}

func setupSavepointCheck(fs *flag.FlagSet) runFunc {
	job := fs.String("job", "", "the job's schema `file` (savepoint.WriteSchema), or a savepoint the job wrote")
	rename := fs.String("rename", "", "states and timer services the job restores under new names, `old=new,...`")
	drop := fs.String("drop", "", "states and timer services the job drops, comma-separated")
	asJSON := fs.Bool("json", false, "print the verdicts as JSON")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		if *job == "" {
			return usageError{"need -job, the job's schema"}
		}
		opts := savepoint.CheckOptions{Drop: listFlag(*drop), Reads: readsByID}
		var err error
		if opts.Rename, err = renameFlag(*rename); err != nil {
			return err
		}
		h, err := readJobSchema(*job)
		if err != nil {
			return err
		}
		f, done, err := openSavepoint(args)
		if err != nil {
			return err
		}
		defer done()
		checks, err := savepoint.Check(f.Meta(), h, opts)
		if err != nil {
			return err
		}
		refused := 0
		type checkJSON struct {
			Name    string `json:"name"`
			Timers  bool   `json:"timers,omitempty"`
			As      string `json:"as,omitempty"`
			Verdict string `json:"verdict"`
			Reason  string `json:"reason,omitempty"`
		}
		var out []checkJSON
		for _, c := range checks {
			cj := checkJSON{Name: c.Name, Timers: c.Timers, As: c.As, Verdict: c.Verdict.String()}
			if c.Err != nil {
				cj.Reason = c.Err.Error()
			}
			if c.Verdict == cowstate.Refused {
				refused++
			}
			out = append(out, cj)
		}
		if *asJSON {
			if err := writeJSON(stdout, out); err != nil {
				return err
			}
		} else {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			for _, c := range out {
				what, as := "state", ""
				if c.Timers {
					what = "timers"
				}
				if c.As != "" && c.As != c.Name {
					as = " as " + c.As
				}
				fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\n", what, c.Name, c.Verdict, as, c.Reason)
			}
			tw.Flush()
		}
		if refused > 0 {
			if !*asJSON {
				fmt.Fprintf(stdout, "refused: %d of %d; the restore would fail\n", refused, len(out))
			}
			return exitError(1)
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "ok: the job restores all %d\n", len(out))
		}
		return nil
	}
}

// writeOutput writes a new file at path through write: into a temporary
// file in path's directory, synced and renamed into place; an existing
// path is not replaced.
func writeOutput(path string, write func(w io.Writer) error) (err error) {
	if path == "" {
		return usageError{"need -o, the output file"}
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: remove it or give another -o", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// Link, not rename: it fails rather than replace a file that appeared
	// meanwhile.
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return os.Remove(tmp.Name())
}

func setupSavepointRewrite(fs *flag.FlagSet) runFunc {
	out := fs.String("o", "", "the output `file`")
	drop := fs.String("drop", "", "states and timer services to leave out, comma-separated")
	rename := fs.String("rename", "", "states and timer services to rename, `old=new,...`")
	kgs := fs.String("key-groups", "", "keep only the entries and timers of key groups `first-last`")
	maxPar := fs.Int("max-parallelism", 0, "the output's max parallelism (default: the file's)")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		rw := savepoint.Rewrite{Drop: listFlag(*drop), MaxParallelism: *maxPar}
		var err error
		if rw.Rename, err = renameFlag(*rename); err != nil {
			return err
		}
		keep, err := keyGroupsFlag(*kgs)
		if err != nil {
			return err
		}
		f, done, err := openSavepoint(args)
		if err != nil {
			return err
		}
		defer done()
		if keep != nil {
			n := f.Meta().MaxParallelism
			if keep.Last >= n {
				return usageError{fmt.Sprintf("-key-groups %s: the savepoint has key groups 0-%d", *kgs, n-1)}
			}
			rw.Keep = func(_ string, key, _ []byte) bool { return keep.Contains(statetable.KeyGroupOfKey(key, n)) }
		}
		if err := writeOutput(*out, func(w io.Writer) error { return f.Rewrite(ctx, w, rw) }); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
		return nil
	}
}

func setupSavepointBootstrap(fs *flag.FlagSet) runFunc {
	out := fs.String("o", "", "the output `file`")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		var in io.Reader = os.Stdin
		switch {
		case len(args) > 1:
			return usageError{fmt.Sprintf("need one input file (or - or none for standard input), got %d", len(args))}
		case len(args) == 1 && args[0] != "-":
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		err := writeOutput(*out, func(w io.Writer) error { return savepoint.BootstrapJSON(ctx, w, in) })
		if err != nil {
			if errors.Is(err, savepoint.ErrLine) && len(args) == 1 {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
		return nil
	}
}

// readsByID judges, for savepoint check, a change of value codec that is
// not between two Struct schemas: between two protocodec schemas it is
// protocodec.Reads; any other is refused, as only the job's code can judge
// it.
func readsByID(cur, old string) error {
	if strings.HasPrefix(cur, "protobuf ") && strings.HasPrefix(old, "protobuf ") {
		return protocodec.Reads(cur, old)
	}
	return fmt.Errorf("value codec %s in the savepoint, %s in the job: only the job can tell whether it reads the old values (an Evolving codec, or cowstate.MigrateFrom; checkpoint.CheckRestore in the job judges it)", old, cur)
}
