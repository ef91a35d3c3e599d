package pebblestate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
)

// State time-to-live, as Flink's RocksDB backend keeps it: in a state
// registered with a TTL every stored value (a value, reducing or
// aggregating state's value, each list element, each map value) is its
// expiration timestamp, 8 bytes big-endian, then its bytes (keys.go). A
// write stamps what it writes to expire the TTL after the clock's time;
// with UpdateOnReadAndWrite a read of something live stamps it again.
// Something is expired when its stamp <= the clock: every operation reads
// it as absent (an Add to an expired value starts over, a merge skips an
// expired source, a list drops its expired elements), StateEntries and
// views leave it out (a view at its capture's time), and so do snapshots
// and savepoints; CleanupExpired removes it from the database.

var _ contract.TTLBackend = (*Backend)(nil)

// ttlFlag marks, in a state's kind record, a state registered with a TTL
// (its values are stamped).
const ttlFlag = 0x80

// RegisterStateTTL implements contract.TTLBackend: it registers a state
// whose values expire ttl.Duration after they were written (or read, with
// UpdateOnReadAndWrite). Again with the same kind and TTL it is a no-op;
// with another kind or TTL, or for a state registered (or stored) without
// a TTL, an error matching statetable.ErrStateMismatch; a TTL under a
// millisecond is an error matching statetable.ErrConfig. The database
// records that the state's values are stamped; the duration may change
// from one Open to the next (stamps are absolute times). Writer goroutine.
func (b *Backend) RegisterStateTTL(name string, kind statetable.Kind, ttl statetable.TTL) error {
	if b.closed {
		return ErrClosed
	}
	if ttl.Duration.Milliseconds() < 1 {
		return fmt.Errorf("%w: state %q: TTL %v, want at least 1ms", statetable.ErrConfig, name, ttl.Duration)
	}
	if old, ok := b.kinds[name]; ok {
		have, hasTTL := b.ttls[name]
		switch {
		case old != kind:
			return fmt.Errorf("%w: %q is a %v state, not %v", statetable.ErrStateMismatch, name, old, kind)
		case !hasTTL:
			return fmt.Errorf("%w: %q is registered without a TTL", statetable.ErrStateMismatch, name)
		case have != ttl:
			return fmt.Errorf("%w: %q is registered with TTL %+v", statetable.ErrStateMismatch, name, have)
		}
		return nil
	}
	if err := b.register(name, kind, true); err != nil {
		return err
	}
	b.ttls[name] = ttl
	return nil
}

// ttlAt is what an operation on a state needs of its TTL: the clock's time
// and the stamp of what it writes, read once per operation.
type ttlAt struct {
	on     bool // the state has a TTL
	onRead bool // reads stamp again
	now    int64
	exp    int64
}

func (b *Backend) ttlAt(state string) ttlAt {
	ttl, ok := b.ttls[state]
	if !ok {
		return ttlAt{}
	}
	now := b.clock()
	return ttlAt{on: true, onRead: ttl.Update == statetable.UpdateOnReadAndWrite, now: now, exp: addSat(now, ttl.Duration.Milliseconds())}
}

// addSat is a + b, saturated at the int64 range.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// stamp returns v stamped to expire at exp.
func stamp(exp int64, v []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), uint64(exp)), v...)
}

// split splits a stamped value into its stamp and its bytes.
func split(v []byte) (int64, []byte, error) {
	if len(v) < 8 {
		return 0, nil, fmt.Errorf("a stamped value of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), v[8:], nil
}

// liveList returns the live elements of a stored list of a state with a
// TTL, in their stored (stamped) form.
func liveList(v []byte, now int64) ([]string, error) {
	elems, err := decodeList(v)
	if err != nil {
		return nil, err
	}
	live := elems[:0]
	for i, e := range elems {
		exp, _, err := split([]byte(e))
		if err != nil {
			return nil, fmt.Errorf("element %d: %v", i, err)
		}
		if exp > now {
			live = append(live, e)
		}
	}
	return live, nil
}

// unstampList returns the bytes of stamped list elements.
func unstampList(elems []string) []string {
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = e[8:]
	}
	return out
}

// liveStored returns what of a stored record of a state of kind kind with
// a TTL is live at now, in its stored form, and false if nothing is (a
// value, map value or list whose every stamp is <= now).
func liveStored(kind statetable.Kind, v []byte, now int64) ([]byte, bool, error) {
	if kind == statetable.KindList {
		live, err := liveList(v, now)
		if err != nil || len(live) == 0 {
			return nil, false, err
		}
		return encodeList(live), true, nil
	}
	exp, _, err := split(v)
	if err != nil {
		return nil, false, err
	}
	return v, exp > now, nil
}

// CleanupExpired implements contract.TTLBackend: it visits about budget
// database keys of the owned key groups, going on from where the last
// call stopped (wrapping around), and removes what of the states with a
// TTL has expired: an expired value or map user key is deleted, a list
// loses its expired elements. It returns the keys visited and the
// records removed or rewritten. A record that does not decode is left
// for the reads to report. Writer goroutine; O(budget) steps and one
// batch.
func (b *Backend) CleanupExpired(budget int) (visited, removed int) {
	if b.closed || budget <= 0 || len(b.ttls) == 0 || b.owned.Empty() {
		return 0, 0
	}
	now := b.clock()
	lo, hi := kgPrefix(nil, b.owned.First), kgPrefix(nil, b.owned.Last+1)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, 0
	}
	defer it.Close()
	batch := b.db.NewBatch()
	defer batch.Close()
	start := b.cleanupAt
	ok := start != nil && it.SeekGE(start)
	wrapped := false
	if !ok {
		ok, wrapped = it.First(), true
	}
	for ok && visited < budget {
		k := it.Key()
		if wrapped && start != nil && bytes.Compare(k, start) >= 0 {
			break // once around
		}
		visited++
		if pk, err := parseKey(k); err == nil && !pk.timer {
			if _, ttl := b.ttls[pk.name]; ttl {
				if v, err := it.ValueAndErr(); err == nil {
					live, keep, err := liveStored(b.kinds[pk.name], v, now)
					switch {
					case err != nil:
					case !keep:
						_ = batch.Delete(k, nil)
						removed++
					case !bytes.Equal(live, v):
						_ = batch.Set(k, live, nil)
						removed++
					}
				}
			}
		}
		if ok = it.Next(); !ok && !wrapped {
			ok, wrapped = it.First(), true
		}
	}
	b.cleanupAt = nil
	if ok {
		b.cleanupAt = bytes.Clone(it.Key())
	}
	if removed > 0 {
		if err := batch.Commit(b.wo); err != nil {
			return visited, 0
		}
	}
	return visited, removed
}
