package rapidtest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cowstate/cowstate/contract"
	"github.com/cowstate/cowstate/statetable"
)

// This file is the model's schemas (contract.SchemaBackend): a schema
// changes how a backend encodes a state, never what it holds, so the
// model only keeps each state's schema, writes it with its snapshots and
// refuses a snapshot that a state's schema cannot read.

var _ contract.SchemaBackend = (*Model)(nil)

// RegisterStateSchema registers a state with schema s (see
// contract.SchemaBackend).
func (m *Model) RegisterStateSchema(name string, kind statetable.Kind, s contract.Schema) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if old, ok := m.kinds[name]; ok && old == kind {
		if have, ok := m.schemas[name]; !ok || have != s {
			return fmt.Errorf("%w: %q is registered with another schema", statetable.ErrStateMismatch, name)
		}
	}
	if err := m.RegisterState(name, kind); err != nil {
		return err
	}
	m.schemas[name] = s
	return nil
}

// fileSchema is a schema in the model's snapshot file: the ID of its
// value codec and its key and namespace codec versions.
type fileSchema struct {
	Value          string
	Key, Namespace int
}

func fileSchemas(ss map[string]contract.Schema) map[string]fileSchema {
	if len(ss) == 0 {
		return nil
	}
	out := make(map[string]fileSchema, len(ss))
	for name, s := range ss {
		out[name] = fileSchema{s.Value.String(), s.Key, s.Namespace}
	}
	return out
}

// checkSchemas returns nil if every state of file f can be restored under
// the schema it is registered with, else every refusal, joined: what
// contract.Schema.Reads says, a state written with a schema restored
// without one, or one without a schema restored with one (statetable's
// String codec and a struct codec read nothing of each other).
func (m *Model) checkSchemas(f modelFile) error {
	var errs []error
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range f.States {
			if !yield(name) {
				return
			}
		}
	}) {
		fs, inFile := f.Schemas[name]
		have, registered := m.schemas[name]
		switch {
		case !inFile && !registered:
		case !inFile || !registered:
			errs = append(errs, fmt.Errorf("%w: state %q: written with schema %v, registered with %v", statetable.ErrIncompatible, name, fs, have))
		default:
			old, err := schemaOf(fs)
			if err == nil {
				err = have.Reads(old)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("state %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// schemaOf returns the schema a file names.
func schemaOf(fs fileSchema) (contract.Schema, error) {
	for _, v := range contract.ValueSchemas {
		if v.String() == fs.Value {
			return contract.Schema{Value: v, Key: fs.Key, Namespace: fs.Namespace}, nil
		}
	}
	return contract.Schema{}, fmt.Errorf("%w: value schema %s is none of contract.ValueSchemas", statetable.ErrIncompatible, fs.Value)
}
