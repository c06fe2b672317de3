// Package kvclient is the Go client of a site's key/value API (kv/kvpb):
// writes that wait for a predicate, reads that choose how stable what they
// see must be, and a session that lets a client read its own writes at any
// site. kvctl is built on it.
//
// The one idea: a client links only what a client needs. This package
// imports the generated API and gRPC, nothing of the site (no pebble, no
// Raft, no stabilizer), so a scheduler or a dashboard that writes job
// records stays small; a repository test holds that rule.
//
// # Usage
//
//	cl, err := kvclient.Dial(addr) // a site's client address
//	defer cl.Close()
//	w, err := cl.Put(ctx, "jobs/7", rec, "majority", 10*time.Second)
//	g, err := cl.Get(ctx, &kvpb.GetRequest{Key: "jobs/7"}) // sees the Put anywhere
//	tok := kvclient.FormatSession(cl.Session()) // carry it to another site
//
// Puts and Deletes are pipelined on one Writes stream per Client, opened
// by the first write: any number of goroutines write at once, each call
// gets its own answer as soon as its wait holds, and the site appends
// whatever writes have arrived together (one batch per wait and timeout),
// so a write never waits for another to be answered. Writes queued while
// the stream's sender is busy go in one message, and answers ready
// together come back in one, once both ends said they read such messages
// (older sites get one write per message): gRPC's cost per message is then
// paid per batch. A call whose ctx ends returns at once (the write may
// still be made, as a unary request in flight may be). If the stream
// breaks, every unanswered write fails with codes.Unavailable and the next
// write opens a new stream. With Client.Unary each write is one unary
// request instead, as are writes over 64 KiB.
//
// # Concurrency
//
// A Client is safe for concurrent use. Its stream has two goroutines,
// whatever the number of writers: one sends, one reads the answers; Close
// waits for them. All its mutexes are leaves.
package kvclient
