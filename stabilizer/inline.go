package stabilizer

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// Inline predicates: sources a client sends with a request instead of a
// name. The core evaluates each distinct source it holds on the streams of
// its scope: the stream names calls used it on (WaitFor, Frontier, HoldOn),
// or every stream once a call needed them all (StableTime, Hold). So the
// KV's waits on stream "kv" cost nothing on pub/sub's streams, nor a
// topic's predicates on the KV's, however many are held. A scope only
// grows while the core holds the predicate. The node holds it only while
// something uses it, keeps the most recently used idle ones (with their
// scopes) a little longer for the next request that sends the same
// source, and refuses new ones past MaxInlinePredicates in use. They are
// never persisted: their frontiers are a function of the ack table, which
// only grows.

// Defaults for the inline-predicate fields of Config.
const (
	DefaultMaxInlinePredicates  = 1024
	DefaultIdleInlinePredicates = 64
)

// ErrTooManyPredicates: MaxInlinePredicates inline predicates are in use.
var ErrTooManyPredicates = errors.New("stabilizer: too many inline predicates in use")

// inlinePrefix starts the core's name of an inline predicate; no named
// predicate may start with it.
const inlinePrefix = "="

func isInline(name string) bool { return strings.HasPrefix(name, inlinePrefix) }

// inline is one inline predicate the node holds.
type inline struct {
	name     string
	compiled *frontier.Predicate
	refs     int           // uses in progress; guarded by Node.mu
	idle     *list.Element // in Node.mu.idle while refs is 0
	// defined is closed once the core holds the predicate (err says if it
	// failed).
	defined chan struct{}
	err     error
	// scopes are the stream names it is scoped to in the core, by name
	// (core.AllStreams: every stream); guarded by Node.mu.
	scopes map[string]*scope
}

// scope is one stream name (or every stream) an inline predicate is
// scoped to.
type scope struct {
	// added is closed once the core scoped the predicate (err says if it
	// failed). ready is then the number of the Ready that carries its
	// evaluation on the streams of the name: the next one the loop took
	// (Node.taken); set on the loop, guarded by Node.mu.
	added chan struct{}
	err   error
	ready uint64
	// evaluated is closed once that Ready is released: the predicate's
	// frontiers on the streams of the name are published.
	evaluated chan struct{}
}

// on says which streams a use needs an inline predicate evaluated on.
type on struct {
	every  bool   // every stream
	stream string // else the streams of this name
}

// key returns the scope on stands for, or false when no stream can have
// its name (then there is nothing to evaluate).
func (o on) key() (string, bool) {
	if o.every {
		return core.AllStreams, true
	}
	return o.stream, o.stream != "" && len(o.stream) <= core.MaxStreamName
}

// resolve returns the core's name of a predicate given by name or source,
// and the compiled source of an inline one (nil for a name).
func (n *Node) resolve(ctx context.Context, nameOrSource string) (string, *frontier.Predicate, error) {
	if _, named := n.PredicateSource(nameOrSource); named {
		return nameOrSource, nil, nil
	}
	name := inlinePrefix + nameOrSource
	n.mu.Lock()
	in := n.mu.inline[name]
	n.mu.Unlock()
	if in != nil {
		// Held or idle: compiled already. Sessions and quorum reads send
		// the same few sources over and over.
		return name, in.compiled, nil
	}
	p, err := frontier.Compile(nameOrSource, n.cfg.Schema)
	if err != nil {
		var fe *frontier.Error
		if errors.As(err, &fe) && !strings.ContainsAny(nameOrSource, "()") {
			return "", nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPredicate, nameOrSource, strings.Join(n.PredicateNames(ctx), ", "))
		}
		return "", nil, fmt.Errorf("stabilizer: predicate %q: %w", nameOrSource, err)
	}
	return name, p, nil
}

