package core

import (
	"fmt"
	"slices"

	"github.com/stabilizer/stabilizer/frontier"
)

// evalFrontiers evaluates the scope additions since the last Ready, then,
// on every stream whose acks changed, the predicates in its scope: those
// evaluated on every stream and those scoped to its name. The reported
// frontier is max(released, current version's value): what an earlier
// version released stays released, and a seq above it is released only by
// a version that holds for it, so no seq is released twice and no frontier
// moves back, also across predicate changes.
func (c *Core) evalFrontiers(rd *Ready) {
	if len(c.scoping) > 0 {
		rd.Scoped = make([]PredicateScope, 0, len(c.scoping))
		for _, sc := range c.scoping {
			rd.Scoped = append(rd.Scoped, PredicateScope{Predicate: sc.p.name, Stream: sc.stream})
			var streams []*stream
			switch {
			case sc.all:
				streams = c.list
			case sc.list != nil:
				streams = sc.list.streams
			}
			for _, s := range streams {
				c.evalOne(rd, s, sc.p, c.settledBelow(s))
			}
		}
		clear(c.scoping)
		c.scoping = c.scoping[:0]
	}
	for _, s := range c.list {
		if !s.dirty {
			continue
		}
		s.dirty = false
		settled := c.settledBelow(s)
		for _, p := range c.every {
			c.evalOne(rd, s, p, settled)
		}
		for _, p := range s.scope.preds {
			c.evalOne(rd, s, p, settled)
		}
	}
}

// evalOne evaluates p on s and releases what it holds for above what was
// released; settled is settledBelow(s).
func (c *Core) evalOne(rd *Ready, s *stream, p *pred, settled uint64) {
	v, err := p.compiled.Eval(s.acks, s.origin, c.self)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("core: evaluate %q version %d on %s: %w", p.name, p.version, s.id, err))
		return
	}
	r := s.release(p.idx)
	if v <= r.seq {
		return
	}
	if !p.transient {
		c.durableAdv++
	}
	adv := FrontierAdvance{Stream: s.id, Predicate: p.name, Version: p.version, From: r.seq, To: v,
		Settled: p.persistedOnly && v <= settled}
	r.seq, r.version = v, p.version
	r.hlc = c.hlcAt(s, v)
	adv.HLC = r.hlc
	rd.Frontiers = append(rd.Frontiers, adv)
	if p.every {
		// Scoped predicates' stable times are computed when asked.
		c.originDirty[s.origin] = true
		c.timeDirty = true
	}
}

// settledBelow returns the highest seq some peer persisted of s when s is
// this site's own stream, else 0: up to it every `persisted` ack is
// durable where it was made (see FrontierAdvance.Settled).
func (c *Core) settledBelow(s *stream) uint64 {
	if !s.own {
		return 0
	}
	var top uint64
	for i := range c.n {
		if i != c.self {
			top = max(top, s.acks[frontier.Persisted*c.n+i])
		}
	}
	return top
}

// timeDue reports whether stable times need recomputing: something they
// depend on changed, and they were not computed yet this tick (or a
// predicate was just scoped to every stream). Once a tick bounds the work
// to the number of streams per tick, however many Readies.
func (c *Core) timeDue() bool {
	return c.timeDirty && (c.timeForce || !c.stableDone || c.tick > c.stableTick)
}

// evalStableTimes recomputes the global stable time of every predicate
// evaluated on every stream when acks, frontiers or heartbeats changed, at
// most once per tick, and only over the origins whose streams changed.
// Scoped transient predicates cost nothing here: StableTime computes
// theirs when asked.
func (c *Core) evalStableTimes(rd *Ready) {
	if !c.timeDue() {
		return
	}
	c.timeDirty, c.timeForce = false, false
	c.stableTick, c.stableDone = c.tick, true
	for o := range c.n {
		if !c.originDirty[o] {
			continue
		}
		c.originDirty[o] = false
		c.originTime[o] = c.originTimes(o, c.originTime[o][:0])
	}
	for k, p := range c.every {
		var t HLC
		for o := range c.n {
			if ot := c.originTime[o][k]; o == 0 || ot.Less(t) {
				t = ot
			}
		}
		// A stream learnt of late may bound the time lower than an
		// earlier answer; that answer stays true, so never report less.
		if p.stable.Less(t) {
			p.stable = t
			rd.StableTimes = append(rd.StableTimes, StableTime{Predicate: p.name, Time: t})
			if !p.transient {
				c.durableAdv++
			}
		}
	}
}

// originTimes computes, per predicate of every (by position), the time up
// to which every message of origin o is behind the predicate's frontiers.
// The origin's latest heartbeat T bounds it: the origin stamps every later
// message above T, but it may have begun streams this site has not heard
// of yet, whose first messages lie just above T. Below T, a stream whose
// frontier f has not reached its head at the heartbeat bounds it by the
// time of message f.
func (c *Core) originTimes(o int, ts []HLC) []HLC {
	for range c.every {
		ts = append(ts, c.originT[o])
	}
	for _, s := range c.byOrigin[o] {
		if s.hbHead == 0 {
			continue
		}
		for k, p := range c.every {
			if r := s.released(p.idx); r.seq < s.hbHead && r.hlc.Less(ts[k]) {
				ts[k] = r.hlc
			}
		}
	}
	return ts
}

