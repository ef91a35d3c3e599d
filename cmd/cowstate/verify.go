package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/cowstate/cowstate"
)

// setupVerify is "cowstate verify".
func setupVerify(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		dir, err := storeDir(args)
		if err != nil {
			return err
		}
		return verify(dir, stdout)
	}
}

// verify checks the store in dir with cowstate.VerifyStore and reports
// each damaged file; damage is exit status 1.
func verify(dir string, stdout io.Writer) error {
	st, err := cowstate.DirStorage(dir)
	if err != nil {
		return err
	}
	damage, err := cowstate.VerifyStore(st)
	if err != nil {
		return err
	}
	if len(damage) > 0 {
		for _, d := range damage {
			fmt.Fprintf(stdout, "damaged: %s\n", d)
		}
		fmt.Fprintf(stdout, "FAIL: %d problems in %s; an older checkpoint may still restore (cowstate inspect %[2]s lists them)\n", len(damage), dir)
		return exitError(1)
	}
	// The manifests all decode (else VerifyStore reports them): count them
	// and the distinct files they reference.
	ms, err := cowstate.ListCheckpoints(st)
	if err != nil {
		return err
	}
	files := map[string]bool{}
	checkpoints, savepoints := 0, 0
	for _, m := range ms {
		if m.Kind == cowstate.SavepointKind {
			savepoints++
		} else {
			checkpoints++
		}
		files[fmt.Sprintf("manifest %s %d", m.Kind, m.ID)] = true
		for _, s := range m.Segments {
			files[s.Name] = true
		}
	}
	fmt.Fprintf(stdout, "ok: %d checkpoints, %d savepoints, %d files verified\n", checkpoints, savepoints, len(files))
	return nil
}
