// Package kv is the wide-area key/value store: every site writes through its
// own kv stream, every site applies every site's stream, and each request
// chooses how stable what it writes or reads must be, as a predicate.
//
// The one idea: a write returns when the frontier of its wait predicate
// covers it, so "done" means exactly what the caller asked for ("persisted
// in two regions", "on another continent"), and a read picks its side of the
// same bargain: the latest local state, only what is stable under P, a
// quorum of sites satisfying dual(P) (which sees every write acknowledged
// under P), or a consistent snapshot at P's global stable time.
//
// Concurrent writes to one key resolve by last writer wins on (HLC, origin),
// the same everywhere, so sites converge once writes stop. Versions are
// kept for snapshot and stable reads until retention prunes them (below),
// and the applied position of each origin's stream is written in the same
// batch as the state, so a crash never leaves the position ahead of the
// data. Versions are stored by key, newest first, so a key's first
// versions are its winner: applying a version writes it and reads nothing
// (unless a Watch needs to know whether it won), and a write's value is
// stored once besides the log.
//
// Keys under a configured prefix (default /lin/) are served instead by the
// linearizable mode (package kv/lin), a Raft group across sites, with
// compare-and-swap and leases; Server routes them.
//
// # Retention
//
// The state, not the log, serves reads, so a Store started with Start
// keeps its site's disk bounded by its live data (retention.go). Every
// second it truncates every origin's kv stream in this site's log up to
// what every site applied, less Retention.LogLag; a peer disconnected for
// longer than MaxLagTime (1h) stops holding the log back, and catches up
// by state transfer. And a pruner walks the keys, 2,000 versions a second
// without reading values, and keeps of each key every version newer than
// its newest settled one (at or below the stable time of
// min(applied(sites)): no older version can arrive anywhere), that one,
// and older ones within KeepVersions (1) or KeepAge (0); a settled
// deletion with nothing older kept goes too. Latest, quorum, scan and
// stable reads under received, persisted and applied levels read what is
// kept; a snapshot read below what was pruned of a key fails with
// ErrHistoryPruned (OutOfRange) instead of answering wrong.
//
// # Usage
//
//	st, err := kv.New(kv.Config{Node: node, Peers: readers}) // before node.Start
//	err = st.Start()                                          // after node.Start; st.Close() before node.Close
//	res, err := st.Put(ctx, "jobs/7", rec, kv.WriteOptions{Wait: "majority"})
//	r, err := st.Get(ctx, "jobs/7", kv.ReadOptions{Quorum: "majority"})
//	srv := kv.NewServer(st) // the gRPC API of kvpb
//
// The Go client is package kv/kvclient, which links only the API (kvpb)
// and gRPC: a program that only talks to sites pulls in none of this
// package's storage or Raft.
//
// # Concurrency
//
// A Store is safe for concurrent use. Apply is called by the node from one
// goroutine; Store.mu guards the unapplied own writes and the watchers and
// is never held across I/O. Start starts two goroutines, the log
// truncation and the pruner, each the only user of its own fields; Close
// stops them and waits. The pruner's deletions race with nothing: it
// deletes only versions older than a settled one, which no write or apply
// touches again, and reads check a key's pruning marker after its versions.
//
// Server.Writes serves each stream with goroutines that end with it: the
// handler's reads, one appends, one waiter per (wait, timeout) with writes
// waiting, one per write of a linearizable key, and one sends, the only
// one. It stops reading while MaxUnanswered writes are unanswered.
// Server.Drain asks every stream's client to close it, so that
// GracefulStop does not wait for clients. All the mutexes of Server are
// leaves.
package kv
