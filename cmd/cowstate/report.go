package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// report collects what the demo measured, for the summary it prints at the
// end.
type report struct {
	checkpoints []checkpointRow
	restored    *checkpoint.Manifest      // in-process demo
	restoredJob *checkpoint.JobCheckpoint // demo of several processes
	restores    []restoreRow
	results     []resultRow
	processes   bool // the restores are processes, not backends
}

type checkpointRow struct {
	run, status    string
	id             uint64
	kind           string
	changed        int
	segments       int
	bytes          int64 // of the checkpoint's own (last) segment
	capture, write time.Duration
}

type restoreRow struct {
	backends  int
	keyGroups statetable.KeyGroupRange
	took      time.Duration
}

type resultRow struct {
	run              string
	sessions, counts digest
	open             int
}

// addCheckpoint records a checkpoint once its handle is done.
// A failure is reported as such unless it is expected (a crash).
func (r *report) addCheckpoint(run string, cp *checkpoint.Checkpoint, status string, failure bool) {
	row := checkpointRow{run: run, status: status, id: cp.ID(), kind: "-", capture: cp.CaptureTime(), write: cp.WriteTime()}
	if err := cp.Wait(); err != nil && failure {
		row.status = "failed: " + err.Error()
	}
	if m := cp.Manifest(); m != nil {
		row.kind, row.changed, row.segments = string(m.Kind), m.Changed, len(m.Segments)
		row.bytes = m.Segments[len(m.Segments)-1].Size
	}
	r.checkpoints = append(r.checkpoints, row)
}

// addJobCheckpoints records the checkpoints of a job's instances, one row
// per checkpoint id: its kind if the instances agree ("mixed" if not),
// their changed entries and bytes added up, the longest segment chain, the
// slowest capture and write, and each status with the number of
// instances if not all of them say it.
func (r *report) addJobCheckpoints(run string, instances []*instanceReport) {
	byID := map[uint64][]checkpointReport{}
	var ids []uint64
	for _, in := range instances {
		for _, c := range in.Checkpoints {
			if byID[c.ID] == nil {
				ids = append(ids, c.ID)
			}
			byID[c.ID] = append(byID[c.ID], c)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		cs := byID[id]
		row := checkpointRow{run: run, id: id, kind: cs[0].Kind}
		var statuses []string
		count := map[string]int{}
		for _, c := range cs {
			if c.Kind != row.kind {
				row.kind = "mixed"
			}
			if count[c.Status]++; count[c.Status] == 1 {
				statuses = append(statuses, c.Status)
			}
			if c.Kind == string(checkpoint.KindIncremental) {
				row.changed += c.Changed
			}
			row.segments = max(row.segments, c.Segments)
			row.bytes += c.Bytes
			row.capture = max(row.capture, c.Capture)
			row.write = max(row.write, c.Write)
		}
		for i, st := range statuses {
			if i > 0 {
				row.status += "; "
			}
			row.status += st
			if count[st] < len(instances) {
				row.status += fmt.Sprintf(" (%d of %d instances)", count[st], len(instances))
			}
		}
		r.checkpoints = append(r.checkpoints, row)
	}
}

// write prints the summary.
func (r *report) write(w io.Writer) {
	fmt.Fprintln(w, "checkpoints:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tid\tkind\tchanged\tsegments\tbytes written\tcapture\twrite\t\tstatus")
	for _, c := range r.checkpoints {
		changed := "-"
		if c.kind == string(checkpoint.KindIncremental) || c.kind == "mixed" {
			changed = fmt.Sprint(c.changed)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t\t%s\n", c.run, c.id, c.kind, changed, c.segments,
			formatBytes(c.bytes), formatDuration(c.capture), formatDuration(c.write), c.status)
	}
	tw.Flush()
	if m := r.restored; m != nil {
		fmt.Fprintf(w, "\nrestores of checkpoint %d (%s, %s, %s):\n", m.ID, m.Kind, chain(m), formatBytes(m.Size()))
	}
	if jc := r.restoredJob; jc != nil {
		var size int64
		for _, m := range jc.Instances {
			size += m.Size()
		}
		fmt.Fprintf(w, "\nrestores of job checkpoint %d (the newest complete: %d instances, key groups %s, %s):\n", jc.ID, len(jc.Instances), rangesString(jc.KeyGroups()), formatBytes(size))
	}
	if len(r.restores) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		if r.processes {
			fmt.Fprintln(tw, "processes\tkey groups\trestore time\t")
		} else {
			fmt.Fprintln(tw, "backends\tkey groups\trestore time\t")
		}
		for _, x := range r.restores {
			fmt.Fprintf(tw, "%d\t%v\t%s\t\n", x.backends, x.keyGroups, formatDuration(x.took))
		}
		tw.Flush()
	}
	if len(r.results) > 0 {
		fmt.Fprintln(w, "\nresults:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "run\tsession results (committed)\tper-user count and late\topen windows\tcompared")
		ref := r.results[0]
		for i, x := range r.results {
			cmp := "reference"
			if i > 0 {
				cmp = "equal"
				if x.sessions != ref.sessions || x.counts != ref.counts || x.open != ref.open {
					cmp = "DIFFERENT"
				}
			}
			fmt.Fprintf(tw, "%s\t%v\t%v\t%d\t%s\n", x.run, x.sessions, x.counts, x.open, cmp)
		}
		tw.Flush()
	}
}

// mismatches returns the runs whose results differ from the first's.
func (r *report) mismatches() []string {
	var bad []string
	for _, x := range r.results[1:] {
		ref := r.results[0]
		var what []string
		if x.sessions != ref.sessions {
			what = append(what, "session results")
		}
		if x.counts != ref.counts {
			what = append(what, "per-user counts")
		}
		if x.open != ref.open {
			what = append(what, "open windows")
		}
		if len(what) > 0 {
			bad = append(bad, fmt.Sprintf("%s: %s differ", x.run, strings.Join(what, ", ")))
		}
	}
	return bad
}

// formatBytes renders a byte count with a binary unit.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// formatDuration rounds a duration to three significant digits or so.
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond).String()
	}
	return d.String()
}
