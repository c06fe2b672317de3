package lin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Node is one site's member of the raft group: it persists the log to the
// site's store, talks to the other voters through the Transport and serves
// reads and writes. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	log   hclog.Logger
	id    uint64
	names []string // names[id-1] is the site of raft id
	ids   map[string]uint64
	rlog  raftLog
	conf  *pb.ConfState

	ms *raft.MemoryStorage
	rn *raft.RawNode // touched only by the loop goroutine

	inbox chan *pb.Message
	calls chan func()
	stop  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
	seq   atomic.Uint64 // request ids: a random start, then counting

	// Owned by the loop goroutine.
	loop struct {
		parked        []uint64 // proposals dropped for want of a leader, by id
		reads         map[uint64][]byte
		expiring      map[string]uint64 // leases with an expiry proposed, by job: rev
		snapIndex     uint64
		snapBytes     int // size of the latest snapshot, made or installed
		logBytes      int // bytes of commands applied since it
		ticks         uint64
		preferredSeen int
		wasLeader     bool
		heard         map[uint64]uint64 // raft id: tick of its last message
	}

	mu struct {
		sync.Mutex
		started, closed bool
		err             error // why the loop stopped, if it failed
		fsm             *fsm
		applied         uint64
		appliedCh       chan struct{} // closed and replaced when applied grows
		waiters         map[uint64]*waiter
		readWaiters     map[uint64]chan uint64
		leader          uint64
		lastLeader      uint64
		term            uint64
		state           raft.StateType
		reachable       []string // when leader: voters heard from recently
		transferring    bool
		snapIndex       uint64 // index of the latest snapshot, made or installed
	}
}

// waiter is a request waiting for its entry to be applied.
type waiter struct {
	data     []byte
	proposed bool // handed to raft at least once (so it may apply)
	ch       chan result
}

// New loads the raft state persisted in cfg.Store (or starts from the
// initial state). Call Start to run it.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Voters = slices.Clone(cfg.Voters)
	n := &Node{
		cfg:   cfg,
		log:   cfg.Logger,
		names: slices.Sorted(slices.Values(cfg.Voters)),
		ids:   map[string]uint64{},
		rlog:  raftLog{ns: cfg.Namespace},
		inbox: make(chan *pb.Message, 4096),
		calls: make(chan func(), 4096),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	voters := make([]uint64, len(n.names))
	for i, s := range n.names {
		n.ids[s] = uint64(i + 1)
		voters[i] = uint64(i + 1)
	}
	n.id = n.ids[cfg.Site]
	n.conf = &pb.ConfState{Voters: voters}
	ms, snap, err := n.rlog.load(voters)
	if err != nil {
		return nil, err
	}
	if got := snap.GetMetadata().GetConfState().GetVoters(); !slices.Equal(got, voters) {
		return nil, fmt.Errorf("lin: voters %q do not match the %d voters the stored state was made with", n.names, len(got))
	}
	f, err := decodeFSM(snap.GetData(), cfg.Clock.Now())
	if err != nil {
		return nil, err
	}
	n.ms = ms
	n.loop.snapIndex = snap.GetMetadata().GetIndex()
	n.loop.snapBytes = len(snap.GetData())
	n.loop.reads = map[uint64][]byte{}
	n.loop.expiring = map[string]uint64{}
	n.loop.heard = map[uint64]uint64{}
	n.mu.fsm = f
	n.mu.applied = n.loop.snapIndex
	n.mu.snapIndex = n.loop.snapIndex
	n.mu.appliedCh = make(chan struct{})
	n.mu.waiters = map[uint64]*waiter{}
	n.mu.readWaiters = map[uint64]chan uint64{}
	n.seq.Store(rand.Uint64() >> 1)

	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        n.id,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   ms,
		Applied:                   n.loop.snapIndex,
		MaxSizePerMsg:             DefaultMaxSizePerMsg,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           DefaultMaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		Logger:                    raftLogger{cfg.Logger.Named("raft")},
	})
	if err != nil {
		return nil, fmt.Errorf("lin: %w", err)
	}
	n.rn = rn
	return n, nil
}

// Site returns this site's name.
func (n *Node) Site() string { return n.cfg.Site }

// Start starts the goroutine that ticks raft, persists, sends and applies.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return ErrStopped
	}
	if n.mu.started {
		return nil
	}
	n.mu.started = true
	n.wg.Add(1)
	go n.run()
	return nil
}

// Close stops the node and waits for its goroutine. Requests in progress
// return ErrStopped. It does not close the store. Close is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		err := n.mu.err
		n.mu.Unlock()
		n.wg.Wait()
		return err
	}
	n.mu.closed = true
	started := n.mu.started
	n.mu.Unlock()
	close(n.stop)
	if !started {
		close(n.done)
	}
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.err
}

