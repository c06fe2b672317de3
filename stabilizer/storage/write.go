package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// States of a writeReq. A request moves from pending to taken (a leader put
// it in a group) or to abandoned (its caller's context ended first), never
// both: the two moves are compare-and-swaps on the same word.
const (
	reqPending   int32 = iota
	reqPromoted        // its caller must lead the next group; no longer abandonable
	reqTaken           // in a group; the caller waits for the outcome
	reqAbandoned       // the caller returned its context's error; skip it
)

type writeReq struct {
	b     *Batch
	state atomic.Int32
	// async: the caller wants its Pending once the batch is applied, not
	// the outcome of its fsync; sync says whether to request one. An async
	// request is always a group of its own.
	async, sync bool
	pending     *Pending
	done        chan error    // the outcome; buffered so the leader never blocks
	lead        chan struct{} // a signal to lead the next group; buffered
}

// Write makes b durable: when it returns nil, b survives a crash of the
// process or the machine. Concurrent Writes are combined into one synced
// pebble commit (group commit): the first caller to find no commit in
// progress leads, taking every queued Write into its group; while its
// group's fsync runs, the next queued caller already leads the next group,
// so pebble syncs the WAL for several groups at once.
//
// Writes are applied in the order they were queued. If b's appends do not
// continue their streams (ErrSeqGap) or it truncates beyond a head
// (ErrInvalid), Write fails and writes nothing of b; other Writes in the same
// group are unaffected.
//
// If ctx ends before b was taken into a group, Write returns the context's
// error and b is not written. Once taken, Write waits for the fsync (bounded
// by the disk) and reports its outcome. After a failed commit every Write
// returns ErrFailed.
func (s *Store) Write(ctx context.Context, b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: write: %w", err)
	}
	req := &writeReq{b: b, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	if err := s.queue(req); err != nil {
		return err
	}
	defer s.ops.Done()
	ctxDone := ctx.Done()
	for {
		select {
		case err := <-req.done:
			return err
		case <-req.lead:
			s.lead()
		case <-ctxDone:
			if req.state.CompareAndSwap(reqPending, reqAbandoned) {
				return fmt.Errorf("storage: write: %w", ctx.Err())
			}
			// Taken or promoted: the outcome comes soon.
			ctxDone = nil
		}
	}
}

// WriteAsync applies b in the order of every other write, like Write, but
// returns as soon as b is applied: readable (see ReadApplied) and ordered
// before every later write, not yet durable. The Pending says when it is.
// With sync, b's fsync is requested at once and Pending.Wait waits for it;
// without, b becomes durable with the next synced write of anyone (every
// fsync of the WAL covers all that was applied before it), or when
// Pending.Wait asks for a sync.
//
// Unlike WriteNoSync it takes appends, acks and truncations: the caller
// promises to let nobody hear of them before Pending.Done is closed. This
// lets a caller overlap building and applying its next batch with this
// one's fsync, and defer an fsync that nothing is waiting for.
//
// Validation failures (ErrSeqGap, ErrInvalid) are returned at once and b is
// not written. After a failed commit it returns ErrFailed.
func (s *Store) WriteAsync(b *Batch, sync bool) (*Pending, error) {
	if b.err != nil {
		return nil, b.err
	}
	req := &writeReq{b: b, async: true, sync: sync, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	if err := s.queue(req); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	for {
		select {
		case err := <-req.done:
			return req.pending, err
		case <-req.lead:
			s.lead()
		}
	}
}

// queue adds req to the write queue and leads at once if no group is being
// committed. On success the caller holds an op (s.ops) it must release.
func (s *Store) queue(req *writeReq) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.mu.failed; err != nil {
		s.mu.Unlock()
		return err
	}
	s.ops.Add(1)
	s.mu.queue = append(s.mu.queue, req)
	lead := !s.mu.leading
	if lead {
		s.mu.leading = true
		req.state.Store(reqPromoted)
	}
	s.mu.Unlock()
	if lead {
		req.lead <- struct{}{}
	}
	return nil
}

// Pending is a batch WriteAsync applied: readable and ordered, durable once
// Done is closed.
type Pending struct {
	s     *Store
	order uint64        // the group's place in the WAL
	pb    *pebble.Batch // the synced commit to wait for; nil without sync
	start time.Time     // when it was applied, for the commit-duration metric
	done  chan struct{} // closed once durable, or once the store failed
	once  sync.Once
	err   error // of the sync Wait asked for
}

