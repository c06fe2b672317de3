// Command wanbench is the side-by-side benchmark of issue 7: our KV under
// several predicates, our linearizable mode and a real etcd cluster, all
// from a client in every region of an emulated WAN, each row beside the
// lower bound the RTT matrix implies; then write throughput on loopback at
// equal durability against etcd and NATS JetStream. It writes
// results.json, latencies.json, report.md and PNG plots.
//
// `wanbench pubsub` is issue 16's: our pub/sub against NATS JetStream on
// ec2-3 (publish-ack and cross-region delivery beside their bounds, a
// degraded link, loopback throughput, memory under a stopped subscriber),
// with the same outputs and every target marked met, missed or not
// measured. Both systems are driven by package psload through
// psload.System; NATS's implementation is package natsps (run by
// benchpeers), ours plugs in at dialOurs in pubsub_ours.go and is not
// wired yet, so its rows say "not measured: ours not wired yet".
//
// `wanbench soak` is issue 18's bounded-disk soak: an overwrite workload
// of job records from every site for 30 minutes (2 with --short), the
// bytes under each site's data directory sampled beside the live data
// size, against 3 × live; a small-site phase before it (10 minutes,
// about 10 MiB of live data; none with --short) holds each site's disk
// in its first minutes against 64 MiB + 3 × live (issue 26). `wanbench
// wipe` is its restore: a site with 1 GiB of KV state at its peers is
// wiped and started again; the time until it serves stable reads,
// against 1 GiB over a link's bandwidth.
//
// It lives in the Go module test/bench, apart from the library, so that the
// root go.mod requires no peer's server (etcd, NATS) and no plotting
// library; that module replaces the root module by path, so it always
// measures the code beside it.
//
// # Usage
//
// From the repository root, `make bench` builds every binary into bin/ and
// runs the full benchmark on ec2-5 (about 6 minutes; etcd's WAN rows need
// root for their network namespaces and are skipped, saying so, without
// it). By hand:
//
//	go build -o bin/ ./cmd/... && (cd test/bench && go build -o ../../bin/ ./cmd/...)
//	bin/wanbench kv --topology ec2-5 --out /tmp/bench
//	bin/wanbench kv --topology ec2-3 --out /tmp/bench --writes 5 --tput-duration 2s --inflight 64 --conns 1
//	bin/wanbench kv --out /tmp/bench --skip wan,etcd,lin,nats --conns 1   # our throughput only
//	bin/wanbench report --out /tmp/bench   # rewrite report.md and the plots from the JSON files
//	bin/wanbench pubsub --topology ec2-3 --out /tmp/pubsub   # about 5 minutes with ours not wired; needs root for NATS's WAN rows
//	bin/wanbench pubsub --out /tmp/pubsub --publishes 10 --degrade-window 5s --tput-duration 2s --stall 10s --stall-before 3s --stall-after 3s
//	bin/wanbench soak --out /tmp/soak   # 41 minutes; --short: 2.5 minutes
//	bin/wanbench wipe --state 256MiB --out /tmp/wipe
//
// # How it runs the systems
//
// wanbench drives the testbed through its binaries, found beside wanbench
// or on PATH, and reads their JSON output; it imports no code of cmd/:
//   - our sites on the WAN: `wanbed up --topology T --dir D -o json`, and
//     `wanbed down --dir D` at the end;
//   - our sites on loopback: `stabilizerd genconfig --sites ... -o json`,
//     then one `stabilizerd --config` per site;
//   - etcd members and NATS servers, and their load clients: benchpeers
//     (test/bench/cmd/benchpeers).
//
// The etcd members on the WAN each run in a network namespace of their own
// and reach each other through a wan.Demux per member (etcd.go says why).
// Our clients are the Go client of package kv, in this process.
//
// The records our KV and etcd write on the WAN come from workload.go, the
// bench's own copy of the generator that `wanbed run` and `wanbed demo`
// use; it writes the same records from the same seeds as before the move.
//
// Files: bench.go runs the phases and holds results.json's rows; kv.go
// drives our sites; etcd.go and nats.go the peers; report.go writes
// report.md and the plots; testbed.go finds, starts and stops the
// binaries. The pub/sub bench: pubsub.go runs its phases; pubsub_ours.go
// and pubsub_nats.go drive the two systems; psbounds.go holds the bounds,
// psresults.go the rows and the targets, psreport.go and psplots.go the
// report; rss.go samples the processes' memory. sites.go starts our sites
// behind in-process emulated links (the file bench, the soak); the soak:
// soak.go runs it, soak_results.go holds its rows and targets,
// soak_report.go writes its report; the wipe: wipe.go runs it,
// wipe_results.go holds its rows, target and report; retention.go reads
// the sites' status.json and their disk use.
//
// NATS on the WAN runs like etcd: each server in its own network namespace,
// its routes through a wan.Demux per server (pubsub_nats.go says why).
//
// # Concurrency
//
// Every process wanbench starts runs in a session or process group of its
// own, so that a Ctrl-C at the terminal reaches only wanbench: it then
// cancels the run and stops what it started (SIGTERM, SIGKILL after 15 s),
// removes the network namespaces, and leaves in --out the results of the
// phases that finished. One goroutine per started process waits for it
// to exit; stopAll waits for those.
package main
