package statetable

import (
	"strings"
	"testing"
	"time"
)

// TestTTL_CleanupPerAccessOfAbsentKeys checks that the per-access cleanup
// runs on every access of a TTL state, whether the key accessed has an
// entry or not, as Flink's cleanup on every record does: 1000 entries
// written at 0 with a TTL of 100 ms, the clock at 300, and 300 accesses of
// keys that have no entry, 10 entries visited each, leave none.
func TestTTL_CleanupPerAccessOfAbsentKeys(t *testing.T) {
	cfg := TTL{Duration: 100 * time.Millisecond, CleanupPerAccess: 10}
	type access struct {
		name string
		fill func(k int64) error
		read func(k int64) error
	}
	var cases []func(tb *ttlTable) []access
	cases = append(cases, func(tb *ttlTable) []access {
		v := must[*ValueState[int64, VoidNamespace, string]](t)(NewValueWithTTL(tb.Table, "value", Int64, Void, String, "", cfg))
		fill := func(k int64) error { return v.Put(k, void, "v") }
		return []access{
			{"value Get", fill, func(k int64) error { _, err := v.Get(k, void); return err }},
			{"value Lookup", fill, func(k int64) error { _, _, err := v.Lookup(k, void); return err }},
			{"value Clear", fill, func(k int64) error { return v.Clear(k, void) }},
		}
	})
	cases = append(cases, func(tb *ttlTable) []access {
		r := must[*ReducingState[int64, VoidNamespace, int64]](t)(NewReducingWithTTL(tb.Table, "reduce", Int64, Void, Int64,
			func(a, b int64) int64 { return a + b }, cfg))
		fill := func(k int64) error { return r.Add(k, void, 1) }
		return []access{
			{"reducing Get", fill, func(k int64) error { _, _, err := r.Get(k, void); return err }},
			{"reducing Clear", fill, func(k int64) error { return r.Clear(k, void) }},
		}
	})
	cases = append(cases, func(tb *ttlTable) []access {
		l := must[*ListState[int64, VoidNamespace, int64]](t)(NewListWithTTL(tb.Table, "list", Int64, Void, Int64, cfg))
		fill := func(k int64) error { return l.Add(k, void, 1) }
		return []access{
			{"list Get", fill, func(k int64) error { _, err := l.Get(k, void); return err }},
			{"list Len", fill, func(k int64) error { _, err := l.Len(k, void); return err }},
			{"list Clear", fill, func(k int64) error { return l.Clear(k, void) }},
		}
	})
	cases = append(cases, func(tb *ttlTable) []access {
		m := must[*MapState[int64, VoidNamespace, int64, int64]](t)(NewMapStateWithTTL(tb.Table, "map", Int64, Void, Int64, Int64, cfg))
		fill := func(k int64) error { return m.Put(k, void, 1, 1) }
		return []access{
			{"map Get", fill, func(k int64) error { _, _, err := m.Get(k, void, 1); return err }},
			{"map Contains", fill, func(k int64) error { _, err := m.Contains(k, void, 1); return err }},
			{"map Len", fill, func(k int64) error { _, err := m.Len(k, void); return err }},
			{"map Clear", fill, func(k int64) error { return m.Clear(k, void) }},
		}
	})
	for _, mk := range cases {
		for i := range len(mk(newTTLTable(t))) {
			tb := newTTLTable(t)
			a := mk(tb)[i]
			t.Run(a.name, func(t *testing.T) {
				state := strings.Fields(a.name)[0]
				for k := range int64(1000) {
					noErr(t, a.fill(k))
				}
				tb.now = 300
				for k := range int64(300) {
					noErr(t, a.read(-1-k)) // keys that were never written
				}
				if n := must[int](t)(tb.Entries(stateName(state))); n != 0 {
					t.Errorf("%d entries left after 300 accesses of absent keys, 10 visited per access", n)
				}
			})
		}
	}
}

func stateName(kind string) string {
	if kind == "reducing" {
		return "reduce"
	}
	return kind
}
