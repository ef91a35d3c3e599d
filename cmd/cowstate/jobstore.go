package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/cowstate/cowstate/checkpoint"
	"github.com/cowstate/cowstate/statetable"
)

// jobStore is the storage of a job of several instances (a multi-process
// cowstate demo, checkpoint.OpenInstance): no store at its root, one per
// instance under a prefix naming its key-group range
// (checkpoint.InstanceStorage). Inspect and verify read each instance's
// store and say which job checkpoints are complete (checkpoint.ListJob).
type jobStore struct {
	st          checkpoint.Storage
	checkpoints []*checkpoint.JobCheckpoint
	// instances: the ranges of the instances that committed a checkpoint
	// or savepoint, by first then last key group.
	instances []statetable.KeyGroupRange
	// problem: what ListJob could not read (an instance whose manifests
	// are all damaged), "" if nothing.
	problem string
}

// listJob returns the job store in st, or nil if st holds no instance's
// checkpoint.
func listJob(ctx context.Context, st checkpoint.Storage) (*jobStore, error) {
	jcs, err := checkpoint.ListJob(ctx, st)
	if len(jcs) == 0 {
		return nil, err
	}
	j := &jobStore{st: st, checkpoints: jcs}
	if err != nil {
		j.problem = err.Error()
	}
	for _, jc := range jcs {
		for _, r := range jc.KeyGroups() {
			if !slices.Contains(j.instances, r) {
				j.instances = append(j.instances, r)
			}
		}
	}
	slices.SortFunc(j.instances, func(a, b statetable.KeyGroupRange) int {
		if a.First != b.First {
			return a.First - b.First
		}
		return a.Last - b.Last
	})
	return j, nil
}

// jobEntry is one job checkpoint in the JSON of inspect and verify.
type jobEntry struct {
	ID        uint64                     `json:"id"`
	Savepoint bool                       `json:"savepoint"`
	Complete  bool                       `json:"complete"`
	Restores  *bool                      `json:"restores,omitempty"` // verify only
	KeyGroups []statetable.KeyGroupRange `json:"key_groups"`
}

func (j *jobStore) entries() []jobEntry {
	es := make([]jobEntry, len(j.checkpoints))
	for i, jc := range j.checkpoints {
		es[i] = jobEntry{ID: jc.ID, Savepoint: jc.Savepoint, Complete: jc.Complete, KeyGroups: jc.KeyGroups()}
	}
	return es
}

func (j *jobStore) summary() string {
	complete := 0
	for _, jc := range j.checkpoints {
		if jc.Complete {
			complete++
		}
	}
	return fmt.Sprintf("job store %s: %d instances, %d job checkpoints and savepoints (%d complete)", j.st, len(j.instances), len(j.checkpoints), complete)
}

func rangesString(rs []statetable.KeyGroupRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// inspectJob lists a job store: its job checkpoints, then each instance's
// store as inspect lists a store.
func inspectJob(ctx context.Context, j *jobStore, verbose, asJSON bool, stdout, stderr io.Writer) error {
	var ls []*checkpoint.Listing
	var problems []string
	if j.problem != "" {
		problems = append(problems, j.problem)
	}
	for _, r := range j.instances {
		l, err := checkpoint.Inspect(ctx, checkpoint.InstanceStorage(j.st, r))
		if l == nil {
			return err // ListJob read it a moment ago
		}
		ls = append(ls, l)
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, d := range l.Skipped {
			problems = append(problems, d.Problem)
		}
	}
	if asJSON {
		v := struct {
			Storage     string                `json:"storage"`
			Checkpoints []jobEntry            `json:"job_checkpoints"`
			Instances   []*checkpoint.Listing `json:"instances"`
		}{j.st.String(), j.entries(), ls}
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, j.summary())
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tCOMPLETE\tINSTANCES (key groups)")
		for _, jc := range j.checkpoints {
			complete := "no"
			if jc.Complete {
				complete = "yes"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", jc.ID, kindWord(jc.Savepoint), complete, rangesString(jc.KeyGroups()))
		}
		tw.Flush()
		for i, l := range ls {
			fmt.Fprintf(stdout, "\ninstance %v: ", j.instances[i])
			writeListing(stdout, l, verbose)
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "cowstate inspect: damaged: %s\n", p)
		}
		fmt.Fprintf(stderr, "cowstate inspect: run %s to check the whole store\n", verifyHint(j.st))
		return exitError(1)
	}
	return nil
}

func kindWord(savepoint bool) string {
	if savepoint {
		return "savepoint"
	}
	return "checkpoint"
}

// verifyJob verifies each instance's store (checkpoint.Verify) and says
// which job checkpoints restore: the complete ones whose every instance's
// checkpoint restores. Exit status 1 if anything is damaged or no complete
// job checkpoint or savepoint restores.
func verifyJob(ctx context.Context, j *jobStore, asJSON bool, stdout io.Writer) error {
	type key struct {
		r         statetable.KeyGroupRange
		id        uint64
		savepoint bool
	}
	restores := map[key]bool{}
	var reps []*checkpoint.Report
	var problems []string
	if j.problem != "" {
		problems = append(problems, j.problem)
	}
	damaged := 0
	for _, r := range j.instances {
		rep, err := checkpoint.Verify(ctx, checkpoint.InstanceStorage(j.st, r))
		if err != nil {
			return err
		}
		reps = append(reps, rep)
		damaged += len(rep.Damage)
		for _, c := range rep.Checkpoints {
			restores[key{r, c.ID, c.Kind == checkpoint.KindSavepoint}] = c.Restores
		}
	}
	es := j.entries()
	good := 0
	for i, jc := range j.checkpoints {
		ok := jc.Complete
		for _, r := range jc.KeyGroups() {
			ok = ok && restores[key{r, jc.ID, jc.Savepoint}]
		}
		es[i].Restores = &ok
		if ok {
			good++
		}
	}
	if asJSON {
		v := struct {
			Storage     string               `json:"storage"`
			Checkpoints []jobEntry           `json:"job_checkpoints"`
			Instances   []*checkpoint.Report `json:"instances"`
			Problems    []string             `json:"problems,omitempty"`
		}{j.st.String(), es, reps, problems}
		if err := writeJSON(stdout, v); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, j.summary())
		for i, rep := range reps {
			fmt.Fprintf(stdout, "instance %v, manifest %s:\n", j.instances[i], rep.Manifest)
			writeReport(stdout, rep, "  ")
		}
		for _, p := range problems {
			fmt.Fprintf(stdout, "damaged: %s\n", p)
		}
		for _, e := range es {
			verdict := "complete, restores"
			switch {
			case !e.Complete:
				verdict = "incomplete (its instances do not cover the key groups)"
			case !*e.Restores:
				verdict = "complete, DOES NOT RESTORE (see the damage above)"
			}
			fmt.Fprintf(stdout, "job %s %d: %s\n", kindWord(e.Savepoint), e.ID, verdict)
		}
		switch {
		case damaged+len(problems) > 0:
			fmt.Fprintf(stdout, "FAIL: %d problems; %d of %d job checkpoints and savepoints restore\n", damaged+len(problems), good, len(es))
		case good == 0:
			fmt.Fprintln(stdout, "FAIL: no complete job checkpoint or savepoint")
		default:
			fmt.Fprintf(stdout, "ok: %d complete job checkpoints and savepoints, all restore (%d instances)\n", good, len(j.instances))
		}
	}
	if damaged+len(problems) > 0 || good == 0 {
		return exitError(1)
	}
	return nil
}