// use resolves a predicate and, when it is inline, holds it in the core,
// scoped to what o names, until the returned release is called (once). A
// named predicate's release does nothing. The scope is nil for a named
// predicate or when o names no possible stream.
func (n *Node) use(ctx context.Context, nameOrSource string, o on) (name string, sc *scope, release func(), err error) {
	name, compiled, err := n.resolve(ctx, nameOrSource)
	if err != nil || compiled == nil {
		return name, nil, func() {}, err
	}
	key, scoped := o.key()
	in, created, sc, fresh, err := n.hold(name, compiled, key, scoped)
	if err != nil {
		return "", nil, nil, err
	}
	if created {
		// Under the node's context: every caller of this source waits for
		// this definition, not only the one whose ctx might end.
		n.define(n.ctx, in, key, sc)
	}
	fail := func(err error) (string, *scope, func(), error) {
		n.drop(in)
		return "", nil, nil, err
	}
	select {
	case <-in.defined:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if in.err != nil {
		return fail(in.err)
	}
	if sc == nil {
		return name, nil, func() { n.drop(in) }, nil
	}
	if fresh && !created {
		n.scope(n.ctx, in, key, sc)
	}
	select {
	case <-sc.added:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if sc.err != nil {
		return fail(sc.err)
	}
	return name, sc, func() { n.drop(in) }, nil
}

// Hold keeps a predicate given as source in the site's core, evaluated on
// every stream, until release is called, for a caller that will wait on
// it many times (a watch); each WaitFor, Frontier and StableTime holds its
// own while it runs. For a named predicate it holds nothing. Past
// MaxInlinePredicates in use it fails with ErrTooManyPredicates. A caller
// that waits on streams of one name only should use HoldOn: what Hold
// holds costs every stream's acks.
func (n *Node) Hold(ctx context.Context, predicate string) (release func(), err error) {
	_, _, release, err = n.use(ctx, predicate, on{every: true})
	return release, err
}

// HoldOn is Hold for a caller that waits on the streams of one name (a
// topic's subscribers on stream "pubsub", say): the predicate is held
// scoped to stream name stream, evaluated on the streams of that name
// (from every origin, those to come included) and not on others, so that
// holding many costs only the acks of those streams. A WaitFor or
// Frontier with the same source on a stream of another name adds that
// name to its scope, and StableTime or Hold every stream: a scope only
// grows while the core holds the predicate. Like Hold, it holds nothing
// for a named predicate.
func (n *Node) HoldOn(ctx context.Context, predicate, stream string) (release func(), err error) {
	if stream == "" || len(stream) > core.MaxStreamName {
		return nil, fmt.Errorf("stabilizer: hold %q on %q: %w (1..%d bytes)", predicate, stream, ErrBadStreamName, core.MaxStreamName)
	}
	_, _, release, err = n.use(ctx, predicate, on{stream: stream})
	return release, err
}

// hold counts a use of the inline predicate name, making its record if
// there is none, and, when scoped, the record of its scope key if there is
// none: created says the caller must define the predicate in the core,
// fresh that it must scope it (define does both).
func (n *Node) hold(name string, compiled *frontier.Predicate, key string, scoped bool) (in *inline, created bool, sc *scope, fresh bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	in, ok := n.mu.inline[name]
	if ok {
		if in.refs == 0 {
			n.mu.idle.Remove(in.idle)
			in.idle = nil
			n.mu.inUse++
		}
		in.refs++
	} else {
		if n.mu.inUse >= n.cfg.MaxInlinePredicates {
			return nil, false, nil, false, fmt.Errorf("%w: %d at this site, the limit (Config.MaxInlinePredicates); "+
				"name the predicate with SetPredicate, or use fewer distinct sources at once", ErrTooManyPredicates, n.mu.inUse)
		}
		in = &inline{name: name, compiled: compiled, refs: 1, defined: make(chan struct{}), scopes: map[string]*scope{}}
		n.mu.inline[name] = in
		n.mu.inUse++
		created = true
	}
	n.inlineGaugesLocked()
	if !scoped {
		return in, created, nil, false, nil
	}
	if sc, ok := in.scopes[key]; ok {
		return in, created, sc, false, nil
	}
	if every, ok := in.scopes[core.AllStreams]; ok {
		// Evaluated on every stream already, or about to be.
		return in, created, every, false, nil
	}
	sc = &scope{added: make(chan struct{}), evaluated: make(chan struct{})}
	in.scopes[key] = sc
	return in, created, sc, true, nil
}

// define has the core define in and, if sc is not nil, scope it to key,
// in one round trip; it closes in.defined, and sc.added as scope does.
// The definition runs on the loop, after any removal of an earlier record
// of the same source that was queued before it.
func (n *Node) define(ctx context.Context, in *inline, key string, sc *scope) {
	err := n.do(ctx, func() {
		// An earlier record's definition may be kept (its removal found
		// this one): scoping it again has the next Ready carry its
		// evaluation on the scope's streams all the same.
		if _, in.err = n.core.DefineTransient(in.name, in.compiled); in.err == nil && sc != nil {
			n.scopeOnLoop(in, key, sc)
		}
	})
	if err != nil {
		in.err = err
	}
	close(in.defined)
	if sc != nil {
		if in.err != nil {
			n.scopeFailed(in, key, sc, in.err)
		}
		close(sc.added)
	}
}

// scope has the core add key to in's scope; it closes sc.added.
func (n *Node) scope(ctx context.Context, in *inline, key string, sc *scope) {
	if err := n.do(ctx, func() { n.scopeOnLoop(in, key, sc) }); err != nil {
		n.scopeFailed(in, key, sc, err)
	}
	close(sc.added)
}

// scopeOnLoop runs on the loop: the next Ready it takes carries the
// scope's evaluation.
func (n *Node) scopeOnLoop(in *inline, key string, sc *scope) {
	if err := n.core.ScopeTransient(in.name, key); err != nil {
		n.scopeFailed(in, key, sc, err)
		return
	}
	n.mu.Lock()
	sc.ready = n.taken + 1
	n.mu.Unlock()
}

// scopeFailed records why sc failed and forgets it, so that the next use
// of the scope tries again.
func (n *Node) scopeFailed(in *inline, key string, sc *scope, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sc.err == nil {
		sc.err = err
	}
	if in.scopes[key] == sc {
		delete(in.scopes, key)
	}
}

// drop ends a use of in. The last use leaves it idle; past
// IdleInlinePredicates idle ones, the least recently used is removed.
func (n *Node) drop(in *inline) {
	for _, name := range n.unhold(in) {
		// Not waited for: the loop removes it unless a new record of the
		// same source was made meanwhile (see forget).
		_ = n.submitTo(n.ctx, n.ctrl, func() { n.forget(name) })
	}
}

// unhold counts one use of in less and returns the inline predicates to
// evict.
func (n *Node) unhold(in *inline) (evict []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.inlineGaugesLocked()
	if in.refs--; in.refs > 0 {
		return nil
	}
	n.mu.inUse--
	if in.err != nil {
		if n.mu.inline[in.name] == in {
			delete(n.mu.inline, in.name)
		}
		return nil
	}
	in.idle = n.mu.idle.PushFront(in)
	for n.mu.idle.Len() > n.cfg.IdleInlinePredicates {
		old := n.mu.idle.Remove(n.mu.idle.Back()).(*inline)
		old.idle = nil
		delete(n.mu.inline, old.name)
		evict = append(evict, old.name)
	}
	return evict
}

func (n *Node) inlineGaugesLocked() {
	n.m.inlineInUse.Set(float64(n.mu.inUse))
	n.m.inlineIdle.Set(float64(n.mu.idle.Len()))
}

// forget runs on the loop: it removes an evicted inline predicate from the
// core and the publisher, unless a new record of the same source exists.
func (n *Node) forget(name string) {
	n.mu.Lock()
	_, again := n.mu.inline[name]
	n.mu.Unlock()
	if again {
		return
	}
	if err := n.core.RemoveTransient(name); err != nil {
		n.log.Warn("remove inline predicate", "predicate", name, "error", err)
	}
	n.pub.forget(name)
}

// evaluated runs as the released'th Ready is released: the scopes it
// carries the evaluation of are evaluated. A scope the loop added after an
// earlier record's addition of the same one was taken in a Ready waits for
// its own (ready).
func (n *Node) evaluated(released uint64, scoped []core.PredicateScope) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ps := range scoped {
		in, ok := n.mu.inline[ps.Predicate]
		if !ok {
			continue
		}
		sc, ok := in.scopes[ps.Stream]
		if !ok || sc.ready == 0 || sc.ready > released {
			continue
		}
		select {
		case <-sc.evaluated:
		default:
			close(sc.evaluated)
		}
	}
}

// waitEvaluated waits until sc's evaluation is published, so that a read
// of the predicate's frontier is not the zero of a stream it was not
// evaluated on yet.
func (n *Node) waitEvaluated(ctx context.Context, sc *scope) error {
	if sc == nil {
		return nil
	}
	select {
	case <-sc.evaluated:
		return nil
	default:
	}
	// The Ready carrying the evaluation may be held back for a later fsync.
	select {
	case n.recheck <- struct{}{}:
	default:
	}
	select {
	case <-sc.evaluated:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
}

// PredicateStats says how many predicates a site evaluates: what bounds
// the work of every Ready, per stream whose acks changed.
type PredicateStats struct {
	// Evaluated counts every predicate the core holds: built-in, named
	// and inline.
	Evaluated int
	// Everywhere counts those evaluated on every stream: built-in, named
	// and inline ones held for every stream (Hold, StableTime). A stream
	// costs these and the inline ones scoped to its name.
	Everywhere int
	// InlineInUse are inline predicates some call is using; InlineIdle
	// those kept for reuse (Config.IdleInlinePredicates).
	InlineInUse, InlineIdle int
}

// PredicateStats returns the site's predicate counts.
func (n *Node) PredicateStats(ctx context.Context) (PredicateStats, error) {
	var st PredicateStats
	if err := n.do(ctx, func() {
		st.Evaluated, st.Everywhere = n.core.NumPredicates(), n.core.NumEvaluated(core.AllStreams)
	}); err != nil {
		return st, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	st.InlineInUse, st.InlineIdle = n.mu.inUse, n.mu.idle.Len()
	return st, nil
}
