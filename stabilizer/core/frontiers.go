package core

import (
	"fmt"
	"slices"
)

// evalFrontiers re-evaluates every predicate on every stream whose acks
// changed. The reported frontier is max(released, current version's value):
// what an earlier version released stays released, and a seq above it is
// released only by a version that holds for it, so no seq is released twice
// and no frontier moves back, also across predicate changes.
func (c *Core) evalFrontiers(rd *Ready) {
	for _, s := range c.list {
		if !s.dirty {
			continue
		}
		s.dirty = false
		for _, name := range c.predNames {
			p := c.preds[name]
			v, err := p.compiled.Eval(s.acks, s.origin, c.self)
			if err != nil {
				c.errs = append(c.errs, fmt.Errorf("core: evaluate %q version %d on %s: %w", name, p.version, s.id, err))
				continue
			}
			r := s.rel[name]
			if r == nil {
				r = &release{}
				s.rel[name] = r
			}
			if v <= r.seq {
				continue
			}
			adv := FrontierAdvance{Stream: s.id, Predicate: name, Version: p.version, From: r.seq, To: v}
			r.seq, r.version = v, p.version
			r.hlc = c.hlcAt(s, v)
			adv.HLC = r.hlc
			rd.Frontiers = append(rd.Frontiers, adv)
			c.timeDirty = true
		}
	}
}

// evalStableTimes recomputes the global stable time of every predicate when
// acks, frontiers or heartbeats changed.
func (c *Core) evalStableTimes(rd *Ready) {
	if !c.timeDirty {
		return
	}
	c.timeDirty = false
	for _, name := range c.predNames {
		t := c.stableTime(name)
		if old := c.stable[name]; old.Less(t) {
			c.stable[name] = t
			rd.StableTimes = append(rd.StableTimes, StableTime{Predicate: name, Time: t})
		}
	}
}

// stableTime is the minimum over origins of the time up to which each
// origin's messages are all behind the predicate's frontiers. An origin's
// latest heartbeat T bounds it: the origin stamps every later message above
// T, but it may have begun streams this site has not heard of yet, whose
// first messages lie just above T. Below T, a stream whose frontier f has
// not reached its head at the heartbeat bounds it by the time of message f.
func (c *Core) stableTime(name string) HLC {
	var res HLC
	for o := 0; o < c.n; o++ {
		t := c.originT[o]
		for _, s := range c.byOrigin[o] {
			var f uint64
			var ts HLC
			if r := s.rel[name]; r != nil {
				f, ts = r.seq, r.hlc
			}
			if f < s.hbHead && ts.Less(t) {
				t = ts
			}
		}
		if o == 0 || t.Less(res) {
			res = t
		}
	}
	// A stream learnt of late may bound the time lower than an earlier
	// answer; that answer stays true, so never report less.
	return maxHLC(res, c.stable[name])
}

// Frontier returns the frontier of predicate name on stream as of the last
// Ready.
func (c *Core) Frontier(id StreamID, name string) (FrontierState, error) {
	if _, ok := c.preds[name]; !ok {
		return FrontierState{}, fmt.Errorf("core: frontier %s: %w: %q (known: %v)", id, ErrUnknownPredicate, name, c.predNames)
	}
	s, ok := c.streams[id]
	if !ok {
		return FrontierState{}, fmt.Errorf("core: frontier %s: %w", id, ErrUnknownStream)
	}
	fs := FrontierState{Stream: id, Predicate: name}
	if r := s.rel[name]; r != nil {
		fs.Seq, fs.Version, fs.HLC = r.seq, r.version, r.hlc
	}
	return fs, nil
}

// StableTime returns the global stable time under predicate name as of the
// last Ready.
func (c *Core) StableTime(name string) (HLC, error) {
	if _, ok := c.preds[name]; !ok {
		return HLC{}, fmt.Errorf("core: stable time: %w: %q (known: %v)", ErrUnknownPredicate, name, c.predNames)
	}
	return c.stable[name], nil
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
// by name.
func (c *Core) Predicates() []PredicateDef {
	defs := make([]PredicateDef, 0, len(c.predNames))
	for _, name := range c.predNames {
		p := c.preds[name]
		defs = append(defs, PredicateDef{Name: name, Source: p.src, Version: p.version})
	}
	return defs
}

// Site returns the site this core runs.
func (c *Core) Site() string { return c.cfg.Site }

// Clock returns the latest timestamp issued or observed.
func (c *Core) Clock() HLC { return c.clock }