// Done is closed once the batch is durable (or the store failed: Wait
// says which).
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait makes the batch durable, asking for an fsync if it was applied
// without one and no later fsync has covered it yet, and returns nil once
// it is. It may be called more than once and from several goroutines.
func (p *Pending) Wait() error {
	p.once.Do(func() {
		if p.pb != nil {
			err := p.pb.SyncWait()
			if err == nil {
				err = p.pb.Close()
			}
			p.s.synced(p.order, err)
			p.s.metrics.commitSeconds.Observe(time.Since(p.start).Seconds())
			p.pb = nil
			return
		}
		select {
		case <-p.done:
		default:
			// An empty synced write: its fsync covers this batch.
			p.err = p.s.Write(context.Background(), &Batch{})
		}
	})
	if p.err != nil {
		return p.err
	}
	<-p.done
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.mu.failed
}

// lead commits one group. The caller's own request is first in the queue.
func (s *Store) lead() {
	s.mu.Lock()
	group := s.takeGroupLocked()
	failed := s.mu.failed
	s.mu.Unlock()

	if failed != nil {
		s.handoff()
		for _, r := range group {
			r.done <- failed
		}
		return
	}

	g := s.buildGroup(group)
	sync := !group[0].async || group[0].sync
	start := time.Now()
	order := s.applied(g)
	var applyErr error
	if sync {
		applyErr = s.db.ApplyNoSyncWait(g.pb, pebble.Sync)
	} else {
		applyErr = s.db.Apply(g.pb, pebble.NoSync)
	}
	// The WAL order is fixed once the apply returns, so the next group may
	// be built and applied while this one waits for its fsync.
	s.handoff()
	if applyErr != nil {
		g.pb.Close()
		s.synced(order, applyErr)
		s.finish(group, g, start)
		return
	}
	if r := group[0]; r.async {
		s.metrics.commits.Inc()
		s.metrics.writes.Inc()
		r.pending = &Pending{s: s, order: order, start: start, done: g.durable}
		if sync {
			r.pending.pb = g.pb
		} else {
			g.pb.Close()
		}
		r.done <- g.results[0]
		return
	}
	err := g.pb.SyncWait()
	if err == nil {
		err = g.pb.Close()
	}
	s.synced(order, err)
	s.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	s.finish(group, g, start)
}

// applied registers a group about to be applied to pebble: its place in the
// WAL, and what becomes durable with it. The caller leads, so groups
// register in the order pebble applies them.
func (s *Store) applied(g *group) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.order++
	g.durable = make(chan struct{})
	s.mu.unsynced = append(s.mu.unsynced, unsyncedGroup{order: s.mu.order, g: g})
	for _, u := range g.streams {
		cur := s.mu.applied[u.id]
		cur.head = max(cur.head, u.st.head)
		cur.truncated = max(cur.truncated, u.st.truncated)
		s.mu.applied[u.id] = cur
	}
	return s.mu.order
}

// synced records the outcome of the fsync of the group at order: on
// success every group up to it is durable (the WAL is sequential, so an
// fsync covers all applied before it; fsyncs may return out of order, so
// only the highest counts); on failure the store fails.
func (s *Store) synced(order uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.mu.failed == nil {
			s.mu.failed = fmt.Errorf("%w: commit: %v", ErrFailed, err)
			s.log.Error("commit failed; refusing further writes", "error", err)
		}
		for _, u := range s.mu.unsynced {
			close(u.g.durable)
		}
		s.mu.unsynced = nil
		return
	}
	n := 0
	for ; n < len(s.mu.unsynced) && s.mu.unsynced[n].order <= order; n++ {
		g := s.mu.unsynced[n].g
		for _, u := range g.streams {
			cur := s.mu.durable[u.id]
			cur.head = max(cur.head, u.st.head)
			cur.truncated = max(cur.truncated, u.st.truncated)
			s.mu.durable[u.id] = cur
		}
		for _, u := range g.acks {
			s.mu.acks[u.id] = max(s.mu.acks[u.id], u.seq)
		}
		if s.mu.failed == nil {
			s.metrics.appendedMsgs.Add(float64(g.msgs))
			s.metrics.appendedBytes.Add(float64(g.payloadBytes))
		}
		close(g.durable)
	}
	s.mu.unsynced = s.mu.unsynced[n:]
}

type unsyncedGroup struct {
	order uint64
	g     *group
}

