package rapidtest

import (
	"math"
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
)

// This file draws the operations' arguments. The input space is every
// byte string for keys, namespaces, values and user-map keys (empty,
// arbitrary bytes, lengths around the 15- and 31-byte marks where backends
// store keys apart, and over 1 KiB), every int64 for timestamps and
// watermarks (negative and extreme ones too), and every max parallelism
// from 1 to statetable.MaxParallelismLimit with operators' shares of it.
// Operations draw most arguments from what the model holds (its entries,
// their user keys and list positions, its timers, due or not) and from the
// test case's pools, so that they meet: a rewrite of an entry that exists,
// with an equal value or another, while a view of it is live; a delete of
// a timer that is registered. Now and then an argument is fresh, or a
// name is one that is not registered.

// bytesGen draws a byte string: a few everyday ones, arbitrary bytes,
// lengths around backends' thresholds, and long ones (over 1 KiB).
func bytesGen() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.Just(""),
		rapid.SampledFrom([]string{"a", "b", "ab", "k", "\x00", "|", "a\x00b", "\xff\xfe"}),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "bytes")) }),
		rapid.Custom(func(t *rapid.T) string {
			n := rapid.SampledFrom([]int{13, 14, 15, 16, 29, 30, 31, 32, 33, 255, 1025, 2100}).Draw(t, "length")
			fill := rapid.Byte().Draw(t, "fill")
			tail := rapid.SliceOfN(rapid.Byte(), 0, 2).Draw(t, "tail")
			return strings.Repeat(string([]byte{fill}), max(0, n-len(tail))) + string(tail)
		}),
	)
}

// maxParallelismGen draws a number of key groups from the whole range:
// small ones, powers of two and others, the default and the limit.
func maxParallelismGen() *rapid.Generator[int] {
	return rapid.OneOf(
		rapid.SampledFrom([]int{1, 2, 3, 4, 5, 7, 8, 10, 32, 100, 128, 1000, statetable.MaxParallelismLimit}),
		rapid.IntRange(1, statetable.MaxParallelismLimit),
	)
}

// timestampGen draws a timestamp: mostly small ones, so that timers meet
// and ties happen, and negative, extreme and arbitrary ones.
func timestampGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(-3, 24),
		rapid.Int64Range(-3, 24),
		rapid.SampledFrom([]int64{math.MinInt64, math.MinInt64 + 1, -1 << 32, 1 << 32, math.MaxInt64 - 1, math.MaxInt64}),
		rapid.Int64(),
	)
}

// drawSpace draws the test case's Config and its pools of keys and
// namespaces.
func (m *machine) drawSpace(t *rapid.T) {
	maxPar := 0
	if len(m.opts.MaxParallelism) > 0 {
		maxPar = rapid.SampledFrom(m.opts.MaxParallelism).Draw(t, "maxParallelism")
	} else {
		maxPar = maxParallelismGen().Draw(t, "maxParallelism")
	}
	m.cfg = Config{MaxParallelism: maxPar, Clock: func() int64 { return m.now }}
	if maxPar > 1 && rapid.IntRange(0, 2).Draw(t, "share") == 0 {
		p := rapid.IntRange(2, min(7, maxPar)).Draw(t, "parallelism")
		r := statetable.RangeForOperator(maxPar, p, rapid.IntRange(0, p-1).Draw(t, "operator"))
		m.cfg.KeyGroups = &r
	}
	m.now = rapid.SampledFrom([]int64{0, -100, 1 << 40}).Draw(t, "clockStart")
	// Pools of the full size: merges need three namespaces or more to show
	// their order, timer ties several keys.
	m.keys = rapid.SliceOfNDistinct(bytesGen(), m.opts.Keys, m.opts.Keys, rapid.ID[string]).Draw(t, "keys")
	nonEmpty := bytesGen().Filter(func(s string) bool { return s != "" })
	nss := rapid.SliceOfNDistinct(nonEmpty, m.opts.Namespaces-1, m.opts.Namespaces-1, rapid.ID[string]).Draw(t, "namespaces")
	m.nss = append([]string{""}, nss...)
}

