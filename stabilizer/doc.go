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
//	ns, err := n.Namespace("kv")                   // the application's key space
//	n.Handle("kv", applier)                        // before Start
//	err = n.Start()
//	a, err := n.Append(ctx, "kv", payload)          // seq and HLC at once
//	as, err := n.AppendBatch(ctx, "kv", payloads)   // many, one loop round trip
//	err = n.WaitFor(ctx, a.Stream, "majority", a.Seq)
//	f, err := n.Frontier(ctx, a.Stream, "all")
//	err = n.WaitFor(ctx, a.Stream, `min(persisted(group("eu")))`, a.Seq) // inline
//	release, err := n.HoldOn(ctx, src, "pubsub")      // inline, for "pubsub" streams
//	w := n.WatchFrontiers(64, nil)                  // advances on w.C
//	v, err := n.SetPredicate(ctx, "eu", `persisted("eu-west-1")`)
//	defer n.Close()
//
// Applications go through this package's door only: the vocabulary
// (StreamID, HLC, Entry, Position, FrontierState, …), the Node, and a
// Namespace per application, whose Batch commits the application's state
// together with how far it applied its streams (Batch.SetApplied), so that
// delivery resumes exactly after it. The core, the storage layout and the
// transport stay free to change behind it; a repository test
// (test/deps_test.go) holds that no application imports them.
// Package stabilizertest is the harness for testing applications.
//
// A predicate may be named or given as source (inline). The core evaluates
// an inline one only on the streams of the names it is used on (WaitFor,
// Frontier, HoldOn), or on every stream once a call needs them all
// (StableTime, Hold), while something uses it and a little after: so the
// predicates an application holds for its own streams cost nothing on
// other applications' streams, however many it holds. Named predicates are
// evaluated on every stream.
//
// Append returns before the message is durable; wait for the `local`
// predicate (or a stronger one) to know it is. An origin never sends a
// message it has not fsynced, and a site acks `persisted` only after its
// fsync.
//
// A site relays: when an origin has been unreachable from it for
// DefaultRelayAfter (Config.Core.RelayDelay ticks), it sends what it
// persisted of the origin's streams to connected sites that lack it, from
// its own log (stabilizer_relayed_entries_total). So a write acknowledged
// under `majority` reaches the surviving sites although its origin died
// before they had it; they take it as from the origin, each seq once, and
// the origin, back, resumes from what they state they hold.
//
// Bulk streams (HandleBulk: file chunks) keep their payloads out of
// pebble, in a segment store under Dir/bulk (package storage/segment):
// each byte written once at each site, checksummed, fsynced in groups by
// a goroutine of its own, read back from its segment to serve peers and
// clients, dropped by whole segments. The core hands their entries out
// apart (core.Ready.BulkEntries) and counts them persisted only once that
// goroutine synced them (core.BulkPersisted), so a KV write's fsync never
// waits behind megabytes of chunks, and pebble, holding metadata and the
// other streams only, is sized small (4 MiB memtables). A store written
// by an earlier release, whose bulk entries are in pebble, has them moved
// at Start. Config.FS is the one filesystem seam both stores run on, so
// tests can drop unsynced writes (a power cut), fail writes and fsyncs,
// and corrupt files.
//
// A site keeps a reserve of free disk space (Config.MinFreeBytes: 256 MiB
// by default, at most 5% of the filesystem), because pebble cannot survive
// a failed WAL write and the site must never let it reach ENOSPC. Below the
// reserve the site is full (disk.go): Append and AppendBatch fail wrapping
// ErrDiskFull, naming the site, the directory, the free space and the
// reserve, and data frames from peers are dropped
// (stabilizer_disk_full_dropped_frames_total). Reads, the site's own
// streams, acks and frontiers go on; the small records they write come out
// of the reserve, which is what it is for. Free space is read every
// DiskCheckInterval and again on an append while full. The site takes
// writes again once free space climbs past the reserve plus a slack (a
// quarter of the reserve, at least 16 MiB, at most the reserve), and its
// peers resend what it dropped when they reopen their channel to it
// (after ResendTicks without progress), so nothing acknowledged is lost.
//
// # Retention and state transfer
//
// Applications decide when a stream's prefix may go (Truncate): the KV
// once every site applied it, pub/sub by its topics' limits, file sync
// once no retained version names its chunks. The core never drops what
// the local application has not applied, nor, without BeyondPeers, what a
// peer has not persisted; the node deletes with one range deletion per
// truncation. A peer that asks for what was dropped is told so and
// catches up from a snapshot: EnableStateTransfer registers how an
// application's state of one origin's stream is told apart (Owner), and a
// site behind a truncation, or one whose store was wiped, copies that
// state from the peer that applied most of the stream. The source takes
// a pebble checkpoint of the namespace with the node's positions (one
// instant; kept beside the store, in Dir + ".snapshots", until unused for
// ten minutes) and streams the stream's keys on the bulk plane, within
// the receiver's credit (DefaultTransferWindow) and Config.StateTransferRate;
// every frame carries a CRC-32C and the whole copy a SHA-256 the receiver
// checks. The receiver stores each chunk and its progress in one write,
// so either side may be killed and the copy resumes where the receiver's
// store stands; while it runs the stream's deliveries are held back and
// the application is told (Restoring, Restored). A site that starts with
// an empty store waits to hear every peer (Config.JoinTimeout) before its
// first append: peers say which of its seqs they hold or saw, so that it
// never gives a seq to a second message (see package core).
//
// # Concurrency
//
// Node methods are safe for concurrent use. These kinds of goroutine run
// per node, all started by Start and waited for by Close:
//
//   - the loop, the only goroutine that touches the core: it ticks, feeds
//     the core inputs (appends, frames from the transport, applied and
//     reported positions, connection changes) from the inputs and ctrl
//     channels, control first, and hands each Ready to the writer;
//   - the writer, which applies each Ready's writes to pebble in one batch,
//     in the order the core hands them out, without waiting for the fsync
//     (storage.WriteAsync), and tells the loop, which then calls Advance.
//     It queues the Ready's bulk entries for the bulk writer, waiting
//     while more than 64 MiB are queued (the disk pushes back);
//   - the bulk writer (runBulk), which appends queued bulk entries to the
//     segment store, syncs everything appended since its last sync at
//     once (group commit: the next group queues during the fsync) and
//     tells the loop what became durable (core.BulkPersisted). It does a
//     Ready's truncations of bulk streams once that Ready's pebble writes,
//     which record their floors, are durable.
//     The loop builds and the writer applies the next Ready while this
//     one's fsync runs, and one fsync covers all that was applied before it;
//   - the completer, which releases each Ready once its writes are durable,
//     strictly in order: sends its messages, queues its deliveries and
//     publishes its frontiers, then returns it to the loop, which acks
//     unhandled streams. Nothing of a Ready leaves the site before its
//     fsync. At most three Readies wait for fsyncs of their own at a time;
//   - one goroutine per registered Applier, which applies its queue and
//     reports Applied through the loop;
//   - the disk guard's ticker, which reads the free space every
//     DiskCheckInterval;
//   - state transfer's: the receiving loop (runTransfers), and a sender
//     per snapshot a peer reads from this site;
//   - the pinger (runPings), which measures every connected peer's round
//     trip each PingInterval and when the peer connects: a ping on the
//     reserved channel 0xfd of the control plane, answered by a pong from
//     the transport's goroutine (Peers, RoundTrips,
//     stabilizer_peer_rtt_seconds).
//
// Lock order: Node.mu, publisher.mu, appQueue.mu, diskGuard.mu and
// rttTable.mu are leaves; none is held while taking another, nor across disk or network IO.
// diskGuard.checking, which only serializes the guard's checks, is held
// across statfs and taken before diskGuard.mu. Node.mu.apps is fixed at
// Start and read without the lock afterwards.
//
// # Durability and fsyncs
//
// An fsync is the dearest thing a site does: on the 2-core machines we
// measure on, one costs about 150 µs of CPU besides its wait (getrusage
// around 500 fsyncs of 4 KiB), the price of hundreds of small appends. So
// a Ready gets one at once only when something waits for what it
// releases: new entries (to send, or to ack to their origin), session
// messages, deliveries, or a frontier advance a WaitFor is blocked on. The rest (applied acks, stable times,
// clock heartbeats, frontiers nobody waits for) is written at once but
// released only when a later fsync covers it, or after Config.SyncDelay
// (default 10ms), or as soon as a write starts waiting for one of its
// frontiers. Under load nearly every Ready has entries, so this costs
// nothing; at light load it removes most fsyncs that are not on a write's
// path, and with them the queueing of the ones that are.
//
// A write waiting for a predicate that reads only `persisted` on this
// site's own stream returns as soon as the acks that make it hold arrive
// (FrontierAdvance.Settled), not once this site's record of the new
// frontier is fsynced: those acks were fsynced where they were made, and a
// peer holds a seq only because this site sent it, which it does only once
// the seq is durable here. Frontier (and so the kv's stable reads) reports
// the settled advance at once, watchers and the frontier record once the
// record is durable. The one thing a crash can show: until the peers' acks
// arrive again after a restart (a round trip), this site's frontier may
// stand below a write it acknowledged before the crash; the write itself
// is as durable as its predicate says. That takes an fsync (0.36 ms on
// average on three loopback sites here) off the path of every such write.
package stabilizer
