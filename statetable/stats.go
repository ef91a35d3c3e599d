package statetable

// StatsSample is the number of entries per state that Table.Stats encodes
// to estimate a state's bytes.
const StatsSample = 32

// StateStats is what Table.Stats reports of one state.
type StateStats struct {
	Name    string
	Kind    Kind
	Entries int // (key, namespace) entries
	// Bytes estimates the state's size as a full snapshot encodes it
	// (composite keys and cells in their codecs' encodings, without the
	// file's framing): Entries times the mean size of the first
	// StatsSample entries in entry-hash order. It is exact for a state of
	// at most StatsSample entries, and an estimate (not a bound) above.
	// The heap the state takes is larger: nodes of the persistent maps
	// and Go values rather than encodings.
	Bytes int64
}

// Stats reports each registered state's entries and estimated bytes, in
// registration order. Cost: per state, the encoding of at most StatsSample
// entries (a list or map cell is encoded whole), whatever the state's
// size; nothing is captured or copied. Writer goroutine only.
func (t *Table) Stats() []StateStats {
	out := make([]StateStats, 0, len(t.names))
	for _, n := range t.names {
		r := t.states[n]
		st := StateStats{Name: n, Kind: r.info().Kind, Entries: r.count()}
		if bytes, sampled := r.sampleBytes(StatsSample); sampled > 0 {
			st.Bytes = int64(bytes) * int64(st.Entries) / int64(sampled)
		}
		out = append(out, st)
	}
	return out
}

// sampleBytes returns the encoded size (composite key plus cell) of the
// first n entries in map order, and how many it encoded.
func (c *cells[K, N, C]) sampleBytes(n int) (bytes, sampled int) {
	var buf []byte
	c.m.all(func(ck string, v C) bool {
		buf = c.cell.enc(buf[:0], v)
		bytes += len(ck) + len(buf)
		sampled++
		return sampled < n
	})
	return bytes, sampled
}
