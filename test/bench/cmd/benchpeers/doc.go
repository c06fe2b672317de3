// Command benchpeers runs the peer systems of `wanbench kv` and `wanbench
// pubsub`: etcd members, NATS servers, and their load clients. wanbench
// starts it (from beside itself) and reads its results as JSON on stdout;
// people need not run it.
//
// It is a binary of its own so that each peer runs as it would in
// production, in processes of its own (one per etcd member or NATS
// server, started by wanbench), and so that the peers' load clients, like
// ours, measure from a process apart from the servers; wanbench itself
// links none of the peers' code.
//
// # Usage
//
//	benchpeers etcd-member --config member.json   # one embedded etcd member, until SIGTERM
//	benchpeers etcd-leader --endpoints a=host:port,... [--want a]
//	benchpeers etcd-wan-load --in load.json       # per-region closed loops; prints []Result
//	benchpeers etcd-tput --endpoints host:port,... --inflight 256 --conns 4
//	benchpeers nats-server --config server.conf   # one embedded nats-server, until SIGTERM
//	benchpeers nats-tput --endpoints host:port,... --inflight 256 --conns 4
//	benchpeers nats-ps --in job.json              # a pub/sub job (peerapi.PSJob); prints a peerapi.PSResult
//
// nats-ps drives NATS JetStream through package natsps with the loads of
// package psload, the code wanbench drives our pub/sub with.
//
// The throughput commands print one Result (writes/s and every latency in
// the measured window; see internal/loadgen).
package main
