package statetable

import (
	"fmt"
	"testing"
)

// encodedBytes sums what a full snapshot encodes of a state: composite
// keys and cells, every key group.
func encodedBytes(t *testing.T, tb *Table, name string) int64 {
	t.Helper()
	snap := tb.View(tb.Owner().Capture())
	defer snap.Capture().Release()
	var n int64
	for g := range tb.MaxParallelism() {
		if err := snap.KeyGroupEntries(name, g, func(key, cell []byte) bool {
			n += int64(len(key) + len(cell))
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func TestTable_Stats(t *testing.T) {
	s := newStates(t)
	// Small states: the sample is the whole state, the bytes exact.
	for i := range 5 {
		k := fmt.Sprint("k", i)
		if err := s.list.Add(k, "ns", int64(i)); err != nil {
			t.Fatal(err)
		}
		if err := s.mp.Put(k, "ns", "uk", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.list.Add("k0", "ns", 99); err != nil { // cells of other sizes
		t.Fatal(err)
	}
	// A state beyond the sample, of fixed-size entries: the estimate is
	// exact too.
	for i := range 10 * StatsSample {
		if err := s.value.Put(fmt.Sprintf("key-%04d", i), "ns", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]StateStats{
		"value":  {"value", KindValue, 10 * StatsSample, encodedBytes(t, s.t, "value")},
		"list":   {"list", KindList, 5, encodedBytes(t, s.t, "list")},
		"map":    {"map", KindMap, 5, encodedBytes(t, s.t, "map")},
		"reduce": {"reduce", KindReducing, 0, 0},
		"agg":    {"agg", KindAggregating, 0, 0},
	}
	got := s.t.Stats()
	if len(got) != len(want) {
		t.Fatalf("Stats has %d states, want %d: %+v", len(got), len(want), got)
	}
	for i, st := range got {
		if st != want[st.Name] {
			t.Errorf("Stats()[%d] = %+v, want %+v", i, st, want[st.Name])
		}
	}
	if want["value"].Bytes == 0 || want["list"].Bytes == 0 {
		t.Fatal("encodedBytes found nothing")
	}
}
