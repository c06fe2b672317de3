package core

import (
	"fmt"

	"github.com/stabilizer/stabilizer/frontier"
)

// peer is this site's view of one other site: the session of our data
// channel to it, what is in flight on it, and what of our ack row it got.
type peer struct {
	idx  int
	name string

	connected   bool
	session     uint64 // current session of our channel to the peer
	established bool   // the peer answered the session's Hello
	// helloSession is the session of the peer's channel to us that we
	// last answered: the answer travels on our own connection to the
	// peer, which may come up after the peer's, and is sent again when it
	// does (Connected), or the peer would wait for its resend timeout.
	helloSession uint64
	rejected     error

	// lanes: the channel's window per lane, laneData for most streams,
	// laneBulk for Config.BulkStreams, so that bulk entries filling their
	// window never hold back the others (they travel on a connection of
	// their own, PlaneBulk).
	lanes        [numLanes]lane
	progressTick uint64 // last tick the channel made progress

	ackSentVer uint64 // our row version the peer was last sent
	lastCtrl   uint64 // tick of the last Acks sent to the peer
	sentCtrl   bool
	needFull   bool

	// Relaying (relay.go). downTick is the tick the peer was last
	// disconnected (0: not connected since New); relaying, that it has
	// been for RelayDelay ticks, so this site relays its streams.
	downTick uint64
	relaying bool
	// As a relay destination: heard, that an Acks message of the peer
	// arrived since Connected, so its row here is fresh; relay, per
	// origin; relayEpoch voids the stream cursors to the peer when bumped.
	heard      bool
	relay      []relayState
	relayEpoch uint64
	// incarnation is the peer's as its Acks last said (0: not heard).
	incarnation uint64
}

// The lanes of a channel.
const (
	laneData = iota
	laneBulk
	numLanes
)

// lane is one window of a channel: what was sent on it and not yet acked
// received by the peer, in send order, for the bytes-in-flight bound.
type lane struct {
	inflight      []flight
	inflightBytes int
	// windowFull: the next entry did not fit the window; nothing can be
	// sent on the lane until acks release some of what is in flight.
	windowFull bool
	rr         int // round-robin start among own streams
}

type flight struct {
	s     *stream
	seq   uint64
	bytes int
}

func (p *peer) resetInflight() {
	for l := range p.lanes {
		p.lanes[l].inflight = nil
		p.lanes[l].inflightBytes = 0
		p.lanes[l].windowFull = false
	}
}

// inflight reports whether anything sent on the channel is unacknowledged.
func (p *peer) inflight() bool {
	for l := range p.lanes {
		if len(p.lanes[l].inflight) > 0 {
			return true
		}
	}
	return false
}

// windowOpen reports whether some lane has room.
func (p *peer) windowOpen() bool {
	for l := range p.lanes {
		if !p.lanes[l].windowFull {
			return true
		}
	}
	return false
}

// releaseInflight forgets what the peer acknowledged received, on the bulk
// lane what it acknowledged persisted: a site persists bulk entries on its
// bulk store's own schedule and holds them in memory until then, so the
// window also bounds what a slow disk leaves in a receiver's memory.
func (p *peer) releaseInflight(n int, tick uint64) {
	for l := range p.lanes {
		ln := &p.lanes[l]
		level := frontier.Received
		if l == laneBulk {
			level = frontier.Persisted
		}
		k := 0
		for k < len(ln.inflight) {
			f := ln.inflight[k]
			if f.s.acks[level*n+p.idx] < f.seq {
				break
			}
			ln.inflightBytes -= f.bytes
			k++
		}
		if k > 0 {
			ln.inflight = ln.inflight[k:]
			p.progressTick = tick
			ln.windowFull = false
		}
	}
}