// fromPool draws from the pool, or now and then a fresh byte string.
func fromPool(t *rapid.T, pool []string, label string) string {
	if rapid.IntRange(0, 9).Draw(t, label+"Fresh") == 0 {
		return bytesGen().Draw(t, label)
	}
	return rapid.SampledFrom(pool).Draw(t, label)
}

func (m *machine) key(t *rapid.T) string {
	if ks := m.heldKeys(); len(ks) > 0 && rapid.IntRange(0, 2).Draw(t, "heldKey") == 0 {
		return rapid.SampledFrom(ks).Draw(t, "key")
	}
	return fromPool(t, m.keys, "key")
}

func (m *machine) ns(t *rapid.T, label string) string { return fromPool(t, m.nss, label) }

func value(t *rapid.T, label string) string { return bytesGen().Draw(t, label) }

// heldKeys returns the keys the model holds state or timers of, sorted.
func (m *machine) heldKeys() []string {
	var ks []string
	for _, s := range m.names {
		es, _ := m.m.StateEntries(s)
		for _, e := range es {
			ks = append(ks, e.Key)
		}
	}
	for _, s := range services {
		for _, d := range domains {
			ts, _ := m.m.TimerEntries(s, d)
			for _, tm := range ts {
				ks = append(ks, tm.Key)
			}
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// held draws an entry the model holds in state, if it holds any and the
// draw says so (two times in three).
func (m *machine) held(t *rapid.T, state string) (contract.Entry, bool) {
	es, err := m.m.StateEntries(state)
	if err != nil || len(es) == 0 || rapid.IntRange(0, 2).Draw(t, "held") == 0 {
		return contract.Entry{}, false
	}
	es = canonical(es)
	return es[rapid.IntRange(0, len(es)-1).Draw(t, "entry")], true
}

// addr draws the key and namespace of an operation on state: an entry the
// model holds, or a key and a namespace.
func (m *machine) addr(t *rapid.T, state string) (key, ns string) {
	if e, ok := m.held(t, state); ok {
		return e.Key, e.Namespace
	}
	return m.key(t), m.ns(t, "ns")
}

// state draws one of the states of the given kinds (with GroupTTL, as
// often the one with a TTL as the one without), or now and then any state
// (so that the kind errors are compared too) or one that is not
// registered.
func (m *machine) state(t *rapid.T, proper ...string) string {
	switch rapid.IntRange(0, 19).Draw(t, "anyState") {
	case 0:
		return unregisteredState
	case 1, 2:
		return rapid.SampledFrom(m.names).Draw(t, "state")
	}
	s := rapid.SampledFrom(proper).Draw(t, "state")
	if m.groups&GroupTTL != 0 && rapid.Bool().Draw(t, "withTTL") {
		s = ttlPrefix + s
	}
	return s
}

// service draws a timer service, now and then one that is not registered.
func service(t *rapid.T) string {
	if rapid.IntRange(0, 19).Draw(t, "anyService") == 0 {
		return unregisteredService
	}
	return rapid.SampledFrom(services).Draw(t, "service")
}

// heldTimer draws a timer the model holds in a service and domain, if any
// and the draw says so.
func (m *machine) heldTimer(t *rapid.T, s string, d int) (timer, bool) {
	ts, err := m.m.TimerEntries(s, domains[d])
	if err != nil || len(ts) == 0 || rapid.IntRange(0, 2).Draw(t, "heldTimer") == 0 {
		return timer{}, false
	}
	return ts[rapid.IntRange(0, len(ts)-1).Draw(t, "timer")], true
}

// timestamp draws a timestamp near one the model holds a timer at (equal,
// one before or one after: due and not due), or any.
func (m *machine) timestamp(t *rapid.T, s string, d int, label string) int64 {
	if tm, ok := m.heldTimer(t, s, d); ok {
		return addSat(tm.Timestamp, rapid.Int64Range(-1, 1).Draw(t, label+"Offset"))
	}
	return timestampGen().Draw(t, label)
}

// addSat is a + b, saturated at the ends of int64.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// domainIndex draws a time domain, as an index into domains.
func domainIndex(t *rapid.T) int { return rapid.IntRange(0, len(domains)-1).Draw(t, "domain") }

// other returns a value other than v.
func other(t *rapid.T, v string) string {
	w := value(t, "otherValue")
	if w == v {
		w = v + "'"
	}
	return w
}
