package consumer

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// phase is where a pending message is; each phase has one home.
type phase uint8

const (
	phaseReady    phase = iota // in its origin's ready list, waiting for a consumer
	phaseInFlight              // delivered; in timers until its ack deadline
	phaseDelayed               // nak'ed with a delay; in timers until it ends
	phaseDead                  // past MaxDeliver; waiting for Resolve
	phaseDone                  // resolved or dropped; in nothing
	numPhases
)

// entry is one pending message.
type entry struct {
	o        *origin
	seq      uint64
	phase    phase
	attempts int        // deliveries so far
	consumer ConsumerID // who got the latest delivery
	at       time.Time  // in flight: ack deadline; delayed: end of the delay
	tidx     int        // index in timers, -1 when not there
	queued   bool       // in State.dead, not yet handed out
}

func (e *entry) id() MsgID { return MsgID{e.o.name, e.seq} }

type consumer struct {
	id       ConsumerID
	max      int // 0: MaxAckPending
	inflight int
}

// State is the state machine of one subscription at one site. See the
// package documentation.
type State struct {
	cfg       Config
	origins   map[string]*origin
	list      []*origin   // sorted by name: the order Next serves origins in
	consumers []*consumer // sorted by id: the tie-break of Next
	timers    timers
	dead      []*entry // dead letters not yet handed out by DeadLetters
	free      []*entry // finished entries to reuse: no allocation per message once warm
	pending   int
	inPhase   [numPhases]int
	stats     Stats // counters only; gauges are filled in by Stats
}

// New returns the state of a subscription that resumes at pos (nil or empty:
// nothing acked yet). Invalid Config fields get their defaults (see
// Config.Validate). pos is copied and normalised: Acked is sorted, and
// duplicates and seqs at or below Floor are dropped.
func New(cfg Config, pos Position) *State {
	s := &State{cfg: cfg.withDefaults(), origins: make(map[string]*origin)}
	for name, op := range pos {
		o := s.origin(name)
		op = normalize(op)
		o.floor, o.cursor = op.Floor, op.Floor
		o.acked.buf = op.Acked
	}
	return s
}

// Config returns the configuration in use, defaults filled in.
func (s *State) Config() Config { return s.cfg }

// origin returns the named origin, creating it.
func (s *State) origin(name string) *origin {
	if o := s.origins[name]; o != nil {
		return o
	}
	o := &origin{name: name}
	s.origins[name] = o
	i, _ := slices.BinarySearchFunc(s.list, name, func(o *origin, n string) int { return cmp.Compare(o.name, n) })
	s.list = slices.Insert(s.list, i, o)
	return o
}

// lookup returns the pending entry of m, or nil.
func (s *State) lookup(m MsgID) *entry {
	o := s.origins[m.Origin]
	if o == nil {
		return nil
	}
	if i, ok := findEntry(&o.pend, m.Seq); ok {
		return o.pend.all()[i]
	}
	return nil
}

// Room returns how many more messages Offer accepts now.
func (s *State) Room() int { return max(0, s.cfg.MaxAckPending-s.pending) }

// Offer adds a message to deliver. The messages of one origin must come in
// increasing seq. A message that is acked per the position, or that was
// offered before, is ignored (nil). Beyond Room it fails with ErrFull, and
// the message is not taken: offer it again later. A message below the last
// one offered of its origin that is neither fails with ErrOrder, if it is
// above the floor; below the floor the position already claims it, since the
// floor is computed as if offers came in order. now is
// unused today; it is there so that a later policy (an age bound) needs no
// new signature.
func (s *State) Offer(m MsgID, now time.Time) error {
	o := s.origin(m.Origin)
	if o.claims(m.Seq) {
		// The pump passed it; with nothing pending the floor may pass it too.
		o.cursor = max(o.cursor, m.Seq)
		o.setFloor(o.newFloor())
		return nil
	}
	if m.Seq <= o.cursor {
		if _, ok := findEntry(&o.pend, m.Seq); ok {
			return nil
		}
		return fmt.Errorf("%w: offer %v: %s:%d was offered before it", ErrOrder, m, m.Origin, o.cursor)
	}
	if s.Room() == 0 {
		return fmt.Errorf("%w: offer %v: %d messages pending, MaxAckPending %d", ErrFull, m, s.pending, s.cfg.MaxAckPending)
	}
	e := s.newEntry()
	e.o, e.seq = o, m.Seq
	o.cursor = m.Seq
	addEntry(&o.pend, e)
	o.setFloor(o.newFloor()) // the seqs the pump skipped to reach m
	s.pending++
	s.stats.Offered++
	s.toReady(e)
	s.assertInvariants()
	return nil
}

