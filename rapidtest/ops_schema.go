package rapidtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
)

// This file holds GroupSchema's operation: an upgrade of the job's types
// across a snapshot.

// upgrade writes a snapshot of the backend and restores it into a fresh
// backend whose states are registered with other schemas, as the next
// version of a job would. Half the upgrades draw for each state a value
// schema that reads its present one (a compatible upgrade, every value
// migrated); the others draw any value schema, and a quarter of them
// change the key or namespace codec of one state. When every new schema
// reads its old one (contract.Schema.Reads), the restore must succeed and
// hold what the model holds, and the new backend goes on in the old one's
// place; otherwise it must fail with an error matching every refusal's
// sentinel (statetable.ErrStateMismatch always, statetable.ErrIncompatible
// when every refusal is of values) and hold nothing, and the old backend
// goes on.
func (m *machine) upgrade(t *rapid.T) {
	old := m.schemas
	next := make(map[string]contract.Schema, len(old))
	mode := rapid.IntRange(0, 3).Draw(t, "upgrade") // 0, 1: compatible; 2: any values; 3: and a key or namespace codec
	for _, name := range stateNames {
		s := old[name]
		choices := contract.ValueSchemas
		if mode < 2 {
			choices = slices.DeleteFunc(slices.Clone(choices), func(v contract.ValueSchema) bool {
				return contract.Schema{Value: v, Key: s.Key, Namespace: s.Namespace}.Reads(s) != nil
			})
		}
		s.Value = rapid.SampledFrom(choices).Draw(t, "value schema of "+name)
		next[name] = s
	}
	if mode == 3 {
		name := rapid.SampledFrom(stateNames).Draw(t, "state of another key or namespace codec")
		s := next[name]
		if rapid.Bool().Draw(t, "namespace") {
			s.Namespace = 1 - s.Namespace
		} else {
			s.Key = 1 - s.Key
		}
		next[name] = s
	}
	var refusals []error
	for _, name := range stateNames {
		if err := next[name].Reads(old[name]); err != nil {
			refusals = append(refusals, fmt.Errorf("state %q: %w", name, err))
		}
	}
	m.note(t, "Upgrade: Capture, WriteSnapshot, restore into states of schemas %v (from %v): %d refusals", next, old, len(refusals))

	v := m.b.Capture()
	var buf bytes.Buffer
	err := v.WriteSnapshot(context.Background(), &buf)
	v.Release()
	if err != nil {
		m.fatalf(t, "WriteSnapshot: %v", err)
	}
	b, empty := m.freshWith(t, m.cfg, true, next)
	err = b.RestoreSnapshot(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if len(refusals) == 0 {
		if err != nil {
			m.fatalf(t, "Upgrade to schemas %v from %v: RestoreSnapshot: %v", next, old, err)
		}
		if err := m.diff(b, m.m); err != nil {
			m.fatalf(t, "Upgrade to schemas %v from %v: restored: %v", next, old, err)
		}
		m.b, m.schemas = b, next
		return
	}
	if err == nil {
		m.fatalf(t, "Upgrade to schemas %v from %v: restored, want it refused: %v", next, old, errors.Join(refusals...))
	}
	m.note(t, "RestoreSnapshot refused: %v", err)
	values := true
	for _, r := range refusals {
		values = values && errors.Is(r, statetable.ErrIncompatible)
	}
	if !errors.Is(err, statetable.ErrStateMismatch) || values && !errors.Is(err, statetable.ErrIncompatible) {
		m.fatalf(t, "Upgrade to schemas %v from %v: RestoreSnapshot: %v, want an error matching %v", next, old, err, errors.Join(refusals...))
	}
	if err := m.diff(b, empty); err != nil {
		m.fatalf(t, "Upgrade to schemas %v from %v: a refused restore left state behind: %v", next, old, err)
	}
}
