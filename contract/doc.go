// Package contract defines what a keyed-state and timer backend does at the
// level of bytes, the interface Backend, so that one conformance suite
// (package rapidtest) and one reference model (rapidtest.Model) can test
// any backend: cowstate's, through the adapter Of, or another on disk, on a
// remote store or over another engine.
//
// States are addressed by name, and keys, namespaces, values, list elements
// and user-map keys and values are strings (encoded bytes, any bytes at
// all). The reducing and aggregating states of a contract use the fixed
// functions Reduce and Aggregate, so that a run is reproducible and every
// step of a fold or a merge shows in the value.
//
// Two optional interfaces extend Backend: TTLBackend, states with a
// time-to-live, and SchemaBackend, states registered with a Schema (a value
// struct of ValueSchemas and versions of the key and namespace codecs) so
// that a snapshot restores into the next version of a job's types,
// migrated or refused as Schema.Reads says.
//
// The package imports neither rapid nor testing: a backend implements
// Backend in its library code, and only its tests import rapidtest.
//
// # Caveats
//
//   - A contract Backend has a single writer, like cowstate's Backend: every
//     method belongs to one goroutine, and fire callbacks run on it. A View
//     may be read, written and released from any goroutine.
//   - The adapter Of knows the states and timer services registered through
//     it: register a state or service that b already has (with
//     statetable.String codecs, or a Schema's) again through the adapter to
//     reach it.
package contract
