package savepoint

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// Migration rewrites the values of one state: every value (value,
// reducing and aggregating state), list element or map value passes
// through Func, and the state's value codec ID becomes Codec. Map user
// keys, keys and namespaces never change (their bytes decide the order
// and the key group), nor do TTL timestamps.
type Migration struct {
	Codec string
	// Func returns the new encoding of an old one. It must not keep or
	// modify old, and is called on Rewrite's goroutine. An error stops
	// the rewrite with an error matching ErrMigrate that wraps it.
	Func func(old []byte) ([]byte, error)
}

// Rewrite is what File.Rewrite changes. The zero Rewrite copies the file
// as a canonical savepoint.
type Rewrite struct {
	// Drop names states and timer services left out.
	Drop []string
	// Rename maps a state's or timer service's name in the file to its
	// name in the output.
	Rename map[string]string
	// Migrate maps a state's name in the file to the migration of its
	// values.
	Migrate map[string]Migration
	// Keep, if not nil, is asked about every entry and timer (with the
	// file's name of its state or timer service): those it returns false
	// for are left out. Called on Rewrite's goroutine; key and namespace
	// must not be modified or kept.
	Keep func(name string, key, namespace []byte) bool
	// MaxParallelism, if not 0, is the output's number of key groups:
	// every key's key group is computed anew. The file must cover all of
	// its key groups then.
	MaxParallelism int
}

// Rewrite writes to w a savepoint of the file's content as rw changes it:
// canonical, byte for byte what a backend holding that content would write
// as its savepoint (cowstate.WriteSavepoint). A name rw gives that the
// file does not hold is an error matching statetable.ErrUnknownState; two
// states (or timer services) renamed to one name, a migration of a
// dropped state, or a max parallelism out of range, statetable.ErrConfig.
// Values migrated into a codec this package can read (see Dump) are
// checked to decode (statetable.ErrDecode, with ErrMigrate).
//
// Cost: the file is read twice, one section at a time: first for its
// timers, which are all held in memory (as snapshot.Write holds them),
// then for the entries, of which the sections of at most a few key groups
// are held at once (the output key group being written and the input key
// groups that hold its keys; with the max parallelism unchanged, one). On
// the calling goroutine; w gets the output as it is written, and what it
// got is no savepoint if Rewrite fails.
func (f *File) Rewrite(ctx context.Context, w io.Writer, rw Rewrite) error {
	plan, err := f.plan(rw)
	if err != nil {
		return err
	}
	o := newOut(plan.meta)
	cs := codecs{}

	// The timers, into the output's key groups.
	tw := &walker{f: f, kgs: f.meta.KeyGroups, timers: map[string]bool{}}
	for _, t := range f.meta.Timers {
		tw.timers[t.Name] = plan.names[t.Name] != ""
	}
	tw.onTimer = func(t *Timer) error {
		if rw.Keep == nil || rw.Keep(t.Service, t.Key, t.Namespace) {
			o.addTimer(plan.timerNames[t.Service], t)
		}
		return nil
	}
	if err := tw.run(ctx); err != nil {
		return err
	}

	// The entries, read as each output key group needs them.
	ew := &walker{f: f, kgs: f.meta.KeyGroups, states: map[string]bool{}}
	for _, s := range f.meta.States {
		ew.states[s.Name] = plan.names[s.Name] != ""
	}
	ew.infos = map[string]statetable.StateInfo{}
	for _, s := range f.meta.States {
		ew.infos[s.Name] = s
	}
	ew.onEntry = func(e *Entry) error {
		if rw.Keep != nil && !rw.Keep(e.State, e.Key, e.Namespace) {
			return nil
		}
		name := plan.names[e.State]
		if m, ok := rw.Migrate[e.State]; ok {
			info := ew.infos[e.State]
			err := e.values(info.Kind, func(v *Value) error {
				nb, err := m.Func(v.Bytes)
				if err != nil {
					return fmt.Errorf("%w: state %q, key group %d, key %x: %w", ErrMigrate, e.State, e.KeyGroup, e.Key, err)
				}
				if err := cs.check(m.Codec, nb); err != nil {
					return fmt.Errorf("%w: state %q, key group %d, key %x: the migrated value: %w", ErrMigrate, e.State, e.KeyGroup, e.Key, err)
				}
				v.Bytes = nb
				return nil
			})
			if err != nil {
				return err
			}
		}
		return o.add(name, e)
	}
	present := f.r.Groups() // ascending
	next := 0               // the first input key group not read yet
	P, Q := f.meta.MaxParallelism, plan.meta.MaxParallelism
	o.fill = func(g int) error {
		// The input key groups that hold keys of output key group g:
		// key groups are monotone ranges of key hashes.
		start, _ := statetable.KeyGroupStart(g, Q)
		lo, hi := statetable.KeyGroupOf(start, P), P-1
		if end, ok := statetable.KeyGroupStart(g+1, Q); ok {
			hi = statetable.KeyGroupOf(end-1, P)
		}
		lo = max(lo, next)
		if hi < lo {
			return nil
		}
		next = hi + 1
		// Only if one of them has a section: Restore walks the index.
		i := sort.SearchInts(present, lo)
		if i == len(present) || present[i] > hi {
			return nil
		}
		return ew.runRange(ctx, statetable.KeyGroupRange{First: lo, Last: hi})
	}
	return o.write(ctx, w)
}

