package cowstate

import (
	"fmt"
	"iter"
	"reflect"
	"slices"

	"github.com/cowstate/cowstate/statetable"
)

// Keyed states: one value, list, map, reduced value or accumulator per key,
// with no namespace, and codecs inferred from the Go types (CodecFor):
//
//	count, err := cowstate.Value[string, int64](b, "count")
//	...
//	err = count.Update("user-1", func(n int64) int64 { return n + 1 })
//
// A state keyed or valued by a type CodecFor does not know takes its codec
// as an option (WithKeyCodec, WithValueCodec, WithUserKeyCodec); a value
// state's default is the zero V unless WithDefault says otherwise. Each
// kind has a ...WithTTL constructor whose entries expire (the TTL code is
// compiled into a program only if it calls one). Registering a name again
// returns a handle on the same state if kind, codecs, Go types, TTL and
// default match, else an error matching ErrStateMismatch that names the
// state. States of windows or other namespaces are registered by the
// Namespaced... constructors, with explicit codecs.
//
// Every method of a state handle is for the writer goroutine, except the
// ...At methods, which read a live Snapshot from any goroutine. The error
// of a write or read is that of a key the backend does not own (matching
// ErrKeyGroupNotOwned) or of a key the key codec cannot encode; with
// Config.KeyGroups left to its default, a backend owns every key group.

// Codec encodes values of T to bytes and back; see statetable.Codec.
type Codec[T any] = statetable.Codec[T]

// AggregateFunction is an aggregating state's aggregation; see
// statetable.AggregateFunction.
type AggregateFunction[IN, ACC, OUT any] = statetable.AggregateFunction[IN, ACC, OUT]

// VoidNamespace is the namespace of a state registered by a Namespaced...
// constructor that has none (its codec is statetable.Void).
type VoidNamespace = statetable.VoidNamespace

// The states of the Namespaced... constructors: one per key and namespace.
type (
	NamespacedValueState[K, N, V any]                  = statetable.ValueState[K, N, V]
	NamespacedListState[K, N, E any]                   = statetable.ListState[K, N, E]
	NamespacedMapState[K, N, UK, UV any]               = statetable.MapState[K, N, UK, UV]
	NamespacedReducingState[K, N, V any]               = statetable.ReducingState[K, N, V]
	NamespacedAggregatingState[K, N, IN, ACC, OUT any] = statetable.AggregatingState[K, N, IN, ACC, OUT]
)

// A StateOption sets what a state's constructor would otherwise infer: a
// codec, or a value state's default. An option of another Go type than
// the state's (a Codec[int32] for int64 keys, say), or one the kind has no
// use for, is an error matching ErrConfig that names the state.
type StateOption struct {
	what string // "key codec", "value codec", "user key codec", "default", "value migration"
	v    any
}

// WithKeyCodec gives a state the codec of its keys. A key's bytes decide
// its key group, so a job must keep its key codec across restores.
func WithKeyCodec[K any](c Codec[K]) StateOption { return StateOption{"key codec", c} }

// WithValueCodec gives a state the codec of what it stores per key: a
// value state's values, a list's elements, a map's values, a reducing
// state's values, an aggregating state's accumulators.
func WithValueCodec[V any](c Codec[V]) StateOption { return StateOption{"value codec", c} }

// MigrateFrom lets a state restore values of an earlier type O, which a
// file's codec records, by converting each with migrate: the schema change
// that no codec reads by itself (a field's type changed, a value type
// replaced; an added or removed struct field needs none, see
// statetable.Struct). O's values are decoded with O's inferred codec
// (CodecFor), so O declares the old type as it was: its fields' names and
// types, under any Go name. It applies to what WithValueCodec sets: a
// value state's values, a list's elements, a map's values, a reducing
// state's values, an aggregating state's accumulators. Keys never migrate.
// Cost: none on the state's operations; migrate runs once per value at a
// restore from a file of O, and the checkpoint after it is full.
func MigrateFrom[O, V any](migrate func(O) (V, error)) StateOption {
	return StateOption{"value migration", func(c Codec[V]) (Codec[V], error) {
		old, err := statetable.CodecFor[O]()
		if err != nil {
			return nil, fmt.Errorf("the type migrated from: %w", err)
		}
		return statetable.WithMigration(c, old, migrate), nil
	}}
}

