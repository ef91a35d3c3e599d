package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is go test -bench output run with -count 2, trimmed to a few
// families: plain, custom metrics (b.ReportMetric), a family with no
// impl= element, and the checkpoint family's mode= naming.
const sample = `goos: linux
goarch: amd64
pkg: github.com/cowstate/cowstate/bench
cpu: Some CPU @ 2.00GHz
BenchmarkCapture/size=1000/impl=cow-2         	 5000000	       200.0 ns/op	     96 B/op	       2 allocs/op
BenchmarkCapture/size=1000/impl=cow-2         	 5000000	       220.0 ns/op	     96 B/op	       2 allocs/op
BenchmarkCapture/size=1000/impl=gomap-2       	   20000	     50000 ns/op	  41000 B/op	       8 allocs/op
BenchmarkCapture/size=1000/impl=gomap-2       	   20000	     70000 ns/op	  41000 B/op	       8 allocs/op
BenchmarkCapture/size=100000/impl=cow-2       	 5000000	       210.0 ns/op	     96 B/op	       2 allocs/op
BenchmarkCapture/size=100000/impl=cow-2       	 5000000	       230.0 ns/op	     96 B/op	       2 allocs/op
BenchmarkCapture/size=100000/impl=gomap-2     	     200	   6000000 ns/op	5000000 B/op	      40 allocs/op
BenchmarkCapture/size=100000/impl=gomap-2     	     200	   8000000 ns/op	5000000 B/op	      40 allocs/op
BenchmarkCapture/size=100000/impl=tidwall-2   	 1000000	      1000 ns/op	     64 B/op	       1 allocs/op
BenchmarkCapture/size=100000/impl=tidwall-2   	 1000000	      1000 ns/op	     64 B/op	       1 allocs/op
BenchmarkTimers/timers=1000000/impl=cowstate-2	       2	 500000000 ns/op	   2000000 timers/s	1000 B/op	  10 allocs/op
BenchmarkTimers/timers=1000000/impl=cowstate-2	       2	 500000000 ns/op	   2000000 timers/s	1000 B/op	  10 allocs/op
BenchmarkTimers/timers=1000000/impl=heap-2    	       1	1000000000 ns/op	   1000000 timers/s	2000 B/op	  20 allocs/op
BenchmarkTimers/timers=1000000/impl=heap-2    	       1	1000000000 ns/op	   1000000 timers/s	2000 B/op	  20 allocs/op
some log line from a benchmark
BenchmarkSolo-2                               	 1000000	      1500 ns/op
BenchmarkSolo-2                               	 1000000	      1700 ns/op
BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=incremental-2	10	 1000 ns/op	 24000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=full-2       	10	 9000 ns/op	 24000000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=1pct/mode=incremental-2  	10	 2000 ns/op	 240000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=1pct/mode=full-2         	10	 9000 ns/op	 24000000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=10pct/mode=incremental-2 	10	 5000 ns/op	 2400000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=10pct/mode=full-2        	10	 9000 ns/op	 24000000 bytes/op
PASS
ok  	github.com/cowstate/cowstate/bench	42.000s
`

func parseSample(t *testing.T) []Result {
	t.Helper()
	results, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	return results
}

func TestParse(t *testing.T) {
	results := parseSample(t)
	if len(results) != 14 {
		t.Fatalf("got %d results, want 14: %+v", len(results), results)
	}
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkCapture/size=1000/impl=cow", "ns/op", 210}, // median of 2 runs
		{"BenchmarkCapture/size=1000/impl=gomap", "ns/op", 60000},
		{"BenchmarkCapture/size=1000/impl=gomap", "B/op", 41000},
		{"BenchmarkTimers/timers=1000000/impl=heap", "timers/s", 1e6},
		{"BenchmarkSolo", "ns/op", 1600},
		{"BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=full", "bytes/op", 24e6},
	} {
		r, ok := byName[c.name]
		if !ok {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if got := r.Metrics[c.unit]; got != c.want {
			t.Errorf("%s %s = %v, want %v", c.name, c.unit, got, c.want)
		}
	}
	if got := results[0].Name; got != "BenchmarkCapture/size=1000/impl=cow" {
		t.Errorf("first result %q: order of appearance not kept", got)
	}
}

func TestParseLineEdgeCases(t *testing.T) {
	for _, line := range []string{
		"BenchmarkCapture/size=1000/impl=cow",     // name alone (-v progress)
		"BenchmarkX-2  notanumber  1 ns/op",       // not a count
		"BenchmarkX-2  10  1 ns/op  2",            // odd field count
		"ok  	github.com/cowstate/cowstate/bench", // summary
	} {
		if _, _, ok := parseLine(line); ok {
			t.Errorf("parseLine(%q) accepted", line)
		}
	}
	if name, _, _ := parseLine("BenchmarkX/x=-1  10  1 ns/op"); name != "BenchmarkX/x=-1" {
		t.Errorf("negative parameter mistaken for the GOMAXPROCS suffix: %q", name)
	}
}

