package pebblestate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
	"github.com/cowstate/cowstate/timerqueue"
)

// Options configures Open.
type Options struct {
	// Config is the backend's max parallelism, owned key groups and
	// processing-time clock, as for cowstate.New.
	cowstate.Config
	// Dir is the directory of the database, created if missing. A
	// directory that holds a database of this package is opened again with
	// what it holds (its max parallelism must match); the states and timer
	// services are registered again by the caller.
	Dir string
	// FS is the filesystem Dir is on: nil is the operating system's;
	// vfs.NewMem() keeps the database in memory (tests).
	FS vfs.FS
	// Pebble, if not nil, is the database's tuning; Open sets its FS and
	// leaves the caller's value unchanged.
	Pebble *pebble.Options
	// Sync makes every write durable before it returns (a WAL sync per
	// operation). Without it writes are durable when the WAL is synced in
	// the background or the database is closed: checkpoints (snapshots)
	// are what a job restores from, as with Flink's RocksDB backend.
	Sync bool
}

// Backend is a contract.Backend on a Pebble database: every entry and
// timer is a key of one keyspace that starts with its key group (see
// keys.go), Capture is a Pebble snapshot, and WriteSnapshot and
// RestoreSnapshot use this package's own format (doc.go).
//
// A Backend has a single writer: every method but Close belongs to one
// goroutine, and timer callbacks run on it. Its Views may be read, written
// and released from any goroutine. Every operation is one Pebble read or
// write (a list Add rewrites the list: O(list length)); timer firing keeps
// the head of every key group's queue in memory, so finding the next due
// timer is O(owned key groups) comparisons and one Pebble seek for each
// key group whose head changed.
type Backend struct {
	db       *pebble.DB
	wo       *pebble.WriteOptions
	maxPar   int
	owned    statetable.KeyGroupRange
	clock    func() int64
	kinds    map[string]statetable.Kind
	services map[string]*service
	// infos and codecs are the codec IDs (and TTL flags) a restored
	// savepoint gave states and timer services (savepoint.go); ttls the
	// TTLs of the states registered with one.
	infos  map[string]statetable.StateInfo
	codecs map[string][2]string
	ttls   map[string]statetable.TTL
	// cleanupAt is the key CleanupExpired goes on from (nil: the start).
	cleanupAt []byte
	closed    bool
}

var _ contract.Backend = (*Backend)(nil)

// Open opens (or creates) the database in opts.Dir. The caller closes it
// with Close.
func Open(opts Options) (*Backend, error) {
	maxPar := opts.MaxParallelism
	if maxPar == 0 {
		maxPar = statetable.DefaultMaxParallelism
	}
	if maxPar < 1 || maxPar > statetable.MaxParallelismLimit {
		return nil, fmt.Errorf("%w: max parallelism %d, want 1 to %d", cowstate.ErrConfig, maxPar, statetable.MaxParallelismLimit)
	}
	owned := statetable.AllKeyGroups(maxPar)
	if opts.KeyGroups != nil {
		owned = *opts.KeyGroups
		if !owned.Empty() && (owned.First < 0 || owned.Last >= maxPar) {
			return nil, fmt.Errorf("%w: key groups %v of max parallelism %d", cowstate.ErrConfig, owned, maxPar)
		}
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: pebblestate needs a directory (Options.Dir)", cowstate.ErrConfig)
	}
	clock := opts.Clock
	if clock == nil {
		clock = func() int64 { return time.Now().UnixMilli() }
	}
	po := &pebble.Options{}
	if opts.Pebble != nil {
		po = opts.Pebble.Clone()
	}
	if po.Logger == nil {
		po.Logger = quietLogger{}
	}
	po.FS = opts.FS
	if po.FS == nil {
		po.FS = vfs.Default
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebblestate: open %q: %w", opts.Dir, err)
	}
	b := &Backend{db: db, wo: pebble.NoSync, maxPar: maxPar, owned: owned, clock: clock,
		kinds: map[string]statetable.Kind{}, services: map[string]*service{},
		infos: map[string]statetable.StateInfo{}, codecs: map[string][2]string{}, ttls: map[string]statetable.TTL{}}
	if opts.Sync {
		b.wo = pebble.Sync
	}
	if err := b.checkMaxParallelism(); err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// checkMaxParallelism records the max parallelism in a new database and
// checks it in an existing one.
func (b *Backend) checkMaxParallelism() error {
	k := append(bytes.Clone(metaPrefix), tagMaxP)
	v, err := b.get(b.db, k)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return b.db.Set(k, binary.AppendUvarint(nil, uint64(b.maxPar)), pebble.Sync)
	case err != nil:
		return err
	}
	n, l := binary.Uvarint(v)
	if l != len(v) {
		return fmt.Errorf("%w: max parallelism record %x", ErrCorrupt, v)
	}
	if n != uint64(b.maxPar) {
		return fmt.Errorf("%w: database of max parallelism %d opened with %d", ErrMismatch, n, b.maxPar)
	}
	return nil
}

