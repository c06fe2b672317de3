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
// the same everywhere, so sites converge once writes stop. Every version is
// kept (for snapshot reads and stable reads), and the applied position of
// each origin's stream is written in the same batch as the state, so a
// crash never leaves the position ahead of the data. Versions are stored
// by key, newest first, so a key's first versions are its winner: applying a
// version writes it and reads nothing (unless a Watch needs to know whether
// it won), and a write's value is stored once besides the log.
//
// Keys under a configured prefix (default /lin/) are served instead by the
// linearizable mode (package kv/lin), a Raft group across sites, with
// compare-and-swap and leases; Server routes them.
//
// # Usage
//
//	st, err := kv.New(kv.Config{Node: node, Peers: readers}) // before node.Start
//	res, err := st.Put(ctx, "jobs/7", rec, kv.WriteOptions{Wait: "majority"})
//	r, err := st.Get(ctx, "jobs/7", kv.ReadOptions{Quorum: "majority"})
//	srv := kv.NewServer(st) // the gRPC API of kvpb
//
//	cl, err := kv.Dial(addr) // a site's client address
//	w, err := cl.Put(ctx, "jobs/7", rec, "majority", 10*time.Second)
//	g, err := cl.Get(ctx, &kvpb.GetRequest{Key: "jobs/7"}) // sees the Put anywhere
//
// Client is the Go client; kvctl is built on it. Its Puts and Deletes are
// pipelined on one Writes stream per Client, opened by the first write:
// any number of goroutines write at once, each call gets its own answer as
// soon as its wait holds, and the site appends whatever writes have arrived
// together (one batch per wait and timeout), so a write never waits for
// another to be answered. Writes queued while the stream's sender is busy
// go in one message, and answers ready together come back in one, once
// both ends said they read such messages (older sites and clients get one
// write per message): gRPC's cost per message is then paid per batch. A
// call whose ctx ends returns at once (the write may still be made, as a
// unary request in flight may be). If the stream breaks, every unanswered
// write fails with codes.Unavailable and the next write opens a new stream. With Client.Unary each write is one unary
// request instead, as are writes over 64 KiB.
//
// # Concurrency
//
// A Store is safe for concurrent use. Apply is called by the node from one
// goroutine; Store.mu guards the unapplied own writes and the watchers and
// is never held across I/O.
//
// Server.Writes serves each stream with goroutines that end with it: the
// handler's reads, one appends, one waiter per (wait, timeout) with writes
// waiting, one per write of a linearizable key, and one sends, the only
// one. It stops reading while MaxUnanswered writes are unanswered. A
// Client's stream has two goroutines, whatever the number of writers: one
// sends, one reads the answers; Close waits for them. Server.Drain asks
// every stream's client to close it, so that GracefulStop does not wait
// for clients. All the mutexes of Server and Client are leaves.
package kv
