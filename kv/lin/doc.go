// Package lin is the linearizable mode of the key/value store: keys that
// need more than a frontier (which region owns training job J) live in one
// Raft group spanning configured voter sites, with compare-and-swap and
// leases carrying fencing tokens.
//
// The one idea: every operation is an entry of one replicated log (writes,
// compare-and-swaps, lease grants) or waits for the log (reads, through
// raft's ReadIndex), so all sites see one order of operations that respects
// real time. The group is go.etcd.io/raft/v3 driven through its RawNode;
// this package adds durability in the site's pebble store, the state
// machine, and the WAN-sized timing. It is also the Paxos-style baseline
// that the predicates of the eventually consistent kv are measured
// against: an honest one (pre-vote, check-quorum, ReadIndex reads, batched
// appends, a preferred leader placed near the writers).
//
// # Usage
//
//	n, err := lin.Attach(node, lin.Config{ // node: the site's *stabilizer.Node, before its Start
//		Voters:    []string{"us-east-1", "eu-west-1", "ap-south-1"},
//		Preferred: "us-east-1",
//		Logger:    log.Named("lin"),
//	}) // raft state in the node's namespace "lin", messages on its channel lin.Channel
//	err = n.Start() // once node has started
//
// lin.New takes the namespace and a Transport itself, for a driver of its
// own; it then hands every raft frame that arrives to n.Step(ctx, from, frame).
//
//	v, err := n.Put(ctx, "job/7", record)
//	it, err := n.Get(ctx, "job/7")                      // linearizable
//	v, err = n.CompareAndSwap(ctx, "job/7", lin.IfVersion(it.Version), next)
//	l, err := n.Grant(ctx, "job/7", "eu-west-1", 30*time.Second)
//	l, err = n.Renew(ctx, "job/7", "eu-west-1", l.Token) // well before l.ValidUntil
//	v, err = n.CompareAndSwap(ctx, "job/7", lin.IfLeaseHeld("job/7", l.Token), rec) // fenced write
//	err = n.Close()
//
// Raft ticks come from the node's own ticker (Config.TickInterval); the
// defaults (100 ms ticks, heartbeats every 2, elections after 20–40) suit
// sites 100–300 ms apart. Messages are raft's protobuf encoding of
// raftpb.Message; raft ids are the voters' positions in sorted order, so
// every site must be configured with the same voters.
//
// Requests made at a follower are forwarded to the leader by raft itself
// (proposals and read-index requests travel as raft messages through the
// same Transport), and the follower answers once it has applied the entry.
//
// # Errors
//
// A request that finds no leader waits for one until its context ends,
// then fails with *NoLeaderError (the last known leader and term); it did
// not happen. A request that was proposed but not applied in time fails
// with ErrUnknownOutcome (it may still apply; read to find out), wrapping
// the likely cause: *NoQuorumError when this site leads but hears from too
// few voters, or the leader that did not answer. A compare-and-swap whose
// condition fails returns *CompareError with the key's current version and
// value. Lease refusals return *LeaseError with the current holder.
//
// # Leases
//
// A lease names a job's holder; its fencing token increases each time the
// lease passes to a holder (renewals keep it). The rule that keeps two
// holders from being valid at once, without synchronised clocks:
//
//   - A lease ends only through the log: by Revoke, or by an expiry entry
//     that the leader proposes when the lease's deadline passes on the
//     leader's own monotonic clock. The expiry names the lease revision it
//     found expired, and is void if the lease was renewed or changed hands
//     since; so an expiry proposed by a deposed leader is harmless.
//   - Every site sets a lease's deadline to when it applies the grant or
//     renewal plus the TTL. A site that becomes leader, or installs a
//     snapshot, restarts the deadline of every held lease at a full TTL
//     from that moment: it waits out the TTL before it lets a lease held
//     under a previous term expire.
//   - The holder counts its TTL from before it sent the request
//     (Lease.ValidUntil, 1% short to allow for clock rates differing by up
//     to 1%), and every leader counts from after the entry applied, so the
//     holder stops acting before any leader can expire the lease and grant
//     it to someone else. Only clock rates matter, never clock values.
//
// A holder that cannot reach the leader cannot renew and must stop at
// ValidUntil. Writes fenced with IfLeaseHeld are refused once the lease has
// moved on, whatever the deposed holder believes.
//
// # Leader preference
//
// If Config.Preferred is set, the leader checks every election timeout
// whether the preferred site has been heard from recently and its log is
// caught up; after two such checks in a row it transfers leadership there.
// While the preferred site is down or partitioned, whoever wins an
// election leads.
//
// # Durability and compaction
//
// Each Ready's entries, hard state and snapshot are written to the store
// in one synced batch before any message is sent; a raft.MemoryStorage
// caches the log from the last snapshot on. After SnapshotEntries applied
// entries the node snapshots the state machine (keys, versions, leases),
// stores it and deletes the log it covers, keeping CatchUpEntries in
// memory for slow followers; followers further behind receive the
// snapshot. A restarted site loads the snapshot and the log after it and
// replays the committed entries.
//
// # Concurrency
//
// A Node is safe for concurrent use. One goroutine, started by Start,
// owns the RawNode: it ticks, steps incoming messages, persists, sends,
// applies and hands results to the waiting callers. Lock order: Node.mu is
// a leaf, held for state-machine access and never across IO (the store
// write and Transport.Send happen outside it). Close stops the goroutine,
// fails waiting requests with ErrStopped and is idempotent; it does not
// close the store.
package lin
