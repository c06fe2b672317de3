package core

import (
	"fmt"
	"slices"
)

// stream is one stream's state at this site: the entries held in memory, how
// far they are persisted and delivered, its rows of the ack table and its
// released frontiers.
type stream struct {
	id     StreamID
	origin int
	own    bool
	lane   int // laneBulk for Config.BulkStreams, else laneData
	// hop is the site index of the stream's first hop when it is routed
	// (Config.BulkStripes, route.go), else -1; route is, for an own
	// routed stream, each peer's progress.
	hop   int
	route []routeState

	// mem holds entries mem[0].Seq..head contiguously. Every entry above
	// durable is in mem; persisted ones are trimmed (see trim) and read back
	// through Storage when needed.
	mem      []Entry
	memBytes int

	head    uint64 // highest seq held: appended (own) or received in order
	headHLC HLC
	written uint64 // highest seq handed to the driver in Ready.Entries or BulkEntries
	durable uint64 // highest seq the driver confirmed persisted (Advance, BulkPersisted)
	// floor is the highest seq dropped from the log (Truncate,
	// InstallSnapshot); floorHLC its time. behind is an origin's floor
	// above head: entries only a snapshot can replace.
	floor     uint64
	floorHLC  HLC
	behind    uint64
	behindHLC HLC
	// void is an own stream's last abandoned range (abandonLost): seqs
	// that name no message, which peers skip without a snapshot.
	void VoidRange
	// told is, per peer, the session of our channel in which the peer was
	// told the stream is truncated past what it holds (MsgTruncated).
	told []uint64

	delivered uint64  // highest seq handed to the application
	appPos    uint64  // highest seq the application reported applied
	unapplied []hlcAt // delivered, not yet applied: their HLCs, for the applied ack

	// acks and hlcs are the stream's ack table, flat as frontier.Eval wants
	// it: acks[level*sites+site]; hlcs holds each cell's message HLC.
	acks []uint64
	hlcs []HLC
	// cellVer is the row version at which each level of this site's own
	// row last changed; Acks deltas send cells newer than what a peer got.
	cellVer []uint64
	// queued marks own-row levels already listed for the next Ready.Acks.
	queued []bool

	// next is, for an own stream, the next seq to send to each site; 0
	// before the site's Positions told us where to resume.
	next []uint64

	// hbHead is the stream's head at its origin's latest clock heartbeat.
	hbHead uint64

	// relay is, for another origin's stream this site relayed, the cursor
	// to each site (relay.go); nil until then.
	relay []relayCursor

	rel   []release // by predicate index (pred.idx), grown on demand
	dirty bool      // acks changed since frontiers were evaluated
	// scope is the list of the stream's name: the transient predicates
	// evaluated on it besides Core.every.
	scope *scopeList

	// resyncSession/resyncHead remember the last resend request sent for
	// this stream, so that a burst of out-of-order data asks only once.
	resyncSession uint64
	resyncHead    uint64
}

type hlcAt struct {
	seq uint64
	hlc HLC
}

// rel returns the release of predicate index i, growing the slice.
func (s *stream) release(i int) *release {
	if i >= len(s.rel) {
		s.rel = append(s.rel, make([]release, i+1-len(s.rel))...)
	}
	return &s.rel[i]
}

// released returns the release of predicate index i, zero if none.
func (s *stream) released(i int) release {
	if i < len(s.rel) {
		return s.rel[i]
	}
	return release{}
}

// release is a released frontier: seq, the predicate version that released
// it and the time of message seq.
type release struct {
	seq     uint64
	version uint64
	hlc     HLC
}

func (c *Core) newStream(id StreamID, origin int) *stream {
	s := &stream{
		id:      id,
		origin:  origin,
		own:     origin == c.self,
		acks:    make([]uint64, c.nlevels*c.n),
		hlcs:    make([]HLC, c.nlevels*c.n),
		cellVer: make([]uint64, c.nlevels),
		queued:  make([]bool, c.nlevels),
		dirty:   true,
	}
	if slices.Contains(c.cfg.BulkStreams, id.Name) {
		s.lane = laneBulk
	}
	s.hop = c.firstHop(id.Name, origin, s.lane)
	switch {
	case s.hop >= 0 && s.own:
		s.route = make([]routeState, c.n)
		for i := range s.route {
			s.route[i].fed = c.tick
		}
	case s.hop == c.self:
		c.hops = append(c.hops, s)
	}
	s.scope = c.scopeList(id.Name)
	s.scope.streams = append(s.scope.streams, s)
	c.originDirty[origin] = true
	if s.own {
		s.next = make([]uint64, c.n)
		for _, p := range c.peers {
			// A stream begun now was never sent to anyone: established
			// channels carry it from its first seq.
			if p != nil && p.established {
				s.next[p.idx] = 1
			}
		}
		c.own = append(c.own, s)
	}
	c.streams[id] = s
	c.list = append(c.list, s)
	c.byOrigin[origin] = append(c.byOrigin[origin], s)
	return s
}

