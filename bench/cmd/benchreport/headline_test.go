package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// headlineRun is go test output holding every benchmark the headline reads:
// the job at 1M meets its bounds, at 10M it misses the rate and heap ones.
const headlineRun = `goos: linux
goarch: amd64
pkg: github.com/cowstate/cowstate/bench
cpu: Test CPU @ 1.00GHz
BenchmarkJob/keys=1000000/dist=uniform/every=none/impl=cowstate-2 	 1000	 80.0 ns/op	 1.0 max-pause-ms	 100 heap-peak-MB
BenchmarkJob/keys=1000000/dist=uniform/every=none/impl=map-2      	 1000	 40.0 ns/op	 1.0 max-pause-ms	 100 heap-peak-MB
BenchmarkJob/keys=1000000/dist=uniform/every=1s/impl=cowstate-2   	 1000	 82.0 ns/op	 2.0 max-pause-ms	 120 heap-peak-MB
BenchmarkJob/keys=1000000/dist=uniform/every=1s/impl=map-2        	 1000	 45.0 ns/op	 30.0 max-pause-ms	 200 heap-peak-MB
BenchmarkJob/keys=10000000/dist=uniform/every=none/impl=cowstate-2	 1000	 300 ns/op	 5.0 max-pause-ms	 800 heap-peak-MB
BenchmarkJob/keys=10000000/dist=uniform/every=none/impl=map-2     	 1000	 120 ns/op	 5.0 max-pause-ms	 400 heap-peak-MB
BenchmarkJob/keys=10000000/dist=uniform/every=1s/impl=cowstate-2  	 1000	 900 ns/op	 20.0 max-pause-ms	 2000 heap-peak-MB
BenchmarkJob/keys=10000000/dist=uniform/every=1s/impl=map-2       	 1000	 150 ns/op	 150 max-pause-ms	 1100 heap-peak-MB
BenchmarkCapture/size=1000/impl=cow-2        	 1000	 500 ns/op
BenchmarkCapture/size=10000000/impl=cow-2    	 1000	 600 ns/op
BenchmarkCapture/size=1000000/impl=cow-2     	 1000	 550 ns/op
BenchmarkCapture/size=1000000/impl=gomap-2   	 5	 55000000 ns/op
BenchmarkSnapshotWrite/size=1000000/impl=cowstate-2	 10	 20000000 ns/op
BenchmarkSnapshotWrite/size=1000000/impl=gob-2     	 10	 200000000 ns/op
BenchmarkRestore/size=1000000/impl=cowstate-2      	 10	 40000000 ns/op
BenchmarkRestore/size=1000000/impl=gob-2           	 10	 400000000 ns/op
BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=full-2       	 10	 30000000 ns/op	 19000000 bytes/op
BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=incremental-2	 10	 1200000 ns/op	 80000 bytes/op
`

func TestHeadline(t *testing.T) {
	results, err := Parse(strings.NewReader(headlineRun))
	if err != nil {
		t.Fatal(err)
	}
	table, err := Headline(results, ParseEnvironment(strings.NewReader(headlineRun)), "2026-01-02")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"One run on Test CPU @ 1.00GHz (linux/amd64), 2026-01-02",
		"| Job, 1M keys, no checkpoints (`BenchmarkJob`) | 80 ns/event | map 40 ns: cowstate at 0.50 of its rate | >= 0.5: met |",
		"| Job, 1M keys, checkpoint every 1 s | 82 ns/event, 0.98 of its own rate without | map 45 ns | own rate >= 0.95: met |",
		"cowstate at 0.40 of its rate | >= 0.5: **missed** |",
		"longest pause 20 ms, heap peak 2000 MB (800 without)",
		"rate >= 0.5 of the map's: **missed**; pause <= 0.2 of the map's: met; heap <= 1.5x: **missed**",
		"10M/1K = 1.20; 100000x faster than a deep copy at 1M | map deep copy | <= 2.0: met; >= 10,000x: met",
		"10.0x, 10.0x faster than encoding/gob",
		"incremental 1.2 ms and 80 KB, full 30.0 ms and 19 MB: 0.4% of the bytes, 4.0% of the time",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("headline lacks %q:\n%s", want, table)
		}
	}

	// A run without the checkpoint benchmarks cannot make the table.
	var partial []Result
	for _, r := range results {
		if r.Family() != "BenchmarkCheckpoint" {
			partial = append(partial, r)
		}
	}
	_, err = Headline(partial, Environment{}, "2026-01-02")
	if !errors.Is(err, errMissing) || !strings.Contains(err.Error(), "BenchmarkCheckpoint/size=1000000/changed=0.1pct/mode=full") {
		t.Fatalf("a run without BenchmarkCheckpoint: %v, want errMissing naming it", err)
	}
}

func TestRunRewritesReadme(t *testing.T) {
	dir := t.TempDir()
	in, readme := filepath.Join(dir, "bench.txt"), filepath.Join(dir, "README.md")
	if err := os.WriteFile(in, []byte(headlineRun), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := "# x\n\n## Performance\n\n" + headlineBegin + "\nold table\n" + headlineEnd + "\n\nAfter.\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(".", "", 1, in, filepath.Join(dir, "out"), readme); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if strings.Contains(s, "old table") || !strings.Contains(s, "| Job, 1M keys") || !strings.HasSuffix(s, headlineEnd+"\n\nAfter.\n") {
		t.Fatalf("README after the rewrite:\n%s", s)
	}
	if err := os.WriteFile(readme, []byte("# no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(".", "", 1, in, filepath.Join(dir, "out"), readme); err == nil {
		t.Fatal("a README without the markers: no error")
	}
}
