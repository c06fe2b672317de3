package pubsub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// StartKind says where a new subscription begins.
type StartKind int

// Where a subscription may start.
const (
	StartNew  StartKind = iota // messages stored here from now on
	StartAll                   // every retained message
	StartLast                  // the last message of each origin, then new ones
	StartSeq                   // per origin, from Seqs[origin] on (others: all)
	StartTime                  // messages with an HLC at or after Time
)

// TruncatedPolicy says what a subscription does when the messages it was
// to read next were dropped by retention at its site: a durable one that
// resumes behind what the site retains, a start at a seq that is gone, or
// a slow subscription that a topic's limits overtook.
type TruncatedPolicy int

// What a subscription may do about messages retention dropped.
const (
	// OnTruncatedError fails Subscribe, or the consumers' next Next, with
	// a *TruncatedError naming the topic, the origin, the seq asked and
	// the first retained one. The subscription's position stays where it
	// was. The default.
	OnTruncatedError TruncatedPolicy = iota
	// OnTruncatedFirst goes on from the first retained message: the
	// position passes the dropped ones as if they had been acked.
	OnTruncatedFirst
)

// SubOptions describe a subscription. A durable one that exists resumes
// from its replicated position and ignores Start.
type SubOptions struct {
	Topic string
	// Durable names a durable subscription; "" makes an ephemeral one.
	Durable string
	Start   StartKind
	Seqs    map[string]uint64
	Time    time.Time
	// AckWait: default 30s. MaxDeliver: 0 unlimited. MaxAckPending: the
	// bound on unacked messages, default 1000.
	AckWait       time.Duration
	MaxDeliver    int
	MaxAckPending int
	// DeadLetter is the topic that gets messages past MaxDeliver; without
	// one they are dropped (counted as dead-lettered).
	DeadLetter string
	// PositionPredicate is what storing a durable position waits for;
	// default "majority".
	PositionPredicate string
	// MaxInFlight bounds this consumer's unacked deliveries; 0: MaxAckPending.
	MaxInFlight int
	// OnTruncated: what to do when retention dropped what the
	// subscription reads next. Default OnTruncatedError. A start that
	// names no seq (all, new, last, a time; an origin a start at seqs does
	// not name) begins at what is retained, also when retention drops
	// more before it read a message of the origin: that is no gap.
	OnTruncated TruncatedPolicy
}

// Delivery is one message handed to a consumer.
type Delivery struct {
	Msg     *pubsubpb.Message
	Attempt int
}

// AckKind is what a consumer says of a delivery.
type AckKind int

// What a consumer may say of a delivery.
const (
	Ack        AckKind = iota
	Nak                // redeliver after Delay
	InProgress         // restart the ack wait
	Term               // never redeliver
)

// AckRequest names one delivery and what the consumer says of it.
type AckRequest struct {
	Origin  string
	Seq     uint64
	Attempt int
	Kind    AckKind
	Delay   time.Duration
}

type subKey struct{ topic, name string }

// subscription is one subscription at this site: the pure state machine
// (package consumer) and the pump goroutine that feeds it from storage,
// hands its deliveries to the consumers and stores its position.
type subscription struct {
	b       *Broker
	key     subKey
	durable bool
	opts    SubOptions
	resumed bool              // set by init: a durable one resumed from its stored position
	skipped map[string]uint64 // set by init: the origins it started past dropped messages
	wake    chan struct{}
	done    chan struct{} // the pump ended
	stored  chan struct{} // closed once the final position is stored

	mu struct {
		sync.Mutex
		st        *consumer.State
		consumers map[consumer.ConsumerID]*Consumer
		nextID    consumer.ConsumerID
		cursors   map[string]uint64
		read      map[string]bool                      // origins it offered (or passed) a message of
		bodies    map[consumer.MsgID]*pubsubpb.Message // offered, not yet delivered
		bodyBytes int                                  // their sizes, bounded by maxBodyBytes
		// tail holds, per origin, messages the applier handed over as it
		// stored them, when they follow the cursor at once: a caught-up
		// subscription reads nothing back from storage.
		tail      map[string][]stored
		tailBytes int
		closing   bool
		failed    error // why the subscription stopped delivering (retention overtook it)
		dirty     bool  // the position changed since it was last stored
		storing   bool  // the broker's position writer is storing it
		storeErr  error
	}
}

