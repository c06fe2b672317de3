package core

import "github.com/stabilizer/stabilizer/frontier"

// Routes: a bulk stream with a stripe (Config.BulkStripes) goes from its
// origin to one peer only, its first hop, which relays it to the others as
// it persists it; the stripes of one origin have different first hops. So
// each receiver is fed over every link into it, from the origin and from
// the other receivers, and each entry still reaches each site once. See
// Routes in the package documentation for the fallback and why a seq
// still names one message.

// routeState is what an origin knows of one peer's progress on one of its
// routed streams, to send it the stream directly when its first hop does
// not feed it.
type routeState struct {
	cell uint64 // the peer's persisted cell when it last rose
	fed  uint64 // the tick it last rose, or the peer lacked nothing
	// direct: the first hop did not feed the peer for RelayDelay ticks;
	// the origin sends the stream itself until the peer lacks nothing.
	direct bool
}

// firstHop returns the site index of the peer a stream of origin o with
// stripe i goes to first: the (i mod m)-th of o's m peers in schema
// order; -1 when the stream is not routed (no stripe, not bulk, fewer
// than two peers, or relays off).
func (c *Core) firstHop(name string, o, lane int) int {
	i, ok := c.cfg.BulkStripes[name]
	if !ok || lane != laneBulk || c.n < 3 || !c.relayEnabled() {
		return -1
	}
	k := i % (c.n - 1)
	for j := range c.n {
		if j == o {
			continue
		}
		if k == 0 {
			return j
		}
		k--
	}
	return -1
}

// routedAway reports whether own stream s reaches p through its first hop
// rather than from this site.
func (c *Core) routedAway(s *stream, p *peer) bool {
	return s.hop >= 0 && p.idx != s.hop && !s.route[p.idx].direct
}

// checkRoutes, every tick, sends an own routed stream directly to a peer
// whose persisted cell has not risen for RelayDelay ticks while it lacks
// entries this site persisted (its first hop is down, cut off from it, or
// slow), and back through the first hop once the peer lacks nothing.
func (c *Core) checkRoutes() {
	for _, s := range c.own {
		if s.hop < 0 {
			continue
		}
		for _, p := range c.peers {
			if p == nil || p.idx == s.hop {
				continue
			}
			r := &s.route[p.idx]
			cell := s.acks[frontier.Persisted*c.n+p.idx]
			switch {
			case cell >= s.durable:
				r.cell, r.fed, r.direct = cell, c.tick, false
			case cell > r.cell:
				r.cell, r.fed = cell, c.tick
			case !r.direct && c.tick-r.fed >= c.routeDelay(s):
				r.direct = true
				if s.next[p.idx] != 0 {
					s.next[p.idx] = max(s.next[p.idx], cell+1)
				}
			}
		}
	}
}

// routeDelay is how many ticks a peer may go unfed through s's first hop
// before the origin sends s to it itself: RelayDelay while the hop is cut
// off from this site, four times that while it is connected. A connected
// hop on a busy host stalls for hundreds of milliseconds now and then, and
// going direct then sends the peer what the hop is about to relay, so
// the same bytes cross two links (measured: 5% more on the wire for a
// checkpoint with the shorter delay).
func (c *Core) routeDelay(s *stream) uint64 {
	d := uint64(c.cfg.RelayDelay)
	if h := c.peers[s.hop]; h != nil && h.established {
		return 4 * d
	}
	return d
}

// hopRelayDue reports whether this site, as the first hop of s, relays it
// to p now: s is another origin's routed stream and p lacks what this site
// persisted of it. Once the origin is down the relays of package relay.go
// take over, which may pick another holder.
func (c *Core) hopRelayDue(s *stream, p *peer, from uint64) bool {
	return s.hop == c.self && p.idx != s.origin && !c.peers[s.origin].relaying && from <= s.durable && from > s.floor
}
