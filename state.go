package cowstate

import "github.com/cowstate/cowstate/statetable"

// The Namespaced... functions register keyed states per key and namespace
// (the states of windows, say): a state is named, has codecs for its key,
// namespace and values (statetable ships codecs for
// strings, bytes, integers, float64 and bool; statetable.FuncCodec wraps
// your own), and registering a name again returns the same state if kind,
// codecs, Go types, TTL and (for Value) the default match, else an error
// matching statetable.ErrStateMismatch that names the state. Functions
// (reduce, aggregate) cannot be compared: a re-registration keeps the
// first. Each kind has a ...WithTTL variant whose entries expire (see
// TTL); an invalid TTL is an error matching ErrConfig that names the
// state. Writer goroutine only.

// CodecFor returns the codec a state uses for T when it is one of the
// types states are commonly keyed and valued by (strings, []byte, bool,
// integers, float64, time.Time, time.Duration, named types of those,
// VoidNamespace, window.TimeWindow and any statetable.CodecProvider), else
// an error matching ErrNoCodec naming the type. See statetable.CodecFor.
//
//	kc, err := cowstate.CodecFor[string]()
func CodecFor[T any]() (statetable.Codec[T], error) { return statetable.CodecFor[T]() }

// TTL configures a state's time-to-live on the backend's processing-time
// clock (Config.Clock); see statetable.TTL. A state gets one by its
// ...WithTTL constructor:
//
//	seen, err := cowstate.ValueWithTTL[int64, int64](b, "last-seen", cowstate.TTL{Duration: 30 * time.Minute})
//
// The TTL code is compiled into a program only if it calls one of them.
type TTL = statetable.TTL

// NamespacedValue registers a value state: one value per key and namespace, def when
// absent.
func NamespacedValue[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], def V) (*statetable.ValueState[K, N, V], error) {
	return statetable.NewValue(b.table, name, kc, nc, vc, def)
}

// NamespacedValueWithTTL registers a value state whose values expire ttl.Duration
// after they were last written (or read, with UpdateOnReadAndWrite).
func NamespacedValueWithTTL[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], def V, ttl TTL) (*statetable.ValueState[K, N, V], error) {
	return statetable.NewValueWithTTL(b.table, name, kc, nc, vc, def, ttl)
}

// NamespacedList registers a list state: a persistent list per key and namespace
// (appending is O(log n), never a copy of the list).
func NamespacedList[K, N, E any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ec statetable.Codec[E]) (*statetable.ListState[K, N, E], error) {
	return statetable.NewList(b.table, name, kc, nc, ec)
}

// NamespacedListWithTTL registers a list state whose elements expire each on its own.
func NamespacedListWithTTL[K, N, E any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ec statetable.Codec[E], ttl TTL) (*statetable.ListState[K, N, E], error) {
	return statetable.NewListWithTTL(b.table, name, kc, nc, ec, ttl)
}

// NamespacedMap registers a map state: a persistent map per key and namespace (a put
// is O(log n), never a copy of the map).
func NamespacedMap[K, N, UK, UV any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ukc statetable.Codec[UK], uvc statetable.Codec[UV]) (*statetable.MapState[K, N, UK, UV], error) {
	return statetable.NewMapState(b.table, name, kc, nc, ukc, uvc)
}

// NamespacedMapWithTTL registers a map state whose user keys' entries expire each on
// its own.
func NamespacedMapWithTTL[K, N, UK, UV any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ukc statetable.Codec[UK], uvc statetable.Codec[UV], ttl TTL) (*statetable.MapState[K, N, UK, UV], error) {
	return statetable.NewMapStateWithTTL(b.table, name, kc, nc, ukc, uvc, ttl)
}

// NamespacedReducing registers a reducing state: values are folded with reduce as they
// are added.
func NamespacedReducing[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], reduce func(acc, v V) V) (*statetable.ReducingState[K, N, V], error) {
	return statetable.NewReducing(b.table, name, kc, nc, vc, reduce)
}

// NamespacedReducingWithTTL registers a reducing state whose values expire; an Add to
// an expired value starts it over.
func NamespacedReducingWithTTL[K, N, V any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], vc statetable.Codec[V], reduce func(acc, v V) V, ttl TTL) (*statetable.ReducingState[K, N, V], error) {
	return statetable.NewReducingWithTTL(b.table, name, kc, nc, vc, reduce, ttl)
}

// NamespacedAggregating registers an aggregating state: inputs are added to an
// accumulator, results read from it. Go infers every type parameter from
// the arguments: K and N from the codecs, IN, ACC and OUT from fn's methods,
// so a call spells none (cowstate.NamespacedAggregating(b, "avg", kc, nc, ac, avg{})).
func NamespacedAggregating[K, N, IN, ACC, OUT any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ac statetable.Codec[ACC], fn statetable.AggregateFunction[IN, ACC, OUT]) (*statetable.AggregatingState[K, N, IN, ACC, OUT], error) {
	return statetable.NewAggregating(b.table, name, kc, nc, ac, fn)
}

// NamespacedAggregatingWithTTL registers an aggregating state whose accumulators
// expire; an Add to an expired one starts a new accumulator.
func NamespacedAggregatingWithTTL[K, N, IN, ACC, OUT any](b *Backend, name string, kc statetable.Codec[K], nc statetable.Codec[N], ac statetable.Codec[ACC], fn statetable.AggregateFunction[IN, ACC, OUT], ttl TTL) (*statetable.AggregatingState[K, N, IN, ACC, OUT], error) {
	return statetable.NewAggregatingWithTTL(b.table, name, kc, nc, ac, fn, ttl)
}
