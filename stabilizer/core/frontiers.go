package core

import (
	"fmt"
	"slices"

	"github.com/stabilizer/stabilizer/frontier"
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
		settled := c.settledBelow(s)
		for _, name := range c.predNames {
			p := c.preds[name]
			v, err := p.compiled.Eval(s.acks, s.origin, c.self)
			if err != nil {
				c.errs = append(c.errs, fmt.Errorf("core: evaluate %q version %d on %s: %w", name, p.version, s.id, err))
				continue
			}
			r := s.release(p.idx)
			if v <= r.seq {
				continue
			}
			if !p.transient {
				c.durableAdv++
			}
			adv := FrontierAdvance{Stream: s.id, Predicate: name, Version: p.version, From: r.seq, To: v,
				Settled: p.persistedOnly && v <= settled}
			r.seq, r.version = v, p.version
			r.hlc = c.hlcAt(s, v)
			adv.HLC = r.hlc
			rd.Frontiers = append(rd.Frontiers, adv)
			c.originDirty[s.origin] = true
			c.timeDirty = true
		}
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
// depend on changed, and they were not computed yet this tick. Once a tick
// bounds the work to the number of streams per tick, however many Readies.
func (c *Core) timeDue() bool {
	return c.timeDirty && (!c.stableDone || c.tick > c.stableTick)
}

// evalStableTimes recomputes the global stable time of every predicate when
// acks, frontiers or heartbeats changed, at most once per tick, and only
// over the origins whose streams changed.
func (c *Core) evalStableTimes(rd *Ready) {
	if !c.timeDue() {
		return
	}
	c.timeDirty = false
	c.stableTick, c.stableDone = c.tick, true
	for o := range c.n {
		if !c.originDirty[o] {
			continue
		}
		c.originDirty[o] = false
		c.originTime[o] = c.originTimes(o, c.originTime[o][:0])
	}
	for _, name := range c.predNames {
		idx := c.preds[name].idx
		var t HLC
		for o := range c.n {
			if ot := c.originTime[o][idx]; o == 0 || ot.Less(t) {
				t = ot
			}
		}
		// A stream learnt of late may bound the time lower than an
		// earlier answer; that answer stays true, so never report less.
		if old := c.stable[name]; old.Less(t) {
			c.stable[name] = t
			rd.StableTimes = append(rd.StableTimes, StableTime{Predicate: name, Time: t})
			if !c.preds[name].transient {
				c.durableAdv++
			}
		}
	}
}

// originTimes computes, per predicate index, the time up to which every
// message of origin o is behind the predicate's frontiers. The origin's
// latest heartbeat T bounds it: the origin stamps every later message above
// T, but it may have begun streams this site has not heard of yet, whose
// first messages lie just above T. Below T, a stream whose frontier f has
// not reached its head at the heartbeat bounds it by the time of message f.
func (c *Core) originTimes(o int, ts []HLC) []HLC {
	for range c.predSlots {
		ts = append(ts, c.originT[o])
	}
	for _, s := range c.byOrigin[o] {
		for i := range ts {
			r := s.released(i)
			if r.seq < s.hbHead && r.hlc.Less(ts[i]) {
				ts[i] = r.hlc
			}
		}
	}
	return ts
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
	r := s.released(c.preds[name].idx)
	return FrontierState{Stream: id, Predicate: name, Seq: r.seq, Version: r.version, HLC: r.hlc}, nil
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

// NumPredicates returns how many predicates every stream's frontiers are
// evaluated for, transient ones included: what each Ready's evaluation
// costs per stream whose acks changed.
func (c *Core) NumPredicates() int { return len(c.predNames) }

// Site returns the site this core runs.
func (c *Core) Site() string { return c.cfg.Site }

// Clock returns the latest timestamp issued or observed.
func (c *Core) Clock() HLC { return c.clock }
