package statetable

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTTL_DiffOfVariableWidthValues checks that after deletes from a TTL
// state of strings, DiffState yields only the entries that differ: the
// deletes, and no put of an entry whose bytes did not change.
func TestTTL_DiffOfVariableWidthValues(t *testing.T) {
	for _, kind := range []string{"value", "reduce"} {
		t.Run(kind, func(t *testing.T) {
			tb := newTTLTable(t)
			cfg := TTL{Duration: time.Hour}
			var put func(k int64, v string) error
			var clear func(k int64) error
			switch kind {
			case "value":
				v := must[*ValueState[int64, VoidNamespace, string]](t)(NewValueWithTTL(tb.Table, kind, Int64, Void, String, "", cfg))
				put, clear = func(k int64, s string) error { return v.Put(k, void, s) }, func(k int64) error { return v.Clear(k, void) }
			case "reduce":
				r := must[*ReducingState[int64, VoidNamespace, string]](t)(NewReducingWithTTL(tb.Table, kind, Int64, Void, String,
					func(a, b string) string { return a + b }, cfg))
				put, clear = func(k int64, s string) error { return r.Add(k, void, s) }, func(k int64) error { return r.Clear(k, void) }
			}
			for k := range int64(2000) {
				noErr(t, put(k, fmt.Sprintf("value-%d-%s", k, strings.Repeat("x", int(k%7)))))
			}
			prev := tb.View(tb.Owner().Capture())
			defer prev.Capture().Release()
			for k := int64(0); k < 2000; k += 20 {
				noErr(t, clear(k))
			}
			next := tb.View(tb.Owner().Capture())
			defer next.Capture().Release()
			ops := map[ChangeOp]int{}
			noErr(t, DiffState(prev, next, kind, func(c EntryChange) bool {
				ops[c.Op]++
				return true
			}))
			if ops[OpDelete] != 100 || len(ops) != 1 {
				t.Errorf("diff after 100 clears of 2000: %v, want 100 deletes and nothing else", ops)
			}
		})
	}
}