func (c *Core) newSession(p *peer) {
	p.session = c.cfg.Rand.Uint64() | 1
	p.established = false
	p.resetInflight()
	p.relayEpoch++
	p.progressTick = c.tick
	c.pendingMsgs = append(c.pendingMsgs, Message{
		Type: MsgHello, From: c.cfg.Site, To: p.name, Session: p.session, Version: ProtocolVersion, Schema: c.schemaFP,
	})
}

// answerHello tells p what we hold of its streams, for the session of its
// channel to us that we last heard a Hello of.
func (c *Core) answerHello(p *peer) {
	heads, clock := c.remembered(p.idx)
	c.pendingMsgs = append(c.pendingMsgs, Message{
		Type: MsgPositions, From: c.cfg.Site, To: p.name, Session: p.helloSession, Version: ProtocolVersion, Schema: c.schemaFP,
		Positions: c.positions(p.idx), Heads: heads, Clock: clock,
	})
}

// remembered lists, for each of origin's streams, the highest seq this
// site knows existed: its own persisted cell as this site's table holds
// it, and the frontiers released here (they rest on acks of entries that
// existed, and survive a restart, which the table does not); and the
// highest time this site knows origin issued, of a heartbeat or a
// message. A site that lost its store learns from them which seqs it gave
// out (Core.Lost) and above which time it must stamp.
func (c *Core) remembered(origin int) ([]Position, HLC) {
	var ps []Position
	clock := c.originT[origin]
	for _, s := range c.byOrigin[origin] {
		v := s.acks[frontier.Persisted*c.n+origin]
		clock = maxHLC(clock, s.headHLC)
		for _, h := range s.hlcs {
			clock = maxHLC(clock, h)
		}
		for _, r := range s.rel {
			v = max(v, r.seq)
			clock = maxHLC(clock, r.hlc)
		}
		if v > 0 {
			ps = append(ps, Position{Stream: s.id, Seq: v})
		}
	}
	return ps, clock
}

// positions lists what this site holds of origin's streams.
func (c *Core) positions(origin int) []Position {
	ps := make([]Position, 0, len(c.byOrigin[origin]))
	for _, s := range c.byOrigin[origin] {
		if s.head > 0 {
			ps = append(ps, Position{Stream: s.id, Seq: s.head, HLC: s.headHLC})
		}
	}
	return ps
}

