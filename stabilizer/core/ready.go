package core

import (
	"cmp"
	"slices"

	"github.com/stabilizer/stabilizer/frontier"
)

// Ready is what the core asks its driver to do. Handle the fields in this
// order, then call Advance:
//
//  1. Write Entries, Acks, Predicates, Frontiers, StableTimes and Clock in
//     one atomic batch; if MustSync, make it durable (fsync). Nothing below
//     may happen before (but for settled advances, in 4): the rest of the
//     Ready already counts this Ready's entries persisted, and every other
//     field may expose them. Hand BulkEntries to the bulk store, which makes
//     them durable on its own schedule (see BulkEntries).
//  2. Send Messages, each to its To on its Plane(), in order per (To, Plane).
//  3. Hand Deliver to the applications, in order per stream.
//  4. Publish Frontiers and StableTimes to waiters and watchers. The
//     waiters of a Frontier marked Settled may be woken at once, before
//     step 1: what they learn rests on acks durable where they were made.
type Ready struct {
	// Entries to append to the local log: this site's new entries and
	// those received from origins, in seq order per stream.
	Entries []Entry
	// BulkEntries are the new entries of bulk streams (Config.BulkStreams),
	// in seq order per stream: append them to the bulk store, where they
	// become durable on its own schedule, apart from the batch of step 1,
	// so that an fsync of the log never waits behind bulk bytes. Unlike
	// Entries they are not counted persisted: once they are durable, call
	// BulkPersisted; nothing of them leaves the site, is delivered or is
	// acknowledged persisted before. They stay in memory until then.
	BulkEntries []Entry
	// Acks are cells of this site's own row that changed: store each,
	// overwriting the previous value of (stream, level). State.Acks.
	Acks []AckCell
	// Predicates set at run time: store by name. State.Predicates.
	Predicates []PredicateDef
	// Scoped lists the scope additions of transient predicates since the
	// last Ready (ScopeTransient): Frontiers holds their evaluation on
	// every stream of the name where it released more, so that once this
	// Ready is published their frontiers there are current. Transient
	// predicates are not stored.
	Scoped []PredicateScope
	// Frontiers that advanced, each with the version that released it:
	// store the latest per (stream, predicate), but for transient
	// predicates, and publish. State.Frontiers.
	Frontiers []FrontierAdvance
	// StableTimes that advanced: store the latest per predicate, but for
	// transient ones, and publish. State.StableTimes.
	StableTimes []StableTime
	// Clock, when non-zero, bounds every timestamp heartbeats expose until
	// the next one: store it. State.Clock.
	Clock HLC
	// Messages to peers.
	Messages []Message
	// Deliver are persisted entries for the local applications, in seq order
	// per stream, continuing where the last delivery of each stream ended.
	// The application calls Applied (and Report) as it consumes them.
	Deliver []Entry
	// Truncations drop streams' prefixes from the log (Truncate,
	// InstallSnapshot): write them with the batch. State.Truncated.
	Truncations []Truncation
	// Behind lists streams whose origins dropped entries this site lacks
	// (Core.Behind): only a snapshot of their application's state can
	// bring them up to date.
	Behind []Position
	// Recovery, when non-nil, replaces the stored State.Recovery.
	Recovery *Recovery
	// Incarnation, when non-zero, names this site's store: store it
	// (State.Incarnation). A site whose store was wiped has a new one, so
	// peers know to forget what its old row said (Acks carry it).
	Incarnation uint64
	// Errors met while preparing the Ready, for the log: a storage read
	// failed, a predicate failed to evaluate. The core retries what they
	// held up on a later Ready.
	Errors []error
	// MustSync says whether step 1 has anything to write.
	MustSync bool
}

// Empty reports whether the Ready holds nothing to do: the driver may then
// call Advance at once.
func (rd *Ready) Empty() bool {
	return !rd.MustSync && len(rd.BulkEntries) == 0 && len(rd.Messages) == 0 && len(rd.Deliver) == 0 && len(rd.Errors) == 0 &&
		len(rd.Truncations) == 0 && len(rd.Behind) == 0 && rd.Recovery == nil &&
		len(rd.Frontiers) == 0 && len(rd.StableTimes) == 0 && len(rd.Scoped) == 0
}

