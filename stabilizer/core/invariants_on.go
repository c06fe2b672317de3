//go:build invariants

package core

import (
	"fmt"
	"slices"
)

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
			r := s.released(p.idx)
			if r.version > p.version {
				panic(fmt.Sprintf("core: invariant: %s release of %q by version %d beyond the predicate's %d", s.id, name, r.version, p.version))
			}
			if r != (release{}) && !p.inScope(s) {
				panic(fmt.Sprintf("core: invariant: %s release of %q, which is not scoped to it: %+v", s.id, name, r))
			}
		}
		if s.scope == nil || s.scope.name != s.id.Name || c.scopes[s.id.Name] != s.scope || !slices.Contains(s.scope.streams, s) {
			panic(fmt.Sprintf("core: invariant: %s is not in the scope list of its name", s.id))
		}
	}
	c.assertScopes()
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
		for l := range p.lanes {
			ln := &p.lanes[l]
			bytes := 0
			for _, f := range ln.inflight {
				bytes += f.bytes
				if f.s.lane != l {
					panic(fmt.Sprintf("core: invariant: channel to %s carries %v on lane %d, its lane is %d", p.name, f.s.id, l, f.s.lane))
				}
			}
			if bytes != ln.inflightBytes {
				panic(fmt.Sprintf("core: invariant: channel to %s lane %d counts %d bytes in flight, holds %d", p.name, l, ln.inflightBytes, bytes))
			}
			if len(ln.inflight) > 1 && bytes > c.window(l) {
				panic(fmt.Sprintf("core: invariant: channel to %s lane %d has %d bytes in flight, limit %d", p.name, l, bytes, c.window(l)))
			}
		}
		if !p.established && p.inflight() {
			panic(fmt.Sprintf("core: invariant: channel to %s not established with data in flight", p.name))
		}
	}
}

// assertScopes checks the scope lists against the predicates and the
// cached stable-time inputs against a fresh computation.
func (c *Core) assertScopes() {
	if !slices.IsSortedFunc(c.every, byName) {
		panic("core: invariant: every is not sorted by name")
	}
	for _, p := range c.every {
		if !p.every || c.preds[p.name] != p || len(p.lists) > 0 {
			panic(fmt.Sprintf("core: invariant: %q in every: every=%v lists=%d", p.name, p.every, len(p.lists)))
		}
	}
	for name, l := range c.scopes {
		if l.name != name || (len(l.streams) == 0 && len(l.preds) == 0) {
			panic(fmt.Sprintf("core: invariant: scope list %q holds %d streams and %d predicates", name, len(l.streams), len(l.preds)))
		}
		if !slices.IsSortedFunc(l.preds, byName) {
			panic(fmt.Sprintf("core: invariant: scope list %q is not sorted", name))
		}
		for _, p := range l.preds {
			if c.preds[p.name] != p || p.every || !p.transient || !slices.Contains(p.lists, l) {
				panic(fmt.Sprintf("core: invariant: %q in the scope list of %q: every=%v transient=%v", p.name, name, p.every, p.transient))
			}
		}
	}
	every := 0
	for _, name := range c.predNames {
		p := c.preds[name]
		if p.every {
			every++
		}
		if !p.transient && !p.every {
			panic(fmt.Sprintf("core: invariant: named predicate %q is not evaluated on every stream", name))
		}
		for _, l := range p.lists {
			if c.scopes[l.name] != l || !slices.Contains(l.preds, p) {
				panic(fmt.Sprintf("core: invariant: %q scoped to %q, whose list does not hold it", name, l.name))
			}
		}
	}
	if every != len(c.every) {
		panic(fmt.Sprintf("core: invariant: %d predicates evaluated everywhere, every holds %d", every, len(c.every)))
	}
	// What evalStableTimes cached for an origin it calls clean must be what
	// it would compute now.
	for o := range c.n {
		if c.originDirty[o] || !c.stableDone {
			continue
		}
		fresh := c.originTimes(o, nil)
		if len(fresh) != len(c.originTime[o]) {
			panic(fmt.Sprintf("core: invariant: origin %d caches %d times for %d predicates", o, len(c.originTime[o]), len(fresh)))
		}
		for k, t := range fresh {
			if t != c.originTime[o][k] {
				panic(fmt.Sprintf("core: invariant: origin %d caches time %s for %q, now %s", o, c.originTime[o][k], c.every[k].name, t))
			}
			if u := c.originTimeOf(o, c.every[k]); u != t {
				panic(fmt.Sprintf("core: invariant: origin %d time for %q: %s over all, %s alone", o, c.every[k].name, t, u))
			}
		}
	}
}

// inScope reports whether p is evaluated on s.
func (p *pred) inScope(s *stream) bool {
	return p.every || slices.Contains(p.lists, s.scope)
}