// Step delivers a message that peer from sent through its Transport. It
// blocks only while the node's inbox is full.
func (n *Node) Step(ctx context.Context, from string, msg []byte) error {
	id, ok := n.ids[from]
	if !ok {
		return fmt.Errorf("lin: step: message from %q, which is not a voter", from)
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(msg, m); err != nil {
		return fmt.Errorf("lin: step: message from %s: %w", from, err)
	}
	if m.GetFrom() != id || m.GetTo() != n.id || raft.IsLocalMsg(m.GetType()) {
		return fmt.Errorf("lin: step: message from %s claims to be from raft id %d to %d, type %v", from, m.GetFrom(), m.GetTo(), m.GetType())
	}
	select {
	case n.inbox <- m:
		return nil
	case <-n.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call hands f to the loop goroutine without waiting for it to run.
func (n *Node) call(ctx context.Context, f func()) error {
	n.mu.Lock()
	started, closed := n.mu.started, n.mu.closed
	n.mu.Unlock()
	if closed {
		return ErrStopped
	}
	if !started {
		return ErrNotStarted
	}
	select {
	case n.calls <- f:
		return nil
	case <-n.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) fail(err error) {
	n.mu.Lock()
	if n.mu.err == nil {
		n.mu.err = err
	}
	n.mu.Unlock()
	n.log.Error("stopping", "error", err)
}

// run is the one goroutine that touches the RawNode.
func (n *Node) run() {
	defer n.wg.Done()
	defer close(n.done)
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.tick()
		case m := <-n.inbox:
			n.step(m)
		case f := <-n.calls:
			f()
		}
		n.drain()
		for n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				n.fail(err)
				return
			}
		}
	}
}

// drainMax bounds how many queued events one Ready collects, so that a
// flood of proposals cannot starve ticks.
const drainMax = 1024

// drain steps every message and runs every call already queued, so that
// one Ready (one fsync, one round of sends) covers all of them instead of
// one each.
func (n *Node) drain() {
	for range drainMax {
		select {
		case m := <-n.inbox:
			n.step(m)
		case f := <-n.calls:
			f()
		default:
			return
		}
	}
}

func (n *Node) step(m *pb.Message) {
	n.loop.heard[m.GetFrom()] = n.loop.ticks
	if m.GetType() == pb.MsgHeartbeat {
		// A voter whose store was wiped restarts with an empty log, and
		// the leader still counts what it acknowledged before: its
		// heartbeats carry a commit index beyond our log, which raft
		// takes for a corrupt log and panics on. Cap it at our log: the
		// reply leads the leader to probe, find our log short, and send
		// a snapshot. (The wipe itself counts as one failure: what only
		// the wiped voter and one other held is down to one copy.)
		if last, err := n.ms.LastIndex(); err == nil && m.GetCommit() > last {
			m.Commit = proto.Uint64(last)
		}
	}
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		n.log.Debug("step", "error", err)
	}
}

func (n *Node) tick() {
	n.rn.Tick()
	n.loop.ticks++
	st := n.rn.BasicStatus()
	leader := st.RaftState == raft.StateLeader
	if len(n.loop.parked) > 0 && st.Lead != raft.None && st.LeadTransferee == raft.None {
		n.retryParked()
	}
	if len(n.loop.reads) > 0 && n.loop.ticks%uint64(max(n.cfg.ElectionTicks/2, 1)) == 0 {
		n.reissueReads()
	}
	var reachable []string
	if leader {
		n.expireLeases()
		for i, s := range n.names {
			if id := uint64(i + 1); id == n.id || n.heardRecently(id) {
				reachable = append(reachable, s)
			}
		}
		if n.loop.ticks%uint64(n.cfg.ElectionTicks) == 0 {
			n.preferLeader(st)
			// Forget expiries proposed long ago: if one was lost, propose
			// it again.
			clear(n.loop.expiring)
		}
	} else {
		clear(n.loop.expiring)
	}
	n.mu.Lock()
	n.mu.reachable = reachable
	n.mu.transferring = st.LeadTransferee != raft.None
	n.mu.Unlock()
}

// heardRecently reports whether peer id sent something within the last
// few heartbeat intervals (half an election timeout at least, so a WAN
// round trip fits).
func (n *Node) heardRecently(id uint64) bool {
	t, ok := n.loop.heard[id]
	window := uint64(max(3*n.cfg.HeartbeatTicks, n.cfg.ElectionTicks/2))
	return ok && t+window >= n.loop.ticks
}