// WithUserKeyCodec gives a map state the codec of its user keys.
func WithUserKeyCodec[UK any](c Codec[UK]) StateOption { return StateOption{"user key codec", c} }

// WithDefault gives a value state the value Get returns for a key that has
// none (else the zero V).
func WithDefault[V any](v V) StateOption { return StateOption{"default", v} }

// stateOptions are the options of one registration, by what they set.
type stateOptions struct {
	name string
	set  map[string]any
}

// parseOptions sorts opts by what they set; allowed are the settings the
// state's kind has.
func parseOptions(kind, name string, opts []StateOption, allowed ...string) (stateOptions, error) {
	o := stateOptions{name: name}
	for _, opt := range opts {
		_, dup := o.set[opt.what]
		switch {
		case opt.what == "":
			return o, fmt.Errorf("%w: state %q: a zero StateOption", ErrConfig, name)
		case !slices.Contains(allowed, opt.what) && !(opt.what == "value migration" && slices.Contains(allowed, "value codec")):
			return o, fmt.Errorf("%w: state %q: a %s state has no %s", ErrConfig, name, kind, opt.what)
		case dup:
			return o, fmt.Errorf("%w: state %q: %s given twice", ErrConfig, name, opt.what)
		}
		if o.set == nil {
			o.set = make(map[string]any, len(opts))
		}
		o.set[opt.what] = opt.v
	}
	return o, nil
}

// codec returns the codec option what, asserted to Codec[T], or T's
// inferred codec when there is none.
func codec[T any](o stateOptions, what string) (Codec[T], error) {
	given, ok := o.set[what]
	if !ok {
		c, err := statetable.CodecFor[T]()
		if err != nil {
			return nil, fmt.Errorf("state %q: %s: %w (give one with an option)", o.name, what, err)
		}
		return c, nil
	}
	c, ok := given.(Codec[T])
	if !ok || c == nil {
		return nil, fmt.Errorf("%w: state %q: %s is a %T, the state needs a Codec[%s]", ErrConfig, o.name, what, given, reflect.TypeFor[T]())
	}
	return c, nil
}

// valueCodec is codec of the value codec, with the value migration
// option (MigrateFrom) applied if given.
func valueCodec[T any](o stateOptions) (Codec[T], error) {
	c, err := codec[T](o, "value codec")
	if err != nil {
		return nil, err
	}
	given, ok := o.set["value migration"]
	if !ok {
		return c, nil
	}
	wrap, ok := given.(func(Codec[T]) (Codec[T], error))
	if !ok {
		return nil, fmt.Errorf("%w: state %q: MigrateFrom converts to another type than the state's values (%s)", ErrConfig, o.name, reflect.TypeFor[T]())
	}
	if c, err = wrap(c); err != nil {
		return nil, fmt.Errorf("state %q: %w", o.name, err)
	}
	return c, nil
}

// defaultOf returns the default option asserted to V, or the zero V.
func defaultOf[V any](o stateOptions) (V, error) {
	var def V
	given, ok := o.set["default"]
	if !ok {
		return def, nil
	}
	def, ok = given.(V)
	if !ok {
		return def, fmt.Errorf("%w: state %q: default is a %T, the state's values are %s", ErrConfig, o.name, given, reflect.TypeFor[V]())
	}
	return def, nil
}

var noNamespace VoidNamespace

// ValueState holds one value per key. Get returns the default for a key
// without one; Lookup tells the two apart.
type ValueState[K, V any] struct {
	s *statetable.ValueState[K, VoidNamespace, V]
}