// HasReady reports whether Ready would hand out work. It is false between
// Ready and Advance.
func (c *Core) HasReady() bool {
	if c.awaiting {
		return false
	}
	if len(c.truncs) > 0 || len(c.behind) > 0 || c.recoveryDirty || !c.incStored || c.reserveClock {
		return true
	}
	if len(c.pendingMsgs) > 0 || len(c.dirtyCells) > 0 || len(c.pendingDefs) > 0 || len(c.scoping) > 0 || len(c.errs) > 0 {
		return true
	}
	if c.timeDue() || c.hbDue() || c.tick >= c.nextFull {
		return true
	}
	for _, s := range c.list {
		if s.head > s.written || s.dirty || c.deliverable(s) {
			return true
		}
	}
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		if p.needFull || c.ctrlDue(p) {
			return true
		}
		if p.established {
			for _, s := range c.own {
				nx := s.next[p.idx]
				if !p.lanes[s.lane].windowFull && nx != 0 && nx <= s.durable && !c.routedAway(s, p) && (nx > s.floor || s.told == nil || s.told[p.idx] != p.session) {
					return true
				}
			}
		}
		if c.relayPending(p) {
			return true
		}
	}
	return false
}

func (c *Core) deliverable(s *stream) bool {
	return s.delivered < s.durable && s.delivered-s.appPos < uint64(c.cfg.MaxUnapplied)
}

// ctrlDue reports whether p is owed an Acks message now: it has not been
// sent the latest changes of this site's row, and either AckInterval has
// passed since the last one or some of them are received or persisted acks.
// Those are what writes wait for under every built-in predicate, and they
// change once per Ready that persists entries; holding them to the next
// tick would add up to a tick to a write on every hop. Applied and custom
// levels, which can change with every application callback, keep to the
// interval.
func (c *Core) ctrlDue(p *peer) bool {
	if c.rowVer <= p.ackSentVer {
		return false
	}
	return !p.sentCtrl || c.durableVer > p.ackSentVer || c.tick >= p.lastCtrl+uint64(c.cfg.AckInterval)
}