// finish answers the requests of a synchronous group once its fsync
// returned.
func (s *Store) finish(group []*writeReq, g *group, start time.Time) {
	s.metrics.commits.Inc()
	s.metrics.groupWrites.Observe(float64(len(group)))
	s.mu.Lock()
	failed := s.mu.failed
	s.mu.Unlock()
	for i, r := range group {
		res := g.results[i]
		if res == nil {
			res = failed
		}
		if res == nil {
			s.metrics.writes.Inc()
		}
		r.done <- res
	}
}

// takeGroupLocked removes from the queue the requests of the next group.
// An async request is always a group of its own.
func (s *Store) takeGroupLocked() []*writeReq {
	var group []*writeReq
	size := 0
	i := 0
	for ; i < len(s.mu.queue); i++ {
		r := s.mu.queue[i]
		if len(group) > 0 && (group[0].async || r.async || len(group) >= s.cfg.MaxGroupRequests || size+r.b.size > s.cfg.MaxGroupBytes) {
			break
		}
		if r.state.CompareAndSwap(reqPending, reqTaken) || r.state.CompareAndSwap(reqPromoted, reqTaken) {
			group = append(group, r)
			size += r.b.size
		}
		// Otherwise it was abandoned: drop it.
	}
	n := copy(s.mu.queue, s.mu.queue[i:])
	clear(s.mu.queue[n:])
	s.mu.queue = s.mu.queue[:n]
	return group
}

// handoff makes the first waiting request's caller the next leader, or ends
// leadership when nobody waits.
func (s *Store) handoff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.mu.queue) > 0 {
		r := s.mu.queue[0]
		if r.state.CompareAndSwap(reqPending, reqPromoted) {
			r.lead <- struct{}{}
			return
		}
		// Abandoned: drop it.
		s.mu.queue[0] = nil
		s.mu.queue = s.mu.queue[1:]
	}
	s.mu.leading = false
}

type streamUpdate struct {
	id streamID
	st streamState
}

type ackValue struct {
	id  ackID
	seq uint64
}

// group is one synced pebble commit built from several Writes.
type group struct {
	pb           *pebble.Batch
	durable      chan struct{} // closed once an fsync covers the group
	results      []error       // per request: validation error, or nil
	streams      []streamUpdate
	acks         []ackValue
	msgs         int
	payloadBytes int
}

// buildGroup validates the requests in order against the pending state and
// encodes the valid ones into one pebble batch. Only the leader calls it.
func (s *Store) buildGroup(reqs []*writeReq) *group {
	size := 0
	for _, r := range reqs {
		size += r.b.size
	}
	g := &group{pb: s.db.NewBatchWithSize(size + 64), results: make([]error, len(reqs))}
	touched := make(map[streamID]struct{})
	ackTouched := make(map[ackID]struct{})
	for i, r := range reqs {
		g.results[i] = s.stage(r.b, g, touched, ackTouched)
	}
	for id := range touched {
		st := s.pending.streams[id]
		_ = g.pb.Set(streamStateKey(id.origin, id.stream), encodeStreamState(st), nil)
		g.streams = append(g.streams, streamUpdate{id, st})
	}
	var v [8]byte
	for id := range ackTouched {
		seq := s.pending.acks[id]
		binary.BigEndian.PutUint64(v[:], seq)
		_ = g.pb.Set(ackKey(id.origin, id.stream, id.level), v[:], nil)
		g.acks = append(g.acks, ackValue{id, seq})
	}
	if g.pb.Empty() {
		// Nothing changed, but the caller must still learn that everything
		// before it is durable: a synced empty record waits for that.
		_ = g.pb.LogData(nil, nil)
	}
	return g
}

