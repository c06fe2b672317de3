package core

import "github.com/stabilizer/stabilizer/frontier"

// Relaying: a site forwards, from its own log, entries of another origin's
// streams to a connected peer that lacks them, while the origin has been
// disconnected from this site for RelayDelay ticks. See Relay in the
// package documentation for the protocol and why a seq still names one
// message.

// relayState is what this site knows of one peer as a relay destination,
// per origin (by site index).
type relayState struct {
	// fed is the tick at which the peer's received ack of one of the
	// origin's streams last rose here (or the origin began to count as
	// down): a holder that is not preferred takes over only once the peer
	// went RelayDelay ticks without progress.
	fed uint64
	// takeover: this site relays the origin's streams to the peer although
	// another holder is preferred, because that one did not feed it. It
	// ends once the peer lacks nothing this site holds of the origin.
	takeover bool
}

// relayCursor is the next seq of a stream to relay to one peer, valid
// while epoch is the peer's relayEpoch: a new session or a resend request
// voids every cursor to the peer at once.
type relayCursor struct {
	next  uint64
	epoch uint64
	// told: the peer was sent MsgTruncated for the stream in this epoch:
	// it lacks what this site dropped.
	told bool
}

// relayEnabled reports whether this site relays at all.
func (c *Core) relayEnabled() bool { return c.cfg.RelayDelay > 0 }

// tickRelay marks peers that stayed disconnected for RelayDelay ticks as
// origins whose streams this site relays.
func (c *Core) tickRelay(o *peer) {
	if !c.relayEnabled() || o.connected || o.relaying || c.tick-o.downTick < uint64(c.cfg.RelayDelay) {
		return
	}
	o.relaying = true
	c.relayOrigins++
	for _, p := range c.peers {
		if p != nil {
			p.relay[o.idx] = relayState{fed: c.tick}
		}
	}
}

// originBack ends relaying o's streams: it is connected again and resumes
// them itself from what each peer states it holds.
func (c *Core) originBack(o *peer) {
	if o.relaying {
		o.relaying = false
		c.relayOrigins--
	}
}

// relayFrom returns the next seq of s to relay to p: past what p
// acknowledged received (of a bulk stream, persisted: a receiver's
// received cell may stand above what a crash left it, see BulkPersisted),
// as far as this site knows, and past what was sent to p in its current
// epoch.
func (c *Core) relayFrom(s *stream, p *peer) uint64 {
	level := frontier.Received
	if s.lane == laneBulk {
		level = frontier.Persisted
	}
	next := s.acks[level*c.n+p.idx] + 1
	if s.relay != nil {
		if rc := s.relay[p.idx]; rc.epoch == p.relayEpoch {
			next = max(next, rc.next)
		}
	}
	return next
}

// relayPreferred reports whether this site is the holder that should relay
// s to p: of this site and the connected peers but p and the origin, the
// one whose `persisted` ack of s is highest, the lowest index on a tie.
// Others' acks may lag, so two holders may both think themselves preferred
// for a while: the receiver drops what it holds.
func (c *Core) relayPreferred(s *stream, p *peer) bool {
	best, who := s.durable, c.self
	for _, q := range c.peers {
		if q == nil || q == p || q.idx == s.origin || !q.connected {
			continue
		}
		if v := s.acks[frontier.Persisted*c.n+q.idx]; v > best || (v == best && q.idx < who) {
			best, who = v, q.idx
		}
	}
	return who == c.self
}

// relayDue reports whether s is to be relayed to p now, starting at from;
// it may start a takeover.
func (c *Core) relayDue(s *stream, p *peer, from uint64, start bool) bool {
	if from > s.durable || from <= s.floor {
		return false
	}
	st := &p.relay[s.origin]
	if st.takeover || c.relayPreferred(s, p) {
		return true
	}
	if c.tick-st.fed < uint64(c.cfg.RelayDelay) {
		return false
	}
	if start {
		st.takeover = true
	}
	return true
}

// canRelay reports whether p may be sent relayed entries now.
func (c *Core) canRelay(p *peer) bool {
	return (c.relayOrigins > 0 || len(c.hops) > 0) && p.established && p.heard && p.windowOpen()
}

// relayPending reports whether relayMessages would send p anything. Once a
// Ready relayed all it could, nothing is pending until an input (Step, Tick,
// a connection change) marks relayScan: the scan costs every stream of
// every origin relayed.
func (c *Core) relayPending(p *peer) bool {
	if !c.relayScan || !c.canRelay(p) {
		return false
	}
	for _, o := range c.peers {
		if o == nil || o == p || !o.relaying {
			continue
		}
		for _, s := range c.byOrigin[o.idx] {
			if c.relayDue(s, p, c.relayFrom(s, p), false) {
				return true
			}
		}
	}
	for _, s := range c.hops {
		if !p.lanes[s.lane].windowFull && c.hopRelayDue(s, p, c.relayFrom(s, p)) {
			return true
		}
	}
	return false
}

