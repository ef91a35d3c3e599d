package pebblestate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/savepoint"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Savepoints. A cowstate savepoint (package snapshot's format, read and
// written through package savepoint) holds, for every state, its kind,
// its codec IDs and whether it has a TTL, and for every timer service the
// codec IDs of its keys and namespaces; its entries are the codecs'
// encodings. This backend stores those encodings as its keys, namespaces
// and values, so a savepoint restores without decoding, and keeps each
// state's StateInfo and each service's codec IDs in the database (keys.go),
// so that the savepoint it writes names the same codecs and is byte for
// byte the one it restored. A state or service registered through the
// contract API alone has the codec IDs of statetable.String for all of
// them, as the cowstate contract adapter (contract.Of) registers its
// states, so the savepoint restores into that adapter.

// stringID is the codec ID of the states and services registered through
// the contract API.
var stringID = statetable.String.ID()

// defaultInfo is the StateInfo of a state registered through the contract
// API: string codecs for key, namespace and values.
func defaultInfo(name string, kind statetable.Kind, ttl bool) statetable.StateInfo {
	n := 3
	if kind == statetable.KindMap {
		n = 4
	}
	codecs := make([]string, n)
	for i := range codecs {
		codecs[i] = stringID
	}
	return statetable.StateInfo{Name: name, Kind: kind, Codec: codecs, TTL: ttl}
}

// encodeInfo encodes a state's codec IDs and TTL flag (its info record).
func encodeInfo(info statetable.StateInfo) []byte {
	b := binary.AppendUvarint(nil, uint64(len(info.Codec)))
	for _, c := range info.Codec {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	flags := byte(0)
	if info.TTL {
		flags = 1
	}
	return append(b, flags)
}

// decodeInfo decodes an info record of a state of kind kind.
func decodeInfo(name string, kind statetable.Kind, v []byte) (statetable.StateInfo, error) {
	d := decoder{b: v}
	info := statetable.StateInfo{Name: name, Kind: kind}
	for n := d.count(1); n > 0 && d.err == nil; n-- {
		info.Codec = append(info.Codec, d.str())
	}
	flags := d.byte()
	if d.err == nil && (flags > 1 || len(d.b) > 0) {
		d.err = fmt.Errorf("flags %#x, %d bytes after them", flags, len(d.b))
	}
	if d.err != nil {
		return info, fmt.Errorf("%w: info record of state %q: %w", ErrCorrupt, name, d.err)
	}
	info.TTL = flags == 1
	return info, nil
}

// encodeCodecs encodes a timer service's codec IDs (its codec record).
func encodeCodecs(c [2]string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(c[0])))
	b = append(b, c[0]...)
	b = binary.AppendUvarint(b, uint64(len(c[1])))
	return append(b, c[1]...)
}

func decodeCodecs(name string, v []byte) ([2]string, error) {
	d := decoder{b: v}
	c := [2]string{d.str(), d.str()}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the codec IDs", len(d.b))
	}
	if d.err != nil {
		return c, fmt.Errorf("%w: codec record of timer service %q: %w", ErrCorrupt, name, d.err)
	}
	return c, nil
}