// Close closes the database. Release every View first: Pebble reports
// snapshots still open as an error. Writer goroutine; idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	return b.db.Close()
}

// DB returns the Pebble database, for metrics and tuning; writing it
// directly voids the backend's invariants.
func (b *Backend) DB() *pebble.DB { return b.db }

// MaxParallelism implements contract.Backend.
func (b *Backend) MaxParallelism() int { return b.maxPar }

// KeyGroups implements contract.Backend.
func (b *Backend) KeyGroups() statetable.KeyGroupRange { return b.owned }

// RegisterState implements contract.Backend. The kind is recorded in the
// database, so that a database opened again refuses a state registered
// with another kind; the codec IDs a restored savepoint gave the state are
// read back (RestoreSavepoint).
func (b *Backend) RegisterState(name string, kind statetable.Kind) error {
	if b.closed {
		return ErrClosed
	}
	if old, ok := b.kinds[name]; ok {
		if old != kind {
			return fmt.Errorf("%w: %q is a %v state, not %v", statetable.ErrStateMismatch, name, old, kind)
		}
		return nil
	}
	return b.register(name, kind, false)
}

// register registers a new state, recording its kind (and whether its
// values are stamped) in the database or checking the recorded one.
func (b *Backend) register(name string, kind statetable.Kind, ttl bool) error {
	if kind < statetable.KindValue || kind > statetable.KindAggregating {
		return fmt.Errorf("%w: state %q of unknown kind %v", contract.ErrKind, name, kind)
	}
	if name == "" {
		return fmt.Errorf("%w: a state needs a name", cowstate.ErrConfig)
	}
	rec := byte(kind)
	if ttl {
		rec |= ttlFlag
	}
	v, err := b.get(b.db, kindKey(name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := b.db.Set(kindKey(name), []byte{rec}, b.wo); err != nil {
			return fmt.Errorf("pebblestate: register state %q: %w", name, err)
		}
	case err != nil:
		return err
	case len(v) != 1 || v[0] != rec:
		return fmt.Errorf("%w: %q is stored as %s, not %s", statetable.ErrStateMismatch, name, kindRecord(v), kindRecord([]byte{rec}))
	}
	if err := b.loadInfo(name, kind); err != nil {
		return err
	}
	b.kinds[name] = kind
	return nil
}

// kindRecord describes a kind record, for errors.
func kindRecord(v []byte) string {
	if len(v) != 1 {
		return fmt.Sprintf("a record of %d bytes", len(v))
	}
	if v[0]&ttlFlag != 0 {
		return fmt.Sprintf("a %v state with a TTL", statetable.Kind(v[0]&^ttlFlag))
	}
	return fmt.Sprintf("a %v state", statetable.Kind(v[0]))
}

// RegisterTimerService implements contract.Backend.
func (b *Backend) RegisterTimerService(name string) error {
	if b.closed {
		return ErrClosed
	}
	if _, ok := b.services[name]; !ok {
		if err := b.loadCodecs(name); err != nil {
			return err
		}
		b.services[name] = newService(name, b.owned)
	}
	return nil
}

// get returns a copy of the value of k in r.
func (b *Backend) get(r pebble.Reader, k []byte) ([]byte, error) {
	v, c, err := r.Get(k)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	return out, c.Close()
}

// keyGroup returns the key group of key, or an error if it is not owned.
func (b *Backend) keyGroup(key string) (int, error) {
	kg := statetable.KeyGroupOfKey([]byte(key), b.maxPar)
	if !b.owned.Contains(kg) {
		return 0, fmt.Errorf("%w: key %q is in key group %d, the backend owns %v", statetable.ErrKeyGroupNotOwned, key, kg, b.owned)
	}
	return kg, nil
}

// state checks that state is registered with one of kinds (any if none)
// and that key is owned, and returns the state's kind and the key group.
func (b *Backend) state(state, key string, kinds ...statetable.Kind) (statetable.Kind, int, error) {
	if b.closed {
		return 0, 0, ErrClosed
	}
	kind, ok := b.kinds[state]
	if !ok {
		return 0, 0, fmt.Errorf("%w %q", statetable.ErrUnknownState, state)
	}
	if len(kinds) > 0 && !slices.Contains(kinds, kind) {
		return 0, 0, fmt.Errorf("%w: %q is a %v state", contract.ErrKind, state, kind)
	}
	kg, err := b.keyGroup(key)
	return kind, kg, err
}

// Put implements contract.Backend.Put; in a state with a TTL the value is
// stamped (ttl.go).
func (b *Backend) Put(state, key, ns, value string) error {
	_, kg, err := b.state(state, key, statetable.KindValue)
	if err != nil {
		return err
	}
	if value == "" {
		return b.db.Delete(entryKey(kg, state, key, ns), b.wo)
	}
	v := []byte(value)
	if t := b.ttlAt(state); t.on {
		v = stamp(t.exp, v)
	}
	return b.db.Set(entryKey(kg, state, key, ns), v, b.wo)
}

// Get implements contract.Backend.Get; an expired value is absent.
func (b *Backend) Get(state, key, ns string) (string, bool, error) {
	kind, kg, err := b.state(state, key, statetable.KindValue, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return "", false, err
	}
	k := entryKey(kg, state, key, ns)
	v, err := b.get(b.db, k)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if t := b.ttlAt(state); t.on {
		exp, rest, err := split(v)
		if err != nil {
			return "", false, fmt.Errorf("%w: value of (%q, %q) in state %q: %v", ErrCorrupt, key, ns, state, err)
		}
		if exp <= t.now {
			return "", false, nil
		}
		if t.onRead {
			if err := b.db.Set(k, stamp(t.exp, rest), b.wo); err != nil {
				return "", false, err
			}
		}
		v = rest
	}
	if kind == statetable.KindAggregating {
		return contract.Aggregate{}.Result(string(v)), true, nil
	}
	return string(v), true, nil
}

// load reads the stored value of k of a list, reducing or aggregating
// state for an update: for a list its elements as stored (in a state with
// a TTL, the live ones, stamped), for the others the value's bytes (nil
// and false if absent or expired).
func (b *Backend) load(r pebble.Reader, k []byte, kind statetable.Kind, t ttlAt) (elems []string, v []byte, have bool, err error) {
	old, err := b.get(r, k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	switch {
	case kind == statetable.KindList && t.on:
		elems, err = liveList(old, t.now)
		return elems, nil, len(elems) > 0, err
	case kind == statetable.KindList:
		elems, err = decodeList(old)
		return elems, nil, true, err
	case t.on:
		exp, rest, err := split(old)
		if err != nil || exp <= t.now {
			return nil, nil, false, err
		}
		return nil, rest, true, nil
	}
	return nil, old, true, nil
}

// Add implements contract.Backend.Add: a list is read, appended to and
// written back (O(list length)); with a TTL, an expired value starts
// over and a list drops its expired elements.
func (b *Backend) Add(state, key, ns, v string) error {
	kind, kg, err := b.state(state, key, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	t := b.ttlAt(state)
	k := entryKey(kg, state, key, ns)
	elems, old, have, err := b.load(b.db, k, kind, t)
	if err != nil {
		return fmt.Errorf("%w: (%q, %q) in state %q: %w", ErrCorrupt, key, ns, state, err)
	}
	var nv []byte
	switch {
	case kind == statetable.KindList && t.on:
		return b.db.Set(k, encodeList(append(elems, string(stamp(t.exp, []byte(v))))), b.wo)
	case kind == statetable.KindList:
		return b.db.Set(k, encodeList(append(elems, v)), b.wo)
	case kind == statetable.KindReducing && have:
		nv = []byte(contract.Reduce(string(old), v))
	case kind == statetable.KindReducing:
		nv = []byte(v)
	default:
		acc := contract.Aggregate{}.CreateAccumulator()
		if have {
			acc = string(old)
		}
		nv = []byte(contract.Aggregate{}.Add(v, acc))
	}
	if t.on {
		nv = stamp(t.exp, nv)
	}
	return b.db.Set(k, nv, b.wo)
}

// GetList implements contract.Backend.GetList; with a TTL, the live
// elements.
func (b *Backend) GetList(state, key, ns string) ([]string, error) {
	_, kg, err := b.state(state, key, statetable.KindList)
	if err != nil {
		return nil, err
	}
	t := b.ttlAt(state)
	k := entryKey(kg, state, key, ns)
	elems, _, have, err := b.load(b.db, k, statetable.KindList, t)
	if err != nil {
		return nil, fmt.Errorf("%w: list of (%q, %q) in state %q: %w", ErrCorrupt, key, ns, state, err)
	}
	if !have {
		return nil, nil
	}
	if !t.on {
		return elems, nil
	}
	out := unstampList(elems)
	if t.onRead {
		if err := b.db.Set(k, encodeList(stampList(t.exp, out)), b.wo); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stampList returns the elements stamped to expire at exp.
func stampList(exp int64, elems []string) []string {
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = string(stamp(exp, []byte(e)))
	}
	return out
}

// UpdateList implements contract.Backend.UpdateList.
func (b *Backend) UpdateList(state, key, ns string, elems []string) error {
	_, kg, err := b.state(state, key, statetable.KindList)
	if err != nil {
		return err
	}
	if len(elems) == 0 {
		return b.db.Delete(entryKey(kg, state, key, ns), b.wo)
	}
	if t := b.ttlAt(state); t.on {
		elems = stampList(t.exp, elems)
	}
	return b.db.Set(entryKey(kg, state, key, ns), encodeList(elems), b.wo)
}

// PutMapEntry implements contract.Backend.PutMapEntry: one Pebble key
// per user key.
func (b *Backend) PutMapEntry(state, key, ns, userKey, userValue string) error {
	_, kg, err := b.state(state, key, statetable.KindMap)
	if err != nil {
		return err
	}
	v := []byte(userValue)
	if t := b.ttlAt(state); t.on {
		v = stamp(t.exp, v)
	}
	return b.db.Set(mapKey(kg, state, key, ns, userKey), v, b.wo)
}

// GetMapEntry implements contract.Backend.GetMapEntry; an expired user
// key is absent.
func (b *Backend) GetMapEntry(state, key, ns, userKey string) (string, bool, error) {
	_, kg, err := b.state(state, key, statetable.KindMap)
	if err != nil {
		return "", false, err
	}
	k := mapKey(kg, state, key, ns, userKey)
	v, err := b.get(b.db, k)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if t := b.ttlAt(state); t.on {
		exp, rest, err := split(v)
		if err != nil {
			return "", false, fmt.Errorf("%w: map value of (%q, %q) in state %q: %v", ErrCorrupt, key, ns, state, err)
		}
		if exp <= t.now {
			return "", false, nil
		}
		if t.onRead {
			if err := b.db.Set(k, stamp(t.exp, rest), b.wo); err != nil {
				return "", false, err
			}
		}
		v = rest
	}
	return string(v), true, nil
}

// RemoveMapEntry implements contract.Backend.RemoveMapEntry; the map
// (key, ns) is gone when its last user key is.
func (b *Backend) RemoveMapEntry(state, key, ns, userKey string) error {
	_, kg, err := b.state(state, key, statetable.KindMap)
	if err != nil {
		return err
	}
	return b.db.Delete(mapKey(kg, state, key, ns, userKey), b.wo)
}

// ClearState implements contract.Backend.ClearState; a map is cleared
// with one range deletion.
func (b *Backend) ClearState(state, key, ns string) error {
	kind, kg, err := b.state(state, key)
	if err != nil {
		return err
	}
	k := entryKey(kg, state, key, ns)
	if kind == statetable.KindMap {
		return b.db.DeleteRange(k, prefixEnd(k), b.wo)
	}
	return b.db.Delete(k, b.wo)
}

// MergeNamespaces implements contract.Backend.MergeNamespaces, in one
// Pebble batch, committed at once. With a TTL, expired sources (and
// expired list elements) are skipped; list elements keep their stamps,
// a merged value is stamped afresh.
func (b *Backend) MergeNamespaces(state, key, target string, sources []string) error {
	kind, kg, err := b.state(state, key, statetable.KindList, statetable.KindReducing, statetable.KindAggregating)
	if err != nil {
		return err
	}
	t := b.ttlAt(state)
	// An indexed batch: a source named twice is read as deleted the
	// second time.
	batch := b.db.NewIndexedBatch()
	defer batch.Close()
	tk := entryKey(kg, state, key, target)
	accList, acc, have, err := b.load(batch, tk, kind, t)
	if err != nil {
		return fmt.Errorf("%w: (%q, %q) in state %q: %w", ErrCorrupt, key, target, state, err)
	}
	merged := false
	for _, src := range sources {
		if src == target {
			continue
		}
		sk := entryKey(kg, state, key, src)
		l, v, ok, err := b.load(batch, sk, kind, t)
		if err != nil {
			return fmt.Errorf("%w: (%q, %q) in state %q: %w", ErrCorrupt, key, src, state, err)
		}
		if !ok {
			continue
		}
		if err := batch.Delete(sk, nil); err != nil {
			return err
		}
		merged = true
		switch {
		case kind == statetable.KindList:
			accList, have = append(accList, l...), true
		case !have:
			acc, have = v, true
		case kind == statetable.KindReducing:
			acc = []byte(contract.Reduce(string(acc), string(v)))
		default:
			acc = []byte(contract.Aggregate{}.Merge(string(acc), string(v)))
		}
	}
	if !merged {
		return nil
	}
	switch {
	case kind == statetable.KindList:
		acc = encodeList(accList)
	case t.on:
		acc = stamp(t.exp, acc)
	}
	if err := batch.Set(tk, acc, nil); err != nil {
		return err
	}
	return batch.Commit(b.wo)
}

// StateEntries implements contract.EntryReader on the live database,
// leaving out what has expired. O(owned key groups + entries).
func (b *Backend) StateEntries(state string) ([]contract.Entry, error) {
	if b.closed {
		return nil, ErrClosed
	}
	kind, ok := b.kinds[state]
	if !ok {
		return nil, fmt.Errorf("%w %q", statetable.ErrUnknownState, state)
	}
	_, ttl := b.ttls[state]
	return stateEntries(b.db, b.owned, state, kind, ttl, b.clock())
}

// TimerEntries implements contract.EntryReader on the live database.
func (b *Backend) TimerEntries(service string, d timerqueue.Domain) ([]contract.Timer, error) {
	if b.closed {
		return nil, ErrClosed
	}
	if _, ok := b.services[service]; !ok {
		return nil, fmt.Errorf("%w: no timer service %q", contract.ErrUnknownTimerService, service)
	}
	return timerEntries(b.db, b.owned, service, d)
}

// stateEntries reads every entry of a state in the key groups kgs of r;
// of a state with a TTL (ttl), what is live at now, unstamped.
func stateEntries(r pebble.Reader, kgs statetable.KeyGroupRange, state string, kind statetable.Kind, ttl bool, now int64) ([]contract.Entry, error) {
	it, err := r.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []contract.Entry
	err = scan(it, kgs, func(kg int) []byte { return statePrefix(kg, state) }, func(k, v []byte) error {
		pk, err := parseKey(k)
		if err != nil || pk.timer || pk.hasUserKey != (kind == statetable.KindMap) {
			return fmt.Errorf("%w: key %x of state %q: %v", ErrCorrupt, k, state, err)
		}
		if ttl {
			live, keep, err := liveStored(kind, v, now)
			if err != nil {
				return fmt.Errorf("%w: (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, state, err)
			}
			if !keep {
				return nil
			}
			if kind == statetable.KindList {
				l, _ := decodeList(live)
				out = append(out, contract.Entry{Key: pk.key, Namespace: pk.ns, List: unstampList(l)})
				return nil
			}
			v = v[8:]
		}
		switch kind {
		case statetable.KindMap:
			if n := len(out); n > 0 && out[n-1].Key == pk.key && out[n-1].Namespace == pk.ns {
				out[n-1].Map[pk.userKey] = string(v)
				return nil
			}
			out = append(out, contract.Entry{Key: pk.key, Namespace: pk.ns, Map: map[string]string{pk.userKey: string(v)}})
		case statetable.KindList:
			l, err := decodeList(v)
			if err != nil {
				return fmt.Errorf("%w: list of (%q, %q) in state %q: %w", ErrCorrupt, pk.key, pk.ns, state, err)
			}
			out = append(out, contract.Entry{Key: pk.key, Namespace: pk.ns, List: l})
		case statetable.KindAggregating:
			out = append(out, contract.Entry{Key: pk.key, Namespace: pk.ns, Value: contract.Aggregate{}.Result(string(v))})
		default:
			out = append(out, contract.Entry{Key: pk.key, Namespace: pk.ns, Value: string(v)})
		}
		return nil
	})
	return out, err
}

// timerEntries reads every timer of a service in a domain in the key
// groups kgs of r, in firing order.
func timerEntries(r pebble.Reader, kgs statetable.KeyGroupRange, service string, d timerqueue.Domain) ([]contract.Timer, error) {
	it, err := r.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []contract.Timer
	err = scan(it, kgs, func(kg int) []byte { return queuePrefix(kg, service, d) }, func(k, _ []byte) error {
		pk, err := parseKey(k)
		if err != nil || !pk.timer {
			return fmt.Errorf("%w: timer key %x: %v", ErrCorrupt, k, err)
		}
		out = append(out, contract.Timer{Timestamp: pk.ts, Key: pk.key, Namespace: pk.ns})
		return nil
	})
	slices.SortFunc(out, compareTimers)
	return out, err
}

// quietLogger drops Pebble's informational messages (one per WAL found at
// every Open) and passes errors and fatal errors to pebble.DefaultLogger.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Errorf(format string, args ...any) { pebble.DefaultLogger.Errorf(format, args...) }
func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }
