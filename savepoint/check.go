package savepoint

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cowstate/cowstate"
	"github.com/cowstate/cowstate/snapshot"
	"github.com/cowstate/cowstate/statetable"
)

// HeaderOf returns the header of a savepoint with metadata m: what a job
// registers, for Check and WriteSchema. A job gets its own with
// cowstate.SavepointMeta of a snapshot taken once its states and timer
// services are registered.
func HeaderOf(m snapshot.Meta) Header {
	h := Header{MaxParallelism: m.MaxParallelism, States: slices.Clone(m.States), Timers: slices.Clone(m.Timers)}
	if m.KeyGroups != statetable.AllKeyGroups(m.MaxParallelism) {
		kgs := m.KeyGroups
		h.KeyGroups = &kgs
	}
	return h
}

// WriteSchema writes h as one line of JSON: the header line of the dump
// format (Dump), which ReadSchema reads back. A job writes its schema with
// it at build or deploy time, for `cowstate savepoint check` to judge a
// savepoint against before the job runs.
func WriteSchema(w io.Writer, h Header) error {
	hj := headerJSON{MaxParallelism: h.MaxParallelism, KeyGroups: h.KeyGroups, States: []stateHeaderJSON{}, Timers: []timerHeaderJSON{}}
	for _, s := range h.States {
		hj.States = append(hj.States, stateHeaderJSON{Name: s.Name, Kind: s.Kind.String(), Codecs: s.Codec, TTL: s.TTL})
	}
	for _, t := range h.Timers {
		hj.Timers = append(hj.Timers, timerHeaderJSON{Name: t.Name, Codecs: t.Codecs})
	}
	b, err := json.Marshal(hj)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadSchema reads a header line (WriteSchema, or the first line of a
// Dump) from r. A line that is not one is an error matching ErrLine.
// Reads at most MaxLine bytes.
func ReadSchema(r io.Reader) (Header, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return Header{}, fmt.Errorf("%w: reading the schema: %w", ErrLine, err)
		}
		return Header{}, fmt.Errorf("%w: the schema is empty", ErrLine)
	}
	h, err := parseHeader(sc.Bytes())
	if err != nil {
		return Header{}, fmt.Errorf("%w: line 1: %w", ErrLine, err)
	}
	return h, nil
}

// CheckOptions are what a job says of the file's states when it restores:
// cowstate.Backend.RestoreAs and DropOnRestore, by the file's names.
type CheckOptions struct {
	Rename map[string]string
	Drop   []string
	// Reads, if set, judges value codec IDs that are not both Struct
	// schemas, as the job's Evolving codec would: nil if a codec of ID cur
	// reads the values one of ID old wrote, else an error saying why
	// (protocodec.Reads for protocol buffer messages). It is not called
	// for equal IDs. Without it Check refuses such a change.
	Reads func(cur, old string) error
}