// Ready returns the work accumulated since the last Advance. The driver must
// handle it (see Ready) and call Advance before the next Ready; until then
// Ready returns an empty Ready and HasReady is false. Inputs may be given
// between Ready and Advance; their effects come in the next Ready.
func (c *Core) Ready() Ready {
	var rd Ready
	if c.awaiting {
		return rd
	}
	c.awaiting = true
	if len(c.lost) > 0 {
		c.abandonLost()
	}

	// 1. What to persist. The driver makes it durable before anything of
	// this Ready leaves the site, so the rest of the Ready may already count
	// it persisted: ack it, send it, deliver it. That saves a loop round
	// on the path to every frontier. Bulk entries are persisted apart and
	// count only once the driver says so (BulkPersisted).
	for _, s := range c.list {
		if s.head > s.written {
			first := s.memFirst()
			if s.lane == laneBulk {
				rd.BulkEntries = append(rd.BulkEntries, s.mem[s.written+1-first:]...)
				s.written = s.head
				continue
			}
			rd.Entries = append(rd.Entries, s.mem[s.written+1-first:]...)
			s.written, s.durable = s.head, s.head
			c.setOwn(s, frontier.Persisted, s.head, s.headHLC)
		}
	}
	for _, r := range c.dirtyCells {
		r.s.queued[r.level] = false
		i := r.level*c.n + c.self
		rd.Acks = append(rd.Acks, AckCell{Stream: r.s.id, Site: c.cfg.Site, Level: r.level, Seq: r.s.acks[i], HLC: r.s.hlcs[i]})
	}
	c.dirtyCells = c.dirtyCells[:0]
	rd.Predicates, c.pendingDefs = c.pendingDefs, nil
	rd.Truncations, c.truncs = c.truncs, nil
	rd.Behind, c.behind = c.behind, nil
	if !c.incStored {
		c.incStored = true
		rd.Incarnation = c.incarnation
	}
	if c.recoveryDirty {
		c.recoveryDirty = false
		rd.Recovery = c.recovery()
	}

	// 2. Frontiers and stable times.
	c.durableAdv = 0
	c.evalFrontiers(&rd)
	c.evalStableTimes(&rd)

	// 3. Clock heartbeat: a fresh timestamp. No restart may issue a
	// timestamp at or below one a heartbeat exposed, so the clock persists
	// a reservation ClockReserve ahead whenever a heartbeat would pass the
	// last one: one fsync per ClockReserve instead of one per heartbeat.
	// A site that may have lost its own streams' heads sends no
	// heartbeat: "nothing else until now" would be false.
	hb := c.hbDue()
	if hb {
		c.nextHB = c.tick + uint64(c.cfg.HeartbeatInterval)
		c.readyClock = c.now()
		if c.reserved.Less(c.readyClock) {
			c.reserved = HLC{Wall: c.readyClock.Wall + c.cfg.ClockReserve}
			rd.Clock = c.reserved
		}
		c.readyHeads = c.readyHeads[:0]
		for _, s := range c.own {
			c.readyHeads = append(c.readyHeads, s.head)
		}
	} else {
		c.readyClock = HLC{}
	}
	if c.reserveClock {
		c.reserveClock = false
		if c.reserved.Less(c.clock) {
			c.reserved = c.clock
			rd.Clock = c.reserved
		}
	}
	full := c.tick >= c.nextFull
	if full {
		c.nextFull = c.tick + uint64(c.cfg.FullAckInterval)
	}

	// 4. Messages: session control first, so that a Positions answer
	// precedes data and a Hello precedes the new session's data.
	rd.Messages, c.pendingMsgs = c.pendingMsgs, nil
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		c.ctrlMessage(&rd, p, hb, full)
		c.dataMessages(&rd, p)
		c.relayMessages(&rd, p)
	}
	// Whatever could be relayed was: the window is full, or nothing is due
	// until an input changes the table, the connections or the time.
	c.relayScan = false

	c.trimChanges()

	// 5. Deliveries.
	for _, s := range c.list {
		if !c.deliverable(s) {
			continue
		}
		room := uint64(c.cfg.MaxUnapplied) - (s.delivered - s.appPos)
		ents, err := c.read(s, s.delivered+1, min(s.durable, s.delivered+room), c.cfg.MaxBatchBytes)
		if err != nil {
			c.errs = append(c.errs, err)
			continue
		}
		for _, e := range ents {
			s.unapplied = append(s.unapplied, hlcAt{e.Seq, e.HLC})
		}
		rd.Deliver = append(rd.Deliver, ents...)
		s.delivered = ents[len(ents)-1].Seq
	}

	rd.Errors, c.errs = c.errs, nil
	c.assertInvariants()
	rd.MustSync = len(rd.Entries) > 0 || len(rd.Truncations) > 0 || rd.Recovery != nil || rd.Incarnation != 0 || len(rd.Acks) > 0 || len(rd.Predicates) > 0 || !rd.Clock.IsZero() ||
		(!c.cfg.LazyFrontiers && c.durableAdv > 0)
	return rd
}

func (c *Core) ctrlMessage(rd *Ready, p *peer, hb, full bool) {
	full = full || p.needFull
	if !hb && !full && !c.ctrlDue(p) {
		return
	}
	m := Message{Type: MsgAcks, From: c.cfg.Site, To: p.name, Schema: c.schemaFP, Session: c.incarnation}
	if hb {
		m.Clock = c.readyClock
		m.Heads = make([]Position, 0, len(c.own))
		for _, s := range c.own {
			if s.head > 0 {
				m.Heads = append(m.Heads, Position{Stream: s.id, Seq: s.head, HLC: s.headHLC})
			}
		}
	}
	cell := func(s *stream, l int) AckCell {
		i := l*c.n + c.self
		return AckCell{Stream: s.id, Site: c.cfg.Site, Level: l, Seq: s.acks[i], HLC: s.hlcs[i]}
	}
	if full {
		for _, s := range c.list {
			for l := 0; l < c.nlevels; l++ {
				if s.acks[l*c.n+c.self] != 0 {
					m.Cells = append(m.Cells, cell(s, l))
				}
			}
		}
	} else {
		i, _ := slices.BinarySearchFunc(c.changes, p.ackSentVer+1, func(ch change, v uint64) int { return cmp.Compare(ch.ver, v) })
		for _, ch := range c.changes[i:] {
			// A cell changed again later is sent at its latest change.
			if ch.s.cellVer[ch.level] == ch.ver {
				m.Cells = append(m.Cells, cell(ch.s, ch.level))
			}
		}
	}
	p.ackSentVer = c.rowVer
	p.lastCtrl = c.tick
	p.sentCtrl = true
	p.needFull = false
	rd.Messages = append(rd.Messages, m)
}

