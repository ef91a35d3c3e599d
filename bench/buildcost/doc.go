// Package buildcost holds the programs BenchmarkBuildCost builds: a job
// that keeps its checkpoints on a local disk (library), in S3 through
// checkpoint/s3store (s3store), and in S3 through checkpoint/storeurl
// with gocloud.dev's s3blob driver (storeurl). Each opens a store and
// does nothing else: what it costs to build is what its storage costs.
package buildcost
