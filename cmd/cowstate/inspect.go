package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cowstate/cowstate"
)

// setupInspect is "cowstate inspect".
func setupInspect(fs *flag.FlagSet) runFunc {
	verbose := fs.Bool("v", false, "list the segment files of each checkpoint")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		dir, err := storeDir(args)
		if err != nil {
			return err
		}
		return inspect(dir, *verbose, stdout, stderr)
	}
}

// storeDir returns the one argument of inspect and verify, a store
// directory that must exist (DirStorage would create it).
func storeDir(args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError{"need exactly one argument, the checkpoint directory"}
	}
	fi, err := os.Stat(args[0])
	if err != nil {
		return "", fmt.Errorf("%w (give the -dir of a cowstate demo run with -keep, or another checkpoint directory)", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory: give a checkpoint directory", args[0])
	}
	return args[0], nil
}

// inspect lists the checkpoints and savepoints of the store in dir. A
// manifest that does not decode is reported on stderr and makes the exit
// status 1, after the others are listed.
func inspect(dir string, verbose bool, stdout, stderr io.Writer) error {
	st, err := cowstate.DirStorage(dir)
	if err != nil {
		return err
	}
	ms, listErr := cowstate.ListCheckpoints(st)
	if len(ms) == 0 && listErr == nil {
		fmt.Fprintf(stdout, "%s holds no committed checkpoint or savepoint\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tCHAIN\tSIZE\tTIMERS\tKEY GROUPS\tSTATES (entries)")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%v\t%s\n", m.ID, m.Kind, chain(m), formatBytes(m.Size()), m.Timers, m.KeyGroups, states(m))
	}
	tw.Flush()
	if verbose {
		for _, m := range ms {
			fmt.Fprintf(stdout, "\n%s %d:\n", m.Kind, m.ID)
			tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
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
	if listErr != nil {
		fmt.Fprintf(stderr, "cowstate inspect: %v\n", listErr)
		fmt.Fprintf(stderr, "cowstate inspect: run 'cowstate verify %s' to check the whole store\n", dir)
		return exitError(1)
	}
	return nil
}

// chain describes a checkpoint's segments: "full" or "full+3 deltas".
func chain(m *cowstate.Manifest) string {
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
func states(m *cowstate.Manifest) string {
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
