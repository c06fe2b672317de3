package stabilizer

import (
	"sync"
	"sync/atomic"
)

type fkey struct {
	id   StreamID
	pred string
}

type waiter struct {
	seq uint64
	ch  chan struct{}
}

// publisher holds the frontiers and stable times the loop published, wakes
// waiters and feeds watchers. It has its own lock so that reads and waits
// never go through the loop.
type publisher struct {
	mu        sync.Mutex
	frontiers map[fkey]FrontierState
	// settled is, per stream and predicate, the furthest settled advance
	// (FrontierAdvance.Settled), which waits and reads may count on
	// before it is durable here and published to watchers.
	settled map[fkey]FrontierState
	waiters map[fkey][]*waiter
	// streams lists, per predicate, the streams frontiers or settled hold
	// it for, so that forgetting a predicate costs its own entries.
	streams  map[string]map[StreamID]struct{}
	stable   map[string]HLC
	watchers map[*Watch]struct{}
	closed   bool
}

func (p *publisher) init() {
	p.frontiers = map[fkey]FrontierState{}
	p.settled = map[fkey]FrontierState{}
	p.waiters = map[fkey][]*waiter{}
	p.streams = map[string]map[StreamID]struct{}{}
	p.stable = map[string]HLC{}
	p.watchers = map[*Watch]struct{}{}
}

func (p *publisher) seed(f FrontierState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(p.frontiers, f)
}

// setLocked stores f in m (frontiers or settled) and indexes it.
func (p *publisher) setLocked(m map[fkey]FrontierState, f FrontierState) {
	k := fkey{f.Stream, f.Predicate}
	if _, ok := m[k]; !ok {
		ids := p.streams[k.pred]
		if ids == nil {
			ids = map[StreamID]struct{}{}
			p.streams[k.pred] = ids
		}
		ids[k.id] = struct{}{}
	}
	m[k] = f
}

func (p *publisher) setStable(s StableTime) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.stable[s.Predicate]; old.Less(s.Time) {
		p.stable[s.Predicate] = s.Time
	}
}

func (p *publisher) publish(advs []FrontierAdvance, stable []StableTime) {
	if len(advs) == 0 && len(stable) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range advs {
		p.setLocked(p.frontiers, FrontierState{Stream: a.Stream, Predicate: a.Predicate, Seq: a.To, Version: a.Version, HLC: a.HLC})
		p.wakeLocked(fkey{a.Stream, a.Predicate}, a.To)
	}
	for _, s := range stable {
		if old := p.stable[s.Predicate]; old.Less(s.Time) {
			p.stable[s.Predicate] = s.Time
		}
	}
	for w := range p.watchers {
		w.offer(advs)
	}
}

// wake ends the waits that settled advances cover, before the advances
// are durable here: what the waiters learn (the predicate holds for their
// seq) rests on acks durable where they were made.
func (p *publisher) wake(advs []FrontierAdvance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range advs {
		if !a.Settled {
			continue
		}
		k := fkey{a.Stream, a.Predicate}
		if a.To > p.settled[k].Seq {
			p.setLocked(p.settled, FrontierState{Stream: a.Stream, Predicate: a.Predicate, Seq: a.To, Version: a.Version, HLC: a.HLC})
		}
		p.wakeLocked(k, a.To)
	}
}

func (p *publisher) wakeLocked(k fkey, to uint64) {
	ws := p.waiters[k]
	kept := ws[:0]
	for _, w := range ws {
		if w.seq <= to {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		delete(p.waiters, k)
	} else {
		p.waiters[k] = kept
	}
}

// awaited reports whether a waiter waits for one of the advances: a write
// whose caller is blocked until the frontier covers it.
func (p *publisher) awaited(advs []FrontierAdvance) bool {
	if len(advs) == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range advs {
		for _, w := range p.waiters[fkey{a.Stream, a.Predicate}] {
			if w.seq <= a.To {
				return true
			}
		}
	}
	return false
}

// wait returns a channel closed once the frontier reaches seq, or nil when
// it already has.
func (p *publisher) wait(k fkey, seq uint64) (<-chan struct{}, *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frontierLocked(k).Seq >= seq {
		return nil, nil
	}
	w := &waiter{seq: seq, ch: make(chan struct{})}
	p.waiters[k] = append(p.waiters[k], w)
	return w.ch, w
}

func (p *publisher) cancel(k fkey, w *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.waiters[k]
	for i, x := range ws {
		if x == w {
			p.waiters[k] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(p.waiters[k]) == 0 {
		delete(p.waiters, k)
	}
}

// frontier is the furthest of the published frontier and the settled one:
// what a wait or a stable read may count on.
func (p *publisher) frontier(k fkey) FrontierState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frontierLocked(k)
}

func (p *publisher) frontierLocked(k fkey) FrontierState {
	f, ok := p.frontiers[k]
	if !ok {
		f = FrontierState{Stream: k.id, Predicate: k.pred}
	}
	if s := p.settled[k]; s.Seq > f.Seq {
		f = s
	}
	return f
}

// forget drops what was published of a predicate the core removed.
func (p *publisher) forget(pred string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.streams[pred] {
		delete(p.frontiers, fkey{id, pred})
		delete(p.settled, fkey{id, pred})
	}
	delete(p.streams, pred)
	delete(p.stable, pred)
}

func (p *publisher) stableTime(pred string) HLC {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stable[pred]
}

func (p *publisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for w := range p.watchers {
		w.closeLocked()
	}
	p.watchers = map[*Watch]struct{}{}
}

// Watch receives frontier advances as they are published. A watcher that
// falls more than its buffer behind misses advances; Dropped counts them,
// and Node.Frontier always has the current value.
type Watch struct {
	C       <-chan FrontierAdvance
	c       chan FrontierAdvance
	p       *publisher
	filter  func(FrontierAdvance) bool
	dropped atomic.Uint64
	done    bool
}

// Dropped counts the advances the watch missed because its buffer was full.
func (w *Watch) Dropped() uint64 { return w.dropped.Load() }

func (w *Watch) offer(advs []FrontierAdvance) {
	for _, a := range advs {
		if w.filter != nil && !w.filter(a) {
			continue
		}
		select {
		case w.c <- a:
		default:
			w.dropped.Add(1)
		}
	}
}

func (w *Watch) closeLocked() {
	if !w.done {
		w.done = true
		close(w.c)
	}
}

// Stop ends the watch and closes C.
func (w *Watch) Stop() {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	delete(w.p.watchers, w)
	w.closeLocked()
}