// retryParked proposes again the requests dropped while there was no
// leader; raft drops them before they enter any log, so this cannot apply
// one twice.
func (n *Node) retryParked() {
	parked := n.loop.parked
	n.loop.parked = nil
	for _, id := range parked {
		n.propose(id)
	}
}

// propose hands request id to raft, or parks it when there is no leader.
func (n *Node) propose(id uint64) {
	n.mu.Lock()
	w := n.mu.waiters[id]
	if w != nil {
		w.proposed = true
	}
	n.mu.Unlock()
	if w == nil {
		return // its caller gave up before it was proposed
	}
	err := n.rn.Propose(w.data)
	if errors.Is(err, raft.ErrProposalDropped) {
		n.mu.Lock()
		// Dropped before entering any log: it cannot apply.
		w.proposed = false
		n.mu.Unlock()
		n.loop.parked = append(n.loop.parked, id)
	} else if err != nil {
		n.mu.Lock()
		delete(n.mu.waiters, id)
		n.mu.Unlock()
		w.ch <- result{err: fmt.Errorf("lin: propose: %w", err)}
	}
}

func (n *Node) reissueReads() {
	n.mu.Lock()
	for id := range n.loop.reads {
		if n.mu.readWaiters[id] == nil {
			delete(n.loop.reads, id)
		}
	}
	n.mu.Unlock()
	for _, rctx := range n.loop.reads {
		n.rn.ReadIndex(rctx)
	}
}

// expireLeases proposes the expiry of every held lease whose deadline
// passed on this leader's clock.
func (n *Node) expireLeases() {
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	exp := n.mu.fsm.expired(now)
	n.mu.Unlock()
	for job, rev := range exp {
		if r, ok := n.loop.expiring[job]; ok && r == rev {
			continue
		}
		c := command{op: opExpire, origin: n.cfg.Site, key: job, rev: rev}
		if err := n.rn.Propose(c.encode()); err == nil {
			n.loop.expiring[job] = rev
		}
	}
}

// preferLeader hands leadership to the preferred site once it has been
// reachable and caught up for two checks in a row.
func (n *Node) preferLeader(st raft.BasicStatus) {
	p := n.cfg.Preferred
	if p == "" || p == n.cfg.Site || st.LeadTransferee != raft.None {
		n.loop.preferredSeen = 0
		return
	}
	pid := n.ids[p]
	last, _ := n.ms.LastIndex()
	healthy := false
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == pid && n.heardRecently(id) && pr.Match+uint64(n.cfg.CatchUpEntries) >= last {
			healthy = true
		}
	})
	if !healthy {
		n.loop.preferredSeen = 0
		return
	}
	n.loop.preferredSeen++
	if n.loop.preferredSeen >= 2 {
		n.log.Info("transferring leadership to the preferred site", "to", p, "term", st.Term)
		n.loop.preferredSeen = 0
		n.rn.TransferLeader(pid)
	}
}

func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	ctx := context.Background()
	if err := n.rlog.save(ctx, rd.Snapshot, rd.Entries, rd.HardState); err != nil {
		return fmt.Errorf("lin: persist raft state: %w", err)
	}
	now := n.cfg.Clock.Now()
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.ms.ApplySnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("lin: apply snapshot: %w", err)
		}
		f, err := decodeFSM(rd.Snapshot.GetData(), now)
		if err != nil {
			return err
		}
		idx := rd.Snapshot.GetMetadata().GetIndex()
		n.loop.snapIndex, n.loop.snapBytes, n.loop.logBytes = idx, len(rd.Snapshot.GetData()), 0
		n.mu.Lock()
		n.mu.fsm = f
		n.mu.snapIndex = idx
		n.setAppliedLocked(idx)
		n.mu.Unlock()
		n.log.Info("installed snapshot", "index", idx)
	}
	if err := n.ms.Append(rd.Entries); err != nil {
		return fmt.Errorf("lin: append: %w", err)
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := n.ms.SetHardState(rd.HardState); err != nil {
			return fmt.Errorf("lin: hard state: %w", err)
		}
	}
	n.send(rd.Messages)
	if rd.SoftState != nil || rd.HardState != nil {
		n.updateLeader(rd, now)
	}
	if len(rd.CommittedEntries) > 0 {
		if err := n.apply(rd.CommittedEntries, now); err != nil {
			return err
		}
	}
	if len(rd.ReadStates) > 0 {
		n.mu.Lock()
		for _, rs := range rd.ReadStates {
			if len(rs.RequestCtx) != 8 {
				continue
			}
			id := binary.BigEndian.Uint64(rs.RequestCtx)
			delete(n.loop.reads, id)
			if ch := n.mu.readWaiters[id]; ch != nil {
				delete(n.mu.readWaiters, id)
				ch <- rs.Index
			}
		}
		n.mu.Unlock()
	}
	n.rn.Advance(rd)
	return n.maybeCompact(ctx)
}