// Value registers a value state keyed by K (options: WithKeyCodec,
// WithValueCodec, WithDefault).
func Value[K, V any](b *Backend, name string, opts ...StateOption) (*ValueState[K, V], error) {
	kc, vc, def, err := valueArgs[K, V](name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewValue(b.table, name, kc, statetable.Void, vc, def)
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{s}, nil
}

// ValueWithTTL registers a value state whose values expire ttl.Duration
// after they were last written (or read, with UpdateOnReadAndWrite).
func ValueWithTTL[K, V any](b *Backend, name string, ttl TTL, opts ...StateOption) (*ValueState[K, V], error) {
	kc, vc, def, err := valueArgs[K, V](name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewValueWithTTL(b.table, name, kc, statetable.Void, vc, def, ttl)
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{s}, nil
}

func valueArgs[K, V any](name string, opts []StateOption) (Codec[K], Codec[V], V, error) {
	var def V
	o, err := parseOptions("value", name, opts, "key codec", "value codec", "default")
	if err != nil {
		return nil, nil, def, err
	}
	kc, err := codec[K](o, "key codec")
	if err != nil {
		return nil, nil, def, err
	}
	vc, err := valueCodec[V](o)
	if err != nil {
		return nil, nil, def, err
	}
	def, err = defaultOf[V](o)
	return kc, vc, def, err
}

// Get returns key's value, or the default.
func (v *ValueState[K, V]) Get(key K) (V, error) { return v.s.Get(key, noNamespace) }

// Lookup returns key's value and true, or the zero V and false.
func (v *ValueState[K, V]) Lookup(key K) (V, bool, error) { return v.s.Lookup(key, noNamespace) }

// Put sets key's value. Right after a Get of key, with nothing written
// between, it writes where the Get found the entry: Get then Put costs
// about what Update does.
func (v *ValueState[K, V]) Put(key K, val V) error { return v.s.Put(key, noNamespace, val) }

// Update sets key's value to f of its value (or of the default): a
// read-modify-write that finds the key once.
func (v *ValueState[K, V]) Update(key K, f func(V) V) error { return v.s.Update(key, noNamespace, f) }

// UpdateEach is Update of keys[0], keys[1], ... in turn, where f(i, old)
// is the new value of keys[i]: the same result as the calls one by one,
// with the cache misses of each group of keys overlapped. Use it to
// apply a batch of events at once; at millions of keys it takes a third
// less time an event than Update (BenchmarkJob). An error stops it, with
// the keys before the failing one updated; the error names its index.
// Writer goroutine only.
func (v *ValueState[K, V]) UpdateEach(keys []K, f func(i int, old V) V) error {
	return v.s.UpdateEach(keys, noNamespace, f)
}

// GetEach calls f(i, val) with the value of keys[i] (or the default),
// for each index in turn: the values Get would return one by one, with
// the cache misses of each group of keys overlapped. Use it to read a
// batch of events' state at once. An error stops it, f called for the
// keys before the failing one; the error names its index. Writer
// goroutine only.
func (v *ValueState[K, V]) GetEach(keys []K, f func(i int, val V)) error {
	return v.s.GetEach(keys, noNamespace, f)
}

// Clear removes key's value.
func (v *ValueState[K, V]) Clear(key K) error { return v.s.Clear(key, noNamespace) }

// GetAt is Get on a snapshot of the backend; any goroutine while snap is
// live.
func (v *ValueState[K, V]) GetAt(snap *Snapshot, key K) (V, error) {
	return v.s.GetAt(snap.State(), key, noNamespace)
}

// LookupAt is Lookup on a snapshot of the backend; any goroutine while snap
// is live.
func (v *ValueState[K, V]) LookupAt(snap *Snapshot, key K) (V, bool, error) {
	return v.s.LookupAt(snap.State(), key, noNamespace)
}

// Count returns the number of keys with a value. O(1).
func (v *ValueState[K, V]) Count() int { return v.s.Count() }

// Keys yields the keys with a value in entry-hash order (deterministic).
// The loop's body may read and write any state: the keys are those there
// were when the loop began. O(keys), plus the copy-on-write of what the
// body writes; writer goroutine only.
func (v *ValueState[K, V]) Keys() iter.Seq[K] { return v.s.Keys(noNamespace) }

// KeysAt yields the keys with a value in a snapshot; any goroutine while
// snap is live.
func (v *ValueState[K, V]) KeysAt(snap *Snapshot) (iter.Seq[K], error) {
	return v.s.KeysAt(snap.State(), noNamespace)
}

// Namespaced returns the state as registered, with its (noNamespace) namespace:
// for code written against the namespaced states.
func (v *ValueState[K, V]) Namespaced() *NamespacedValueState[K, VoidNamespace, V] { return v.s }

// ListState holds a persistent list per key: appending is O(log n), never a
// copy of the list.
type ListState[K, E any] struct {
	s *statetable.ListState[K, VoidNamespace, E]
}

// List registers a list state (options: WithKeyCodec, WithValueCodec for
// the elements).
func List[K, E any](b *Backend, name string, opts ...StateOption) (*ListState[K, E], error) {
	kc, ec, err := keyValueArgs[K, E]("list", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewList(b.table, name, kc, statetable.Void, ec)
	if err != nil {
		return nil, err
	}
	return &ListState[K, E]{s}, nil
}

// ListWithTTL registers a list state whose elements expire each on its own.
func ListWithTTL[K, E any](b *Backend, name string, ttl TTL, opts ...StateOption) (*ListState[K, E], error) {
	kc, ec, err := keyValueArgs[K, E]("list", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewListWithTTL(b.table, name, kc, statetable.Void, ec, ttl)
	if err != nil {
		return nil, err
	}
	return &ListState[K, E]{s}, nil
}

// ResolveCodecs returns the key and value codecs a state of kind ("value",
// "list", "reducing", ...) registered under name would use with opts:
// those WithKeyCodec and WithValueCodec give, else the inferred ones. Any
// other option is an error matching ErrConfig. For code that registers
// states on a job's behalf, such as package window's operators.
func ResolveCodecs[K, V any](kind, name string, opts ...StateOption) (Codec[K], Codec[V], error) {
	return keyValueArgs[K, V](kind, name, opts)
}

func keyValueArgs[K, V any](kind, name string, opts []StateOption) (Codec[K], Codec[V], error) {
	o, err := parseOptions(kind, name, opts, "key codec", "value codec")
	if err != nil {
		return nil, nil, err
	}
	kc, err := codec[K](o, "key codec")
	if err != nil {
		return nil, nil, err
	}
	vc, err := valueCodec[V](o)
	return kc, vc, err
}

// Add appends e to key's list.
func (l *ListState[K, E]) Add(key K, e E) error { return l.s.Add(key, noNamespace, e) }

// AddEach appends e(i) to the list of keys[i], for each index in turn:
// the same result as the calls of Add one by one, with the cache misses
// of each group of keys' lists overlapped (see ValueState.UpdateEach). An
// error stops it, with the keys before the failing one added; the error
// names its index. Writer goroutine only.
func (l *ListState[K, E]) AddEach(keys []K, e func(i int) E) error {
	return l.s.AddEach(keys, noNamespace, e)
}

// AddAll appends every element of es to key's list.
func (l *ListState[K, E]) AddAll(key K, es iter.Seq[E]) error {
	return l.s.AddAll(key, noNamespace, es)
}

// Update replaces key's list with es (an empty es clears it).
func (l *ListState[K, E]) Update(key K, es iter.Seq[E]) error {
	return l.s.Update(key, noNamespace, es)
}

// Get yields key's list (see statetable.ListState.Get).
func (l *ListState[K, E]) Get(key K) (iter.Seq[E], error) { return l.s.Get(key, noNamespace) }

// Len returns the length of key's list.
func (l *ListState[K, E]) Len(key K) (int, error) { return l.s.Len(key, noNamespace) }

// Clear removes key's list.
func (l *ListState[K, E]) Clear(key K) error { return l.s.Clear(key, noNamespace) }

// GetAt is Get on a snapshot; any goroutine while snap is live.
func (l *ListState[K, E]) GetAt(snap *Snapshot, key K) (iter.Seq[E], error) {
	return l.s.GetAt(snap.State(), key, noNamespace)
}

// Count returns the number of keys with a list. O(1).
func (l *ListState[K, E]) Count() int { return l.s.Count() }

// Keys yields the keys with a list (see ValueState.Keys).
func (l *ListState[K, E]) Keys() iter.Seq[K] { return l.s.Keys(noNamespace) }

// Namespaced returns the state as registered, with its (noNamespace) namespace.
func (l *ListState[K, E]) Namespaced() *NamespacedListState[K, VoidNamespace, E] { return l.s }

// MapState holds a persistent map per key: a put is O(log n), never a copy
// of the map.
type MapState[K, UK, UV any] struct {
	s *statetable.MapState[K, VoidNamespace, UK, UV]
}

// Map registers a map state (options: WithKeyCodec, WithUserKeyCodec,
// WithValueCodec).
func Map[K, UK, UV any](b *Backend, name string, opts ...StateOption) (*MapState[K, UK, UV], error) {
	kc, ukc, uvc, err := mapArgs[K, UK, UV](name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewMapState(b.table, name, kc, statetable.Void, ukc, uvc)
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{s}, nil
}

// MapWithTTL registers a map state whose entries expire each on its own.
func MapWithTTL[K, UK, UV any](b *Backend, name string, ttl TTL, opts ...StateOption) (*MapState[K, UK, UV], error) {
	kc, ukc, uvc, err := mapArgs[K, UK, UV](name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewMapStateWithTTL(b.table, name, kc, statetable.Void, ukc, uvc, ttl)
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{s}, nil
}

func mapArgs[K, UK, UV any](name string, opts []StateOption) (Codec[K], Codec[UK], Codec[UV], error) {
	o, err := parseOptions("map", name, opts, "key codec", "user key codec", "value codec")
	if err != nil {
		return nil, nil, nil, err
	}
	kc, err := codec[K](o, "key codec")
	if err != nil {
		return nil, nil, nil, err
	}
	ukc, err := codec[UK](o, "user key codec")
	if err != nil {
		return nil, nil, nil, err
	}
	uvc, err := valueCodec[UV](o)
	return kc, ukc, uvc, err
}

// Get returns the value of uk in key's map and whether it is there.
func (m *MapState[K, UK, UV]) Get(key K, uk UK) (UV, bool, error) {
	return m.s.Get(key, noNamespace, uk)
}

// Contains reports whether key's map holds uk.
func (m *MapState[K, UK, UV]) Contains(key K, uk UK) (bool, error) {
	return m.s.Contains(key, noNamespace, uk)
}

// Put sets uk to uv in key's map.
func (m *MapState[K, UK, UV]) Put(key K, uk UK, uv UV) error {
	return m.s.Put(key, noNamespace, uk, uv)
}

// PutAll puts every entry of entries in key's map.
func (m *MapState[K, UK, UV]) PutAll(key K, entries iter.Seq2[UK, UV]) error {
	return m.s.PutAll(key, noNamespace, entries)
}

// Remove removes uk from key's map.
func (m *MapState[K, UK, UV]) Remove(key K, uk UK) error { return m.s.Remove(key, noNamespace, uk) }

// IsEmpty reports whether key's map has no entry.
func (m *MapState[K, UK, UV]) IsEmpty(key K) (bool, error) { return m.s.IsEmpty(key, noNamespace) }

// Len returns the number of entries of key's map.
func (m *MapState[K, UK, UV]) Len(key K) (int, error) { return m.s.Len(key, noNamespace) }

// Iterate yields key's map (see statetable.MapState.Iterate).
func (m *MapState[K, UK, UV]) Iterate(key K) (iter.Seq2[UK, UV], error) {
	return m.s.Iterate(key, noNamespace)
}

// IterateAt is Iterate on a snapshot; any goroutine while snap is live.
func (m *MapState[K, UK, UV]) IterateAt(snap *Snapshot, key K) (iter.Seq2[UK, UV], error) {
	return m.s.IterateAt(snap.State(), key, noNamespace)
}

// Clear removes key's whole map.
func (m *MapState[K, UK, UV]) Clear(key K) error { return m.s.Clear(key, noNamespace) }

// Count returns the number of keys with a map. O(1).
func (m *MapState[K, UK, UV]) Count() int { return m.s.Count() }

// Keys yields the keys with a map (see ValueState.Keys).
func (m *MapState[K, UK, UV]) Keys() iter.Seq[K] { return m.s.Keys(noNamespace) }

// Namespaced returns the state as registered, with its (noNamespace) namespace.
func (m *MapState[K, UK, UV]) Namespaced() *NamespacedMapState[K, VoidNamespace, UK, UV] {
	return m.s
}

// ReducingState folds the values added to a key with its reduce function.
type ReducingState[K, V any] struct {
	s *statetable.ReducingState[K, VoidNamespace, V]
}

// Reducing registers a reducing state (options: WithKeyCodec,
// WithValueCodec). reduce must return a new value rather than mutate its
// arguments.
func Reducing[K, V any](b *Backend, name string, reduce func(acc, v V) V, opts ...StateOption) (*ReducingState[K, V], error) {
	kc, vc, err := keyValueArgs[K, V]("reducing", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewReducing(b.table, name, kc, statetable.Void, vc, reduce)
	if err != nil {
		return nil, err
	}
	return &ReducingState[K, V]{s}, nil
}

// ReducingWithTTL registers a reducing state whose values expire; an Add
// to an expired value starts it over.
func ReducingWithTTL[K, V any](b *Backend, name string, reduce func(acc, v V) V, ttl TTL, opts ...StateOption) (*ReducingState[K, V], error) {
	kc, vc, err := keyValueArgs[K, V]("reducing", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewReducingWithTTL(b.table, name, kc, statetable.Void, vc, reduce, ttl)
	if err != nil {
		return nil, err
	}
	return &ReducingState[K, V]{s}, nil
}

// Add folds v into key's value (or makes v its value).
func (r *ReducingState[K, V]) Add(key K, v V) error { return r.s.Add(key, noNamespace, v) }

// AddEach is Add of keys[0], keys[1], ... in turn, value(i) folded into
// keys[i]: the same result as the calls one by one, with the cache
// misses of each group of keys overlapped (see ValueState.UpdateEach).
// An error stops it, with the keys before the failing one added; the
// error names its index. Writer goroutine only.
func (r *ReducingState[K, V]) AddEach(keys []K, value func(i int) V) error {
	return r.s.AddEach(keys, noNamespace, value)
}

// Get returns key's value and whether it has one.
func (r *ReducingState[K, V]) Get(key K) (V, bool, error) { return r.s.Get(key, noNamespace) }

// Clear removes key's value.
func (r *ReducingState[K, V]) Clear(key K) error { return r.s.Clear(key, noNamespace) }

// GetAt is Get on a snapshot; any goroutine while snap is live.
func (r *ReducingState[K, V]) GetAt(snap *Snapshot, key K) (V, bool, error) {
	return r.s.GetAt(snap.State(), key, noNamespace)
}

// Count returns the number of keys with a value. O(1).
func (r *ReducingState[K, V]) Count() int { return r.s.Count() }

// Keys yields the keys with a value (see ValueState.Keys).
func (r *ReducingState[K, V]) Keys() iter.Seq[K] { return r.s.Keys(noNamespace) }

// Namespaced returns the state as registered, with its (noNamespace) namespace.
func (r *ReducingState[K, V]) Namespaced() *NamespacedReducingState[K, VoidNamespace, V] { return r.s }

// AggregatingState adds inputs to an accumulator per key and reads results
// from it.
type AggregatingState[K, IN, ACC, OUT any] struct {
	s *statetable.AggregatingState[K, VoidNamespace, IN, ACC, OUT]
}

// Aggregating registers an aggregating state (options: WithKeyCodec,
// WithValueCodec for the accumulators). Go infers IN, ACC and OUT from
// fn's methods, so a call names only the key type:
// cowstate.Aggregating[string](b, "avg", average{}).
func Aggregating[K, IN, ACC, OUT any](b *Backend, name string, fn AggregateFunction[IN, ACC, OUT], opts ...StateOption) (*AggregatingState[K, IN, ACC, OUT], error) {
	kc, ac, err := keyValueArgs[K, ACC]("aggregating", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewAggregating(b.table, name, kc, statetable.Void, ac, fn)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[K, IN, ACC, OUT]{s}, nil
}

// AggregatingWithTTL registers an aggregating state whose accumulators
// expire; an Add to an expired one starts a new accumulator.
func AggregatingWithTTL[K, IN, ACC, OUT any](b *Backend, name string, fn AggregateFunction[IN, ACC, OUT], ttl TTL, opts ...StateOption) (*AggregatingState[K, IN, ACC, OUT], error) {
	kc, ac, err := keyValueArgs[K, ACC]("aggregating", name, opts)
	if err != nil {
		return nil, err
	}
	s, err := statetable.NewAggregatingWithTTL(b.table, name, kc, statetable.Void, ac, fn, ttl)
	if err != nil {
		return nil, err
	}
	return &AggregatingState[K, IN, ACC, OUT]{s}, nil
}

// Add adds in to key's accumulator (a new one if it has none).
func (a *AggregatingState[K, IN, ACC, OUT]) Add(key K, in IN) error {
	return a.s.Add(key, noNamespace, in)
}

// AddEach is Add of keys[0], keys[1], ... in turn, in(i) added to
// keys[i]'s accumulator: the same result as the calls one by one, with
// the cache misses of each group of keys overlapped (see
// ValueState.UpdateEach). An error stops it, with the keys before the
// failing one added; the error names its index. Writer goroutine only.
func (a *AggregatingState[K, IN, ACC, OUT]) AddEach(keys []K, in func(i int) IN) error {
	return a.s.AddEach(keys, noNamespace, in)
}

// Get returns the result of key's accumulator and whether it has one.
func (a *AggregatingState[K, IN, ACC, OUT]) Get(key K) (OUT, bool, error) {
	return a.s.Get(key, noNamespace)
}

// Clear removes key's accumulator.
func (a *AggregatingState[K, IN, ACC, OUT]) Clear(key K) error { return a.s.Clear(key, noNamespace) }

// GetAt is Get on a snapshot; any goroutine while snap is live.
func (a *AggregatingState[K, IN, ACC, OUT]) GetAt(snap *Snapshot, key K) (OUT, bool, error) {
	return a.s.GetAt(snap.State(), key, noNamespace)
}

// Count returns the number of keys with an accumulator. O(1).
func (a *AggregatingState[K, IN, ACC, OUT]) Count() int { return a.s.Count() }

// Keys yields the keys with an accumulator (see ValueState.Keys).
func (a *AggregatingState[K, IN, ACC, OUT]) Keys() iter.Seq[K] { return a.s.Keys(noNamespace) }

// Namespaced returns the state as registered, with its (noNamespace) namespace.
func (a *AggregatingState[K, IN, ACC, OUT]) Namespaced() *NamespacedAggregatingState[K, VoidNamespace, IN, ACC, OUT] {
	return a.s
}
