package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// errNoData is returned by the chart functions when the results hold no
// point for the chart, which is then not written.
var errNoData = errors.New("no matching benchmark results")

// CaptureChart plots capture time against state size, both on log scales,
// for cowstate (impl=cow) and the deep-copy baseline (impl=gomap), from
// BenchmarkCapture/size=N/impl=X, and saves it as an SVG at path.
func CaptureChart(results []Result, path string) error {
	series := Series(results, "BenchmarkCapture", "size", "ns/op", func(r Result) bool {
		impl, _ := r.Param("impl")
		return impl == "cow" || impl == "gomap"
	})
	for i, l := range series {
		switch l.Label {
		case "impl=cow":
			series[i].Label = "cowstate (impl=cow)"
		case "impl=gomap":
			series[i].Label = "deep copy (impl=gomap)"
		}
	}
	return saveLogLog(path, "Capture time against state size", "state size (entries)", "capture time (ns/op)", series)
}

// CheckpointChart plots the bytes written per checkpoint (the bytes/op
// metric) against the changed fraction, for mode=full and
// mode=incremental, from BenchmarkCheckpoint/size=N/changed=Xpct/mode=M,
// and saves it as an SVG at path.
func CheckpointChart(results []Result, path string) error {
	series := Series(results, "BenchmarkCheckpoint", "changed", "bytes/op", nil)
	return saveLogLog(path, "Checkpoint size: full against incremental", "entries changed (%)", "bytes written (bytes/op)", series)
}

// Line is one named line of a chart.
type Line struct {
	Label  string // the sub-benchmark name less the x element, e.g. "impl=cow"
	Points plotter.XYs
}

// Series collects the positive values of metric in family's results that
// keep accepts (nil keeps all), with x the numeric value of the xKey path
// element (a unit suffix such as "pct" is ignored), one Line per remaining
// name, in order of first appearance, each sorted by x.
func Series(results []Result, family, xKey, metric string, keep func(Result) bool) []Line {
	var lines []Line
	for _, r := range results {
		if r.Family() != family || (keep != nil && !keep(r)) {
			continue
		}
		y, ok := r.Metrics[metric]
		xs, hasX := r.Param(xKey)
		if !ok || !hasX || y <= 0 {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimRightFunc(xs, isUnitRune), 64)
		if err != nil || x <= 0 {
			continue
		}
		var rest []string
		for _, p := range r.Params() {
			if p.Key != xKey {
				rest = append(rest, p.String())
			}
		}
		label := strings.Join(rest, " ")
		i := slices.IndexFunc(lines, func(l Line) bool { return l.Label == label })
		if i < 0 {
			i = len(lines)
			lines = append(lines, Line{Label: label})
		}
		lines[i].Points = append(lines[i].Points, plotter.XY{X: x, Y: y})
	}
	for _, l := range lines {
		slices.SortFunc(l.Points, func(a, b plotter.XY) int {
			if a.X < b.X {
				return -1
			}
			if a.X > b.X {
				return 1
			}
			return 0
		})
	}
	return lines
}

// isUnitRune reports whether r belongs to a unit suffix of a numeric
// parameter ("pct" in "0.1pct").
func isUnitRune(r rune) bool {
	return !(r >= '0' && r <= '9') && r != '.'
}

// saveLogLog draws lines on log-scaled axes and saves the chart as an SVG.
func saveLogLog(path, title, xLabel, yLabel string, lines []Line) error {
	if len(lines) == 0 {
		return errNoData
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	var args []any
	for _, l := range lines {
		args = append(args, l.Label, l.Points)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	// Pad the ranges so that end points stay off the frame and the edge
	// decades get their labels, and leave a decade free at the top for
	// the legend.
	p.X.Min, p.X.Max = p.X.Min/1.3, p.X.Max*1.3
	p.Y.Min, p.Y.Max = p.Y.Min/1.3, p.Y.Max*20
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}
