package rapidtest

import (
	"fmt"
	"maps"
	"slices"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
)

// This file lists the machine's operations and holds those on keyed state:
// every kind, merges of namespaces, registering again.

// weights makes some actions more frequent than others (weight 1): the
// ones that build up what others need (entries to rewrite under a view,
// ties to order, namespaces to merge) and the views themselves.
var weights = map[string]int{
	"Put":                  2,
	"Add":                  2,
	"PutMapEntry":          3,
	"RemoveMapEntry":       2,
	"MergeNamespaces":      3,
	"AddToWindows":         3,
	"RegisterTimer":        2,
	"RegisterWindowTimers": 2,
	"AdvanceWatermark":     2,
	"Capture":              3,
	"AdvanceClock":         5,
	"ReadTTL":              5,
}

func (m *machine) actions() map[string]func(*rapid.T) {
	a := map[string]func(*rapid.T){}
	if m.groups&GroupState != 0 {
		a["Put"] = m.put
		a["Get"] = m.get
		a["Add"] = m.add
		a["GetList"] = m.getList
		a["UpdateList"] = m.updateList
		a["PutMapEntry"] = m.putMapEntry
		a["GetMapEntry"] = m.getMapEntry
		a["RemoveMapEntry"] = m.removeMapEntry
		a["ClearState"] = m.clearState
		a["RegisterAgain"] = m.registerAgain
	}
	if m.groups&GroupMerge != 0 {
		a["MergeNamespaces"] = m.merge
		a["AddToWindows"] = m.addToWindows
	}
	if m.groups&GroupTimers != 0 {
		a["RegisterTimer"] = m.registerTimer
		a["RegisterWindowTimers"] = m.registerWindowTimers
		a["DeleteTimer"] = m.deleteTimer
		a["RegisterServiceAgain"] = m.registerServiceAgain
		a["AdvanceWatermark"] = m.advanceWatermark
		a["AdvanceProcessingTime"] = m.advanceProcessingTime
	}
	if m.groups&GroupSnapshots != 0 {
		a["Capture"] = m.capture
		a["Release"] = m.release
	}
	if m.groups&GroupWrites != 0 {
		a["StartWrite"] = m.startWrite
		a["FinishWrite"] = func(t *rapid.T) {
			if len(m.writes) > 0 {
				m.finishWrite(t, rapid.IntRange(0, len(m.writes)-1).Draw(t, "write"))
			}
		}
	}
	if m.groups&GroupRescale != 0 {
		a["Rescale"] = m.rescale
	}
	if m.groups&GroupSchema != 0 {
		a["Upgrade"] = m.upgrade
	}
	if m.groups&GroupTTL != 0 {
		a["AdvanceClock"] = m.advanceClock
		a["CleanupExpired"] = m.cleanupExpired
		a["ReadTTL"] = m.readTTL
	}
	return a
}

// advanceClock moves the processing-time clock forward, mostly by less
// than a TTL (so that what was refreshed since its last write outlives
// what was not), now and then by up to two: what the TTL states hold
// expires, or not yet.
func (m *machine) advanceClock(t *rapid.T) {
	ttl := m.ttl.Duration.Milliseconds()
	if rapid.IntRange(0, 3).Draw(t, "clockLong") == 0 {
		ttl *= 2
	}
	d := rapid.Int64Range(0, ttl).Draw(t, "clockAdvance")
	m.now = addSat(m.now, d)
	m.note(t, "clock +%d = %d", d, m.now)
}

// readTTL reads an entry of a state with a TTL, one of every kind: with
// UpdateOnReadAndWrite, reads refresh, and a refresh shows only after the
// clock moves past the timestamp it replaced.
func (m *machine) readTTL(t *rapid.T) {
	s := ttlPrefix + rapid.SampledFrom([]string{"value", "reducing", "aggregating", "list", "map"}).Draw(t, "ttlState")
	k, ns := m.addr(t, s)
	switch s {
	case ttlPrefix + "list":
		g, gerr := m.b.GetList(s, k, ns)
		w, werr := m.m.GetList(s, k, ns)
		if len(g) == 0 {
			g = nil
		}
		m.same(t, fmt.Sprintf("GetList(%q, %q, %q)", s, k, ns), []any{g}, []any{w}, gerr, werr)
	case ttlPrefix + "map":
		uk, _, _ := m.userKey(t, s, k, ns, 3)
		gv, gok, gerr := m.b.GetMapEntry(s, k, ns, uk)
		wv, wok, werr := m.m.GetMapEntry(s, k, ns, uk)
		m.same(t, fmt.Sprintf("GetMapEntry(%q, %q, %q, %q)", s, k, ns, uk), []any{gv, gok}, []any{wv, wok}, gerr, werr)
	default:
		gv, gok, gerr := m.b.Get(s, k, ns)
		wv, wok, werr := m.m.Get(s, k, ns)
		m.same(t, fmt.Sprintf("Get(%q, %q, %q)", s, k, ns), []any{gv, gok}, []any{wv, wok}, gerr, werr)
	}
}

