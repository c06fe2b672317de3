package core

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stabilizer/stabilizer/frontier"
)

// errTruncated: an entry asked for is below the stream's floor, gone from
// this site's log. It is never a storage fault: the caller tells the peer
// (MsgTruncated) or skips.
var errTruncated = errors.New("core: truncated")

// ErrSnapshotTooOld: a snapshot's position of a stream is below what this
// site dropped of it, so the entries between could not be applied again.
var ErrSnapshotTooOld = errors.New("core: snapshot older than the log it would continue")

// Truncation is a stream's prefix the driver drops from the log: every
// entry up to Seq. Skip is set when a snapshot moved the stream past its
// head (InstallSnapshot): the driver then moves the head to Seq as well,
// and the stream continues at Seq+1.
type Truncation struct {
	Stream StreamID
	Seq    uint64
	HLC    HLC
	Skip   bool
}

// Truncate drops the entries of stream id up to upto from this site's log:
// at most what the local application applied and, unless beyondPeers, what
// every other site persisted, so that no peer ever needs them from here.
// With beyondPeers a peer that lacks them is told so (MsgTruncated) and
// must catch up from a snapshot of the application's state
// (InstallSnapshot); the caller promises one can be had. It returns the
// stream's floor afterwards: everything at or below it is gone. The
// truncation reaches the driver in the next Ready (Ready.Truncations).
func (c *Core) Truncate(id StreamID, upto uint64, beyondPeers bool) (uint64, error) {
	s, ok := c.streams[id]
	if !ok {
		return 0, fmt.Errorf("core: truncate %s: %w", id, ErrUnknownStream)
	}
	upto = min(upto, s.appPos, s.durable)
	if !beyondPeers {
		upto = min(upto, c.peersHold(s))
	}
	if upto <= s.floor {
		return s.floor, nil
	}
	c.setFloor(s, upto, c.hlcAt(s, upto), false)
	return s.floor, nil
}

// peersHold is the highest seq of s every other site persisted.
func (c *Core) peersHold(s *stream) uint64 {
	low := s.head
	for i := range c.n {
		if i != c.self {
			low = min(low, s.acks[frontier.Persisted*c.n+i])
		}
	}
	return low
}

// setFloor records a new floor of s and drops what memory holds below it.
func (c *Core) setFloor(s *stream, seq uint64, hlc HLC, skip bool) {
	s.floor, s.floorHLC = seq, hlc
	c.truncs = append(c.truncs, Truncation{Stream: s.id, Seq: seq, HLC: hlc, Skip: skip})
	k := 0
	for k < len(s.mem) && s.mem[k].Seq <= seq {
		s.memBytes -= entrySize(&s.mem[k])
		k++
	}
	clear(s.mem[:k])
	s.mem = append([]Entry(nil), s.mem[k:]...)
}

// lostAt is what peers hold (held, by site index) and remember of this
// site's own row (seen) of one of its own streams. held is per peer so
// that a peer wiped in turn stops counting.
type lostAt struct {
	held []uint64
	seen uint64
}

func (l lostAt) maxHeld() uint64 {
	var m uint64
	for _, v := range l.held {
		m = max(m, v)
	}
	return m
}

func (l lostAt) top() uint64 { return max(l.maxHeld(), l.seen) }

// noteLost records that peer (a site index) holds own stream name up to
// seq, or, with peer -1, that a peer saw this site persist it up to seq.
func (c *Core) noteLost(name string, seq uint64, peer int) {
	if seq <= c.headOf(StreamID{Origin: c.cfg.Site, Name: name}) {
		return
	}
	if c.lost == nil {
		c.lost = map[string]lostAt{}
	}
	l := c.lost[name]
	if l.held == nil {
		l.held = make([]uint64, c.n)
	}
	switch {
	case peer >= 0 && seq > l.held[peer]:
		l.held[peer] = seq
	case peer < 0 && seq > l.seen:
		l.seen = seq
	default:
		return
	}
	c.lost[name] = l
	c.recoveryDirty = true
}

// forgetHeld drops what a wiped peer was said to hold: nobody can send it
// any more. Those seqs were given out all the same, so they count as seen:
// they are abandoned, never given to other messages (a frontier may have
// been released over them).
func (c *Core) forgetHeld(peer int) {
	for name, l := range c.lost {
		if l.held != nil && l.held[peer] > 0 {
			l.seen = max(l.seen, l.held[peer])
			l.held[peer] = 0
			c.lost[name] = l
			c.recoveryDirty = true
		}
	}
}

