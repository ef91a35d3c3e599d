package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is one benchmark's measurements: every "value unit" pair of its
// output line (ns/op, B/op, allocs/op and any b.ReportMetric unit), keyed by
// unit. When a benchmark ran several times (-count > 1), each metric is the
// median of its runs.
type Result struct {
	Name    string             // full name without the -GOMAXPROCS suffix
	Metrics map[string]float64 // unit -> value
}

// procSuffix is the "-8" that go test appends to a benchmark name when
// GOMAXPROCS > 1. The preceding character is kept in the match so that a
// negative parameter value ("x=-1") is not mistaken for it.
var procSuffix = regexp.MustCompile(`([^=])-\d+$`)

// Parse reads standard go test -bench output and returns one Result per
// benchmark name, in the order the names first appear. Lines that are not
// benchmark results (goos:, pkg:, PASS, ok, log output) are ignored.
func Parse(r io.Reader) ([]Result, error) {
	var order []string
	runs := map[string]map[string][]float64{} // name -> unit -> values
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		name, metrics, ok := parseLine(sc.Text())
		if !ok {
			continue
		}
		if runs[name] == nil {
			runs[name] = map[string][]float64{}
			order = append(order, name)
		}
		for unit, v := range metrics {
			runs[name][unit] = append(runs[name][unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(order))
	for _, name := range order {
		res := Result{Name: name, Metrics: map[string]float64{}}
		for unit, vs := range runs[name] {
			res.Metrics[unit] = median(vs)
		}
		results = append(results, res)
	}
	return results, nil
}

// parseLine parses one result line,
//
//	BenchmarkX/a=1-8   1000   123 ns/op   45 B/op   7.0 custom/op
//
// returning ok = false for anything else.
func parseLine(line string) (name string, metrics map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	metrics = map[string]float64{}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		metrics[f[i+1]] = v
	}
	return procSuffix.ReplaceAllString(f[0], "$1"), metrics, true
}

// median returns the middle value of vs (the mean of the two middle values
// for an even count). vs must not be empty.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Family is the benchmark function's name: "BenchmarkCapture" for
// "BenchmarkCapture/size=1000/impl=cow".
func (r Result) Family() string {
	family, _, _ := strings.Cut(r.Name, "/")
	return family
}

// Params returns the key=value path elements after the family name, in
// order; an element without "=" gets an empty key.
func (r Result) Params() []Param {
	elems := strings.Split(r.Name, "/")[1:]
	params := make([]Param, len(elems))
	for i, e := range elems {
		k, v, found := strings.Cut(e, "=")
		if !found {
			k, v = "", e
		}
		params[i] = Param{Key: k, Value: v}
	}
	return params
}

// Param is one key=value element of a sub-benchmark name.
type Param struct{ Key, Value string }

// String gives the element back as it appears in the name.
func (p Param) String() string {
	if p.Key == "" {
		return p.Value
	}
	return p.Key + "=" + p.Value
}

// Param returns the value of the path element with the given key.
func (r Result) Param(key string) (string, bool) {
	for _, p := range r.Params() {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}