// rewritePlan is the output's metadata and the output name of each of the
// file's states and timer services ("" if dropped).
type rewritePlan struct {
	meta       snapshot.Meta
	names      map[string]string // state name in the file -> in the output
	timerNames map[string]string
}

func (f *File) plan(rw Rewrite) (*rewritePlan, error) {
	known := func(name string) bool {
		_, err := f.state(name)
		return err == nil || f.timerService(name)
	}
	unknown := func(what, name string) error {
		return fmt.Errorf("%w: %s %q: the savepoint holds %s", statetable.ErrUnknownState, what, name, f.names())
	}
	drop := map[string]bool{}
	for _, d := range rw.Drop {
		if !known(d) {
			return nil, unknown("drop", d)
		}
		drop[d] = true
	}
	for old, name := range rw.Rename {
		switch {
		case !known(old):
			return nil, unknown("rename", old)
		case name == "":
			return nil, fmt.Errorf("%w: rename %q to the empty name", statetable.ErrConfig, old)
		case drop[old]:
			return nil, fmt.Errorf("%w: %q is both dropped and renamed", statetable.ErrConfig, old)
		}
	}
	p := &rewritePlan{names: map[string]string{}, timerNames: map[string]string{}}
	p.meta = snapshot.Meta{Savepoint: true, MaxParallelism: f.meta.MaxParallelism, KeyGroups: f.meta.KeyGroups}
	if rw.MaxParallelism != 0 && rw.MaxParallelism != f.meta.MaxParallelism {
		if rw.MaxParallelism < 1 || rw.MaxParallelism > statetable.MaxParallelismLimit {
			return nil, fmt.Errorf("%w: max parallelism %d: need 1 to %d", statetable.ErrConfig, rw.MaxParallelism, statetable.MaxParallelismLimit)
		}
		if f.meta.KeyGroups != statetable.AllKeyGroups(f.meta.MaxParallelism) {
			return nil, fmt.Errorf("%w: max parallelism %d: the file holds key groups %v of %d, not all: rekeying needs every key", statetable.ErrConfig, rw.MaxParallelism, f.meta.KeyGroups, f.meta.MaxParallelism)
		}
		p.meta.MaxParallelism = rw.MaxParallelism
		p.meta.KeyGroups = statetable.AllKeyGroups(rw.MaxParallelism)
	}
	rename := func(n string) string {
		if drop[n] {
			return ""
		}
		if to, ok := rw.Rename[n]; ok {
			return to
		}
		return n
	}
	taken := map[string]string{}
	for _, s := range f.meta.States {
		to := rename(s.Name)
		p.names[s.Name] = to
		if to == "" {
			continue
		}
		if prev, ok := taken[to]; ok {
			return nil, fmt.Errorf("%w: states %q and %q would both be called %q", statetable.ErrConfig, prev, s.Name, to)
		}
		taken[to] = s.Name
		info := statetable.StateInfo{Name: to, Kind: s.Kind, Codec: slices.Clone(s.Codec), TTL: s.TTL}
		if m, ok := rw.Migrate[s.Name]; ok {
			if m.Func == nil || m.Codec == "" {
				return nil, fmt.Errorf("%w: migration of state %q: need a codec ID and a function", statetable.ErrConfig, s.Name)
			}
			if len(info.Codec) != codecCount(s.Kind) {
				return nil, fmt.Errorf("%w: state %q: %d codec IDs for a %s state", snapshot.ErrCorrupt, s.Name, len(info.Codec), s.Kind)
			}
			info.Codec[valueCodec(s.Kind)] = m.Codec
		}
		p.meta.States = append(p.meta.States, info)
	}
	for name := range rw.Migrate {
		switch _, err := f.state(name); {
		case err != nil:
			return nil, fmt.Errorf("migrate: %w", err)
		case drop[name]:
			return nil, fmt.Errorf("%w: state %q is both dropped and migrated", statetable.ErrConfig, name)
		}
	}
	taken = map[string]string{}
	for _, t := range f.meta.Timers {
		to := rename(t.Name)
		p.timerNames[t.Name] = to
		p.names[t.Name] = to
		if to == "" {
			continue
		}
		if prev, ok := taken[to]; ok {
			return nil, fmt.Errorf("%w: timer services %q and %q would both be called %q", statetable.ErrConfig, prev, t.Name, to)
		}
		taken[to] = t.Name
		p.meta.Timers = append(p.meta.Timers, snapshot.TimerServiceInfo{Name: to, Codecs: t.Codecs})
	}
	return p, nil
}
