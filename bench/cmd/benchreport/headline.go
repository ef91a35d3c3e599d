package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The README's performance table is the headline: a few figures of one run,
// each with the bound the project holds itself to, rendered between these
// markers by -readme.
const (
	headlineBegin = "<!-- benchreport:headline -->"
	headlineEnd   = "<!-- /benchreport:headline -->"
)

// errMissing is matched by the error of a headline whose run lacks a
// benchmark it reads.
var errMissing = errors.New("benchmark missing from the run")

// Environment is what go test printed about the machine of a run.
type Environment struct{ GoOS, GoArch, CPU string }

// ParseEnvironment reads the goos, goarch and cpu lines of go test output.
func ParseEnvironment(r io.Reader) Environment {
	var env Environment
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		switch k {
		case "goos":
			env.GoOS = v
		case "goarch":
			env.GoArch = v
		case "cpu":
			env.CPU = v
		}
	}
	return env
}

// headlineRow is one line of the table: what is measured, cowstate's
// figure, its peer's, and the bound with whether this run met it.
type headlineRow struct{ what, cowstate, peer, bound string }

// figures reads one run's results by benchmark name.
type figures struct {
	byName  map[string]Result
	missing []string
}

func (f *figures) get(name, unit string) float64 {
	r, ok := f.byName[name]
	v, has := r.Metrics[unit]
	if !ok || !has {
		f.missing = append(f.missing, name+" "+unit)
		return 0
	}
	return v
}

// verdict says whether a bound was met.
func verdict(bound string, met bool) string {
	if met {
		return bound + ": met"
	}
	return bound + ": **missed**"
}