// relayMessages sends p what it lacks of the streams of origins this site
// relays, in Data messages of their own (apart from this site's entries) of
// at most MaxBatchBytes, within the window of p's channel, which own and
// relayed entries share.
func (c *Core) relayMessages(rd *Ready, p *peer) {
	if !c.canRelay(p) {
		return
	}
	p.releaseInflight(c.n, c.tick)
	var b [numLanes]batch
	for l := range b {
		b[l] = batch{m: Message{Type: MsgData, From: c.cfg.Site, To: p.name, Session: p.session, Bulk: l == laneBulk}, lane: l}
	}
	for _, o := range c.peers {
		if o == nil || o == p || !o.relaying {
			continue
		}
		lacks := false
		for _, s := range c.byOrigin[o.idx] {
			if s.acks[frontier.Received*c.n+p.idx] < s.durable {
				lacks = true
			}
			nx := c.relayFrom(s, p)
			if nx <= s.floor && nx <= s.durable {
				c.tellRelayTruncated(p, s)
				continue
			}
			if p.lanes[s.lane].windowFull || !c.relayDue(s, p, nx, true) {
				continue
			}
			c.relayTo(rd, p, &b[s.lane], s, nx)
		}
		if !lacks {
			p.relay[o.idx].takeover = false
		}
	}
	for _, s := range c.hops {
		nx := c.relayFrom(s, p)
		if p.lanes[s.lane].windowFull || !c.hopRelayDue(s, p, nx) {
			continue
		}
		c.relayTo(rd, p, &b[s.lane], s, nx)
	}
	for l := range b {
		b[l].flush(rd, p)
	}
}

// relayTo relays s to p from nx on, as far as p's window goes, and
// records where it stopped.
func (c *Core) relayTo(rd *Ready, p *peer, b *batch, s *stream, nx uint64) {
	nx = c.fill(rd, p, b, s, nx)
	if s.relay == nil {
		s.relay = make([]relayCursor, c.n)
	}
	s.relay[p.idx] = relayCursor{next: nx, epoch: p.relayEpoch}
}

// tellRelayTruncated tells p, once per relay epoch, that this site dropped
// entries of another origin's stream that p lacks: with the origin down,
// p may have to catch up from a snapshot.
func (c *Core) tellRelayTruncated(p *peer, s *stream) {
	if s.relay == nil {
		s.relay = make([]relayCursor, c.n)
	}
	if rc := s.relay[p.idx]; rc.epoch == p.relayEpoch && rc.told {
		return
	}
	s.relay[p.idx] = relayCursor{epoch: p.relayEpoch, told: true}
	c.pendingMsgs = append(c.pendingMsgs, Message{
		Type: MsgTruncated, From: c.cfg.Site, To: p.name, Session: p.session, Version: ProtocolVersion, Schema: c.schemaFP,
		Positions: []Position{{Stream: s.id, Seq: s.floor, HLC: s.floorHLC}},
	})
}

// batch is a Data message being filled for one peer, on one lane.
type batch struct {
	m     Message
	bytes int
	lane  int
}

// flush sends what the batch holds and starts the next one.
func (b *batch) flush(rd *Ready, p *peer) {
	if len(b.m.Entries) == 0 {
		return
	}
	p.lanes[b.lane].inflightBytes += b.bytes
	rd.Messages = append(rd.Messages, b.m)
	b.m = Message{Type: b.m.Type, From: b.m.From, To: b.m.To, Session: b.m.Session, Bulk: b.m.Bulk}
	b.bytes = 0
}

// fill adds persisted entries nx.. of s to b, flushing full batches, until
// p's window is full or s is exhausted, and returns the next seq to send.
// An entry larger than a batch or the window goes alone, when nothing else
// is in the batch or in flight.
func (c *Core) fill(rd *Ready, p *peer, b *batch, s *stream, nx uint64) uint64 {
	ln := &p.lanes[b.lane]
	window := c.window(b.lane)
	for nx <= s.durable && !ln.windowFull {
		if b.bytes >= c.cfg.MaxBatchBytes {
			b.flush(rd, p)
		}
		ents, err := c.read(s, nx, s.durable, c.cfg.MaxBatchBytes-b.bytes)
		if err != nil {
			c.errs = append(c.errs, err)
			break
		}
		for _, e := range ents {
			sz := entrySize(&e)
			if b.bytes > 0 && b.bytes+sz > c.cfg.MaxBatchBytes {
				b.flush(rd, p)
			}
			if ln.inflightBytes+b.bytes > 0 && ln.inflightBytes+b.bytes+sz > window {
				ln.windowFull = true
				break
			}
			b.m.Entries = append(b.m.Entries, e)
			ln.inflight = append(ln.inflight, flight{s, e.Seq, sz})
			b.bytes += sz
			nx = e.Seq + 1
		}
	}
	return nx
}
