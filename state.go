package cowstate

import "github.com/cowstate/cowstate/statetable"

// The functions below register keyed states on a backend: a state is named,
// has codecs for its key, namespace and values (statetable ships codecs for
// strings, bytes, integers, float64 and bool; statetable.FuncCodec wraps
// your own), and registering a name again returns the same state if kind,
// codecs, Go types and (for Value) the default match, else an error
// matching statetable.ErrStateMismatch that names the state. Functions
// (reduce, aggregate) cannot be compared: a re-registration keeps the
// first. Options (WithTTL) apply to every kind; a bad one is an error
// matching statetable.ErrConfig that names the state. Writer goroutine
// only.

// TTL configures a state's time-to-live; see statetable.TTL.
type TTL = statetable.TTL

// WithTTL gives a state a time-to-live on the backend's processing-time
// clock (Config.Clock); see statetable.TTL:
//
//	seen, err := cowstate.Value(b, "last-seen", statetable.Int64, statetable.Void, statetable.Int64, 0,
//		cowstate.WithTTL(cowstate.TTL{Duration: 30 * time.Minute}))
func WithTTL(ttl TTL) statetable.Option { return statetable.WithTTL(ttl) }

// Value registers a value state: one value per key and namespace, def when
// absent.
func Value[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], def V, opts ...statetable.Option) (*statetable.ValueState[K, N, V], error) {
	return statetable.NewValue(b.table, name, kc, nc, vc, def, opts...)
}

// List registers a list state: a persistent list per key and namespace
// (appending is O(log n), never a copy of the list).
func List[K, N, E any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ec statetable.Codec[E], opts ...statetable.Option) (*statetable.ListState[K, N, E], error) {
	return statetable.NewList(b.table, name, kc, nc, ec, opts...)
}

// Map registers a map state: a persistent map per key and namespace (a put
// is O(log n), never a copy of the map).
func Map[K, N, UK, UV any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ukc statetable.Codec[UK], uvc statetable.Codec[UV], opts ...statetable.Option) (*statetable.MapState[K, N, UK, UV], error) {
	return statetable.NewMapState(b.table, name, kc, nc, ukc, uvc, opts...)
}

// Reducing registers a reducing state: values are folded with reduce as they
// are added.
func Reducing[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], reduce func(acc, v V) V, opts ...statetable.Option) (*statetable.ReducingState[K, N, V], error) {
	return statetable.NewReducing(b.table, name, kc, nc, vc, reduce, opts...)
}

// Aggregating registers an aggregating state: inputs are added to an
// accumulator, results read from it. Go infers every type parameter from
// the arguments: K and N from the codecs, IN, ACC and OUT from fn's methods,
// so a call spells none (cowstate.Aggregating(b, "avg", kc, nc, ac, avg{})).
func Aggregating[K, N, IN, ACC, OUT any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ac statetable.Codec[ACC], fn statetable.AggregateFunction[IN, ACC, OUT], opts ...statetable.Option) (*statetable.AggregatingState[K, N, IN, ACC, OUT], error) {
	return statetable.NewAggregating(b.table, name, kc, nc, ac, fn, opts...)
}
