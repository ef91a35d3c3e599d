package cowstate

import (
	"fmt"

	"github.com/cowstate/cowstate/snapshot"
)

// restoreName is what a restore does with a state or timer service of a
// file, by the name the file gives it.
type restoreName struct {
	as   string // the registered name it restores into
	drop bool   // skipped: the job no longer has it
}

// RestoreAs makes every later restore into b read the state or timer
// service that files call old into the one registered as name: a state
// renamed in the job's code keeps what was checkpointed under its old
// name (its kind and codecs must still match). Checkpoints and savepoints
// taken afterwards use the new name. Call it after registering and before
// restoring (before checkpoint.Resume, say). It is an error, matching
// ErrConfig, if name is registered as neither a state nor a timer
// service, if old is registered (the file's old could not be told from
// the live one), or if old already has a plan. Writer goroutine only.
func (b *Backend) RestoreAs(old, name string) error {
	if err := b.planFor(old); err != nil {
		return err
	}
	if !b.registered(name) {
		return fmt.Errorf("%w: RestoreAs(%q, %q): no state or timer service %q is registered", ErrConfig, old, name, name)
	}
	for from, p := range b.restoreNames {
		if p.as == name {
			return fmt.Errorf("%w: RestoreAs(%q, %q): %q already restores into %q", ErrConfig, old, name, from, name)
		}
	}
	b.restoreNames[old] = restoreName{as: name}
	return nil
}

// DropOnRestore makes every later restore into b skip the state or timer
// service that files call name, which the job no longer registers (Flink's
// allowNonRestoredState, one state at a time): without it, such a state
// fails the restore with an error naming it, so that no state is lost by
// a forgotten registration. A state the job registers and the file does
// not hold needs nothing: it starts empty. An error matching ErrConfig if
// name is registered or already has a plan. Writer goroutine only.
func (b *Backend) DropOnRestore(name string) error {
	if err := b.planFor(name); err != nil {
		return err
	}
	b.restoreNames[name] = restoreName{drop: true}
	return nil
}

// planFor checks that a file's name may get a restore plan.
func (b *Backend) planFor(old string) error {
	if b.registered(old) {
		return fmt.Errorf("%w: %q is registered: a restore reads a file's %q into it", ErrConfig, old, old)
	}
	if _, ok := b.restoreNames[old]; ok {
		return fmt.Errorf("%w: %q already has a restore plan", ErrConfig, old)
	}
	if b.restoreNames == nil {
		b.restoreNames = map[string]restoreName{}
	}
	return nil
}

func (b *Backend) registered(name string) bool {
	if _, ok := b.services[name]; ok {
		return true
	}
	_, err := b.table.State(name)
	return err == nil
}

// restoredName returns the registered name a file's state or service
// restores into, and false if the restore skips it.
func (b *Backend) restoredName(file string) (string, bool) {
	p, ok := b.restoreNames[file]
	switch {
	case !ok:
		return file, true
	case p.drop:
		return "", false
	}
	return p.as, true
}

// checkRestoreNames returns an error if two of a file's states or timer
// services restore into one registered name (a file that holds both a
// state and its new name).
func (b *Backend) checkRestoreNames(m snapshot.Meta) error {
	into := map[string]string{}
	names := make([]string, 0, len(m.States)+len(m.Timers))
	for _, s := range m.States {
		names = append(names, s.Name)
	}
	for _, t := range m.Timers {
		names = append(names, t.Name)
	}
	for _, n := range names {
		as, ok := b.restoredName(n)
		if !ok {
			continue
		}
		if other, dup := into[as]; dup {
			return fmt.Errorf("%w: the file's %q and %q both restore into %q", snapshot.ErrMismatch, other, n, as)
		}
		into[as] = n
	}
	return nil
}

// Translated reports whether the last restore into b (since the last
// RestoreChains, RestoreSnapshot or checkpoint restore began) read a state
// or timer service under another name (RestoreAs), skipped one
// (DropOnRestore), or read values through an Evolving codec that another
// codec wrote. A checkpoint store takes a full checkpoint after such a
// restore instead of a delta of the restored chain: a chain is read with
// one set of names and codecs. Writer goroutine only.
func (b *Backend) Translated() bool { return b.translated }
