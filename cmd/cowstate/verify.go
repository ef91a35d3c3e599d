package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cowstate/cowstate/checkpoint"
)

// setupVerify is "cowstate verify".
func setupVerify(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the report as JSON")
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
		return verify(ctx, st, *asJSON, stdout)
	}
}

// verify checks the store with checkpoint.Verify and reports, per
// checkpoint and savepoint, whether it restores, then each damaged object.
// Exit status 1 if anything is damaged or nothing restores.
func verify(ctx context.Context, st checkpoint.Storage, asJSON bool, stdout io.Writer) error {
	rep, err := checkpoint.Verify(ctx, st)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		if job, jerr := listJob(ctx, st); jerr != nil || job != nil {
			if jerr != nil {
				return jerr
			}
			return verifyJob(ctx, job, asJSON, stdout)
		}
	}
	if err != nil {
		return storeErr(st, err)
	}
	restorable := 0
	for _, c := range rep.Checkpoints {
		if c.Restores {
			restorable++
		}
	}
	if asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		if rep.Manifest != "" {
			fmt.Fprintf(stdout, "store %s, manifest %s\n", rep.Storage, rep.Manifest)
		}
		writeReport(stdout, rep, "")
		switch {
		case !rep.Intact() && restorable > 0:
			fmt.Fprintf(stdout, "FAIL: %d problems; %d of %d checkpoints and savepoints restore\n", len(rep.Damage), restorable, len(rep.Checkpoints))
		case !rep.Intact():
			fmt.Fprintf(stdout, "FAIL: %d problems; no checkpoint or savepoint restores\n", len(rep.Damage))
		case len(rep.Checkpoints) == 0:
			fmt.Fprintln(stdout, "FAIL: the store holds no checkpoint or savepoint")
		default:
			fmt.Fprintf(stdout, "ok: %d checkpoints and savepoints, all restore\n", len(rep.Checkpoints))
		}
	}
	if !rep.Intact() || restorable == 0 {
		return exitError(1)
	}
	return nil
}

// writeReport prints, each line after indent, whether each checkpoint of
// rep restores, then each damaged object.
func writeReport(w io.Writer, rep *checkpoint.Report, indent string) {
	for _, c := range rep.Checkpoints {
		verdict := "restores"
		if !c.Restores {
			verdict = "DOES NOT RESTORE: " + strings.Join(c.Problems, "; ")
		}
		fmt.Fprintf(w, "%s%s %d: %s\n", indent, c.Kind, c.ID, verdict)
	}
	for _, d := range rep.Damage {
		fmt.Fprintf(w, "%sdamaged: %s\n", indent, d)
	}
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