// Step feeds the core a message from a peer. Errors name the problem; the
// driver should log them and, for ErrUnknownPeer, ErrVersionMismatch and
// ErrRejected, close the connection the message came on.
func (c *Core) Step(m Message) error {
	if m.To != c.cfg.Site {
		return fmt.Errorf("core: step %s: %w: addressed to %q, this is %q", m.Type, ErrBadMessage, m.To, c.cfg.Site)
	}
	from, ok := c.cfg.Schema.SiteIndex(m.From)
	if !ok {
		return fmt.Errorf("core: step %s: %w: %q (known: %v)", m.Type, ErrUnknownPeer, m.From, c.cfg.Schema.Sites)
	}
	if from == c.self {
		return fmt.Errorf("core: step %s: %w: from self", m.Type, ErrBadMessage)
	}
	p := c.peers[from]
	c.relayScan = true
	switch m.Type {
	case MsgHello:
		if m.Version != ProtocolVersion {
			c.pendingMsgs = append(c.pendingMsgs, Message{
				Type: MsgReject, From: c.cfg.Site, To: m.From, Session: m.Session, Version: ProtocolVersion, Schema: c.schemaFP,
				Reason: fmt.Sprintf("protocol version %d, want %d", m.Version, ProtocolVersion),
			})
			return fmt.Errorf("core: hello from %s: %w: peer speaks %d, we speak %d", m.From, ErrVersionMismatch, m.Version, ProtocolVersion)
		}
		if m.Schema != c.schemaFP {
			c.pendingMsgs = append(c.pendingMsgs, Message{
				Type: MsgReject, From: c.cfg.Site, To: m.From, Session: m.Session, Version: ProtocolVersion, Schema: c.schemaFP,
				Reason: fmt.Sprintf("schema mismatch: %s has sites %v and levels %v", c.cfg.Site, c.cfg.Schema.Sites, c.cfg.Schema.LevelNames()),
			})
			return fmt.Errorf("core: hello from %s: %w: its sites or levels differ from ours (sites %v, levels %v)",
				m.From, ErrSchemaMismatch, c.cfg.Schema.Sites, c.cfg.Schema.LevelNames())
		}
		p.helloSession = m.Session
		c.answerHello(p)
		return nil
	case MsgPositions:
		if m.Version != ProtocolVersion {
			return fmt.Errorf("core: positions from %s: %w: peer speaks %d, we speak %d", m.From, ErrVersionMismatch, m.Version, ProtocolVersion)
		}
		if m.Schema != c.schemaFP {
			return fmt.Errorf("core: positions from %s: %w", m.From, ErrSchemaMismatch)
		}
		return c.stepPositions(p, m)
	case MsgData:
		return c.stepData(from, m)
	case MsgAcks:
		if m.Schema != c.schemaFP {
			return fmt.Errorf("core: acks from %s: %w: cells ignored", m.From, ErrSchemaMismatch)
		}
		return c.stepAcks(p, m)
	case MsgTruncated:
		if m.Schema != c.schemaFP {
			return fmt.Errorf("core: truncated from %s: %w", m.From, ErrSchemaMismatch)
		}
		return c.stepTruncated(p, m)
	case MsgReject:
		if !p.connected || m.Session != p.session {
			return nil // about an earlier session
		}
		p.established = false
		p.resetInflight()
		p.rejected = fmt.Errorf("core: %s refused our channel: %w: %s", m.From, ErrRejected, m.Reason)
		return p.rejected
	}
	return fmt.Errorf("core: step: %w: type %d from %s", ErrBadMessage, m.Type, m.From)
}

// stepPositions resumes our channel to p from where p says it stands: the
// answer to our Hello, or p's request to resend after it saw a gap.
func (c *Core) stepPositions(p *peer, m Message) error {
	if !p.connected || m.Session != p.session || p.rejected != nil {
		return nil // an answer to an earlier session
	}
	pos := make(map[string]uint64, len(m.Positions))
	for _, q := range m.Positions {
		if q.Stream.Origin != c.cfg.Site {
			return fmt.Errorf("core: positions from %s: %w: stream %s is not ours", p.name, ErrBadMessage, q.Stream)
		}
		// What the peer holds beyond our log is noted from its row
		// (stepAcks), which names its incarnation.
		pos[q.Stream.Name] = q.Seq
	}
	for _, q := range m.Heads {
		if q.Stream.Origin == c.cfg.Site {
			c.noteLost(q.Stream.Name, q.Seq, -1)
		}
	}
	if c.reserved.Less(m.Clock) {
		// The peer heard a heartbeat of ours above our clock: our store
		// lost its reservation. Never stamp at or below it again.
		c.observe(m.Clock)
		c.reserveClock = true
	}
	var err error
	for _, s := range c.own {
		at := pos[s.id.Name]
		if at > s.durable {
			// The peer holds what we never persisted: our store lost it
			// (Lost, noted above), and until a snapshot brings the stream
			// there we append nothing to it. Resend from our end; the
			// peer drops what it has.
			at = s.durable
		}
		s.next[p.idx] = at + 1
	}
	// Forget what was in flight: beyond the peer's positions it was lost
	// or will be dropped on arrival, and at or below them it arrived.
	// Keeping it counted would let lost entries block their own resend
	// until a timeout. Entries still on the wire may so exceed the window
	// once, right after a resend request.
	p.established = true
	p.resetInflight()
	p.relayEpoch++
	p.progressTick = c.tick
	return err
}