func (c *Core) headOf(id StreamID) uint64 {
	if s, ok := c.streams[id]; ok {
		return s.head
	}
	return 0
}

// Lost lists this site's own streams that peers hold beyond its log: the
// site lost its store, and must install a snapshot of the streams'
// application (its state and the streams' positions) that reaches Seq, the
// highest seq a peer holds, before it appends to them again. Seqs that
// its earlier incarnation gave out and no peer holds are abandoned once
// every peer was heard (the stream skips them).
func (c *Core) Lost() []Position {
	var out []Position
	for _, name := range c.lostNames() {
		id := StreamID{Origin: c.cfg.Site, Name: name}
		if h := c.lost[name].maxHeld(); h > c.headOf(id) {
			out = append(out, Position{Stream: id, Seq: h})
		}
	}
	return out
}

func (c *Core) lostNames() []string {
	var names []string
	for name, l := range c.lost {
		if l.top() > c.headOf(StreamID{Origin: c.cfg.Site, Name: name}) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func (c *Core) recovery() *Recovery {
	r := &Recovery{Joining: c.joining}
	for _, name := range c.lostNames() {
		id := StreamID{Origin: c.cfg.Site, Name: name}
		l := c.lost[name]
		for i, v := range l.held {
			if v > c.headOf(id) {
				r.Held = append(r.Held, AckCell{Stream: id, Site: c.cfg.Schema.Sites[i], Seq: v})
			}
		}
		if l.seen > c.headOf(id) {
			r.Seen = append(r.Seen, Position{Stream: id, Seq: l.seen})
		}
	}
	for _, s := range c.own {
		if s.void.To > 0 {
			r.Void = append(r.Void, s.void)
		}
	}
	if len(r.Held) > 0 {
		for _, p := range c.peers {
			if p != nil && p.incarnation != 0 {
				r.Peers = append(r.Peers, PeerIncarnation{Site: p.name, Incarnation: p.incarnation})
			}
		}
	}
	return r
}

// abandonLost gives up the seqs of own streams that this site's earlier
// incarnation persisted and no peer holds: once every peer was heard and
// the site's log reaches what peers hold, nobody can bring them back, so
// the stream skips them (a Truncation with Skip) rather than give their
// seqs to other messages. Peers that released them under some predicate
// released entries that only this site held, and the wipe took them.
func (c *Core) abandonLost() {
	if c.joining {
		return
	}
	for _, name := range c.lostNames() {
		l := c.lost[name]
		id := StreamID{Origin: c.cfg.Site, Name: name}
		if l.maxHeld() > c.headOf(id) {
			continue // a snapshot first
		}
		s, ok := c.streams[id]
		if !ok {
			s = c.newStream(id, c.self)
		}
		s.void = VoidRange{Stream: id, From: s.head + 1, To: l.seen}
		c.install(s, Position{Stream: id, Seq: l.seen, HLC: c.now()})
		c.recoveryDirty = true
	}
}

// checkIncarnation forgets what p's row said when p's store is not the one
// it said it from: p was wiped, and holds none of it any more. Frontiers
// released on it stay released; relays and the table start over.
func (c *Core) checkIncarnation(p *peer, inc uint64) {
	if inc == 0 || inc == p.incarnation {
		return
	}
	old := p.incarnation
	p.incarnation = inc
	if old == 0 {
		return
	}
	c.forgetHeld(p.idx)
	for _, s := range c.list {
		for l := range c.nlevels {
			s.acks[l*c.n+p.idx], s.hlcs[l*c.n+p.idx] = 0, HLC{}
		}
		s.dirty = true
	}
	p.relayEpoch++
	c.timeDirty = true
}

// waitsSnapshot reports whether p lacks entries of an own stream that this
// site dropped.
func (c *Core) waitsSnapshot(p *peer) bool {
	for _, s := range c.own {
		if nx := s.next[p.idx]; nx != 0 && nx <= s.floor {
			return true
		}
	}
	return false
}

func (c *Core) hbDue() bool { return c.tick >= c.nextHB && !c.joining && !c.hasLost() }

func (c *Core) hasLost() bool {
	for name, l := range c.lost {
		if l.top() > c.headOf(StreamID{Origin: c.cfg.Site, Name: name}) {
			return true
		}
	}
	return false
}

// SkipLost gives up this site's copy of own stream id's entries that
// peers hold and it lost, for an application that cannot take a snapshot
// of its state: the stream skips to the highest seq a peer holds (a
// Truncation with Skip), so that its next entries take new seqs. The
// peers keep theirs; this site's application goes on without them.
func (c *Core) SkipLost(id StreamID) error {
	if id.Origin != c.cfg.Site {
		return fmt.Errorf("core: skip lost %s: %w: not this site's stream", id, ErrUnknownStream)
	}
	l, ok := c.lost[id.Name]
	s := c.streams[id]
	if !ok || s == nil || l.maxHeld() <= s.head {
		return nil
	}
	c.install(s, Position{Stream: id, Seq: l.maxHeld(), HLC: c.now()})
	c.recoveryDirty = true
	return nil
}

// SkipBehind gives up the entries of stream id that this site lacks and
// its holders dropped, for an application that cannot take a snapshot of
// its state: the stream skips to the floor it was told of, and delivery
// goes on after it. The application never sees what was skipped.
func (c *Core) SkipBehind(id StreamID) error {
	s, ok := c.streams[id]
	if !ok {
		return fmt.Errorf("core: skip behind %s: %w", id, ErrUnknownStream)
	}
	if s.behind > s.head {
		c.install(s, Position{Stream: id, Seq: s.behind, HLC: s.behindHLC})
	}
	return nil
}

// checkJoined ends joining once every peer's row was heard.
func (c *Core) checkJoined() {
	if !c.joining {
		return
	}
	for _, p := range c.peers {
		if p != nil && (!p.heard || !p.established) {
			return
		}
	}
	c.joining = false
	c.recoveryDirty = true
}

// Joining reports whether this site, started with an empty store, is still
// waiting to hear every peer's row before it appends (ErrJoining): only
// then does it know whether it lost its own streams (Lost).
func (c *Core) Joining() bool { return c.joining }

// Join ends joining without hearing every peer, for an operator who knows
// the site is new or accepts the risk: if its store was wiped while an
// unheard peer held entries of its streams, their seqs are given again.
func (c *Core) Join() {
	if c.joining {
		c.joining = false
		c.recoveryDirty = true
	}
}

// Floor returns the highest seq of stream id dropped from this site's log
// (0: none) and the head.
func (c *Core) Floor(id StreamID) (floor, head uint64, err error) {
	s, ok := c.streams[id]
	if !ok {
		return 0, 0, fmt.Errorf("core: floor %s: %w", id, ErrUnknownStream)
	}
	return s.floor, s.head, nil
}

// tellTruncated answers a peer that asked for entries of our stream s below
// its floor, once per session: the channel holds s back until the peer
// states new positions, after it installed a snapshot. A channel that
// waits so counts as stuck (waitsSnapshot), so that a lost answer is sent
// again in the next session.
func (c *Core) tellTruncated(p *peer, s *stream) {
	if s.told == nil {
		s.told = make([]uint64, c.n)
	}
	if s.told[p.idx] == p.session {
		return
	}
	s.told[p.idx] = p.session
	m := Message{
		Type: MsgTruncated, From: c.cfg.Site, To: p.name, Session: p.session, Version: ProtocolVersion, Schema: c.schemaFP,
		Positions: []Position{{Stream: s.id, Seq: s.floor, HLC: s.floorHLC}},
	}
	if s.void.To == s.floor {
		// Heads: from where the dropped seqs are void.
		m.Heads = []Position{{Stream: s.id, Seq: s.void.From}}
	}
	c.pendingMsgs = append(c.pendingMsgs, m)
}

// stepTruncated takes a peer's word that it dropped entries we lack, the
// origin's or a relay's: the streams are behind until a snapshot brings
// them past the floor.
func (c *Core) stepTruncated(p *peer, m Message) error {
	for _, q := range m.Positions {
		if q.Stream.Origin == c.cfg.Site {
			return fmt.Errorf("core: truncated from %s: %w: stream %s is ours", p.name, ErrBadMessage, q.Stream)
		}
		s, err := c.lookup(q.Stream)
		if err != nil {
			return fmt.Errorf("core: truncated from %s: %w", p.name, err)
		}
		if q.Seq <= s.head {
			continue
		}
		if voidFrom(m.Heads, s.id) <= s.head+1 {
			// All we lack of it names no message: skip it.
			c.install(s, q)
			continue
		}
		if q.Seq > s.behind {
			s.behind, s.behindHLC = q.Seq, q.HLC
			c.behind = append(c.behind, Position{Stream: s.id, Seq: q.Seq, HLC: q.HLC})
		}
	}
	return nil
}

// voidFrom returns where the void seqs of id begin in a MsgTruncated's
// Heads; beyond every seq when it names none.
func voidFrom(heads []Position, id StreamID) uint64 {
	for _, h := range heads {
		if h.Stream == id && h.Seq > 0 {
			return h.Seq
		}
	}
	return ^uint64(0)
}

// Behind lists the streams this site lacks entries of that their origins
// dropped: only a snapshot can bring them up to date. Seq is the origin's
// floor as last heard.
func (c *Core) Behind() []Position {
	var out []Position
	for _, s := range c.list {
		if s.behind > s.head {
			out = append(out, Position{Stream: s.id, Seq: s.behind})
		}
	}
	return out
}

// InstallSnapshot moves streams to the positions of a snapshot of their
// application's state that the driver has just made the application's own:
// for each listed stream the application now holds the effects of its
// entries 1..Seq, and of none after, as the snapshot's source did. State
// transfer is per stream (per origin): an application's state of one
// origin's stream can be replaced without touching the others', which is
// what lets two sites that each dropped what the other lacks both catch
// up. A stream whose log ends below Seq continues at Seq+1 (its head
// moves: Truncation.Skip); one whose log holds Seq is delivered again from
// Seq+1. Check with CheckSnapshot before the application's state is
// replaced: a snapshot that needs entries this site dropped is refused with
// ErrSnapshotTooOld, and nothing changes.
//
// clock is the snapshot source's clock (Core.Clock when it took the
// snapshot): a wiped site resumes its own streams above every time its
// earlier incarnation exposed, as far as the source heard of them.
//
// The driver must have stopped the streams' deliveries: entries delivered
// and not applied are forgotten and delivered again.
func (c *Core) InstallSnapshot(positions []Position, clock HLC) error {
	if err := c.CheckSnapshot(positions); err != nil {
		return err
	}
	c.observe(clock)
	c.reserveClock = true
	if len(c.lost) > 0 {
		c.recoveryDirty = true // Lost may shrink once the heads moved
	}
	for _, q := range positions {
		s, ok := c.streams[q.Stream]
		if !ok {
			o, _ := c.cfg.Schema.SiteIndex(q.Stream.Origin)
			s = c.newStream(q.Stream, o)
		}
		c.install(s, q)
	}
	for _, p := range c.peers {
		if p != nil && p.connected {
			// Our channel starts over from what each peer holds, and each
			// origin hears where we now stand.
			c.newSession(p)
			if p.helloSession != 0 {
				c.answerHello(p)
			}
		}
	}
	return nil
}

// CheckSnapshot reports whether InstallSnapshot would take the positions.
func (c *Core) CheckSnapshot(positions []Position) error {
	for _, q := range positions {
		if _, ok := c.cfg.Schema.SiteIndex(q.Stream.Origin); !ok {
			return fmt.Errorf("core: install snapshot: stream %s: %w", q.Stream, ErrUnknownPeer)
		}
		s := c.streams[q.Stream]
		if s != nil && q.Seq <= s.head && q.Seq < s.floor {
			return fmt.Errorf("core: install snapshot: %w: %s at %d, but this site dropped its entries up to %d",
				ErrSnapshotTooOld, s.id, q.Seq, s.floor)
		}
		if s != nil && q.Seq <= s.head && q.Seq > s.durable {
			// Delivered would pass durable: wait for the bulk store.
			return fmt.Errorf("core: install snapshot: %w: %s at %d, but its bulk entries are durable here only up to %d",
				ErrNotDurable, s.id, q.Seq, s.durable)
		}
	}
	return nil
}

func (c *Core) install(s *stream, q Position) {
	s.unapplied = nil
	if q.Seq > s.head {
		s.mem, s.memBytes = nil, 0
		s.head, s.written, s.durable, s.headHLC = q.Seq, q.Seq, q.Seq, q.HLC
		c.observe(q.HLC)
		c.setFloor(s, q.Seq, q.HLC, true)
		c.setOwn(s, frontier.Received, q.Seq, q.HLC)
		c.setOwn(s, frontier.Persisted, q.Seq, q.HLC)
	}
	// The application's state is now at q.Seq, below what it applied
	// before, maybe: it is delivered again from there. The applied cell
	// never goes back; it is reached again.
	s.appPos, s.delivered = q.Seq, q.Seq
	c.setOwn(s, frontier.Applied, q.Seq, q.HLC)
	s.dirty = true
}
