// Package core is the deterministic protocol state machine of a stabilizer
// site: it decides what to persist, what to send to whom and what to resend,
// merges acknowledgements into the ack table, and reports when a stability
// frontier advanced. It does no I/O, reads no clock, starts no goroutines and
// imports only the standard library and frontier, so that a seeded simulation
// can drive many sites through crashes and partitions (see sim_test.go).
//
// # Usage
//
// A driver (stabilizer.Node) owns one Core per site and loops, in the manner
// of etcd raft's RawNode:
//
//	c, err := core.New(cfg, state) // state rebuilt from storage; zero when fresh
//	for {
//		// inputs, in any order:
//		c.Tick(nowNanos)                  // every tick interval
//		c.Step(msg)                       // a message from a peer
//		c.Append(stream, payload)         // a local write
//		c.Applied(id, seq); c.Report(id, level, seq) // from applications
//		c.Connected(peer); c.Disconnected(peer)
//		c.SetPredicate(name, src)
//		c.DefineTransient(name, p); c.ScopeTransient(name, stream)
//		for c.HasReady() {
//			rd := c.Ready()
//			// 1. write rd.Entries, Acks, Predicates, Frontiers,
//			//    StableTimes, Clock in one batch; fsync if rd.MustSync
//			// 2. send rd.Messages (per peer, on m.Plane())
//			// 3. deliver rd.Deliver to applications
//			// 4. publish rd.Frontiers and rd.StableTimes
//			c.Advance()
//		}
//	}
//
// The ordering in Ready is what keeps a seq naming one message across
// crashes: nothing of a Ready leaves the site before its writes are durable,
// so an origin never sends an entry it has not persisted, a site's
// `persisted` ack never precedes its fsync, and every ack, frontier and
// heartbeat that leaves the site is backed by durable state. A crash before
// the fsync loses the whole Ready, and nothing of it was seen. Entries no longer held in memory are read back
// through Config.Storage, synchronously, from within Ready.
//
// A driver may pipeline: call Advance once a Ready's writes are applied in
// order (readable through Storage), before their fsync, and take the next
// Ready, provided it releases every Ready's steps 2-4 only after its writes
// are durable, in the order the Readies came. The next Ready may count the
// last one's writes as persisted; it leaves the site after them. The
// waiters of a Settled frontier advance may be woken before step 1 (see
// FrontierAdvance.Settled).
//
// # Protocol
//
// Data plane: each origin has one ordered channel per destination carrying all
// of its streams. Connected opens a session (Hello); the destination answers
// Positions, what it holds of each of the origin's streams, and the origin
// sends from there, batched (MaxBatchBytes) and with at most MaxInflightBytes
// not yet acknowledged `received`. A destination that sees a gap asks again
// with Positions; a session without progress for ResendTicks is reopened.
// Resends are harmless: a destination takes only the next seq of each stream.
//
// Control plane: each site sends its own row of the ack table (every stream,
// every level) to every other site: the cells changed since the last message,
// in the next Ready if received or persisted changed, else at most every
// AckInterval ticks; the whole row every FullAckInterval ticks and after
// Connected. Rows merge by max, so acks never go backwards, whatever is lost,
// duplicated or reordered. Every HeartbeatInterval ticks the message also
// carries a clock heartbeat: a timestamp at or below the clock
// reservation the site persisted (Ready.Clock) and its streams' heads then;
// it lets idle origins' time advance.
//
// Frontiers: after acks change, each predicate in the stream's scope is
// evaluated on the stream's table: every named predicate, and the transient
// ones scoped to the stream's name or to every stream (see
// ScopeTransient); the reported frontier is max(released, value) and each
// advance carries the predicate version that released it. The global
// stable time of a predicate is the minimum over origins of the time at its
// frontiers on the streams in its scope: every stream for a named
// predicate. So transient predicates held for one kind of stream cost
// nothing on the others, however many there are.
//
// Restart: the driver rebuilds State from what it persisted: log heads, own
// ack cells, run-time predicates, released frontiers, stable times and clock.
// Other sites' rows are not persisted; they come back with their next whole
// row. Own acks never go backwards, frontiers never move back.
// Config.LazyFrontiers trades the last for latency: frontier advances then
// leave without an fsync of their own, and after a crash a frontier may come
// back lower until the acks return.
//
// # Driver obligations
//
//   - Tick at a fixed interval (a millisecond, say) with the wall clock in
//     nanoseconds; every interval in Config counts these ticks.
//   - Write each Ready's writes as one atomic batch and, if MustSync, fsync
//     it before sending, delivering or publishing anything of that Ready.
//     Implement Storage over the same log, reading synchronously.
//   - Send MsgAcks on the control connection to m.To and every other type on
//     the data connection to or from m.To; a Positions or Reject answers
//     the origin and may go back on the connection its Hello came on.
//     Messages for a peer whose connection is down may be dropped: the core
//     resends what matters after Connected.
//   - Call Connected when connections to a peer come up and Disconnected
//     when one breaks. Close the connection on ErrUnknownPeer,
//     ErrVersionMismatch, ErrSchemaMismatch or ErrRejected from Step.
//   - Append's seq and SetPredicate's version are durable only once the
//     Ready carrying them was synced; a caller waiting on the `local`
//     frontier (or for that Ready) waits for exactly that.
//   - On restart, build State from what was written: the log's heads, the
//     latest own ack cells, run-time predicates, released frontiers, stable
//     times and clock; plus the application's own positions when it keeps
//     them (Applied). An application that keeps custom-level positions
//     Reports them again after a restart: a Report lost with an unsynced
//     Ready is gone.
//
// # Concurrency
//
// A Core is not safe for concurrent use: the driver calls it from one
// goroutine. Entries and messages it hands out share payload slices with the
// core; nobody may modify them.
package core