// Consumer is one receiver attached to a subscription at this site.
type Consumer struct {
	s    *subscription
	id   consumer.ConsumerID
	wake chan struct{}
	mu   struct {
		sync.Mutex
		queued []Delivery
		closed bool
	}
}

func (s *subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (c *Consumer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// checkSubOptions fills defaults and refuses bad options.
func (b *Broker) checkSubOptions(ctx context.Context, o *SubOptions) error {
	t, err := b.knownTopic(o.Topic)
	if err != nil {
		return err
	}
	if o.Durable != "" {
		if err := checkTopicName(o.Durable); err != nil {
			return fmt.Errorf("%w: durable name: %v", ErrBadSubscription, err)
		}
	}
	if o.AckWait < 0 || o.MaxDeliver < 0 || o.MaxAckPending < 0 || o.MaxInFlight < 0 {
		return fmt.Errorf("%w: negative ack wait, max deliver, max ack pending or max in flight", ErrBadSubscription)
	}
	if o.AckWait == 0 {
		o.AckWait = pubsubpb.DefaultAckWaitMs * time.Millisecond
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = pubsubpb.DefaultMaxAckPending
	}
	if o.MaxAckPending > 1_000_000 {
		return fmt.Errorf("%w: max ack pending %d is above 1000000", ErrBadSubscription, o.MaxAckPending)
	}
	if o.PositionPredicate == "" {
		o.PositionPredicate = "majority"
	}
	if _, err := b.node.Predicate(ctx, o.PositionPredicate); err != nil {
		return fmt.Errorf("%w: position predicate %q: %v", ErrBadPredicate, o.PositionPredicate, err)
	}
	if o.DeadLetter != "" {
		if o.DeadLetter == o.Topic {
			return fmt.Errorf("%w: the dead-letter topic %q is the topic itself", ErrBadSubscription, o.DeadLetter)
		}
		if _, ok := b.topic(o.DeadLetter); !ok {
			return fmt.Errorf("%w: dead-letter topic %q (create it first)", ErrUnknownTopic, o.DeadLetter)
		}
	}
	if o.Start < StartNew || o.Start > StartTime {
		return fmt.Errorf("%w: unknown start %d", ErrBadSubscription, o.Start)
	}
	if o.OnTruncated != OnTruncatedError && o.OnTruncated != OnTruncatedFirst {
		return fmt.Errorf("%w: unknown on_truncated %d", ErrBadSubscription, o.OnTruncated)
	}
	if t.def.Retention.Policy == pubsubpb.RetentionWorkQueue {
		return b.checkWorkQueue(ctx, o)
	}
	return nil
}

// checkWorkQueue refuses what a work queue does not take: an ephemeral
// subscription, or a second durable one. Its messages go once its durable
// subscription acked them, so two would each miss what the other took.
// Two sites that create different ones at once both succeed; retention
// then waits for both.
func (b *Broker) checkWorkQueue(ctx context.Context, o *SubOptions) error {
	if o.Durable == "" {
		return fmt.Errorf("%w: topic %q is a work queue: subscribe with a durable name (its consumers share the work)", ErrBadSubscription, o.Topic)
	}
	names := map[string]bool{}
	b.mu.Lock()
	for s := range b.mu.byTopic[o.Topic] {
		if s.durable {
			names[s.key.name] = true
		}
	}
	b.mu.Unlock()
	stored, err := b.storedSubscriptions(ctx, o.Topic)
	if err != nil {
		return fmt.Errorf("pubsub: subscribe to the work queue %q: read its subscriptions: %w", o.Topic, err)
	}
	for k := range stored {
		names[k.name] = true
	}
	delete(names, o.Durable)
	if len(names) > 0 {
		other := slices.Sorted(maps.Keys(names))[0]
		return fmt.Errorf("%w: topic %q is a work queue and has the durable subscription %q; a work queue takes one "+
			"(subscribe to %q, or delete it first)", ErrBadSubscription, o.Topic, other, other)
	}
	return nil
}

// Subscribe attaches a consumer to a subscription at this site, creating
// the subscription (an ephemeral one, or a durable one at its replicated
// position) when it has no consumer here yet. Several consumers of one
// durable subscription share its messages, each to one of them.
func (b *Broker) Subscribe(ctx context.Context, o SubOptions) (*Consumer, error) {
	if err := b.checkSubOptions(ctx, &o); err != nil {
		return nil, err
	}
	for {
		s, fresh, err := b.findSub(o)
		if err != nil {
			return nil, err
		}
		if fresh {
			if err := s.init(ctx); err != nil {
				b.dropSub(s)
				close(s.done)
				close(s.stored)
				return nil, err
			}
			if !b.goBackground(s.pump) {
				b.dropSub(s)
				return nil, ErrClosed
			}
		}
		c, ok := s.attach(o.MaxInFlight)
		if ok {
			return c, nil
		}
		// It was closing as its last consumer left: wait, then start anew.
		select {
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// findSub returns the subscription of o at this site, or registers a new one.
func (b *Broker) findSub(o SubOptions) (*subscription, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return nil, false, ErrClosed
	}
	key := subKey{o.Topic, o.Durable}
	if o.Durable == "" {
		b.mu.ephemeral++
		key.name = "~" + strconv.FormatUint(b.mu.ephemeral, 10)
	}
	if s, ok := b.mu.subs[key]; ok {
		return s, false, nil
	}
	s := &subscription{b: b, key: key, durable: o.Durable != "", opts: o, wake: make(chan struct{}, 1),
		done: make(chan struct{}), stored: make(chan struct{})}
	s.mu.consumers = map[consumer.ConsumerID]*Consumer{}
	s.mu.cursors = map[string]uint64{}
	s.mu.read = map[string]bool{}
	s.mu.bodies = map[consumer.MsgID]*pubsubpb.Message{}
	s.mu.tail = map[string][]stored{}
	b.mu.subs[key] = s
	if b.mu.byTopic[key.topic] == nil {
		b.mu.byTopic[key.topic] = map[*subscription]struct{}{}
	}
	b.mu.byTopic[key.topic][s] = struct{}{}
	return s, true, nil
}

func (b *Broker) dropSub(s *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.subs[s.key] == s {
		delete(b.mu.subs, s.key)
	}
	delete(b.mu.byTopic[s.key.topic], s)
	if len(b.mu.byTopic[s.key.topic]) == 0 {
		delete(b.mu.byTopic, s.key.topic)
	}
}

// wakeTopic wakes the pumps of a topic's subscriptions: new messages, or a
// frontier that moved.
func (b *Broker) wakeTopic(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.mu.byTopic[topic] {
		s.signal()
	}
}

// init sets the subscription's state: a durable one from the positions
// every site stored (merged), or from its start; an ephemeral one from
// its start.
func (s *subscription) init(ctx context.Context) error {
	cfg := consumer.Config{AckWait: s.opts.AckWait, MaxDeliver: s.opts.MaxDeliver, MaxAckPending: s.opts.MaxAckPending}
	var pos consumer.Position
	found := false
	if s.durable {
		var err error
		pos, found, err = s.b.loadPosition(ctx, s.key, s.opts.PositionPredicate)
		if err != nil {
			return err
		}
	}
	if !found {
		var err error
		if pos, err = s.b.startPosition(s.opts); err != nil {
			return err
		}
	}
	st := consumer.New(cfg, pos)
	s.resumed = found
	if err := s.startRetained(st, pos); err != nil {
		return err
	}
	if s.durable {
		s.b.log.Info("durable subscription starts here", "topic", s.key.topic, "subscription", s.key.name,
			"resumed", found, "position", fmt.Sprint(pos))
	}
	s.mu.Lock()
	s.mu.st = st
	for o, p := range pos {
		s.mu.cursors[o] = p.Floor
	}
	for o, f := range s.skipped {
		s.mu.cursors[o] = max(s.mu.cursors[o], f)
	}
	s.mu.Unlock()
	if s.durable && !found {
		// Stored at once, so that a consumer that moves to another site
		// before acking anything starts where this one did.
		if err := s.b.storePosition(ctx, s.key, s.opts, st.Position()); err != nil {
			return err
		}
	}
	return nil
}

// startRetained moves a new state past what retention dropped here. A
// position that asked for dropped messages (a resumed durable one, or a
// start at a seq) fails with a *TruncatedError, unless OnTruncatedFirst;
// every other start begins at what is retained.
func (s *subscription) startRetained(st *consumer.State, pos consumer.Position) error {
	s.skipped = map[string]uint64{}
	for origin, ost := range s.b.store.stats(s.key.topic) {
		f := ost.Floor.Seq
		if f == 0 || pos[origin].Floor >= f {
			continue
		}
		s.mu.Lock()
		asked := !s.atRetainedLocked(origin)
		s.mu.Unlock()
		if asked && s.opts.OnTruncated != OnTruncatedFirst {
			return s.truncatedError(origin, pos[origin].Floor, f)
		}
		if asked {
			s.b.log.Info("subscription starts past messages retention dropped", "topic", s.key.topic, "subscription", s.key.name,
				"origin", origin, "asked", pos[origin].Floor+1, "dropped_to", f)
		}
		st.Skip(origin, f)
		s.skipped[origin] = f
	}
	return nil
}

// atRetainedLocked reports whether the subscription asked for no message
// of origin in particular: it started at what is retained (all, new, last,
// a time, or an origin a start at seqs does not name) and has read none
// of origin's since. Retention dropping what it would have read first is
// no gap then: it starts after, whatever OnTruncated says.
func (s *subscription) atRetainedLocked(origin string) bool {
	if s.resumed || s.mu.read[origin] {
		return false
	}
	return s.opts.Start != StartSeq || s.opts.Seqs[origin] == 0
}

func (s *subscription) truncatedError(origin string, after, floor uint64) error {
	first, _ := s.b.store.firstSeq(s.key.topic, origin)
	return &TruncatedError{Topic: s.key.topic, Origin: origin, Asked: after + 1, Truncated: floor, FirstRetained: first}
}

// startPosition turns a start into per-origin floors.
func (b *Broker) startPosition(o SubOptions) (consumer.Position, error) {
	pos := consumer.Position{}
	stats := b.store.stats(o.Topic)
	switch o.Start {
	case StartAll:
	case StartNew:
		for origin, st := range stats {
			pos[origin] = consumer.OriginPos{Floor: st.LastSeq}
		}
	case StartLast:
		for origin, st := range stats {
			if st.LastSeq > 0 {
				pos[origin] = consumer.OriginPos{Floor: st.LastSeq - 1}
			}
		}
	case StartSeq:
		for origin, seq := range o.Seqs {
			if _, ok := b.node.Schema().SiteIndex(origin); !ok {
				return nil, fmt.Errorf("%w: start seq for unknown site %q (known: %v)", ErrBadSubscription, origin, b.node.Schema().Sites)
			}
			if seq > 0 {
				pos[origin] = consumer.OriginPos{Floor: seq - 1}
			}
		}
	case StartTime:
		at := o.Time.UnixNano()
		for origin, st := range stats {
			floor := st.LastSeq
			err := b.store.scan(o.Topic, origin, 0, st.LastSeq, 0, func(m stored) bool {
				if m.HLC.Wall >= at {
					floor = m.Seq - 1
					return false
				}
				return true
			})
			if err != nil {
				return nil, err
			}
			pos[origin] = consumer.OriginPos{Floor: floor}
		}
	}
	return pos, nil
}

// attach adds a consumer, unless the subscription is closing.
func (s *subscription) attach(maxInFlight int) (*Consumer, bool) {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		return nil, false
	}
	s.mu.nextID++
	c := &Consumer{s: s, id: s.mu.nextID, wake: make(chan struct{}, 1)}
	s.mu.consumers[c.id] = c
	s.mu.st.Attach(c.id, maxInFlight)
	s.mu.Unlock()
	s.b.aud.addLocal(s.key.topic, 1)
	s.signal()
	return c, true
}

// Next waits for deliveries for this consumer.
func (c *Consumer) Next(ctx context.Context) ([]Delivery, error) {
	for {
		c.mu.Lock()
		q := c.mu.queued
		c.mu.queued = nil
		closed := c.mu.closed
		c.mu.Unlock()
		if len(q) > 0 {
			return q, nil
		}
		if err := c.s.failure(); err != nil {
			return nil, err
		}
		if closed {
			return nil, ErrClosed
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.wake:
		}
	}
}

func (s *subscription) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.failed
}

// fail stops the subscription's deliveries here: its consumers' Next
// returns err once they took what was queued. Its position stays; the
// consumers close as usual.
func (s *subscription) fail(err error) {
	s.mu.Lock()
	if s.mu.failed == nil {
		s.mu.failed = err
	}
	cs := make([]*Consumer, 0, len(s.mu.consumers))
	for _, c := range s.mu.consumers {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	s.b.log.Warn("subscription stops: retention dropped what it reads next", "topic", s.key.topic, "subscription", s.key.name, "error", err)
	for _, c := range cs {
		c.signal()
	}
}

// Ack applies what the consumer says of one delivery.
func (c *Consumer) Ack(a AckRequest) error {
	s := c.s
	now := s.b.cfg.Now()
	m := consumer.MsgID{Origin: a.Origin, Seq: a.Seq}
	s.mu.Lock()
	var err error
	switch a.Kind {
	case Ack:
		err = s.mu.st.Ack(c.id, m, a.Attempt, now)
	case Nak:
		err = s.mu.st.Nak(c.id, m, a.Attempt, a.Delay, now)
	case InProgress:
		err = s.mu.st.InProgress(c.id, m, a.Attempt, now)
	case Term:
		err = s.mu.st.Term(c.id, m, a.Attempt, now)
	default:
		err = fmt.Errorf("%w: unknown ack kind %d", ErrBadSubscription, a.Kind)
	}
	if err == nil && (a.Kind == Ack || a.Kind == Term) {
		s.mu.dirty = true
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("pubsub: %s %s/%d attempt %d: %w", ackName(a.Kind), a.Origin, a.Seq, a.Attempt, err)
	}
	if a.Kind == Ack || a.Kind == Term {
		s.b.metrics.acked.WithLabelValues(s.key.topic, s.label()).Inc()
	}
	s.signal()
	return nil
}

func ackName(k AckKind) string {
	switch k {
	case Ack:
		return "ack"
	case Nak:
		return "nak"
	case InProgress:
		return "in-progress"
	case Term:
		return "term"
	}
	return "ack kind " + strconv.Itoa(int(k))
}

// label names the subscription in metrics: ephemeral ones share one.
func (s *subscription) label() string {
	if !s.durable {
		return "~ephemeral"
	}
	return s.key.name
}

// Close detaches the consumer: what it had not acked is redelivered to the
// others, or, when it was the last one here, the subscription stores its
// position (a durable one: waiting for the position predicate) and ends.
func (c *Consumer) Close(ctx context.Context) error {
	s := c.s
	s.mu.Lock()
	if _, ok := s.mu.consumers[c.id]; !ok {
		s.mu.Unlock()
		return nil
	}
	delete(s.mu.consumers, c.id)
	s.mu.st.Detach(c.id, s.b.cfg.Now())
	last := len(s.mu.consumers) == 0
	if last {
		s.mu.closing = true
	}
	s.mu.Unlock()
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	c.signal()
	s.b.aud.addLocal(s.key.topic, -1)
	s.signal()
	if !last {
		return nil
	}
	select {
	case <-s.stored:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.storeErr
}

// Info describes the subscription.
func (c *Consumer) Info() SubscriptionInfo { return c.s.info() }

// shutdown ends the subscription as the broker closes.
func (s *subscription) shutdown() {
	s.mu.Lock()
	cs := make([]*Consumer, 0, len(s.mu.consumers))
	for _, c := range s.mu.consumers {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	// The positions are written at once; waiting for their predicate is
	// bounded, since peers may be gone too: what is written replicates
	// when the site comes back.
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	for _, c := range cs {
		_ = c.Close(ctx)
	}
}

// pump feeds the state machine from storage and hands out its deliveries
// until the last consumer left; then it stores the final position.
func (s *subscription) pump() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if s.closingNow() {
			s.finish()
			return
		}
		if s.failure() == nil {
			s.fill()
			s.dispatch()
			s.deadLetters()
		}
		now := s.b.cfg.Now()
		wait := time.Hour
		if d, ok := s.nextDeadline(); ok {
			wait = max(d.Sub(now), 0)
		}
		timer.Reset(wait)
		select {
		case <-s.wake:
		case <-timer.C:
		case <-s.b.ctx.Done():
			s.finish()
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (s *subscription) closingNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

func (s *subscription) nextDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.st.NextDeadline()
}

// fill offers the state machine the messages it has room for, per origin
// in seq order, up to what the topic's delivery predicate lets this site
// deliver.
func (s *subscription) fill() {
	t, ok := s.b.topic(s.key.topic)
	if !ok {
		return
	}
	for origin, st := range s.b.store.stats(s.key.topic) {
		if upTo, ok := s.b.deliverable(s.b.ctx, t, origin, st.LastSeq); ok {
			s.fillOrigin(origin, upTo)
		}
	}
}

func (s *subscription) fillOrigin(origin string, upTo uint64) {
	if !s.fillFromTail(origin, upTo) {
		return
	}
	s.mu.Lock()
	room := s.mu.st.Room()
	after := s.mu.cursors[origin]
	s.mu.Unlock()
	if room <= 0 || upTo <= after {
		return
	}
	var batch []stored
	floor, err := s.b.store.read(s.key.topic, origin, after, upTo, room, func(m stored) bool {
		batch = append(batch, m)
		return true
	})
	if err != nil {
		s.b.log.Warn("read messages", "topic", s.key.topic, "origin", origin, "error", err)
		return
	}
	if floor.Seq > after && !s.overtaken(origin, after, floor.Seq) {
		return
	}
	now := s.b.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range batch {
		if !s.offerLocked(m, now) {
			return
		}
	}
}

// overtaken handles messages retention dropped before the subscription
// read them (read from the snapshot the batch came from, so the batch
// holds only messages above floor): it moves past them, or fails the
// subscription, as OnTruncated says; true when the pump goes on.
func (s *subscription) overtaken(origin string, after, floor uint64) bool {
	s.mu.Lock()
	asked := !s.atRetainedLocked(origin)
	s.mu.Unlock()
	if asked && s.opts.OnTruncated != OnTruncatedFirst {
		s.fail(s.truncatedError(origin, after, floor))
		return false
	}
	s.mu.Lock()
	s.mu.st.Skip(origin, floor)
	s.mu.cursors[origin] = floor
	s.mu.dirty = true
	s.mu.Unlock()
	if asked {
		s.b.log.Info("subscription skips messages retention dropped before it read them", "topic", s.key.topic,
			"subscription", s.key.name, "origin", origin, "from", after+1, "to", floor)
	}
	return true
}

// fillFromTail offers what the applier handed over, up to upTo; it says
// whether storage may hold more to read (the tail is empty).
func (s *subscription) fillFromTail(origin string, upTo uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tail := s.mu.tail[origin]
	if len(tail) == 0 {
		return true
	}
	if s.b.store.statsOf(s.key.topic, origin).Floor.Seq > s.mu.cursors[origin] {
		// Retention dropped messages the subscription had not offered:
		// storage says which, and what to do is overtaken's.
		for _, m := range tail {
			s.mu.tailBytes -= m.Size
		}
		delete(s.mu.tail, origin)
		return true
	}
	now := s.b.cfg.Now()
	i := 0
	for ; i < len(tail); i++ {
		m := tail[i]
		if m.Seq <= s.mu.cursors[origin] {
			s.mu.tailBytes -= m.Size
			continue // read from storage meanwhile
		}
		if m.Seq > upTo || !s.offerLocked(m, now) {
			break
		}
		s.mu.tailBytes -= m.Size
	}
	tail = tail[i:]
	if len(tail) == 0 {
		delete(s.mu.tail, origin)
		return false
	}
	s.mu.tail[origin] = tail
	return false
}

// offerLocked offers one message read in order; false when the state has
// no room (the cursor stays before it).
func (s *subscription) offerLocked(m stored, now time.Time) bool {
	id := consumer.MsgID{Origin: m.Origin, Seq: m.Seq}
	if s.mu.st.Acked(id) {
		s.mu.cursors[m.Origin] = m.Seq
		s.mu.read[m.Origin] = true
		return true
	}
	if err := s.mu.st.Offer(id, now); err != nil {
		return false
	}
	s.mu.cursors[m.Origin] = m.Seq
	s.mu.read[m.Origin] = true
	if n := len(m.Msg.Data); s.mu.bodyBytes+n <= maxBodyBytes {
		s.mu.bodies[id] = m.Msg
		s.mu.bodyBytes += n
	}
	return true
}

// maxTailBytes bounds the messages handed over and not yet offered.
const maxTailBytes = 1 << 20

// handOver appends messages the applier just stored, of one topic and
// origin, the first following prev, when they follow what the subscription
// read or was handed; otherwise the pump reads them from storage.
func (s *subscription) handOver(origin string, prev uint64, ms []stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tail := s.mu.tail[origin]
	end := s.mu.cursors[origin]
	if len(tail) > 0 {
		end = tail[len(tail)-1].Seq
	}
	if end != prev {
		return
	}
	for _, m := range ms {
		if s.mu.tailBytes+m.Size > maxTailBytes || len(tail) >= s.opts.MaxAckPending {
			break
		}
		tail = append(tail, m)
		s.mu.tailBytes += m.Size
	}
	s.mu.tail[origin] = tail
}

// maxBodyBytes bounds the messages a subscription keeps between reading
// them and handing them out; past it, a delivery reads its message again,
// so that a stopped consumer costs MaxAckPending ids, not their bodies.
const maxBodyBytes = 4 << 20

// dispatch hands the state machine's deliveries to their consumers.
func (s *subscription) dispatch() {
	now := s.b.cfg.Now()
	s.mu.Lock()
	s.mu.st.Tick(now)
	ds := s.mu.st.Next(now)
	type out struct {
		c *Consumer
		d Delivery
	}
	outs := make([]out, 0, len(ds))
	var missing []consumer.Delivery
	for _, d := range ds {
		c := s.mu.consumers[d.Consumer]
		body, ok := s.mu.bodies[d.Msg]
		if ok {
			delete(s.mu.bodies, d.Msg)
			s.mu.bodyBytes -= len(body.Data)
		} else {
			missing = append(missing, d)
			continue
		}
		outs = append(outs, out{c, Delivery{Msg: body, Attempt: d.Attempt}})
	}
	s.mu.Unlock()
	for _, d := range missing {
		// A redelivery: read the message again rather than keep every
		// unacked body in memory.
		body, err := s.read(d.Msg)
		if err != nil {
			continue // it stays in flight: redelivered after the ack wait
		}
		if body == nil {
			s.gone(d.Msg)
			continue
		}
		s.mu.Lock()
		c := s.mu.consumers[d.Consumer]
		s.mu.Unlock()
		outs = append(outs, out{c, Delivery{Msg: body, Attempt: d.Attempt}})
	}
	topic, label := s.key.topic, s.label()
	for _, o := range outs {
		if o.c == nil {
			continue
		}
		o.c.mu.Lock()
		o.c.mu.queued = append(o.c.mu.queued, o.d)
		o.c.mu.Unlock()
		o.c.signal()
		s.b.metrics.delivered.WithLabelValues(topic, label).Inc()
		if o.d.Attempt > 1 {
			s.b.metrics.redelivered.WithLabelValues(topic, label).Inc()
		} else if h := o.d.Msg.GetHlc(); h != nil {
			s.b.metrics.lag.WithLabelValues(topic).Observe(max(0, float64(now.UnixNano()-h.Wall)/1e9))
		}
	}
	s.mu.Lock()
	st := s.mu.st.Stats()
	s.mu.Unlock()
	s.b.metrics.unacked.WithLabelValues(topic, label).Set(float64(st.Pending))
}

// read reads one message again; nil without an error when it is gone.
func (s *subscription) read(id consumer.MsgID) (*pubsubpb.Message, error) {
	var out *pubsubpb.Message
	err := s.b.store.scan(s.key.topic, id.Origin, id.Seq-1, id.Seq, 1, func(m stored) bool {
		out = m.Msg
		return false
	})
	if err != nil {
		s.b.log.Warn("read message", "topic", s.key.topic, "origin", id.Origin, "seq", id.Seq, "error", err)
	}
	return out, err
}

// gone ends a pending message that retention dropped after it was
// offered: its delivery cannot be made again, so it counts as resolved.
func (s *subscription) gone(id consumer.MsgID) {
	s.mu.Lock()
	err := s.mu.st.Drop(id)
	s.mu.dirty = true
	s.mu.Unlock()
	s.signal() // it made room
	if err == nil {
		s.b.log.Warn("retention dropped a message its subscription had not acked; it is not delivered again",
			"topic", s.key.topic, "subscription", s.key.name, "origin", id.Origin, "seq", id.Seq)
	}
}

// deadLetters publishes messages past their last delivery to the
// dead-letter topic, and only then counts them as done.
func (s *subscription) deadLetters() {
	s.mu.Lock()
	dls := s.mu.st.DeadLetters()
	s.mu.Unlock()
	for _, dl := range dls {
		if s.opts.DeadLetter != "" {
			body, err := s.read(dl.Msg)
			if err != nil {
				continue
			}
			if body == nil {
				s.gone(dl.Msg)
				continue
			}
			h := map[string]string{}
			for k, v := range body.Headers {
				h[k] = v
			}
			h[pubsubpb.HeaderDeadLetterTopic] = s.key.topic
			h[pubsubpb.HeaderDeadLetterOrigin] = dl.Msg.Origin
			h[pubsubpb.HeaderDeadLetterSeq] = strconv.FormatUint(dl.Msg.Seq, 10)
			h[pubsubpb.HeaderDeadLetterDeliveries] = strconv.Itoa(dl.Deliveries)
			id := "dl:" + s.key.topic + ":" + s.key.name + ":" + dl.Msg.Origin + ":" + strconv.FormatUint(dl.Msg.Seq, 10)
			if _, err := s.b.Publish(s.b.ctx, Message{Topic: s.opts.DeadLetter, Data: body.Data, Headers: h, ID: id}, 0); err != nil {
				s.b.log.Warn("dead-letter publish failed; the message stays pending", "topic", s.key.topic, "dead_letter", s.opts.DeadLetter, "error", err)
				continue
			}
		}
		s.mu.Lock()
		if err := s.mu.st.Resolve(dl.Msg); err == nil {
			s.mu.dirty = true
		}
		s.mu.Unlock()
		s.b.metrics.deadLettered.WithLabelValues(s.key.topic, s.label()).Inc()
	}
}

// finish stores the final position of a durable subscription and removes
// the subscription from the broker.
func (s *subscription) finish() {
	s.b.dropSub(s)
	if s.durable {
		s.b.log.Info("durable subscription ends here", "topic", s.key.topic, "subscription", s.key.name)
	}
	defer close(s.stored)
	s.mu.Lock()
	s.mu.closing = true
	for _, c := range s.mu.consumers {
		c.mu.Lock()
		c.mu.closed = true
		c.mu.Unlock()
		c.signal()
	}
	pos := s.mu.st.Position()
	s.mu.Unlock()
	if !s.durable {
		return
	}
	ctx, cancel := s.b.graceContext()
	defer cancel()
	err := s.b.storePosition(ctx, s.key, s.opts, pos)
	s.mu.Lock()
	s.mu.storeErr = err
	s.mu.Unlock()
}