// cleanupExpired runs the backend's incremental cleanup with a small
// budget: it may remove what has expired, which no reader may notice.
func (m *machine) cleanupExpired(t *rapid.T) {
	budget := rapid.IntRange(1, 8).Draw(t, "budget")
	m.b.(contract.TTLBackend).CleanupExpired(budget)
	m.m.CleanupExpired(budget)
}

// put sets a value: often a rewrite of a value the model holds, with the
// same value or another.
func (m *machine) put(t *rapid.T) {
	s := m.state(t, "value")
	var k, ns, v string
	if e, ok := m.held(t, s); ok {
		k, ns, v = e.Key, e.Namespace, e.Value
		if rapid.Bool().Draw(t, "otherValue") {
			v = other(t, v)
		}
	} else {
		k, ns, v = m.key(t), m.ns(t, "ns"), value(t, "value")
	}
	m.same(t, fmt.Sprintf("Put(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Put(s, k, ns, v), m.m.Put(s, k, ns, v))
}

func (m *machine) get(t *rapid.T) {
	s := m.state(t, "value", "reducing", "aggregating")
	k, ns := m.addr(t, s)
	gv, gok, gerr := m.b.Get(s, k, ns)
	wv, wok, werr := m.m.Get(s, k, ns)
	m.same(t, fmt.Sprintf("Get(%q, %q, %q)", s, k, ns), []any{gv, gok}, []any{wv, wok}, gerr, werr)
}

func (m *machine) add(t *rapid.T) {
	s := m.state(t, "list", "reducing", "aggregating")
	k, ns := m.addr(t, s)
	v := value(t, "value")
	m.same(t, fmt.Sprintf("Add(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Add(s, k, ns, v), m.m.Add(s, k, ns, v))
}

// addToWindows adds a value to the entries of one key in several
// namespaces, as a window operator does, so that merges have something to
// merge and their order shows.
func (m *machine) addToWindows(t *rapid.T) {
	s, k := m.state(t, "list", "reducing", "aggregating"), m.key(t)
	for _, ns := range rapid.SliceOfNDistinct(rapid.SampledFrom(m.nss), 1, len(m.nss), rapid.ID).Draw(t, "namespaces") {
		v := value(t, "value")
		m.same(t, fmt.Sprintf("Add(%q, %q, %q, %q)", s, k, ns, v), nil, nil, m.b.Add(s, k, ns, v), m.m.Add(s, k, ns, v))
	}
}

func (m *machine) getList(t *rapid.T) {
	s := m.state(t, "list")
	k, ns := m.addr(t, s)
	g, gerr := m.b.GetList(s, k, ns)
	w, werr := m.m.GetList(s, k, ns)
	if len(g) == 0 {
		g = nil
	}
	m.same(t, fmt.Sprintf("GetList(%q, %q, %q)", s, k, ns), []any{g}, []any{w}, gerr, werr)
}

// updateList replaces a list: often one the model holds, changed at a
// position (an element replaced by an equal or another value, removed, or
// inserted), or emptied; or with a list drawn whole.
func (m *machine) updateList(t *rapid.T) {
	s := m.state(t, "list")
	var k, ns string
	var es []string
	if e, ok := m.held(t, s); ok {
		k, ns, es = e.Key, e.Namespace, slices.Clone(e.List)
		i := rapid.IntRange(0, len(es)).Draw(t, "position")
		switch rapid.IntRange(0, 4).Draw(t, "edit") {
		case 0:
			es = slices.Insert(es, i, value(t, "value"))
		case 1:
			if i < len(es) {
				es = slices.Delete(es, i, i+1)
			}
		case 2:
			if i < len(es) {
				es[i] = other(t, es[i])
			}
		case 3:
			es = es[:i]
		} // 4: the same list again
	} else {
		k, ns = m.key(t), m.ns(t, "ns")
		es = rapid.SliceOfN(bytesGen(), 0, 8).Draw(t, "elems")
	}
	m.same(t, fmt.Sprintf("UpdateList(%q, %q, %q, %q)", s, k, ns, es), nil, nil, m.b.UpdateList(s, k, ns, es), m.m.UpdateList(s, k, ns, es))
}

// userKey draws a user key of the map of (key, ns): one it holds (in
// held of three draws, if it holds any), or any; and its value.
func (m *machine) userKey(t *rapid.T, s, k, ns string, held int) (string, string, bool) {
	var mp map[string]string
	if es, err := m.m.StateEntries(s); err == nil {
		for _, e := range es {
			if e.Key == k && e.Namespace == ns {
				mp = e.Map
			}
		}
	}
	if len(mp) > 0 && rapid.IntRange(0, 2).Draw(t, "heldUserKey") < held {
		uk := rapid.SampledFrom(slices.Sorted(maps.Keys(mp))).Draw(t, "userKey")
		return uk, mp[uk], true
	}
	return bytesGen().Draw(t, "userKey"), "", false
}

func (m *machine) putMapEntry(t *rapid.T) {
	s := m.state(t, "map")
	k, ns := m.addr(t, s)
	uk, uv, ok := m.userKey(t, s, k, ns, 1)
	switch {
	case !ok:
		uv = value(t, "userValue")
	case rapid.Bool().Draw(t, "otherValue"):
		uv = other(t, uv)
	}
	m.same(t, fmt.Sprintf("PutMapEntry(%q, %q, %q, %q, %q)", s, k, ns, uk, uv), nil, nil,
		m.b.PutMapEntry(s, k, ns, uk, uv), m.m.PutMapEntry(s, k, ns, uk, uv))
}

func (m *machine) getMapEntry(t *rapid.T) {
	s := m.state(t, "map")
	k, ns := m.addr(t, s)
	uk, _, _ := m.userKey(t, s, k, ns, 2)
	gv, gok, gerr := m.b.GetMapEntry(s, k, ns, uk)
	wv, wok, werr := m.m.GetMapEntry(s, k, ns, uk)
	m.same(t, fmt.Sprintf("GetMapEntry(%q, %q, %q, %q)", s, k, ns, uk), []any{gv, gok}, []any{wv, wok}, gerr, werr)
}

func (m *machine) removeMapEntry(t *rapid.T) {
	s := m.state(t, "map")
	k, ns := m.addr(t, s)
	uk, _, _ := m.userKey(t, s, k, ns, 2)
	m.same(t, fmt.Sprintf("RemoveMapEntry(%q, %q, %q, %q)", s, k, ns, uk), nil, nil,
		m.b.RemoveMapEntry(s, k, ns, uk), m.m.RemoveMapEntry(s, k, ns, uk))
}

// clearState clears an entry, usually one the model holds.
func (m *machine) clearState(t *rapid.T) {
	s := m.state(t, stateNames...)
	k, ns := m.addr(t, s)
	m.same(t, fmt.Sprintf("ClearState(%q, %q, %q)", s, k, ns), nil, nil, m.b.ClearState(s, k, ns), m.m.ClearState(s, k, ns))
}

// registerAgain registers a state again: a no-op with
// the same kind, an error with another.
func (m *machine) registerAgain(t *rapid.T) {
	i := rapid.IntRange(0, len(stateNames)-1).Draw(t, "state")
	kind := stateKinds[i]
	if rapid.IntRange(0, 3).Draw(t, "otherKind") == 0 {
		kind = stateKinds[(i+1)%len(stateKinds)]
	}
	m.same(t, fmt.Sprintf("RegisterState(%q, %v)", stateNames[i], kind), nil, nil,
		m.b.RegisterState(stateNames[i], kind), m.m.RegisterState(stateNames[i], kind))
}

func (m *machine) registerServiceAgain(t *rapid.T) {
	s := rapid.SampledFrom(services).Draw(t, "service")
	m.same(t, fmt.Sprintf("RegisterTimerService(%q)", s), nil, nil, m.b.RegisterTimerService(s), m.m.RegisterTimerService(s))
}

// merge merges namespaces, usually of a key that has entries in the state
// in several namespaces (so that there is something to merge, and its
// order shows), into one of them or another; a source may repeat or be the
// target.
func (m *machine) merge(t *rapid.T) {
	s := m.state(t, "list", "reducing", "aggregating")
	k := ""
	var held []string // namespaces of k's entries
	if e, ok := m.held(t, s); ok {
		k = e.Key
		es, _ := m.m.StateEntries(s)
		for _, e := range canonical(es) {
			if e.Key == k {
				held = append(held, e.Namespace)
			}
		}
	} else {
		k = m.key(t)
	}
	nsGen := rapid.Custom(func(t *rapid.T) string {
		if len(held) > 0 && rapid.IntRange(0, 3).Draw(t, "heldNs") > 0 {
			return rapid.SampledFrom(held).Draw(t, "ns")
		}
		return m.ns(t, "ns")
	})
	target := nsGen.Draw(t, "target")
	srcs := rapid.SliceOfN(nsGen, 0, 4).Draw(t, "sources")
	m.same(t, fmt.Sprintf("MergeNamespaces(%q, %q, %q, %q)", s, k, target, srcs), nil, nil,
		m.b.MergeNamespaces(s, k, target, srcs), m.m.MergeNamespaces(s, k, target, srcs))
}