// Check judges, from codec IDs alone, what restoring a file of metadata
// file into a job whose schema is job would do with each of the file's
// states and timer services, as cowstate.Backend.CheckRestore does in the
// job with its codecs: restore it as written, migrate it (a Struct value
// codec whose schema reads the old one: fields added, removed, widened),
// drop it (opts.Drop), or refuse it, with an error matching
// snapshot.ErrMismatch naming the state and what differs (kind, TTL, a
// key, namespace or map key codec, which never migrate, or a value codec
// the new one cannot read). Where the value codecs differ and are not both
// Struct schemas the IDs cannot tell: Check refuses, and says that only
// the job (an Evolving codec or cowstate.MigrateFrom, judged by
// checkpoint.CheckRestore) can read it, unless opts.Reads judges them. A file of another max parallelism
// is an error; so is a name opts give that the file does not hold. Cost:
// O(states); no file section is read.
func Check(file snapshot.Meta, job Header, opts CheckOptions) ([]cowstate.RestoreCheck, error) {
	if file.MaxParallelism != job.MaxParallelism {
		return nil, fmt.Errorf("%w: the savepoint has max parallelism %d, the job %d (rewrite it with another max parallelism first)", snapshot.ErrMismatch, file.MaxParallelism, job.MaxParallelism)
	}
	names := map[string]bool{}
	for _, s := range file.States {
		names[s.Name] = true
	}
	for _, t := range file.Timers {
		names[t.Name] = true
	}
	for old := range opts.Rename {
		if !names[old] {
			return nil, fmt.Errorf("%w: renamed %q: the savepoint holds no state or timer service of that name", statetable.ErrUnknownState, old)
		}
	}
	for _, d := range opts.Drop {
		if !names[d] {
			return nil, fmt.Errorf("%w: dropped %q: the savepoint holds no state or timer service of that name", statetable.ErrUnknownState, d)
		}
	}
	states := map[string]statetable.StateInfo{}
	for _, s := range job.States {
		states[s.Name] = s
	}
	timers := map[string]snapshot.TimerServiceInfo{}
	for _, t := range job.Timers {
		timers[t.Name] = t
	}
	as := func(name string) (string, bool) {
		if slices.Contains(opts.Drop, name) {
			return "", false
		}
		if n, ok := opts.Rename[name]; ok {
			return n, true
		}
		return name, true
	}
	var checks []cowstate.RestoreCheck
	for _, s := range file.States {
		c := cowstate.RestoreCheck{Name: s.Name}
		name, ok := as(s.Name)
		have, registered := states[name]
		switch {
		case !ok:
			c.Verdict = cowstate.Dropped
		case !registered:
			c.Verdict, c.Err = cowstate.Refused, fmt.Errorf("%w: %v: the job registers no state %q: register it, or say what becomes of it (RestoreAs, DropOnRestore)", snapshot.ErrMismatch, s, name)
		default:
			c.As = name
			if err := judge(s, have, opts.Reads); err != nil {
				c.As, c.Verdict, c.Err = "", cowstate.Refused, err
			} else if !slices.Equal(s.Codec, have.Codec) {
				c.Verdict = cowstate.Migrates
			}
		}
		checks = append(checks, c)
	}
	for _, t := range file.Timers {
		c := cowstate.RestoreCheck{Name: t.Name, Timers: true}
		name, ok := as(t.Name)
		have, registered := timers[name]
		switch {
		case !ok:
			c.Verdict = cowstate.Dropped
		case !registered || have.Codecs != t.Codecs:
			c.Verdict, c.Err = cowstate.Refused, fmt.Errorf("%w: timer service %q with codecs %v: the job registers no timer service %q with those codecs (keys and namespaces never migrate)", snapshot.ErrMismatch, t.Name, t.Codecs, name)
		default:
			c.As = name
		}
		checks = append(checks, c)
	}
	return checks, nil
}

// judge says whether the job's state have reads the file's state s;
// reads (if not nil) judges value codecs that are not both Struct schemas.
func judge(s, have statetable.StateInfo, reads func(cur, old string) error) error {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("%w: state %q: "+format, append([]any{snapshot.ErrMismatch, s.Name}, args...)...)
	}
	switch {
	case s.Kind != have.Kind:
		return mismatch("a %s state in the savepoint, a %s state in the job", s.Kind, have.Kind)
	case s.TTL && !have.TTL:
		return mismatch("has a TTL in the savepoint, none in the job (its values' timestamps would be lost)")
	case len(s.Codec) != len(have.Codec):
		return mismatch("%d codecs in the savepoint, %d in the job", len(s.Codec), len(have.Codec))
	}
	for i, old := range s.Codec {
		cur := have.Codec[i]
		switch {
		case i != valueCodec(s.Kind):
			if old != cur {
				what := [...]string{"key", "namespace", "map user key"}[i]
				return mismatch("%s codec %s in the savepoint, %s in the job: keys, namespaces and map user keys never migrate (their bytes decide the key group and the entries' identity)", what, old, cur)
			}
		case old == cur:
		case (!isStruct(old) || !isStruct(cur)) && reads != nil:
			if err := reads(cur, old); err != nil {
				return fmt.Errorf("%w: state %q: %w", snapshot.ErrMismatch, s.Name, err)
			}
		case !isStruct(old) || !isStruct(cur):
			return mismatch("value codec %s in the savepoint, %s in the job: only the job can tell whether it reads the old values (an Evolving codec, or cowstate.MigrateFrom; checkpoint.CheckRestore in the job judges it)", old, cur)
		default:
			if err := statetable.StructReads(cur, old); err != nil {
				return fmt.Errorf("%w: state %q: %w", snapshot.ErrMismatch, s.Name, err)
			}
		}
	}
	return nil
}

func isStruct(id string) bool { return strings.HasPrefix(id, "struct{") }
