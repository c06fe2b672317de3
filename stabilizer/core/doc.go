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
//		c.BulkPersisted(stream, seq)      // the bulk store synced Ready.BulkEntries
//		c.SetPredicate(name, src)
//		c.DefineTransient(name, p); c.ScopeTransient(name, stream)
//		for c.HasReady() {
//			rd := c.Ready()
//			// 1. write rd.Entries, Acks, Predicates, Frontiers,
//			//    StableTimes, Clock in one batch; fsync if rd.MustSync;
//			//    hand rd.BulkEntries to the bulk store
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
// The channel has two lanes, each with its own window: streams named in
// Config.BulkStreams (file chunks) go in Data messages marked Bulk, which
// travel on PlaneBulk, a connection of their own, within
// MaxBulkInflightBytes; all others within MaxInflightBytes on PlaneData.
// So a bulk transfer filling its window never holds back the other
// streams. A receiver treats both alike: per stream, only the next seq.
//
// Bulk streams are also persisted apart: their entries go to the driver in
// Ready.BulkEntries, for a store with fsyncs of its own, and count as
// persisted only once the driver calls BulkPersisted, so that no fsync of
// the log (a KV write's) waits behind megabytes of chunks. Until then a
// bulk entry stays in memory and is neither sent, relayed, delivered nor
// acked persisted; the origin acks its own bulk entries received with
// persisted too. The bulk window is released by persisted acks, so it
// also bounds what a receiver holds in memory for a slow disk, and relays
// of bulk streams start past the peer's persisted cell: a receiver's
// received cell may stand above what a crash left of its bulk store.
//
// Relay: when an origin has been disconnected from this site for RelayDelay
// ticks (the core counts ticks; it reads no clock), this site sends the
// origin's entries it persisted to each connected peer that lacks them, as
// far as the ack table says (the peer's `received` cell of the stream below
// what this site persisted), from its own log, in Data messages on its own
// channel to the peer and within that channel's window, once an Acks
// message of the peer arrived since it connected (so that a restarted
// relay does not resend from seq 1 what the peer holds). It starts past the
// peer's `received` cell and past what it already relayed in the channel's
// current session; a new session or a resend request starts it over from
// the cell. To spare duplicate traffic, one holder is preferred for each
// stream and peer: of this site and its connected peers but the peer and
// the origin, the one whose `persisted` cell of the stream is highest, the
// lowest site index on a tie. Any other holder takes over only once the
// peer's `received` cells of the origin's streams stood still for another
// RelayDelay ticks (the preferred holder may be cut off from the peer, or
// still connected to the origin and so not relaying), and relays until the
// peer lacks nothing it holds of them. Views of the table lag, so two holders
// may relay the same entries for a while; that is harmless. A site accepts
// an entry of origin O from any peer exactly as from O: only the next seq of
// the stream, persisted, acked, delivered in order; a gap is answered with
// Positions as on the origin's channel, which restarts the sender's
// relaying to it from the table. No site is ever sent entries of its own
// streams. When O is connected again it resumes each peer from the
// Positions the peer states, which count what relays brought, so nothing
// reaches an application twice. Relayed entries to a site of an earlier
// release are refused one by one (ErrBadMessage) and change nothing, so
// ProtocolVersion stays 1.
//
// Why a seq still names one message with relays: by induction on the order
// in which copies come into being, every copy of entry (O, name, seq) at any
// site is the entry O persisted under that seq, with its payload and HLC. O
// sends only entries it persisted (Ready ordering) and never reuses a seq it
// persisted, crashes included. A relay sends only entries at or below its
// own persisted head of the stream (an entry persisted in the same Ready
// leaves after its fsync); it took each of those, in seq order, from O or
// from another relay, and so, by induction, holds O's entry. A receiver
// takes seq k only as the successor of the k-1 it holds, and never replaces
// a seq it holds, so copies that arrive twice, from O and a relay, or from
// two relays, are dropped. This holds only as long as O's own log keeps
// what it persisted; a site whose storage lost data or was wiped breaks it
// with or without relays (see stepPositions).
//
// Routes: a bulk stream with a stripe (Config.BulkStripes) goes from its
// origin to one peer only, its first hop (the (i mod m)-th of the origin's
// m peers for stripe i), which relays it to every other peer as it
// persists it, exactly as a relay does for a down origin, while the origin
// is up; an application that spreads a transfer over stripes with
// consecutive indexes so fills every link into each receiver, from the
// origin and from the other receivers, and each entry reaches each site
// once. The origin watches each other peer's persisted cell of the
// stream: if it does not rise while the peer lacks entries for RelayDelay
// ticks when the first hop is cut off from the origin, or four times that
// when it is connected (cut off from the peer, or slow), the
// origin sends the stream to that peer itself from its cell on, until the
// peer lacks nothing; then it is routed again. Once the origin is down,
// relays as above take over. Nothing changes at receivers, which take an
// entry from any peer as from its origin, so a seq names one message for
// the reasons given for relays.
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
// Truncation: Truncate drops a stream's prefix from the site's log, never
// past what the local application applied and, unless beyondPeers, past
// what every other site persisted (Ready.Truncations; the driver deletes
// with a range deletion). An origin asked for entries below its floor
// answers MsgTruncated instead of data and holds the stream back on that
// channel until the peer states new positions; a relay that dropped what
// a peer lacks says so too. The peer lists the stream in Ready.Behind:
// only a snapshot of the application's state can bring it up to date.
//
// State transfer, per stream: the driver takes a snapshot at a peer of the
// application's state of one origin's stream, with the position that
// state reflects (consistent with each other), checks it here
// (CheckSnapshot: it must not need entries this site dropped), replaces
// the application's state of that stream, records the position, and
// calls InstallSnapshot: a stream whose log ends below the snapshot skips
// to it (Truncation.Skip moves the head; the driver moves the
// application's position with it in the same write), one whose log holds
// it is delivered again from there. Per stream, not per application: two
// sites that each dropped entries of their own stream the other lacks
// (each truncated beyond the other while it was down) can only both catch
// up this way.
//
// A wiped store: a site that starts empty (with JoinPeers) waits to hear
// every peer before it appends (Joining). Peers' rows say how far they
// hold its own streams, and their answers to its Hello how far its own
// row once reached (and their released frontiers): Lost lists its own
// streams peers hold beyond its log, which a snapshot must bring back
// before it appends to them again; seqs it gave out that nobody holds are
// abandoned (the stream skips them, a void range that peers skip too,
// without a snapshot). Its row carries a new incarnation (Acks' Session),
// so peers forget what its old row said. Until it is whole it sends no
// clock heartbeat, which would claim that it issued nothing it has lost.
// A wiped site loses what only it held: entries acknowledged under a
// predicate that did not require another site to hold them.
//
// # Driver obligations
//
//   - Tick at a fixed interval (a millisecond, say) with the wall clock in
//     nanoseconds; every interval in Config counts these ticks.
//   - Write each Ready's writes as one atomic batch and, if MustSync, fsync
//     it before sending, delivering or publishing anything of that Ready.
//     Implement Storage over the same log, reading synchronously.
//   - Append each Ready's BulkEntries to the bulk store, in order, and once
//     they are durable there call BulkPersisted; Storage reads them back
//     from there. On restart, the bulk store's durable heads are the bulk
//     streams' Heads: it may have kept less than it was given (a power
//     cut), never less than BulkPersisted was told.
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