// Attach adds a consumer that may take up to maxInFlight deliveries at a
// time (0: no bound of its own beyond MaxAckPending). Attaching an attached
// consumer changes its bound; what it holds stays with it, and it gets more
// only once it is below the new bound.
func (s *State) Attach(c ConsumerID, maxInFlight int) {
	maxInFlight = max(0, maxInFlight)
	i, ok := s.findConsumer(c)
	if ok {
		s.consumers[i].max = maxInFlight
		return
	}
	s.consumers = slices.Insert(s.consumers, i, &consumer{id: c, max: maxInFlight})
}

// Detach removes a consumer. Its deliveries not yet replied to are ready for
// redelivery at once, to the other consumers; each counts as an attempt, so
// a message at MaxDeliver goes to DeadLetters instead. Detaching an unknown
// consumer does nothing.
func (s *State) Detach(c ConsumerID, now time.Time) {
	i, ok := s.findConsumer(c)
	if !ok {
		return
	}
	if s.consumers[i].inflight > 0 {
		// In (origin, seq) order, so that dead letters come out in a
		// deterministic order.
		var held []*entry
		for _, o := range s.list {
			for _, e := range o.pend.all() {
				if e.phase == phaseInFlight && e.consumer == c {
					held = append(held, e)
				}
			}
		}
		for _, e := range held {
			s.leave(e)
			s.retry(e)
		}
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	s.assertInvariants()
}

func (s *State) findConsumer(c ConsumerID) (int, bool) {
	return slices.BinarySearchFunc(s.consumers, c, func(x *consumer, c ConsumerID) int { return cmp.Compare(x.id, c) })
}

func (s *State) getConsumer(c ConsumerID) *consumer {
	if i, ok := s.findConsumer(c); ok {
		return s.consumers[i]
	}
	return nil
}

// room returns how many more deliveries c takes now.
func (s *State) room(c *consumer) int {
	bound := c.max
	if bound == 0 {
		bound = s.cfg.MaxAckPending
	}
	return max(0, bound-c.inflight)
}

// pick returns the consumer with room that has the fewest in flight, the
// lowest id among equals, or nil. Deliveries thus spread evenly, and an equal
// split goes round-robin in id order.
func (s *State) pick() *consumer {
	var best *consumer
	for _, c := range s.consumers {
		if s.room(c) > 0 && (best == nil || c.inflight < best.inflight) {
			best = c
		}
	}
	return best
}

// Next returns the deliveries to send now: new messages and due
// redeliveries, each to the attached consumer with room that has the fewest
// in flight (the lowest id among equals). It first does what Tick(now) does.
// Each origin's ready messages go out lowest seq first, so per-origin order
// holds except where a redelivery overtakes; origins take turns, one message
// each, so that one busy origin cannot starve another. It returns nil when
// nothing is ready or no consumer has room. Call it after any input that can
// make a message ready or free room: Offer, Attach, Detach, replies, Merge,
// Tick.
func (s *State) Next(now time.Time) []Delivery {
	s.Tick(now)
	n := min(s.inPhase[phaseReady], s.totalRoom())
	if n == 0 {
		return nil
	}
	// Rounds over the origins, one message of each, until n went out; a
	// round that sends nothing (which n rules out) ends it too.
	out := make([]Delivery, 0, n)
	for sent := true; len(out) < n && sent; {
		sent = false
		for _, o := range s.list {
			if c := s.pick(); o.ready.len() > 0 && c != nil {
				out = append(out, s.deliver(o.ready.all()[0], c, now))
				sent = true
			}
		}
	}
	s.assertInvariants()
	return out
}

// totalRoom is how many deliveries the consumers take now.
func (s *State) totalRoom() int {
	n := 0
	for _, c := range s.consumers {
		n += s.room(c)
	}
	return n
}

func (s *State) deliver(e *entry, c *consumer, now time.Time) Delivery {
	s.leave(e)
	e.attempts++
	e.consumer = c.id
	e.at = now.Add(s.cfg.AckWait)
	c.inflight++
	s.enter(e, phaseInFlight)
	heap.Push(&s.timers, e)
	s.stats.Delivered++
	if e.attempts > 1 {
		s.stats.Redelivered++
	}
	return Delivery{Msg: e.id(), Consumer: c.id, Attempt: e.attempts, Deadline: e.at}
}

// Tick moves deliveries whose ack deadline is at or before now to
// redelivery (or, past MaxDeliver, to DeadLetters) and nak'ed messages whose
// delay ended to ready. Call it at NextDeadline; Next calls it too.
func (s *State) Tick(now time.Time) {
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		e := s.timers[0]
		expired := e.phase == phaseInFlight
		s.leave(e)
		if expired {
			s.stats.Expired++
			s.retry(e)
		} else {
			s.toReady(e)
		}
	}
	s.assertInvariants()
}

