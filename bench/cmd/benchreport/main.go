// Command benchreport runs the bench/ suite and renders its results as a
// Markdown report of ratios against the peers, plus SVG charts of capture
// time against state size and of full against incremental checkpoint size.
//
// Usage, from the bench directory (or from anywhere in the repository with
// GOWORK=$PWD/modules.work, which lists the bench module):
//
//	go run ./cmd/benchreport [-bench regexp] [-benchtime d] [-count n] [-in file] [-out dir] [-readme file]
//
// By default it runs go test -run '^$' -bench <regexp> in the bench
// package's directory (module github.com/cowstate/cowstate/bench), streaming
// the output to stderr and saving it to <out>/bench.txt; with -in it reads
// that output from a file instead. It writes <out>/report.md,
// <out>/capture.svg and <out>/checkpoint.svg (a chart whose benchmark is
// not in the output is skipped with a note). -out defaults to bench-report
// in the current directory. With -readme it also rewrites the headline
// table of that file (the README's performance table, between
// <!-- benchreport:headline --> markers) from the same results: the job,
// capture, snapshot and checkpoint figures with their bounds, and the CPU
// go test named; a run lacking one of them is an error that names it
// (scripts/readme-figures runs them all).
//
// go test matches -bench per level of the name and unanchored, so
// "Capture/size=1000/" also runs size=10000000; anchor each level to run
// one case: -bench '^BenchmarkCapture$/^size=1000$/'.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	bench := flag.String("bench", ".", "benchmark regexp passed to go test -bench")
	benchtime := flag.String("benchtime", "", "go test -benchtime (default: go test's)")
	count := flag.Int("count", 1, "go test -count; the median of the runs is reported")
	in := flag.String("in", "", "parse this go test -bench output instead of running the suite")
	out := flag.String("out", "bench-report", "directory for bench.txt, report.md and the charts")
	readme := flag.String("readme", "", "also rewrite the headline table of this file (the README) from the run")
	flag.Parse()
	if err := run(*bench, *benchtime, *count, *in, *out, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// run produces the report in dir from the file in, or from a fresh run of
// the suite when in is empty, and rewrites readme's headline table if
// readme is not empty.
func run(bench, benchtime string, count int, in, dir, readme string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var raw []byte
	var runErr error
	if in != "" {
		var err error
		if raw, err = os.ReadFile(in); err != nil {
			return err
		}
	} else {
		raw, runErr = runSuite(bench, benchtime, count)
		if err := os.WriteFile(filepath.Join(dir, "bench.txt"), raw, 0o644); err != nil {
			return err
		}
	}
	results, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return errors.Join(runErr, errors.New("no benchmark results in the output"))
	}
	if readme != "" {
		if err := rewriteHeadline(readme, results, ParseEnvironment(bytes.NewReader(raw))); err != nil {
			return err
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, BuildTables(results)); err != nil {
		return err
	}
	md.WriteString("\n## Charts\n\n")
	for _, c := range []struct {
		file string
		draw func([]Result, string) error
	}{{"capture.svg", CaptureChart}, {"checkpoint.svg", CheckpointChart}} {
		err := c.draw(results, filepath.Join(dir, c.file))
		switch {
		case errors.Is(err, errNoData):
			note := fmt.Sprintf("%s skipped: %v.", c.file, err)
			fmt.Fprintln(os.Stderr, "benchreport:", note)
			fmt.Fprintf(&md, "- %s\n", note)
		case err != nil:
			return fmt.Errorf("%s: %w", c.file, err)
		default:
			fmt.Fprintf(&md, "![%s](%s)\n\n", c.file, c.file)
		}
	}
	report := filepath.Join(dir, "report.md")
	if err := os.WriteFile(report, md.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchreport: wrote %s (%d benchmarks)\n", report, len(results))
	return runErr
}

// benchPackage is the package of the suite, found by go list so that the
// command runs from the bench module or from anywhere in the workspace.
const benchPackage = "github.com/cowstate/cowstate/bench"

// runSuite runs the bench suite in its package directory, copying its
// output to stderr as it comes, and returns the standard output.
func runSuite(bench, benchtime string, count int) ([]byte, error) {
	dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", benchPackage).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s (run from the bench module or the repository): %w", benchPackage, err)
	}
	root := strings.TrimSpace(string(dir))
	args := []string{"test", "-run", "^$", "-bench", bench, "-count", strconv.Itoa(count)}
	if benchtime != "" {
		args = append(args, "-benchtime", benchtime)
	}
	args = append(args, ".")
	fmt.Fprintf(os.Stderr, "benchreport: go %s (in %s)\n", strings.Join(args, " "), root)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	var stdout bytes.Buffer
	cmd.Stdout = io.MultiWriter(&stdout, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("go test: %w", err)
	}
	return stdout.Bytes(), nil
}

// rewriteHeadline replaces the headline table of the file at path with the
// one of results.
func rewriteHeadline(path string, results []Result, env Environment) error {
	table, err := Headline(results, env, time.Now().UTC().Format("2006-01-02"))
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if doc, err = ReplaceHeadline(doc, table); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchreport: rewrote the headline table of %s\n", path)
	return nil
}
