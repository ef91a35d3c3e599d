// Package bench holds the side-by-side benchmarks of cowstate against the
// structures a Go user would otherwise pick: the builtin map (deep-copied
// where a snapshot is needed), google/btree and tidwall/btree (copy-on-write
// clones), and benbjohnson/immutable (a persistent HAMT). Every peer runs in
// the same benchmark function as a sub-benchmark, so one
//
//	go test -run '^$' -bench . .
//
// in this directory (or, from the repository root with
// GOWORK=$PWD/modules.work, go test -run '^$' -bench . ./bench) compares
// them. Sub-benchmark names are key=value pairs
// (BenchmarkPut/size=1000000/snap=every1000/impl=cow) that tools comparing
// runs read (cmd/benchreport among them); do not rename them.
//
// Peers are imported here only. This directory is a module of its own
// (github.com/cowstate/cowstate/bench, with cmd/benchreport), so that the
// library module, and so its importers, depend on none of them nor on the
// plotting libraries.
package bench
