package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
)

// setupInspect is "cowstate inspect".
func setupInspect(fs *flag.FlagSet) runFunc {
	verbose := fs.Bool("v", false, "list the segments of each checkpoint")
	asJSON := fs.Bool("json", false, "print the listing as JSON")
	storeURL := fs.String("store", "", "the checkpoint store's `URL` (a directory, s3://, gs://, azblob://), instead of a directory argument")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		raw, err := storeArg(*storeURL, args)
		if err != nil {
			return err
		}
		st, err := openExisting(ctx, raw)
		if err != nil {
			return err
		}
		return inspect(ctx, st, *verbose, *asJSON, stdout, stderr)
	}
}

// verifyHint is the command line that verifies st, for messages.
func verifyHint(st checkpoint.Storage) string {
	if d, ok := st.(*checkpoint.DirStorage); ok {
		return fmt.Sprintf("'cowstate verify %s'", d)
	}
	return fmt.Sprintf("'cowstate verify -store URL' with the URL of %s", st)
}

// storeErr words the errors of opening a store for the command line.
func storeErr(st checkpoint.Storage, err error) error {
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return fmt.Errorf("no checkpoint store at %s (no manifest)", st)
	}
	return err
}

// inspect lists the checkpoints and savepoints of the store. Damaged newer
// manifests are reported on stderr and make the exit status 1, after the
// listing of the newest intact one.
func inspect(ctx context.Context, st checkpoint.Storage, verbose, asJSON bool, stdout, stderr io.Writer) error {
	l, err := checkpoint.Inspect(ctx, st)
	if l == nil {
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			if job, jerr := listJob(ctx, st); jerr != nil || job != nil {
				if jerr != nil {
					return jerr
				}
				return inspectJob(ctx, job, verbose, asJSON, stdout, stderr)
			}
		}
		return storeErr(st, err)
	}
	if asJSON {
		if err := writeJSON(stdout, l); err != nil {
			return err
		}
	} else {
		writeListing(stdout, l, verbose)
	}
	if err != nil || len(l.Skipped) > 0 {
		for _, d := range l.Skipped {
			fmt.Fprintf(stderr, "cowstate inspect: damaged: %s\n", d.Problem)
		}
		fmt.Fprintf(stderr, "cowstate inspect: run %s to check the whole store\n", verifyHint(st))
		return exitError(1)
	}
	return nil
}

func writeListing(w io.Writer, l *checkpoint.Listing, verbose bool) {
	fmt.Fprintf(w, "store %s: %s, owner epoch %d, committed %s\n", l.Storage, l.Manifest, l.Epoch, l.Committed.Format(time.RFC3339))
	ms := append(slices.Clone(l.Checkpoints), l.Savepoints...)
	if len(ms) == 0 {
		fmt.Fprintln(w, "no checkpoint or savepoint yet")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tCOMMITTED\tCHAIN\tSIZE\tTIMERS\tKEY GROUPS\tSTATES (entries)")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%v\t%s\n", m.ID, m.Kind, m.Committed.Format(time.RFC3339), chain(m), formatBytes(m.Size()), m.Timers, m.KeyGroups, states(m))
	}
	tw.Flush()
	if verbose {
		for _, m := range ms {
			fmt.Fprintf(w, "\n%s %d:\n", m.Kind, m.ID)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, s := range m.Segments {
				what := "full snapshot"
				if s.Delta {
					what = fmt.Sprintf("delta %d -> %d", s.Base, s.Target)
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\txxhash64 %s\n", s.Name, what, formatBytes(s.Size), s.Sum)
			}
			tw.Flush()
		}
	}
}

// chain describes a checkpoint's segments: "full" or "full+3 deltas".
func chain(m *checkpoint.Manifest) string {
	switch n := len(m.Segments) - 1; n {
	case 0:
		return "full"
	case 1:
		return "full+1 delta"
	default:
		return fmt.Sprintf("full+%d deltas", n)
	}
}

// states renders the entries per state, by name.
func states(m *checkpoint.Manifest) string {
	names := make([]string, 0, len(m.States))
	for n := range m.States {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", n, m.States[n])
	}
	return b.String()
}