func (n *Node) send(msgs []*pb.Message) {
	for _, m := range msgs {
		to := m.GetTo()
		if to == 0 || to > uint64(len(n.names)) {
			continue
		}
		b, err := proto.Marshal(m)
		if err == nil {
			err = n.cfg.Transport.Send(n.names[to-1], b)
		}
		if err != nil {
			n.rn.ReportUnreachable(to)
		}
		if m.GetType() == pb.MsgSnap {
			status := raft.SnapshotFinish
			if err != nil {
				status = raft.SnapshotFailure
			}
			n.rn.ReportSnapshot(to, status)
		}
	}
}

func (n *Node) updateLeader(rd raft.Ready, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if rd.HardState != nil && rd.HardState.GetTerm() > n.mu.term {
		n.mu.term = rd.HardState.GetTerm()
	}
	if rd.SoftState == nil {
		return
	}
	if rd.SoftState.Lead != n.mu.leader && rd.SoftState.Lead != raft.None {
		n.log.Info("leader", "site", n.names[rd.SoftState.Lead-1], "term", n.mu.term)
		n.mu.lastLeader = rd.SoftState.Lead
	}
	n.mu.leader = rd.SoftState.Lead
	n.mu.state = rd.SoftState.RaftState
	leader := rd.SoftState.RaftState == raft.StateLeader
	if leader && !n.loop.wasLeader {
		// A new leader does not know when holders last renewed under the
		// previous leader: it gives every held lease a full TTL from now.
		n.mu.fsm.refreshDeadlines(now)
		clear(n.loop.expiring)
	}
	n.loop.wasLeader = leader
}

func (n *Node) setAppliedLocked(idx uint64) {
	if idx > n.mu.applied {
		n.mu.applied = idx
		close(n.mu.appliedCh)
		n.mu.appliedCh = make(chan struct{})
	}
}

func (n *Node) apply(ents []*pb.Entry, now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	last := n.mu.applied
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= last {
			continue
		}
		last = idx
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		n.loop.logBytes += len(e.GetData())
		c, err := decodeCommand(e.GetData())
		if err != nil {
			// Every site would fail the same way on this entry; skipping it
			// keeps them identical.
			n.log.Error("skipping undecodable entry", "index", idx, "error", err)
			continue
		}
		res := n.mu.fsm.apply(idx, c, now)
		if c.origin != n.cfg.Site || c.id == 0 {
			continue
		}
		if w := n.mu.waiters[c.id]; w != nil {
			delete(n.mu.waiters, c.id)
			w.ch <- res
		}
	}
	n.setAppliedLocked(last)
	return nil
}

// maybeCompact snapshots the state machine once SnapshotEntries entries
// were applied since the last snapshot, and drops the log before it
// (keeping CatchUpEntries in memory for slow followers).
func (n *Node) maybeCompact(ctx context.Context) error {
	n.mu.Lock()
	applied := n.mu.applied
	// Snapshot only once the commands since the last one add up to its
	// size too. Encoding and writing the whole state every SnapshotEntries
	// stalled the loop for up to a second and a half once the state held
	// tens of MB of keys; waiting until as much has been written keeps the
	// cost of snapshots proportional to what is written.
	if applied < n.loop.snapIndex+n.cfg.SnapshotEntries || n.loop.logBytes < n.loop.snapBytes {
		n.mu.Unlock()
		return nil
	}
	data := n.mu.fsm.encode()
	n.mu.Unlock()
	snap, err := n.ms.CreateSnapshot(applied, n.conf, data)
	if err != nil {
		return fmt.Errorf("lin: snapshot at %d: %w", applied, err)
	}
	if err := n.rlog.compact(ctx, snap); err != nil {
		return fmt.Errorf("lin: persist snapshot at %d: %w", applied, err)
	}
	n.loop.snapIndex, n.loop.snapBytes, n.loop.logBytes = applied, len(data), 0
	n.mu.Lock()
	n.mu.snapIndex = applied
	n.mu.Unlock()
	if applied > n.cfg.CatchUpEntries {
		if first, _ := n.ms.FirstIndex(); applied-n.cfg.CatchUpEntries > first {
			if err := n.ms.Compact(applied - n.cfg.CatchUpEntries); err != nil {
				return fmt.Errorf("lin: compact to %d: %w", applied-n.cfg.CatchUpEntries, err)
			}
		}
	}
	n.log.Debug("snapshot", "index", applied, "bytes", len(data))
	return nil
}