// loadInfo reads the info record of a registered state, if any, into
// b.infos.
func (b *Backend) loadInfo(name string, kind statetable.Kind) error {
	v, err := b.get(b.db, infoKey(name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	info, err := decodeInfo(name, kind, v)
	if err != nil {
		return err
	}
	b.infos[name] = info
	return nil
}

// loadCodecs reads the codec record of a registered timer service, if
// any, into b.codecs.
func (b *Backend) loadCodecs(name string) error {
	v, err := b.get(b.db, codecKey(name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	c, err := decodeCodecs(name, v)
	if err != nil {
		return err
	}
	b.codecs[name] = c
	return nil
}

// RestoreSavepoint reads a cowstate savepoint or full snapshot (package
// snapshot's format) through package savepoint, and keeps the key groups
// of it this backend owns (a share of a rescaled job reads only their
// sections). The file's states and timer services that are not registered
// are registered; one registered with another kind is an error matching
// ErrMismatch and statetable.ErrStateMismatch, naming it, as is another
// max parallelism. A state of the file with a TTL must be registered
// first with RegisterStateTTL (its duration is not in the file); its
// expiration stamps are kept, and what has expired by the backend's clock
// is dropped. A state registered with a TTL that the file has without one
// is restored as if written at the restore. Each state's codec IDs
// and TTL flag, and each service's codec IDs, are kept in the database,
// so that WriteSavepoint names them again.
//
// The backend must hold no entry or timer (cowstate.ErrNotEmpty). A
// damaged file is an error matching ErrCorrupt and snapshot.ErrCorrupt
// naming what and where; on any error, a cancelled ctx included, the
// backend is left empty and the registrations the restore made are
// undone. Writer goroutine. Cost: two reads of the owned sections (one
// for entries, one for timers), one section in memory at a time, written
// in batches of restoreBatchBytes.
func (b *Backend) RestoreSavepoint(ctx context.Context, r io.ReaderAt, size int64) error {
	if b.closed {
		return ErrClosed
	}
	if err := b.checkEmpty(); err != nil {
		return err
	}
	f, err := savepoint.Open(r, size)
	if err != nil {
		return fmt.Errorf("pebblestate: %w", err)
	}
	meta := f.Meta()
	if meta.MaxParallelism != b.maxPar {
		return fmt.Errorf("%w: savepoint of max parallelism %d, backend %d", ErrMismatch, meta.MaxParallelism, b.maxPar)
	}
	infos := map[string]statetable.StateInfo{}
	for _, s := range meta.States {
		if err := b.checkFileState(s); err != nil {
			return err
		}
		infos[s.Name] = s
	}
	var newStates, newServices []string
	undo := func() {
		for _, name := range newStates {
			delete(b.kinds, name)
			delete(b.infos, name)
			_ = b.db.Delete(kindKey(name), b.wo)
		}
		for _, name := range newServices {
			delete(b.services, name)
			delete(b.codecs, name)
		}
	}
	for _, s := range meta.States {
		if _, ok := b.kinds[s.Name]; !ok {
			if err := b.RegisterState(s.Name, s.Kind); err != nil {
				undo()
				return err
			}
			newStates = append(newStates, s.Name)
		}
	}
	for _, t := range meta.Timers {
		if _, ok := b.services[t.Name]; !ok {
			if err := b.RegisterTimerService(t.Name); err != nil {
				undo()
				return err
			}
			newServices = append(newServices, t.Name)
		}
	}
	kgs := statetable.KeyGroupRange{First: max(meta.KeyGroups.First, b.owned.First), Last: min(meta.KeyGroups.Last, b.owned.Last)}
	committed, err := b.restoreFile(ctx, f, kgs, infos)
	if err == nil {
		err = b.keepInfos(meta)
	}
	if err != nil {
		if committed {
			lo, hi := kgPrefix(nil, 0), kgPrefix(nil, statetable.MaxParallelismLimit)
			if derr := b.db.DeleteRange(lo, hi, b.wo); derr != nil {
				err = errors.Join(err, fmt.Errorf("pebblestate: clearing a failed restore: %w", derr))
			}
		}
		undo()
		b.forgetHeads()
		return err
	}
	b.forgetHeads()
	return nil
}

// checkFileState checks a state of a savepoint against the registered one.
func (b *Backend) checkFileState(s statetable.StateInfo) error {
	if s.Kind < statetable.KindValue || s.Kind > statetable.KindAggregating {
		return fmt.Errorf("%w: the savepoint's state %q of unknown kind %v", ErrCorrupt, s.Name, s.Kind)
	}
	if have, ok := b.kinds[s.Name]; ok && have != s.Kind {
		return fmt.Errorf("%w: %w: the savepoint's %v state %q is registered as a %v state", ErrMismatch, statetable.ErrStateMismatch, s.Kind, s.Name, have)
	}
	if _, ttl := b.ttls[s.Name]; s.TTL && !ttl {
		return fmt.Errorf("%w: %w: the savepoint's state %q has a TTL: register it first with RegisterStateTTL", ErrMismatch, statetable.ErrStateMismatch, s.Name)
	}
	return nil
}

// restoreFile writes the entries and timers of the file's key groups kgs
// into the database, in batches; committed reports whether any batch was
// committed.
func (b *Backend) restoreFile(ctx context.Context, f *savepoint.File, kgs statetable.KeyGroupRange, infos map[string]statetable.StateInfo) (committed bool, err error) {
	if kgs.Empty() {
		return false, nil
	}
	batch := b.db.NewBatch()
	defer func() { batch.Close() }()
	flush := func(force bool) error {
		if !force && batch.Len() < restoreBatchBytes {
			return nil
		}
		committed = true
		if err := batch.Commit(b.wo); err != nil {
			return err
		}
		batch.Close()
		batch = b.db.NewBatch()
		return nil
	}
	sel := savepoint.Select{KeyGroups: &kgs}
	for e, err := range f.Entries(ctx, sel) {
		if err != nil {
			return committed, fmt.Errorf("pebblestate: %w", err)
		}
		info, t := infos[e.State], b.ttlAt(e.State)
		if t.on && !live(info.TTL, t, &e) {
			continue
		}
		if err := putEntry(batch, info, t, &e); err != nil {
			return committed, err
		}
		if err := flush(false); err != nil {
			return committed, err
		}
	}
	for t, err := range f.Timers(ctx, sel) {
		if err != nil {
			return committed, fmt.Errorf("pebblestate: %w", err)
		}
		if err := batch.Set(timerKey(t.KeyGroup, t.Service, t.Domain, string(t.Key), string(t.Namespace), t.Timestamp), nil, nil); err != nil {
			return committed, err
		}
		if err := flush(false); err != nil {
			return committed, err
		}
	}
	if err := ctx.Err(); err != nil {
		return committed, err
	}
	return committed, flush(true)
}

// putEntry adds the records of a savepoint entry to batch: a value, list
// element or map value of a state with a TTL keeps its expiration stamp in
// front of its bytes (keys.go), as the savepoint's cell does.
func putEntry(batch *pebble.Batch, info statetable.StateInfo, t ttlAt, e *savepoint.Entry) error {
	key, ns := string(e.Key), string(e.Namespace)
	if t.on && !info.TTL {
		// Restored into a state with a TTL: as if written now.
		info.TTL = true
		e.Value.Expires = t.exp
		for i := range e.List {
			e.List[i].Expires = t.exp
		}
		for i := range e.Map {
			e.Map[i].Value.Expires = t.exp
		}
	}
	switch info.Kind {
	case statetable.KindMap:
		for _, m := range e.Map {
			if err := batch.Set(mapKey(e.KeyGroup, e.State, key, ns, string(m.Key)), stamped(info.TTL, m.Value), nil); err != nil {
				return err
			}
		}
		return nil
	case statetable.KindList:
		elems := make([]string, len(e.List))
		for i, v := range e.List {
			elems[i] = string(stamped(info.TTL, v))
		}
		return batch.Set(entryKey(e.KeyGroup, e.State, key, ns), encodeList(elems), nil)
	default:
		return batch.Set(entryKey(e.KeyGroup, e.State, key, ns), stamped(info.TTL, e.Value), nil)
	}
}

// live drops from an entry of a state with a TTL (the file's, ttl) what
// has expired at t.now, and reports whether anything is left.
func live(ttl bool, t ttlAt, e *savepoint.Entry) bool {
	if !ttl {
		return true
	}
	keep := func(v savepoint.Value) bool { return v.Expires > t.now }
	switch {
	case e.List != nil:
		l := make([]savepoint.Value, 0, len(e.List))
		for _, v := range e.List {
			if keep(v) {
				l = append(l, v)
			}
		}
		e.List = l
		return len(l) > 0
	case e.Map != nil:
		m := make([]savepoint.MapEntry, 0, len(e.Map))
		for _, me := range e.Map {
			if keep(me.Value) {
				m = append(m, me)
			}
		}
		e.Map = m
		return len(m) > 0
	}
	return keep(e.Value)
}

// stamped is the stored form of a value: with a TTL, its expiration
// timestamp (8 bytes, big-endian) then its bytes.
func stamped(ttl bool, v savepoint.Value) []byte {
	if !ttl {
		return v.Bytes
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v.Bytes)), uint64(v.Expires)), v.Bytes...)
}

// unstamped splits a stored value of a state with a TTL (or not).
func unstamped(ttl bool, b []byte) (savepoint.Value, error) {
	if !ttl {
		return savepoint.Value{Bytes: b}, nil
	}
	if len(b) < 8 {
		return savepoint.Value{}, fmt.Errorf("a value of %d bytes has no expiration stamp", len(b))
	}
	return savepoint.Value{Bytes: b[8:], Expires: int64(binary.BigEndian.Uint64(b))}, nil
}

// keepInfos records the file's states' infos and services' codec IDs in
// the database and in memory.
func (b *Backend) keepInfos(meta snapshot.Meta) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	infos := make([]statetable.StateInfo, len(meta.States))
	for i, s := range meta.States {
		_, ttl := b.ttls[s.Name]
		infos[i] = statetable.StateInfo{Name: s.Name, Kind: s.Kind, Codec: slices.Clone(s.Codec), TTL: ttl}
		if err := batch.Set(infoKey(s.Name), encodeInfo(infos[i]), nil); err != nil {
			return err
		}
	}
	for _, t := range meta.Timers {
		if err := batch.Set(codecKey(t.Name), encodeCodecs(t.Codecs), nil); err != nil {
			return err
		}
	}
	if err := batch.Commit(b.wo); err != nil {
		return fmt.Errorf("pebblestate: recording the savepoint's codec IDs: %w", err)
	}
	for _, info := range infos {
		b.infos[info.Name] = info
	}
	for _, t := range meta.Timers {
		b.codecs[t.Name] = t.Codecs
	}
	return nil
}