func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
}

func TestBuildTables(t *testing.T) {
	tables := BuildTables(parseSample(t))
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Family+" "+tb.Metric)
	}
	want := []string{
		"BenchmarkCapture ns/op",
		"BenchmarkTimers ns/op", "BenchmarkTimers timers/s",
		"BenchmarkSolo ns/op",
		"BenchmarkCheckpoint ns/op", "BenchmarkCheckpoint bytes/op",
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("tables %q, want %q", names, want)
	}
	capture := tables[0]
	if capture.Baseline != "cow" || strings.Join(capture.Impls, ",") != "cow,gomap,tidwall" {
		t.Errorf("capture baseline %q impls %q", capture.Baseline, capture.Impls)
	}
	if len(capture.Rows) != 2 || capture.Rows[1].Case != "size=100000" {
		t.Errorf("capture rows %+v", capture.Rows)
	}
	if tables[1].Baseline != "cowstate" {
		t.Errorf("timers baseline %q", tables[1].Baseline)
	}
	if tables[3].ImplKey != "" || tables[3].Baseline != "" {
		t.Errorf("solo table %+v", tables[3])
	}
	cp := tables[5]
	if cp.ImplKey != "mode" || cp.Baseline != "incremental" || cp.Rows[0].Case != "size=1000000/changed=0.1pct" {
		t.Errorf("checkpoint table %+v", cp)
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, BuildTables(parseSample(t))); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"above 1 means cowstate is faster",
		"## BenchmarkCapture — ns/op",
		"| case | impl=cow | impl=gomap | impl=tidwall |",
		"|---|---:|---:|---:|",
		"| size=1000 | 210 ns | 60.0 µs (286×) | — |",
		"| size=100000 | 220 ns | 7.00 ms (31.8k×) | 1.00 µs (4.55×) |",
		"| timers=1000000 | 2.00M timers/s | 1.00M timers/s (0.50×) |",
		"| — | 1.60 µs |",
		"| size=1000000/changed=10pct | 2.40M bytes/op | 24.0M bytes/op (10.0×) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestCharts(t *testing.T) {
	results := parseSample(t)
	dir := t.TempDir()
	for _, c := range []struct {
		file string
		draw func([]Result, string) error
	}{{"capture.svg", CaptureChart}, {"checkpoint.svg", CheckpointChart}} {
		path := filepath.Join(dir, c.file)
		if err := c.draw(results, path); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(string(data))
		if !strings.HasPrefix(s, "<?xml") && !strings.HasPrefix(s, "<svg") {
			t.Errorf("%s does not start as SVG: %.40q", c.file, s)
		}
		if !strings.HasSuffix(s, "</svg>") {
			t.Errorf("%s does not end as SVG: %q", c.file, s[max(0, len(s)-40):])
		}
	}
}

func TestSeries(t *testing.T) {
	lines := Series(parseSample(t), "BenchmarkCheckpoint", "changed", "bytes/op", nil)
	if len(lines) != 2 || lines[0].Label != "size=1000000 mode=incremental" || lines[1].Label != "size=1000000 mode=full" {
		t.Fatalf("lines %+v", lines)
	}
	if p := lines[0].Points; len(p) != 3 || p[0].X != 0.1 || p[2].X != 10 || p[2].Y != 2.4e6 {
		t.Errorf("incremental points %v", p)
	}
	capture := Series(parseSample(t), "BenchmarkCapture", "size", "ns/op", nil)
	if len(capture) != 3 {
		t.Errorf("capture lines %+v", capture)
	}
}

func TestChartWithoutData(t *testing.T) {
	results, _ := Parse(strings.NewReader("BenchmarkGet/size=1/impl=cow-2 10 5 ns/op\n"))
	path := filepath.Join(t.TempDir(), "checkpoint.svg")
	if err := CheckpointChart(results, path); err != errNoData {
		t.Fatalf("err = %v, want errNoData", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("chart written without data")
	}
}

func TestRunFromFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(".", "", 1, in, out, ""); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "capture.svg", "checkpoint.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0.5, "x", "0.50 x"},
		{12.34, "x", "12.3 x"},
		{999, "x", "999 x"},
		{9999, "x", "9999 x"},
		{12345, "x", "12.3k x"},
		{2.5e6, "x", "2.50M x"},
		{3e9, "x", "3.00G x"},
		{0.001234, "x", "0.00123 x"},
		{850, "ns/op", "850 ns"},
		{1500, "ns/op", "1.50 µs"},
		{2.5e6, "ns/op", "2.50 ms"},
		{1.2e10, "ns/op", "12.0 s"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}
