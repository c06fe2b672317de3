// Package stabilizer replicates named, ordered streams of messages between
// sites and tells each site how far every stream is stable under named
// predicates (persisted at a majority, applied everywhere, …). A Node is one
// site: the deterministic protocol core (package core) driven by goroutines
// that own pebble (package storage), the gRPC transport (package transport),
// timers, the applications and the waiters.
//
// # Usage
//
//	n, err := stabilizer.New(stabilizer.Config{Site: "eu-west-1", Schema: schema,
//		Dir: dir, Transport: stabilizer.GRPCTransport(tr), Logger: log})
//	n.Handle("kv", applier)                        // before Start
//	err = n.Start()
//	a, err := n.Append(ctx, "kv", payload)          // seq and HLC at once
//	as, err := n.AppendBatch(ctx, "kv", payloads)   // many, one loop round trip
//	err = n.WaitFor(ctx, a.Stream, "majority", a.Seq)
//	f, err := n.Frontier(ctx, a.Stream, "all")
//	w := n.WatchFrontiers(64, nil)                  // advances on w.C
//	v, err := n.SetPredicate(ctx, "eu", `persisted("eu-west-1")`)
//	defer n.Close()
//
// Append returns before the message is durable; wait for the `local`
// predicate (or a stronger one) to know it is. An origin never sends a
// message it has not fsynced, and a site acks `persisted` only after its
// fsync.
//
// # Concurrency
//
// Node methods are safe for concurrent use. Three kinds of goroutine run
// per node, all started by Start and waited for by Close:
//
//   - the loop, the only goroutine that touches the core: it ticks, feeds
//     the core inputs (appends, frames from the transport, applied and
//     reported positions, connection changes) from the inputs and ctrl
//     channels, control first, and hands each Ready to the writer;
//   - the writer, which handles one Ready at a time in the order the core
//     prescribes: write it to pebble in one batch (fsynced when
//     rd.MustSync; unsynced otherwise, which happens only for frontier and
//     stable-time records under Config.Core.LazyFrontiers), then send its
//     messages, queue its deliveries and publish its frontiers; it hands
//     the Ready back and the loop acks unhandled streams and calls
//     Advance. The core hands out no Ready before that Advance, so nothing
//     of a Ready leaves the site before its fsync, while the loop keeps
//     taking inputs during the fsync; they go into the next Ready;
//   - one goroutine per registered Applier, which applies its queue and
//     reports Applied through the loop.
//
// Lock order: Node.mu, publisher.mu and appQueue.mu are leaves; none is held
// while taking another, nor across disk or network IO. Node.mu.apps is
// fixed at Start and read without the lock afterwards.
package stabilizer