// stage validates one batch against the pending state and, if valid, adds it
// to the group and advances the pending state.
func (s *Store) stage(b *Batch, g *group, touched map[streamID]struct{}, ackTouched map[ackID]struct{}) error {
	overlay := make(map[streamID]streamState)
	get := func(id streamID) streamState {
		if st, ok := overlay[id]; ok {
			return st
		}
		return s.pending.streams[id]
	}
	type rangeDel struct{ from, to []byte }
	var dels []rangeDel
	for _, a := range b.appends {
		id := streamID{a.origin, a.stream}
		st := get(id)
		if first := a.msgs[0].Seq; first != st.head+1 {
			return fmt.Errorf("storage: append %s/%s: seq %d after head %d: %w", a.origin, a.stream, first, st.head, ErrSeqGap)
		}
		st.head = a.msgs[len(a.msgs)-1].Seq
		overlay[id] = st
	}
	for _, t := range b.truncs {
		id := streamID{t.origin, t.stream}
		st := get(id)
		if t.skip && t.upto > st.head {
			st.head = t.upto
		}
		if t.upto > st.head {
			return fmt.Errorf("storage: truncate %s/%s to %d: beyond head %d: %w", t.origin, t.stream, t.upto, st.head, ErrInvalid)
		}
		if t.upto <= st.truncated {
			continue
		}
		dels = append(dels, rangeDel{msgKey(t.origin, t.stream, st.truncated+1), msgKey(t.origin, t.stream, t.upto+1)})
		st.truncated = t.upto
		overlay[id] = st
	}

	// Valid: encode. Messages first, so that a truncation in the same batch
	// (applied after them) removes them too.
	for _, a := range b.appends {
		prefix := streamPrefix(prefixMsg, a.origin, a.stream)
		for rest := a.msgs; len(rest) > 0; {
			blk := rest[:nextBlock(rest)]
			rest = rest[len(blk):]
			op := g.pb.SetDeferred(len(prefix)+8, blockLen(blk))
			copy(op.Key, prefix)
			binary.BigEndian.PutUint64(op.Key[len(prefix):], blk[len(blk)-1].Seq)
			putBlock(op.Value, blk)
			_ = op.Finish()
			for _, m := range blk {
				g.payloadBytes += m.size()
			}
		}
		g.msgs += len(a.msgs)
	}
	for _, d := range dels {
		_ = g.pb.DeleteRange(d.from, d.to, nil)
	}
	addOps(g.pb, b.ops)
	for id, st := range overlay {
		s.pending.streams[id] = st
		touched[id] = struct{}{}
	}
	for _, a := range b.acks {
		id := ackID{streamID{a.origin, a.stream}, a.level}
		if a.seq > s.pending.acks[id] {
			s.pending.acks[id] = a.seq
			ackTouched[id] = struct{}{}
		}
	}
	return nil
}

// WriteNoSync applies b like Write but returns without waiting for an
// fsync: b survives a crash of the process or machine only once a later
// Write's fsync covers it (the WAL is sequential, so every fsync covers all
// that was applied before), or after a clean Close. Reads see b at once.
// Only application state and metadata may be written this way: a batch with
// appends, acks or truncations is refused with ErrInvalid, since those must
// be durable before anyone hears of them.
func (s *Store) WriteNoSync(b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if len(b.appends) > 0 || len(b.acks) > 0 || len(b.truncs) > 0 {
		return fmt.Errorf("storage: write without sync: appends, acks and truncations must be synced: %w", ErrInvalid)
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.mu.failed; err != nil {
		s.mu.Unlock()
		return err
	}
	s.ops.Add(1)
	defer s.ops.Done()
	s.mu.Unlock()
	pb := s.db.NewBatchWithSize(b.size + 64)
	defer pb.Close()
	addOps(pb, b.ops)
	if err := s.db.Apply(pb, pebble.NoSync); err != nil {
		return fmt.Errorf("storage: write without sync: %w", err)
	}
	return nil
}

// Append is a shortcut for a Write of one Batch.Append.
func (s *Store) Append(ctx context.Context, origin, stream string, msgs ...Message) error {
	var b Batch
	b.Append(origin, stream, msgs...)
	return s.Write(ctx, &b)
}

// Truncate is a shortcut for a Write of one Batch.Truncate.
func (s *Store) Truncate(ctx context.Context, origin, stream string, upto uint64) error {
	var b Batch
	b.Truncate(origin, stream, upto)
	return s.Write(ctx, &b)
}

// SetMeta is a shortcut for a Write of one Batch.SetMeta.
func (s *Store) SetMeta(ctx context.Context, key string, value []byte) error {
	var b Batch
	b.SetMeta(key, value)
	return s.Write(ctx, &b)
}

// addOps adds the application and metadata operations to a pebble batch.
// pebble's batch methods fail only once the batch is closed.
func addOps(pb *pebble.Batch, ops []rawOp) {
	for _, op := range ops {
		switch op.kind {
		case opSet:
			_ = pb.Set(op.key, op.value, nil)
		case opDelete:
			_ = pb.Delete(op.key, nil)
		case opDeleteRange:
			_ = pb.DeleteRange(op.key, op.value, nil)
		}
	}
}