// trimChanges forgets changes every peer was sent. Every peer is sent
// deltas, connected or not, so the log stays as short as AckInterval
// allows.
func (c *Core) trimChanges() {
	low := c.rowVer
	for _, p := range c.peers {
		if p != nil {
			low = min(low, p.ackSentVer)
		}
	}
	k := 0
	for k < len(c.changes) && c.changes[k].ver <= low {
		k++
	}
	if k > 0 {
		c.changes = c.changes[k:]
		if len(c.changes) < cap(c.changes)/4 {
			c.changes = append([]change(nil), c.changes...)
		}
	}
}

// dataMessages sends what p lacks of our persisted entries, in batches of at
// most MaxBatchBytes, while less than the lane's window is unacknowledged
// (MaxInflightBytes, MaxBulkInflightBytes): each lane in messages of its own.
func (c *Core) dataMessages(rd *Ready, p *peer) {
	if !p.established || len(c.own) == 0 {
		return
	}
	p.releaseInflight(c.n, c.tick)
	for l := range p.lanes {
		c.laneMessages(rd, p, l)
	}
}

func (c *Core) laneMessages(rd *Ready, p *peer, l int) {
	ln := &p.lanes[l]
	window := c.window(l)
	for !ln.windowFull {
		m := Message{Type: MsgData, From: c.cfg.Site, To: p.name, Session: p.session, Bulk: l == laneBulk}
		bytes := 0
		for k := range c.own {
			s := c.own[(ln.rr+k)%len(c.own)]
			if s.lane != l || c.routedAway(s, p) {
				continue
			}
			nx := s.next[p.idx]
			if nx != 0 && nx <= s.floor {
				c.tellTruncated(p, s)
				continue
			}
			for nx != 0 && nx <= s.durable && bytes < c.cfg.MaxBatchBytes && !ln.windowFull {
				ents, err := c.read(s, nx, s.durable, c.cfg.MaxBatchBytes-bytes)
				if err != nil {
					c.errs = append(c.errs, err)
					break
				}
				for _, e := range ents {
					// An entry larger than the batch or the window goes
					// alone, when nothing else is in the batch or in flight.
					sz := entrySize(&e)
					if bytes > 0 && bytes+sz > c.cfg.MaxBatchBytes {
						break
					}
					if ln.inflightBytes+bytes > 0 && ln.inflightBytes+bytes+sz > window {
						ln.windowFull = true
						break
					}
					m.Entries = append(m.Entries, e)
					ln.inflight = append(ln.inflight, flight{s, e.Seq, sz})
					bytes += sz
					nx = e.Seq + 1
				}
				if nx <= ents[len(ents)-1].Seq {
					break // the batch or the window is full
				}
			}
			s.next[p.idx] = nx
		}
		if len(m.Entries) == 0 {
			break
		}
		ln.inflightBytes += bytes
		rd.Messages = append(rd.Messages, m)
	}
	ln.rr++
}

// window is the bytes-in-flight bound of a lane.
func (c *Core) window(l int) int {
	if l == laneBulk {
		return c.cfg.MaxBulkInflightBytes
	}
	return c.cfg.MaxInflightBytes
}

// Advance tells the core that the last Ready was handled: its writes are
// durable, its messages sent, its deliveries handed over; or, for a driver
// that pipelines (see the package documentation), that its writes are
// applied in order and readable through Storage, and will be released only
// once durable. Only then may the core drop persisted entries from memory
// and read them back from Storage.
func (c *Core) Advance() {
	if !c.awaiting {
		return
	}
	c.awaiting = false
	if !c.readyClock.IsZero() {
		c.originT[c.self] = c.readyClock
		for i, h := range c.readyHeads {
			c.own[i].hbHead = h
		}
		c.originDirty[c.self] = true
		c.timeDirty = true
	}
	for _, s := range c.list {
		low := s.delivered + 1
		if s.own {
			for _, p := range c.peers {
				if p != nil && p.established && s.next[p.idx] != 0 {
					low = min(low, s.next[p.idx])
				}
			}
		}
		s.trim(low, c.cfg.MaxMemoryBytes)
	}
	c.assertInvariants()
}