// lookup returns the stream, creating a remote one on first mention. Own
// streams come into being only by Append or restore: a peer naming an own
// stream we do not have is answered with nothing, not with a fresh stream.
func (c *Core) lookup(id StreamID) (*stream, error) {
	if s, ok := c.streams[id]; ok {
		return s, nil
	}
	o, ok := c.cfg.Schema.SiteIndex(id.Origin)
	if !ok {
		return nil, fmt.Errorf("core: stream %s: origin %q: %w", id, id.Origin, ErrUnknownPeer)
	}
	if err := checkStreamName(id.Name); err != nil {
		return nil, err
	}
	if o == c.self {
		return nil, fmt.Errorf("core: stream %s: %w", id, ErrUnknownStream)
	}
	return c.newStream(id, o), nil
}

func checkStreamName(name string) error {
	if name == "" || len(name) > MaxStreamName {
		return fmt.Errorf("%w: %q (1..%d bytes)", ErrBadStreamName, name, MaxStreamName)
	}
	return nil
}

func (s *stream) memFirst() uint64 {
	if len(s.mem) > 0 {
		return s.mem[0].Seq
	}
	return s.head + 1
}

func (s *stream) push(e Entry) {
	s.mem = append(s.mem, e)
	s.memBytes += entrySize(&e)
	s.head = e.Seq
	s.headHLC = e.HLC
}

// memHLC returns the HLC of entry seq if it is in memory.
func (s *stream) memHLC(seq uint64) (HLC, bool) {
	first := s.memFirst()
	if seq < first || seq > s.head {
		return HLC{}, false
	}
	return s.mem[seq-first].HLC, true
}

// trim drops persisted entries no one needs from memory, and persisted ones
// anyone needs once the stream holds more than maxBytes: those are read
// back through Storage.
func (s *stream) trim(low uint64, maxBytes int) {
	k := 0
	bytes := s.memBytes
	for k < len(s.mem) && s.mem[k].Seq <= s.durable && (s.mem[k].Seq < low || bytes > maxBytes) {
		bytes -= entrySize(&s.mem[k])
		k++
	}
	if k == 0 {
		return
	}
	s.memBytes = bytes
	// Drop the trimmed entries' payloads now: the backing array outlives
	// them until the copy below, and with large entries (file chunks) it
	// would hold gigabytes no one can read.
	clear(s.mem[:k])
	s.mem = s.mem[k:]
	// Copy out when most of the backing array is dead, so that trimmed
	// payloads are garbage-collected.
	if len(s.mem) < cap(s.mem)/4 {
		s.mem = append([]Entry(nil), s.mem...)
	}
}

// read returns entries lo.. of s, none above hi, stopping past maxBytes but
// with at least entry lo; from memory when it is there, else from Storage.
func (c *Core) read(s *stream, lo, hi uint64, maxBytes int) ([]Entry, error) {
	if lo > hi {
		return nil, nil
	}
	if lo <= s.floor {
		return nil, fmt.Errorf("%w: %s %d, dropped up to %d", errTruncated, s.id, lo, s.floor)
	}
	first := s.memFirst()
	if lo >= first {
		i := int(lo - first)
		j, bytes := i, 0
		for j < len(s.mem) && s.mem[j].Seq <= hi && (j == i || bytes < maxBytes) {
			bytes += entrySize(&s.mem[j])
			j++
		}
		return s.mem[i:j:j], nil
	}
	top := min(hi, first-1)
	ents, err := c.cfg.Storage.Entries(s.id, lo, top, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s %d..%d: %w", ErrStorage, s.id, lo, top, err)
	}
	if len(ents) == 0 {
		return nil, fmt.Errorf("%w: read %s %d..%d: no entries", ErrStorage, s.id, lo, top)
	}
	for i := range ents {
		if ents[i].Seq != lo+uint64(i) || ents[i].Stream != s.id || ents[i].Seq > top {
			return nil, fmt.Errorf("%w: read %s %d..%d: got %s seq %d at position %d", ErrStorage, s.id, lo, top, ents[i].Stream, ents[i].Seq, i)
		}
	}
	return ents, nil
}

// hlcAt is the time of message f of s as far as this site knows: exact when
// it holds the message or any cell names it, otherwise the time of the
// highest message below f it knows, a lower bound. HLCs grow with seq
// within a stream, so any known time at or below f bounds f's from below.
func (c *Core) hlcAt(s *stream, f uint64) HLC {
	if f == 0 {
		return HLC{}
	}
	if h, ok := s.memHLC(f); ok {
		return h
	}
	var best HLC
	if s.head <= f {
		best = s.headHLC
	}
	for i, v := range s.acks {
		if v <= f {
			best = maxHLC(best, s.hlcs[i])
		}
	}
	for _, r := range s.rel {
		if r.seq > 0 && r.seq <= f {
			best = maxHLC(best, r.hlc)
		}
	}
	return best
}
