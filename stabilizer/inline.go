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
// name. Each distinct source is evaluated on every stream in every Ready
// while the core holds it, so the node holds it only while something uses
// it (a wait, a frontier or stable-time read), keeps the most recently used
// idle ones a little longer for the next request that sends the same
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
	// failed); evaluated once its first evaluation is published.
	defined   chan struct{}
	err       error
	evaluated chan struct{}
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

// use resolves a predicate and, when it is inline, holds it in the core
// until the returned release is called (once). A named predicate's
// release does nothing.
func (n *Node) use(ctx context.Context, nameOrSource string) (name string, in *inline, release func(), err error) {
	name, compiled, err := n.resolve(ctx, nameOrSource)
	if err != nil || compiled == nil {
		return name, nil, func() {}, err
	}
	in, created, err := n.hold(name, compiled)
	if err != nil {
		return "", nil, nil, err
	}
	if created {
		// Under the node's context: every caller of this source waits for
		// this definition, not only the one whose ctx might end.
		n.define(n.ctx, in)
	}
	select {
	case <-in.defined:
	case <-ctx.Done():
		n.drop(in)
		return "", nil, nil, ctx.Err()
	}
	if in.err != nil {
		n.drop(in)
		return "", nil, nil, in.err
	}
	return name, in, func() { n.drop(in) }, nil
}

// Hold keeps a predicate given as source in the site's core until release
// is called, for a caller that will wait on it many times (a watch); each
// WaitFor, Frontier and StableTime holds its own while it runs. For a
// named predicate it holds nothing. Past MaxInlinePredicates in use it
// fails with ErrTooManyPredicates.
func (n *Node) Hold(ctx context.Context, predicate string) (release func(), err error) {
	_, _, release, err = n.use(ctx, predicate)
	return release, err
}

// hold counts a use of the inline predicate name, making its record if
// there is none; created says the caller must define it in the core.
func (n *Node) hold(name string, compiled *frontier.Predicate) (*inline, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if in, ok := n.mu.inline[name]; ok {
		if in.refs == 0 {
			n.mu.idle.Remove(in.idle)
			in.idle = nil
			n.mu.inUse++
		}
		in.refs++
		n.inlineGaugesLocked()
		return in, false, nil
	}
	if n.mu.inUse >= n.cfg.MaxInlinePredicates {
		return nil, false, fmt.Errorf("%w: %d at this site, the limit (Config.MaxInlinePredicates); "+
			"name the predicate with SetPredicate, or use fewer distinct sources at once", ErrTooManyPredicates, n.mu.inUse)
	}
	in := &inline{name: name, compiled: compiled, refs: 1, defined: make(chan struct{}), evaluated: make(chan struct{})}
	n.mu.inline[name] = in
	n.mu.inUse++
	n.inlineGaugesLocked()
	return in, true, nil
}

// define has the core define in; it closes in.defined. The definition
// runs on the loop, after any removal of an earlier record of the same
// source that was queued before it.
func (n *Node) define(ctx context.Context, in *inline) {
	err := n.do(ctx, func() {
		// An earlier record's definition may be kept (its removal found
		// this one); scoping it again has the next Ready carry its
		// evaluation all the same.
		if _, in.err = n.core.DefineTransient(in.name, in.compiled); in.err == nil {
			in.err = n.core.ScopeTransient(in.name, core.AllStreams)
		}
	})
	if err != nil {
		in.err = err
	}
	close(in.defined)
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

// evaluated marks the inline predicates a released Ready scoped as
// evaluated: their first frontiers are published.
func (n *Node) evaluated(scoped []core.PredicateScope) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, sc := range scoped {
		if in, ok := n.mu.inline[sc.Predicate]; ok {
			select {
			case <-in.evaluated:
			default:
				close(in.evaluated)
			}
		}
	}
}

// waitEvaluated waits until in's first evaluation is published, so that a
// read of its frontier is not the zero of a predicate not yet evaluated.
func (n *Node) waitEvaluated(ctx context.Context, in *inline) error {
	if in == nil {
		return nil
	}
	select {
	case <-in.evaluated:
		return nil
	default:
	}
	// The Ready carrying the evaluation may be held back for a later fsync.
	select {
	case n.recheck <- struct{}{}:
	default:
	}
	select {
	case <-in.evaluated:
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
	// Evaluated counts every predicate the core evaluates: built-in,
	// named and inline.
	Evaluated int
	// InlineInUse are inline predicates some call is using; InlineIdle
	// those kept for reuse (Config.IdleInlinePredicates).
	InlineInUse, InlineIdle int
}

// PredicateStats returns the site's predicate counts.
func (n *Node) PredicateStats(ctx context.Context) (PredicateStats, error) {
	var st PredicateStats
	if err := n.do(ctx, func() { st.Evaluated = n.core.NumPredicates() }); err != nil {
		return st, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	st.InlineInUse, st.InlineIdle = n.mu.inUse, n.mu.idle.Len()
	return st, nil
}