// originTime is originTimes for one predicate: over the streams of origin o
// in p's scope.
func (c *Core) originTimeOf(o int, p *pred) HLC {
	t := c.originT[o]
	lower := func(s *stream) {
		if r := s.released(p.idx); r.seq < s.hbHead && r.hlc.Less(t) {
			t = r.hlc
		}
	}
	if p.every {
		for _, s := range c.byOrigin[o] {
			lower(s)
		}
		return t
	}
	for _, l := range p.lists {
		for _, s := range l.streams {
			if s.origin == o {
				lower(s)
			}
		}
	}
	return t
}

// Frontier returns the frontier of predicate name on stream as of the last
// Ready: zero for a transient predicate on a stream outside its scope,
// where it is not evaluated.
func (c *Core) Frontier(id StreamID, name string) (FrontierState, error) {
	if _, ok := c.preds[name]; !ok {
		return FrontierState{}, fmt.Errorf("core: frontier %s: %w: %q (known: %v)", id, ErrUnknownPredicate, name, c.predNames)
	}
	s, ok := c.streams[id]
	if !ok {
		return FrontierState{}, fmt.Errorf("core: frontier %s: %w", id, ErrUnknownStream)
	}
	r := s.released(c.preds[name].idx)
	return FrontierState{Stream: id, Predicate: name, Seq: r.seq, Version: r.version, HLC: r.hlc}, nil
}

// StableTime returns the global stable time under predicate name: every
// message of a stream in the predicate's scope (every stream, for a named
// predicate), from any origin, with an HLC at or below it is behind its
// stream's frontier. For a predicate evaluated on every stream it is the
// one published as of the last Ready. For a transient predicate scoped to
// stream names it is computed now from the frontiers as of the last Ready
// and the latest heartbeats, and never goes below an earlier answer while
// the scope stays the same; adding a name may lower it (it then speaks of
// more streams). Scoped to no stream yet, it is the least heartbeat.
func (c *Core) StableTime(name string) (HLC, error) {
	p, ok := c.preds[name]
	if !ok {
		return HLC{}, fmt.Errorf("core: stable time: %w: %q (known: %v)", ErrUnknownPredicate, name, c.predNames)
	}
	if p.every {
		return p.stable, nil
	}
	var t HLC
	for o := range c.n {
		if ot := c.originTimeOf(o, p); o == 0 || ot.Less(t) {
			t = ot
		}
	}
	if p.stable.Less(t) {
		p.stable = t
	}
	return p.stable, nil
}

// Acks returns a copy of stream's ack table, flat as frontier.Eval takes it:
// acks[level*len(Schema.Sites)+site].
func (c *Core) Acks(id StreamID) ([]uint64, error) {
	s, ok := c.streams[id]
	if !ok {
		return nil, fmt.Errorf("core: acks %s: %w", id, ErrUnknownStream)
	}
	return slices.Clone(s.acks), nil
}

// Head returns how far this site holds stream: appended (own) or received
// in order (remote), and how far of that is persisted.
func (c *Core) Head(id StreamID) (head, persisted uint64, err error) {
	s, ok := c.streams[id]
	if !ok {
		return 0, 0, fmt.Errorf("core: head %s: %w", id, ErrUnknownStream)
	}
	return s.head, s.durable, nil
}

// Streams lists every stream this site knows, in the order it learnt of them.
func (c *Core) Streams() []StreamID {
	ids := make([]StreamID, len(c.list))
	for i, s := range c.list {
		ids[i] = s.id
	}
	return ids
}

// Predicates lists the named predicates with their current versions, sorted
// by name; transient ones are left out.
func (c *Core) Predicates() []PredicateDef {
	defs := make([]PredicateDef, 0, len(c.predNames))
	for _, name := range c.predNames {
		if p := c.preds[name]; !p.transient {
			defs = append(defs, PredicateDef{Name: name, Source: p.src, Version: p.version})
		}
	}
	return defs
}

// NumPredicates returns how many predicates the core holds, transient ones
// included. A stream whose acks changed costs a Ready's evaluation of
// NumEvaluated(its name) of them.
func (c *Core) NumPredicates() int { return len(c.predNames) }

// NumEvaluated returns how many predicates are evaluated on a stream of
// name: the named ones, the transient ones scoped to every stream and
// those scoped to name. With AllStreams, the first two.
func (c *Core) NumEvaluated(name string) int {
	n := len(c.every)
	if l, ok := c.scopes[name]; ok && name != AllStreams {
		n += len(l.preds)
	}
	return n
}

// Site returns the site this core runs.
func (c *Core) Site() string { return c.cfg.Site }

// Clock returns the latest timestamp issued or observed.
func (c *Core) Clock() HLC { return c.clock }