// WriteSavepoint writes a canonical cowstate savepoint of v, a View this
// backend's Capture returned (else ErrMismatch): the states and timer
// services registered at the capture, with the codec IDs a restored
// savepoint gave them (else statetable.String's), and every entry and
// timer of the owned key groups. A savepoint this backend restored is
// written back byte for byte; cowstate restores it as its own.
//
// Any goroutine, as the view's methods. Cost: one pass over the view's
// data through package savepoint's Write, the entries of one key group
// and every timer in memory at a time.
func (b *Backend) WriteSavepoint(ctx context.Context, w io.Writer, cv contract.View) error {
	v, ok := cv.(*view)
	if !ok || v.b != b {
		return fmt.Errorf("%w: WriteSavepoint of a View another backend captured", ErrMismatch)
	}
	return v.writeSavepoint(ctx, w)
}

func (v *view) header() savepoint.Header {
	h := savepoint.Header{MaxParallelism: v.maxPar}
	if v.owned != statetable.AllKeyGroups(v.maxPar) {
		kgs := v.owned
		h.KeyGroups = &kgs
	}
	for _, name := range slices.Sorted(maps.Keys(v.kinds)) {
		h.States = append(h.States, v.info(name))
	}
	for _, name := range v.services {
		c, ok := v.codecs[name]
		if !ok {
			c = [2]string{stringID, stringID}
		}
		h.Timers = append(h.Timers, snapshot.TimerServiceInfo{Name: name, Codecs: c})
	}
	return h
}

