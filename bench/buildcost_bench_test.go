//go:build linux

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkBuildCost builds the programs of package buildcost the way a
// user's first build goes, from an empty build cache: prog=library alone
// (the standard library and cowstate), and prog=s3store and prog=storeurl
// each in a cache where library was built first, so that their figures are
// what keeping checkpoints in S3 adds. The module is built as a release
// sees it (no workspace). One op is one build: run it with -benchtime 1x.
//
// Metrics: cpu-s, the user and system time of the go command and every
// compiler and linker it ran; peak-MB, the resident set of the largest of
// those processes; binary-MB, the size of the program; modules, how many
// modules the linked packages come from.
//
//	go test -run '^$' -bench BenchmarkBuildCost -benchtime 1x
func BenchmarkBuildCost(b *testing.B) {
	for _, prog := range []string{"library", "s3store", "storeurl"} {
		b.Run("prog="+prog, func(b *testing.B) {
			var last buildFigures
			for b.Loop() {
				cache := b.TempDir()
				if prog != "library" {
					b.StopTimer()
					goBuild(b, cache, "library")
					b.StartTimer()
				}
				last = goBuild(b, cache, prog)
			}
			b.ReportMetric(last.cpuSeconds, "cpu-s")
			b.ReportMetric(last.peakMB, "peak-MB")
			b.ReportMetric(last.binaryMB, "binary-MB")
			b.ReportMetric(float64(linkedModules(b, prog)), "modules")
		})
	}
}

type buildFigures struct{ cpuSeconds, peakMB, binaryMB float64 }

// goBuild builds ./buildcost/prog with build cache cache.
func goBuild(b *testing.B, cache, prog string) buildFigures {
	b.Helper()
	out := filepath.Join(b.TempDir(), prog)
	cmd := exec.Command("go", "build", "-o", out, "./buildcost/"+prog)
	cmd.Env = append(os.Environ(), "GOCACHE="+cache, "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./buildcost/%s: %v\n%s", prog, err, msg)
	}
	ps := cmd.ProcessState
	fi, err := os.Stat(out)
	if err != nil {
		b.Fatal(err)
	}
	// wait4's usage covers the go command's reaped children, the
	// compilers and the linker; Maxrss is the largest of them, in KiB.
	rss := ps.SysUsage().(*syscall.Rusage).Maxrss
	return buildFigures{
		cpuSeconds: (ps.UserTime() + ps.SystemTime()).Seconds(),
		peakMB:     float64(rss) / 1024,
		binaryMB:   float64(fi.Size()) / (1 << 20),
	}
}

// linkedModules counts the modules of the packages ./buildcost/prog links.
func linkedModules(b *testing.B, prog string) int {
	b.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./buildcost/"+prog)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("go list ./buildcost/%s: %v", prog, err)
	}
	mods := slices.DeleteFunc(strings.Fields(string(out)), func(s string) bool { return s == "" })
	slices.Sort(mods)
	return len(slices.Compact(mods))
}
