// Package workload makes a training platform's records (WORKLOAD.md),
// scaled down, for demos, system tests and benchmarks: job records of
// about 1 KB, checkpoint manifests of a few KB, lineage edges of a few
// hundred bytes, and the latency bound a topology's round trips allow a
// write under a predicate.
//
// The one idea: the records are a function of the writer site and the
// seed, so that wanbed's runs, the benchmark (a module of its own, which
// cannot import cmd) and the system tests write the same bytes, and runs
// compare across machines and releases.
//
// # Usage
//
//	g := workload.NewGen("us-east-1", 1)
//	rec := g.Next() // rec.Key, rec.Value, rec.Kind: "job", "manifest" or "lineage"
//	b := workload.Bound(topo, compiled, schema, "us-east-1")
//	p50 := workload.Percentile(latencies, 0.5)
package workload
