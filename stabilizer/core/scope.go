package core

import (
	"fmt"
	"slices"
	"strings"
)

// Scopes. A named predicate (built in, configured or set at run time) is
// evaluated on every stream: there are few, and a reader may ask for any
// stream. A transient predicate is evaluated only on the streams its scope
// names: each call of ScopeTransient adds a stream name, or every stream
// (AllStreams). So the predicates a driver holds for one kind of stream
// (the KV's waits on "kv", a topic's on "pubsub") cost nothing on the
// others: a Ready evaluates, per stream whose acks changed, the named
// predicates, the transient ones scoped to every stream and those scoped
// to the stream's name, and nothing else.
//
// Its global stable time follows: it is over the streams in its scope.
// Ready.StableTimes carries those of the predicates evaluated on every
// stream; StableTime computes a scoped one's when asked.

// AllStreams, as the stream name given to ScopeTransient, scopes a
// transient predicate to every stream, whatever its name, as a named
// predicate is. No stream has this name: stream names are not empty.
const AllStreams = ""

// PredicateScope names a stream name a transient predicate was scoped to:
// Ready.Scoped lists them.
type PredicateScope struct {
	Predicate string
	// Stream is a stream name, or AllStreams.
	Stream string
}

func (s PredicateScope) String() string {
	if s.Stream == AllStreams {
		return s.Predicate + "@*"
	}
	return s.Predicate + "@" + s.Stream
}

// scopeList is what one stream name has: its streams (one per origin at
// most) and the transient predicates scoped to it, sorted by name. A list
// lives while it has either.
type scopeList struct {
	name    string
	streams []*stream
	preds   []*pred
}

// scoping is a scope addition not yet evaluated: p on every stream (all),
// or on the streams of list (none when nil).
type scoping struct {
	p      *pred
	all    bool
	list   *scopeList
	stream string
}

// scopeList returns the list of stream name, making it on first mention.
func (c *Core) scopeList(name string) *scopeList {
	l, ok := c.scopes[name]
	if !ok {
		l = &scopeList{name: name}
		c.scopes[name] = l
	}
	return l
}

// dropList forgets l once nothing refers to it.
func (c *Core) dropList(l *scopeList) {
	if len(l.streams) == 0 && len(l.preds) == 0 {
		delete(c.scopes, l.name)
	}
}

func byName(a, b *pred) int { return strings.Compare(a.name, b.name) }

// insertPred adds p to a list sorted by name, replacing a predicate of the
// same name.
func insertPred(list []*pred, p *pred) []*pred {
	i, found := slices.BinarySearchFunc(list, p, byName)
	if found {
		list[i] = p
		return list
	}
	return slices.Insert(list, i, p)
}

func deletePred(list []*pred, p *pred) []*pred {
	if i, found := slices.BinarySearchFunc(list, p, byName); found && list[i] == p {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// ScopeTransient adds stream name to the scope of the transient predicate
// name: from the next Ready on it is evaluated on every stream of that
// name, those known now and those to come; AllStreams scopes it to every
// stream. A scope only grows, until RemoveTransient. The next Ready lists
// the addition in Scoped and carries the predicate's evaluation on every
// stream of that name the core knows, also when the scope held the name
// already (it then releases nothing new, but a driver learns that what it
// publishes of that Ready is current): once it is published, the
// predicate's frontiers on those streams are right, not the zero of a
// stream it was never evaluated on.
//
// Widening a scope changes what the predicate's stable time speaks of: it
// then covers more streams and may be lower (see StableTime). Scoped to
// every stream, the predicate's stable times are in Ready.StableTimes from
// the next Ready on, as a named predicate's are.
func (c *Core) ScopeTransient(name, stream string) error {
	p, ok := c.preds[name]
	if !ok {
		return fmt.Errorf("core: scope predicate %q: %w", name, ErrUnknownPredicate)
	}
	if !p.transient {
		return fmt.Errorf("core: scope predicate %q: %w", name, ErrNamedPredicate)
	}
	if stream != AllStreams {
		if err := checkStreamName(stream); err != nil {
			return fmt.Errorf("core: scope predicate %q: %w", name, err)
		}
	}
	sc := scoping{p: p, stream: stream}
	switch {
	case stream == AllStreams:
		sc.all = true
		if !p.every {
			c.widen(p)
		}
	case p.every:
		sc.list = c.scopes[stream] // only the name's streams to evaluate
	default:
		sc.list = c.scopeList(stream)
		if !slices.Contains(p.lists, sc.list) {
			sc.list.preds = insertPred(sc.list.preds, p)
			p.lists = append(p.lists, sc.list)
			p.stable = HLC{} // it speaks of more streams now
		}
	}
	c.scoping = append(c.scoping, sc)
	return nil
}

// widen scopes p to every stream: it leaves its names' lists for the list
// of predicates evaluated everywhere, whose stable times are published.
func (c *Core) widen(p *pred) {
	c.unlist(p)
	p.every = true
	p.stable = HLC{}
	c.every = insertPred(c.every, p)
	c.everyChanged()
	// Its first stable time comes in the Ready that carries its first
	// evaluation everywhere, even if this tick's are computed already.
	c.timeForce = true
}

// unlist takes p out of the lists of the stream names in its scope.
func (c *Core) unlist(p *pred) {
	for _, l := range p.lists {
		l.preds = deletePred(l.preds, p)
		c.dropList(l)
	}
	p.lists = nil
}

// everyChanged notes that the predicates evaluated on every stream
// changed: originTime, indexed by their position, is recomputed.
func (c *Core) everyChanged() {
	for o := range c.originDirty {
		c.originDirty[o] = true
	}
	c.timeDirty = true
}

// scopeStreams returns the streams p is evaluated on.
func (c *Core) scopeStreams(p *pred, f func(*stream)) {
	if p.every {
		for _, s := range c.list {
			f(s)
		}
		return
	}
	for _, l := range p.lists {
		for _, s := range l.streams {
			f(s)
		}
	}
}
