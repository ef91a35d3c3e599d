package rapidtest

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"pgregory.net/rapid"
)

// Outcome is what a run of the suite found, as a value: for a backend
// author's meta-tests (does the suite catch the bug I planted?) and for
// tools.
type Outcome struct {
	// Failed reports whether a machine failed.
	Failed bool
	// Machine is the machine that failed (the last one run if none did).
	Machine Machine
	// Failure is the first failure found, before shrinking: "step N: "
	// and what differed.
	Failure string
	// Shrunk is the shrunk failing test case: its operations in order,
	// one line each with its result ("step N: Put(...) -> ..."); its last
	// line is the failure.
	Shrunk []string
	// TestCases and Steps count the test cases and operations run up to
	// and including the first failure (all of them if none failed),
	// over the machines run.
	TestCases, Steps int
	// Output is everything rapid logged: the failing test case's draws
	// and the seed that replays it.
	Output string
}

type hooks struct {
	// testCase is called as a test case starts, step before each
	// operation, op with each operation's line, fail with each failure.
	testCase, step func()
	op, fail       func(line string)
}

// Check runs the suite like Run, without a testing.T, and returns what it
// found: the machines in order, up to the first that fails. It blocks
// until done; rapid's flags (-rapid.seed, -rapid.checks,
// -rapid.shrinktime, ...) apply as in Run. Fail files are not written:
// Check turns rapid's -rapid.nofailfile on for its run, so it may be
// called from any goroutine but not concurrently with another Check.
func Check(newBackend func(Config) Backend, opts Options) Outcome {
	opts = opts.withDefaults()
	defer withFlag("rapid.nofailfile", "true")()
	var out Outcome
	var cur []string // the operations of the test case running
	found := false
	opts.hooks = &hooks{
		testCase: func() {
			cur = cur[:0]
			if !found {
				out.TestCases++
			}
		},
		step: func() {
			if !found {
				out.Steps++
			}
		},
		op: func(line string) { cur = append(cur, line) },
		fail: func(msg string) {
			cur = append(cur, msg)
			if !found {
				found, out.Failure = true, msg
			}
		},
	}
	for _, m := range Machines {
		if m.core()&opts.Groups == 0 {
			continue
		}
		out.Machine = m
		rec := &recorder{name: "rapidtest-" + string(m)}
		done := make(chan struct{})
		go func() { // FailNow ends the goroutine, as in testing
			defer close(done)
			rapid.Check(rec, prop(m, newBackend, opts))
		}()
		<-done
		out.Output += rec.output()
		if rec.Failed() {
			out.Failed = true
			// rapid runs the shrunk test case last, to print it.
			out.Shrunk = append([]string(nil), cur...)
			if !found { // a panic or a failure outside the machine's checks
				out.Failure = lastLine(rec.output())
			}
			return out
		}
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// withFlag sets one of rapid's flags and returns what restores it.
func withFlag(name, value string) func() {
	f := flag.Lookup(name)
	if f == nil {
		panic("rapidtest: BUG: no flag " + name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		panic(fmt.Sprintf("rapidtest: BUG: flag %s=%s: %v", name, value, err))
	}
	return func() { f.Value.Set(old) }
}

// recorder is a rapid.TB that records instead of failing a test; run it
// on its own goroutine (FailNow exits the goroutine, as in testing).
type recorder struct {
	name   string
	mu     sync.Mutex
	failed bool
	out    strings.Builder
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.out, format+"\n", args...)
}
func (r *recorder) Log(args ...any)                   { r.Logf("%s", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.Logf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.Log(args...); runtime.Goexit() }
func (r *recorder) SkipNow()                          { runtime.Goexit() }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
func (r *recorder) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}