func (c *Core) stepData(from int, m Message) error {
	gap := false
	var err error
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Stream.Origin == c.cfg.Site {
			// No relay sends a site its own streams: it is their only
			// source.
			err = fmt.Errorf("core: data from %s: %w: entry of our own stream %s", m.From, ErrBadMessage, e.Stream)
			continue
		}
		s, lerr := c.lookup(e.Stream)
		if lerr != nil {
			err = fmt.Errorf("core: data from %s: %w", m.From, lerr)
			continue
		}
		switch {
		case e.Seq <= s.head:
			// A resend of what we hold.
		case e.Seq == s.head+1:
			s.push(*e)
			c.observe(e.HLC)
			c.setOwn(s, frontier.Received, e.Seq, e.HLC)
		default:
			if s.resyncSession != m.Session || s.resyncHead != s.head {
				s.resyncSession, s.resyncHead = m.Session, s.head
				gap = true
			}
		}
	}
	if gap {
		// Something of this session was lost: ask the origin to resume
		// from what we hold.
		c.pendingMsgs = append(c.pendingMsgs, Message{
			Type: MsgPositions, From: c.cfg.Site, To: m.From, Session: m.Session, Version: ProtocolVersion, Schema: c.schemaFP,
			Positions: c.positions(from),
		})
	}
	return err
}

// stepAcks merges p's row into the table by max and takes p's heartbeat.
func (c *Core) stepAcks(p *peer, m Message) error {
	var err error
	c.checkIncarnation(p, m.Session)
	for _, a := range m.Cells {
		if a.Level < 0 || a.Level >= c.nlevels {
			err = fmt.Errorf("core: acks from %s: %w: level %d of %s", p.name, ErrBadMessage, a.Level, a.Stream)
			continue
		}
		if a.Stream.Origin == c.cfg.Site && a.Seq > c.headOf(a.Stream) {
			// Cells of own streams beyond our log: we lost our store.
			// The stream is known from here on (its head 0 if it was
			// not), so that the table says who holds what of it.
			if a.Level <= frontier.Persisted {
				c.noteLost(a.Stream.Name, a.Seq, p.idx)
			}
			if _, known := c.streams[a.Stream]; !known {
				if err := checkStreamName(a.Stream.Name); err != nil {
					continue
				}
				c.newStream(a.Stream, c.self)
			}
		}
		s, lerr := c.lookup(a.Stream)
		if lerr != nil {
			err = fmt.Errorf("core: acks from %s: %w", p.name, lerr)
			continue
		}
		i := a.Level*c.n + p.idx
		if a.Seq <= s.acks[i] {
			continue
		}
		if a.Level == frontier.Received && s.origin != c.self {
			p.relay[s.origin].fed = c.tick
		}
		s.acks[i], s.hlcs[i] = a.Seq, a.HLC
		s.dirty = true
		c.timeDirty = true
	}
	p.heard = true
	c.checkJoined()
	p.releaseInflight(c.n, c.tick)
	if c.originT[p.idx].Less(m.Clock) {
		// Take the heartbeat whole or not at all: a head left out would
		// read as "no messages then" and overstate the stable time.
		heads := make([]*stream, len(m.Heads))
		for i, h := range m.Heads {
			if h.Stream.Origin != p.name {
				return fmt.Errorf("core: heartbeat from %s: %w: head of stream %s", p.name, ErrBadMessage, h.Stream)
			}
			s, lerr := c.lookup(h.Stream)
			if lerr != nil {
				return fmt.Errorf("core: heartbeat from %s: %w", p.name, lerr)
			}
			heads[i] = s
		}
		c.originT[p.idx] = m.Clock
		for _, s := range c.byOrigin[p.idx] {
			s.hbHead = 0
		}
		for i, s := range heads {
			s.hbHead = m.Heads[i].Seq
		}
		c.observe(m.Clock)
		c.originDirty[p.idx] = true
		c.timeDirty = true
	}
	return err
}