// info is the StateInfo of a state of the view.
func (v *view) info(name string) statetable.StateInfo {
	_, ttl := v.ttls[name]
	if info, ok := v.infos[name]; ok {
		info.TTL = ttl
		return info
	}
	return defaultInfo(name, v.kinds[name], ttl)
}

func (v *view) writeSavepoint(ctx context.Context, w io.Writer) error {
	it, err := v.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	infos := map[string]statetable.StateInfo{}
	for name := range v.kinds {
		infos[name] = v.info(name)
	}
	group := func(g int) iter.Seq2[savepoint.Entry, error] {
		return func(yield func(savepoint.Entry, error) bool) {
			if err := groupEntries(it, g, infos, v.now, yield); err != nil {
				yield(savepoint.Entry{}, err)
			}
		}
	}
	timers := func(yield func(savepoint.Timer, error) bool) {
		stop := errors.New("stop")
		err := scan(it, v.owned, func(kg int) []byte { return append(kgPrefix(nil, kg), tagTimer) }, func(k, _ []byte) error {
			pk, err := parseKey(k)
			if err != nil || !pk.timer {
				return fmt.Errorf("%w: timer key %x: %v", ErrCorrupt, k, err)
			}
			if !slices.Contains(v.services, pk.name) {
				return fmt.Errorf("%w: timer of service %q, not registered", ErrMismatch, pk.name)
			}
			if !yield(savepoint.Timer{Service: pk.name, Domain: pk.domain, KeyGroup: pk.kg, Timestamp: pk.ts, Key: []byte(pk.key), Namespace: []byte(pk.ns)}, nil) {
				return stop
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			yield(savepoint.Timer{}, err)
		}
	}
	if err := savepoint.Write(ctx, w, v.header(), group, timers); err != nil {
		return fmt.Errorf("pebblestate: %w", err)
	}
	return nil
}

// groupEntries yields the entries of key group g in it, the user keys of
// a map (consecutive keys) gathered into one entry, leaving out what of a
// state with a TTL has expired at now. Stored values are
// copied: the entries outlive the iterator's position.
func groupEntries(it *pebble.Iterator, g int, infos map[string]statetable.StateInfo, now int64, yield func(savepoint.Entry, error) bool) error {
	p := append(kgPrefix(nil, g), tagState)
	var cur savepoint.Entry
	have := false
	for ok := it.SeekGE(p); ok && bytes.HasPrefix(it.Key(), p); ok = it.Next() {
		k := it.Key()
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		pk, err := parseKey(k)
		if err != nil {
			return fmt.Errorf("%w: key %x: %v", ErrCorrupt, k, err)
		}
		info, ok := infos[pk.name]
		if !ok {
			return fmt.Errorf("%w: entry of state %q, not registered", ErrMismatch, pk.name)
		}
		if pk.hasUserKey != (info.Kind == statetable.KindMap) {
			return fmt.Errorf("%w: key %x does not fit the %v state %q", ErrCorrupt, k, info.Kind, pk.name)
		}
		if info.TTL {
			live, keep, err := liveStored(info.Kind, val, now)
			if err != nil {
				return fmt.Errorf("%w: (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, pk.name, err)
			}
			if !keep {
				continue
			}
			val = live
		}
		val = bytes.Clone(val)
		if val == nil {
			val = []byte{}
		}
		if info.Kind == statetable.KindMap && have && cur.State == pk.name && string(cur.Key) == pk.key && string(cur.Namespace) == pk.ns {
			mv, err := unstamped(info.TTL, val)
			if err != nil {
				return fmt.Errorf("%w: state %q, key %q: map value: %v", ErrCorrupt, pk.name, pk.key, err)
			}
			cur.Map = append(cur.Map, savepoint.MapEntry{Key: []byte(pk.userKey), Value: mv})
			continue
		}
		if have && !yield(cur, nil) {
			return nil
		}
		cur, have = savepoint.Entry{State: pk.name, KeyGroup: g, Key: []byte(pk.key), Namespace: []byte(pk.ns)}, true
		switch info.Kind {
		case statetable.KindMap:
			mv, err := unstamped(info.TTL, val)
			if err != nil {
				return fmt.Errorf("%w: state %q, key %q: map value: %v", ErrCorrupt, pk.name, pk.key, err)
			}
			cur.Map = []savepoint.MapEntry{{Key: []byte(pk.userKey), Value: mv}}
		case statetable.KindList:
			elems, err := decodeList(val)
			if err != nil {
				return fmt.Errorf("%w: list of (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, pk.name, err)
			}
			cur.List = make([]savepoint.Value, len(elems))
			for i, e := range elems {
				if cur.List[i], err = unstamped(info.TTL, []byte(e)); err != nil {
					return fmt.Errorf("%w: list of (%q, %q) in state %q: element %d: %v", ErrCorrupt, pk.key, pk.ns, pk.name, i, err)
				}
			}
		default:
			if cur.Value, err = unstamped(info.TTL, val); err != nil {
				return fmt.Errorf("%w: value of (%q, %q) in state %q: %v", ErrCorrupt, pk.key, pk.ns, pk.name, err)
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if have {
		yield(cur, nil)
	}
	return nil
}