// NextDeadline returns the earliest ack deadline or nak delay end, when Tick
// has something to do; false when nothing waits for a time.
func (s *State) NextDeadline() (time.Time, bool) {
	if len(s.timers) == 0 {
		return time.Time{}, false
	}
	return s.timers[0].at, true
}

// DeadLetters hands out, once each, the messages that went past MaxDeliver,
// in the order they did. They stay pending, and count against MaxAckPending,
// until Resolve; a subscription without a dead-letter topic resolves them at
// once.
func (s *State) DeadLetters() []DeadLetter {
	var out []DeadLetter
	for _, e := range s.dead {
		if e.phase == phaseDead { // not resolved or merged away meanwhile
			out = append(out, DeadLetter{Msg: e.id(), Deliveries: e.attempts})
		}
		e.queued = false
	}
	clear(s.dead)
	s.dead = s.dead[:0]
	return out
}

// Stats returns the gauges now and the counters since New.
func (s *State) Stats() Stats {
	st := s.stats
	st.Pending = uint64(s.pending)
	st.InFlight = uint64(s.inPhase[phaseInFlight])
	st.Ready = uint64(s.inPhase[phaseReady])
	st.Delayed = uint64(s.inPhase[phaseDelayed])
	st.Dead = uint64(s.inPhase[phaseDead])
	st.Consumers = uint64(len(s.consumers))
	return st
}

// The phase changes. Every move is leave, then enter a new phase through
// one of the functions below; leave takes the entry out of its old home.

func (s *State) enter(e *entry, p phase) {
	e.phase = p
	s.inPhase[p]++
}

func (s *State) leave(e *entry) {
	switch e.phase {
	case phaseReady:
		removeEntry(&e.o.ready, e)
	case phaseInFlight:
		heap.Remove(&s.timers, e.tidx)
		if c := s.getConsumer(e.consumer); c != nil {
			c.inflight--
		}
	case phaseDelayed:
		heap.Remove(&s.timers, e.tidx)
	case phaseDead:
		// s.dead is filtered when drained.
	}
	s.inPhase[e.phase]--
}

func (s *State) toReady(e *entry) {
	s.enter(e, phaseReady)
	addEntry(&e.o.ready, e)
}

func (s *State) toDelayed(e *entry, until time.Time) {
	s.enter(e, phaseDelayed)
	e.at = until
	heap.Push(&s.timers, e)
}

// retry makes a message that was delivered and not acked ready again, or a
// dead letter once it was delivered MaxDeliver times.
func (s *State) retry(e *entry) {
	if s.exhausted(e) {
		s.enter(e, phaseDead)
		e.queued = true
		s.dead = append(s.dead, e)
		s.stats.DeadLettered++
		return
	}
	s.toReady(e)
}

// exhausted reports whether a message had all the deliveries MaxDeliver
// allows.
func (s *State) exhausted(e *entry) bool {
	return s.cfg.MaxDeliver > 0 && e.attempts >= s.cfg.MaxDeliver
}

// finish takes a message out of pending for good. The caller records it as
// resolved (or knows that a merged position already does).
func (s *State) finish(e *entry) {
	s.leave(e)
	e.phase = phaseDone
	removeEntry(&e.o.pend, e)
	s.pending--
	if !e.queued { // else State.dead still points to it
		s.free = append(s.free, e)
	}
}

// newEntry returns a cleared entry, reusing a finished one if it can. The
// free list never holds more than MaxAckPending entries, since each was
// pending once.
func (s *State) newEntry() *entry {
	n := len(s.free)
	if n == 0 {
		return &entry{tidx: -1}
	}
	e := s.free[n-1]
	s.free[n-1] = nil
	s.free = s.free[:n-1]
	*e = entry{tidx: -1}
	return e
}