// Headline returns the README's table from one run's results, or an error
// matching errMissing that names every benchmark it lacks. The bounds are
// the project's performance targets.
func Headline(results []Result, env Environment, date string) (string, error) {
	f := &figures{byName: map[string]Result{}}
	for _, r := range results {
		f.byName[r.Name] = r
	}
	job := func(keys, every, impl, unit string) float64 {
		return f.get(fmt.Sprintf("BenchmarkJob/keys=%s/dist=uniform/every=%s/impl=%s", keys, every, impl), unit)
	}
	var rows []headlineRow
	for _, keys := range []struct{ n, name string }{{"1000000", "1M"}, {"10000000", "10M"}} {
		c, m := job(keys.n, "none", "cowstate", "ns/op"), job(keys.n, "none", "map", "ns/op")
		rows = append(rows, headlineRow{
			fmt.Sprintf("Job, %s keys, no checkpoints (`BenchmarkJob`)", keys.name),
			fmt.Sprintf("%.0f ns/event", c),
			fmt.Sprintf("map %.0f ns: cowstate at %.2f of its rate", m, m/c),
			verdict(">= 0.5", m/c >= 0.5),
		})
		c1, m1 := job(keys.n, "1s", "cowstate", "ns/op"), job(keys.n, "1s", "map", "ns/op")
		own := c / c1
		ownBound := map[string]float64{"1M": 0.95, "10M": 0.9}[keys.name]
		row := headlineRow{
			fmt.Sprintf("Job, %s keys, checkpoint every 1 s", keys.name),
			fmt.Sprintf("%.0f ns/event, %.2f of its own rate without", c1, own),
			fmt.Sprintf("map %.0f ns", m1),
			verdict(fmt.Sprintf("own rate >= %.2g", ownBound), own >= ownBound),
		}
		if keys.name == "10M" {
			pc, pm := job(keys.n, "1s", "cowstate", "max-pause-ms"), job(keys.n, "1s", "map", "max-pause-ms")
			hc, hn := job(keys.n, "1s", "cowstate", "heap-peak-MB"), job(keys.n, "none", "cowstate", "heap-peak-MB")
			row.cowstate += fmt.Sprintf(", longest pause %.0f ms, heap peak %.0f MB (%.0f without)", pc, hc, hn)
			row.peer += fmt.Sprintf(", longest pause %.0f ms: cowstate at %.2f of the map's rate", pm, m1/c1)
			row.bound += "; " + verdict("rate >= 0.5 of the map's", m1/c1 >= 0.5) +
				"; " + verdict("pause <= 0.2 of the map's", pc <= 0.2*pm) +
				"; " + verdict("heap <= 1.5x", hc <= 1.5*hn)
		}
		rows = append(rows, row)
	}
	capture := func(size, impl string) float64 {
		return f.get(fmt.Sprintf("BenchmarkCapture/size=%s/impl=%s", size, impl), "ns/op")
	}
	growth, vsCopy := capture("10000000", "cow")/capture("1000", "cow"), capture("1000000", "gomap")/capture("1000000", "cow")
	rows = append(rows, headlineRow{
		"Capture, 1K to 10M entries (`BenchmarkCapture`)",
		fmt.Sprintf("10M/1K = %.2f; %.0fx faster than a deep copy at 1M", growth, vsCopy), "map deep copy",
		verdict("<= 2.0", growth <= 2) + "; " + verdict(">= 10,000x", vsCopy >= 10000),
	})
	write := f.get("BenchmarkSnapshotWrite/size=1000000/impl=gob", "ns/op") / f.get("BenchmarkSnapshotWrite/size=1000000/impl=cowstate", "ns/op")
	restore := f.get("BenchmarkRestore/size=1000000/impl=gob", "ns/op") / f.get("BenchmarkRestore/size=1000000/impl=cowstate", "ns/op")
	rows = append(rows, headlineRow{
		"Snapshot write, restore of 1M entries (`BenchmarkSnapshotWrite`, `BenchmarkRestore`)",
		fmt.Sprintf("%.1fx, %.1fx faster than encoding/gob of the map", write, restore), "encoding/gob",
		verdict(">= 8x", write >= 8) + "; " + verdict(">= 6x", restore >= 6),
	})
	cp := func(mode, unit string) float64 {
		return f.get("BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode="+mode, unit)
	}
	bytesShare, timeShare := cp("incremental", "bytes/op")/cp("full", "bytes/op"), cp("incremental", "ns/op")/cp("full", "ns/op")
	rows = append(rows, headlineRow{
		"Checkpoint of 1M entries, 0.1% changed (`BenchmarkCheckpoint`)",
		fmt.Sprintf("incremental %.1f ms and %.0f KB, full %.1f ms and %.0f MB: %.1f%% of the bytes, %.1f%% of the time",
			cp("incremental", "ns/op")/1e6, cp("incremental", "bytes/op")/1e3, cp("full", "ns/op")/1e6, cp("full", "bytes/op")/1e6,
			100*bytesShare, 100*timeShare), "a full checkpoint",
		verdict("<= 2% of the bytes", bytesShare <= 0.02) + "; " + verdict("<= 5% of the time", timeShare <= 0.05),
	})
	if len(f.missing) > 0 {
		return "", fmt.Errorf("%w: %s", errMissing, strings.Join(f.missing, ", "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "One run on %s (%s/%s), %s, generated by bench/cmd/benchreport from its output\n(`scripts/readme-figures`); medians where a benchmark ran more than once.\n\n", env.CPU, env.GoOS, env.GoArch, date)
	b.WriteString("| benchmark | cowstate | peer | bound |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.what, r.cowstate, r.peer, r.bound)
	}
	return b.String(), nil
}

// ReplaceHeadline returns doc with the text between the headline markers
// replaced by table, or an error if doc lacks the markers.
func ReplaceHeadline(doc []byte, table string) ([]byte, error) {
	i, j := bytes.Index(doc, []byte(headlineBegin)), bytes.Index(doc, []byte(headlineEnd))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %s ... %s block", headlineBegin, headlineEnd)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(headlineBegin)])
	out.WriteString("\n" + table)
	out.Write(doc[j:])
	return out.Bytes(), nil
}
