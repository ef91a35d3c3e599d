package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// implKeys are the path-element keys that name what a sub-benchmark
// compares, in order of preference: the first one present in a family
// splits its sub-benchmarks into columns.
var implKeys = []string{"impl", "mode"}

// baselines are the column values that stand for cowstate itself (or, for
// mode=, the variant the others are measured against). Ratios are taken
// against the first of them present in a family.
var baselines = []string{"cow", "cowstate", "incremental"}

// skipUnits are the standard metrics left out of the tables: ns/op is
// always shown, and the allocation counts are in bench.txt.
var skipUnits = []string{"B/op", "allocs/op", "MB/s"}

// Table is one metric of one benchmark family, with a row per case (the
// sub-benchmark name less its impl= or mode= element) and a column per
// implementation.
type Table struct {
	Family   string
	Metric   string   // "ns/op" or a b.ReportMetric unit
	ImplKey  string   // "impl", "mode" or "" when the family compares nothing
	Baseline string   // the column ratios are taken against, or ""
	Impls    []string // columns, the baseline first
	Rows     []Row
}

// Row is one case of a Table.
type Row struct {
	Case   string             // e.g. "size=1000"
	Values map[string]float64 // impl -> metric value
}

// BuildTables groups results by family and returns a ns/op table for each
// family followed by one table per custom metric the family reports, in
// the order the families first appear.
func BuildTables(results []Result) []Table {
	var families []string
	byFamily := map[string][]Result{}
	for _, r := range results {
		f := r.Family()
		if byFamily[f] == nil {
			families = append(families, f)
		}
		byFamily[f] = append(byFamily[f], r)
	}
	var tables []Table
	for _, f := range families {
		rs := byFamily[f]
		for _, metric := range familyMetrics(rs) {
			tables = append(tables, buildTable(f, metric, rs))
		}
	}
	return tables
}

// familyMetrics returns "ns/op" then the family's custom units, sorted.
func familyMetrics(rs []Result) []string {
	var custom []string
	for _, r := range rs {
		for unit := range r.Metrics {
			if unit != "ns/op" && !slices.Contains(skipUnits, unit) && !slices.Contains(custom, unit) {
				custom = append(custom, unit)
			}
		}
	}
	slices.Sort(custom)
	return append([]string{"ns/op"}, custom...)
}

// buildTable lays out one metric of one family's results.
func buildTable(family, metric string, rs []Result) Table {
	t := Table{Family: family, Metric: metric}
	for _, key := range implKeys {
		if slices.ContainsFunc(rs, func(r Result) bool { _, ok := r.Param(key); return ok }) {
			t.ImplKey = key
			break
		}
	}
	rowIndex := map[string]int{}
	for _, r := range rs {
		v, ok := r.Metrics[metric]
		if !ok {
			continue
		}
		var impl string
		var rest []string
		for _, p := range r.Params() {
			if t.ImplKey != "" && p.Key == t.ImplKey {
				impl = p.Value
			} else {
				rest = append(rest, p.String())
			}
		}
		c := strings.Join(rest, "/")
		i, seen := rowIndex[c]
		if !seen {
			i = len(t.Rows)
			rowIndex[c] = i
			t.Rows = append(t.Rows, Row{Case: c, Values: map[string]float64{}})
		}
		t.Rows[i].Values[impl] = v
		if !slices.Contains(t.Impls, impl) {
			t.Impls = append(t.Impls, impl)
		}
	}
	for _, b := range baselines {
		if i := slices.Index(t.Impls, b); i >= 0 {
			t.Baseline = b
			t.Impls = append([]string{b}, slices.Delete(t.Impls, i, i+1)...)
			break
		}
	}
	return t
}

// WriteMarkdown renders the tables as a Markdown document.
func WriteMarkdown(w io.Writer, tables []Table) error {
	var b strings.Builder
	b.WriteString("# cowstate benchmark report\n\n")
	b.WriteString("Each table is one benchmark family and one metric, with a row per case and a column per\n")
	b.WriteString("implementation (the sub-benchmark's `impl=` or `mode=` element). The first column is the\n")
	b.WriteString("baseline: cowstate itself (`cow` or `cowstate`), or `incremental` for checkpoints. Every other\n")
	b.WriteString("cell shows its value and, in parentheses, the ratio **other ÷ baseline**: for ns/op and for\n")
	b.WriteString("sizes per op or per entry, a ratio **above 1 means cowstate is faster (or smaller)**; for\n")
	b.WriteString("rates (units ending in `/s`) it is the other way round.\n")
	for _, t := range tables {
		fmt.Fprintf(&b, "\n## %s — %s\n\n", t.Family, t.Metric)
		writeTable(&b, t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable renders one Table.
func writeTable(b *strings.Builder, t Table) {
	b.WriteString("| case |")
	for _, impl := range t.Impls {
		if impl == "" {
			impl = t.Metric
		} else {
			impl = t.ImplKey + "=" + impl
		}
		fmt.Fprintf(b, " %s |", impl)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(t.Impls)))
	b.WriteString("\n")
	for _, r := range t.Rows {
		c := r.Case
		if c == "" {
			c = "—"
		}
		fmt.Fprintf(b, "| %s |", c)
		base, hasBase := r.Values[t.Baseline]
		for _, impl := range t.Impls {
			v, ok := r.Values[impl]
			switch {
			case !ok:
				b.WriteString(" — |")
			case impl != t.Baseline && hasBase && base != 0:
				fmt.Fprintf(b, " %s (%s×) |", formatValue(v, t.Metric), formatNumber(v/base))
			default:
				fmt.Fprintf(b, " %s |", formatValue(v, t.Metric))
			}
		}
		b.WriteString("\n")
	}
}

// formatValue shows a ns/op value as a duration and any other metric as a
// number with its unit.
func formatValue(v float64, unit string) string {
	if unit != "ns/op" {
		return formatNumber(v) + " " + unit
	}
	for _, u := range []struct {
		scale float64
		name  string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}} {
		if math.Abs(v) >= u.scale {
			return formatNumber(v/u.scale) + " " + u.name
		}
	}
	return formatNumber(v) + " ns"
}

// formatNumber shows v with about three significant digits, with an SI
// suffix (k, M, G) from 10 000 up, and never in exponent notation for values
// of 0.01 and above.
func formatNumber(v float64) string {
	a := math.Abs(v)
	for _, u := range []struct {
		from, scale float64
		suffix      string
	}{{1e9, 1e9, "G"}, {1e6, 1e6, "M"}, {1e4, 1e3, "k"}} {
		if a >= u.from {
			return formatNumber(v/u.scale) + u.suffix
		}
	}
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.01 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
