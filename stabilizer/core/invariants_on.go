//go:build invariants

package core

import "fmt"

// invariantsEnabled reports whether the invariants build tag is on; tests
// use it to say which checks ran.
const invariantsEnabled = true

// assertInvariants checks the core's internal consistency after every Ready
// and Advance. It panics: a broken invariant is a bug in this package, and
// the simulation turns the panic into a failing seed.
func (c *Core) assertInvariants() {
	for _, s := range c.list {
		if !(s.appPos <= s.delivered && s.delivered <= s.durable && s.durable <= s.written && s.written <= s.head) {
			panic(fmt.Sprintf("core: invariant: %s positions applied %d delivered %d durable %d written %d head %d",
				s.id, s.appPos, s.delivered, s.durable, s.written, s.head))
		}
		bytes := 0
		for i := range s.mem {
			if s.mem[i].Seq != s.memFirst()+uint64(i) || s.mem[i].Stream != s.id {
				panic(fmt.Sprintf("core: invariant: %s memory holds %s seq %d at %d, first %d", s.id, s.mem[i].Stream, s.mem[i].Seq, i, s.memFirst()))
			}
			bytes += entrySize(&s.mem[i])
		}
		if bytes != s.memBytes {
			panic(fmt.Sprintf("core: invariant: %s memory counts %d bytes, holds %d", s.id, s.memBytes, bytes))
		}
		if s.durable+1 < s.memFirst() && s.memFirst() <= s.head {
			panic(fmt.Sprintf("core: invariant: %s unpersisted entries above %d dropped from memory (first %d)", s.id, s.durable, s.memFirst()))
		}
		if s.written < s.head && s.memFirst() > s.written+1 {
			panic(fmt.Sprintf("core: invariant: %s unwritten entries from %d not in memory (first %d)", s.id, s.written+1, s.memFirst()))
		}
		if s.delivered-s.appPos > uint64(c.cfg.MaxUnapplied) {
			panic(fmt.Sprintf("core: invariant: %s %d delivered unapplied, limit %d", s.id, s.delivered-s.appPos, c.cfg.MaxUnapplied))
		}
		own := c.self
		for l := 0; l < c.nlevels; l++ {
			if l <= 1 && s.acks[l*c.n+own] > s.head {
				panic(fmt.Sprintf("core: invariant: %s own ack level %d = %d above head %d", s.id, l, s.acks[l*c.n+own], s.head))
			}
		}
		for _, name := range c.predNames {
			p := c.preds[name]
			if r := s.released(p.idx); r.version > p.version {
				panic(fmt.Sprintf("core: invariant: %s release of %q by version %d beyond the predicate's %d", s.id, name, r.version, p.version))
			}
		}
	}
	relaying := 0
	for _, p := range c.peers {
		if p != nil && p.relaying {
			relaying++
			if p.connected {
				panic(fmt.Sprintf("core: invariant: relaying the streams of %s, which is connected", p.name))
			}
		}
	}
	if relaying != c.relayOrigins {
		panic(fmt.Sprintf("core: invariant: %d origins relayed, %d counted", relaying, c.relayOrigins))
	}
	for _, p := range c.peers {
		if p == nil {
			continue
		}
		bytes := 0
		for _, f := range p.inflight {
			bytes += f.bytes
		}
		if bytes != p.inflightBytes {
			panic(fmt.Sprintf("core: invariant: channel to %s counts %d bytes in flight, holds %d", p.name, p.inflightBytes, bytes))
		}
		if len(p.inflight) > 1 && bytes > c.cfg.MaxInflightBytes {
			panic(fmt.Sprintf("core: invariant: channel to %s has %d bytes in flight, limit %d", p.name, bytes, c.cfg.MaxInflightBytes))
		}
		if !p.established && len(p.inflight) > 0 {
			panic(fmt.Sprintf("core: invariant: channel to %s not established with data in flight", p.name))
		}
	}
}
