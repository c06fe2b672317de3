package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subConfig)

type subConfig struct {
	start  pubsubpb.SubscribeStart
	starts []string // the start options given
	bad    []string
}

func (c *subConfig) setStart(name string, p *pubsubpb.StartPosition) {
	c.starts = append(c.starts, name)
	c.start.Start = p
}

func (c *subConfig) count(name string, n int, dst *uint32) {
	if n < 0 || n > math.MaxUint32 {
		c.bad = append(c.bad, fmt.Sprintf("%s(%d): want 0 (the site's default) to %d", name, n, uint32(math.MaxUint32)))
		return
	}
	*dst = uint32(n)
}

// Durable makes the subscription durable under name: its position (per
// origin, what was acked) is stored at the sites, so that a consumer that
// comes back, at any site, resumes there; several consumers may share it.
// Without Durable the subscription is ephemeral: it lives as long as its
// stream (and moves with it on failover).
func Durable(name string) SubscribeOption {
	return func(c *subConfig) {
		if name == "" {
			c.bad = append(c.bad, `Durable(""): want a name`)
		}
		c.start.Durable = name
	}
}

// StartAll starts with every retained message.
func StartAll() SubscribeOption {
	return func(c *subConfig) { c.setStart("StartAll", &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_ALL}) }
}

// StartNew starts with the messages published from now on (the default).
func StartNew() SubscribeOption {
	return func(c *subConfig) { c.setStart("StartNew", &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_NEW}) }
}

// StartLast starts with the last message of each origin, then new ones.
func StartLast() SubscribeOption {
	return func(c *subConfig) {
		c.setStart("StartLast", &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_LAST})
	}
}

// StartSeq starts, per origin, at seqs[origin]; with every message of the
// origins it does not name.
func StartSeq(seqs map[string]uint64) SubscribeOption {
	return func(c *subConfig) {
		c.setStart("StartSeq", &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_SEQ, Seqs: maps.Clone(seqs)})
	}
}

// StartTime starts with the messages whose HLC is at or after t.
func StartTime(t time.Time) SubscribeOption {
	return func(c *subConfig) {
		if t.IsZero() {
			c.bad = append(c.bad, "StartTime(zero time): want a time")
		}
		c.setStart("StartTime", &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_TIME, TimeUnixNano: t.UnixNano()})
	}
}

// AckWait is how long a delivery waits for its ack before the site
// delivers it again (default 30 s); InProgress restarts it.
func AckWait(d time.Duration) SubscribeOption {
	return func(c *subConfig) {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			c.bad = append(c.bad, fmt.Sprintf("AckWait(%s): want 0 (the default, 30s) or at least 1ms", d))
		}
		c.start.AckWaitMs = d.Milliseconds()
	}
}

// MaxDeliver bounds the deliveries of a message (default 0: unlimited);
// past it the message goes to the DeadLetter topic, if any.
func MaxDeliver(n int) SubscribeOption {
	return func(c *subConfig) { c.count("MaxDeliver", n, &c.start.MaxDeliver) }
}

// MaxAckPending bounds the subscription's unacked messages, over all its
// consumers (default 1000): the site delivers no more until some are
// answered.
func MaxAckPending(n int) SubscribeOption {
	return func(c *subConfig) { c.count("MaxAckPending", n, &c.start.MaxAckPending) }
}

// MaxInFlight bounds this consumer's unacked deliveries (default:
// MaxAckPending). It also bounds what the client holds for Next.
func MaxInFlight(n int) SubscribeOption {
	return func(c *subConfig) { c.count("MaxInFlight", n, &c.start.MaxInFlight) }
}

// DeadLetter names the topic that gets the messages past MaxDeliver, with
// the pubsubpb.HeaderDeadLetter* headers.
func DeadLetter(topic string) SubscribeOption {
	return func(c *subConfig) { c.start.DeadLetter = topic }
}

// PositionPredicate is what a durable subscription's position waits for
// to count as stored (default majority). Only with Durable.
func PositionPredicate(p string) SubscribeOption {
	return func(c *subConfig) { c.start.PositionPredicate = p }
}

// OnTruncatedFirst makes a subscription whose next messages retention
// dropped at the site (a durable one resuming behind what the site
// retains, a StartSeq at a seq that is gone, a slow one a limit overtook)
// go on from the first retained message. Without it such a subscription
// fails with ErrTruncated.
func OnTruncatedFirst() SubscribeOption {
	return func(c *subConfig) { c.start.OnTruncated = pubsubpb.SubscribeStart_TRUNCATED_FIRST }
}

// Subscription is one consumer of a subscription. Next hands out its
// messages; Close ends it, storing a durable position.
type Subscription struct {
	c       *Client
	op      string
	start   *pubsubpb.SubscribeStart // what the caller asked for
	ctx     context.Context          // ends the subscription's streams
	cancel  context.CancelFunc
	ackWake chan struct{} // cap 1: acks were queued, or Close was called
	closing chan struct{} // closed by Close
	done    chan struct{} // closed when run returns

	mu struct {
		sync.Mutex
		gen       uint64 // counts the subscription's streams; a Msg carries its stream's
		queue     []*Msg // received, not yet handed out by Next
		queued    map[msgKey]*Msg
		changed   chan struct{} // closed and replaced when queue, err or closing change
		acks      []*pubsubpb.Ack
		ackErrs   []AckError
		delivered map[string]uint64 // per origin, the highest seq received
		info      SubscriptionInfo
		closing   bool  // Close was called
		closeSent bool  // Close went to the site: no more acks
		closed    bool  // the site answered Close: the position is stored
		err       error // why the subscription ended; nil while it runs
	}
}

type msgKey struct {
	origin string
	seq    uint64
}

// maxAckErrors bounds the ack errors a Subscription keeps for AckErrors.
const maxAckErrors = 1024

// maxAcksPerMessage bounds the acks the client sends in one message.
const maxAcksPerMessage = 1024

func subscribeOp(topic string) string { return fmt.Sprintf("subscribe to %q", topic) }

// Subscribe opens a subscription to topic at the site in use, or the next
// one when that is lost, and returns once the site has answered (ctx, or
// the client's timeout, bounds that wait; it plays no part afterwards).
//
// When the site is lost later, the subscription moves to the next site by
// itself. A durable one sends the same start again: the site resumes it
// from its stored position, so the messages not yet acked are delivered
// again (Next drops those it had not handed out). An ephemeral one
// resumes, per origin, after the last message it received; origins it had
// received nothing from start at their last message at the new site when
// the subscription started at new, last or a time (what they published
// while it moved is missed), with every message when it started at all.
// Acks of messages from the lost site are dropped: Ack returns nil.
func (c *Client) Subscribe(ctx context.Context, topic string, opts ...SubscribeOption) (*Subscription, error) {
	op := subscribeOp(topic)
	cfg := subConfig{}
	cfg.start.Topic = topic
	for _, o := range opts {
		o(&cfg)
	}
	if topic == "" {
		cfg.bad = append(cfg.bad, "no topic given")
	}
	if len(cfg.starts) > 1 {
		cfg.bad = append(cfg.bad, strings.Join(cfg.starts, " and ")+": give one start position")
	}
	if cfg.start.PositionPredicate != "" && cfg.start.Durable == "" {
		cfg.bad = append(cfg.bad, "PositionPredicate without Durable: only a durable subscription has a stored position")
	}
	if cfg.start.DeadLetter != "" && cfg.start.DeadLetter == topic {
		cfg.bad = append(cfg.bad, fmt.Sprintf("DeadLetter(%q): a topic cannot be its own dead-letter topic", topic))
	}
	if len(cfg.bad) > 0 {
		return nil, &Error{Op: op, Code: codes.InvalidArgument, Msg: strings.Join(cfg.bad, "; "), kind: ErrInvalid}
	}
	if cfg.start.Start == nil {
		cfg.start.Start = &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_NEW}
	}
	s := &Subscription{c: c, op: op, start: &cfg.start, ackWake: make(chan struct{}, 1),
		closing: make(chan struct{}), done: make(chan struct{})}
	s.mu.queued = map[msgKey]*Msg{}
	s.mu.changed = make(chan struct{})
	s.mu.delivered = map[string]uint64{}
	s.ctx, s.cancel = context.WithCancel(c.ctx)

	ctx, cancel := c.bound(ctx, 0)
	defer cancel()
	var last error
	for range c.addrs {
		st, err := c.current()
		if err != nil {
			s.cancel()
			if errors.Is(err, ErrClosed) {
				return nil, errClientClosed(op)
			}
			return nil, err
		}
		stream, end, err := s.open(ctx, st, s.start)
		if err == nil {
			if !c.goroutine(func() { s.run(stream, end, st) }) {
				end()
				s.cancel()
				return nil, errClientClosed(op)
			}
			return s, nil
		}
		last = wrapErr(ctx, op, st.addr, err)
		if ctx.Err() != nil || !lostSite(err) {
			s.cancel()
			return nil, last
		}
		c.failover(st.gen)
	}
	s.cancel()
	return nil, last
}

// open starts a stream at st and waits for the site's subscribed answer,
// bound ending the wait (and the stream) until then.
func (s *Subscription) open(bound context.Context, st site, start *pubsubpb.SubscribeStart) (pubsubpb.PubSub_SubscribeClient, context.CancelFunc, error) {
	ctx, end := context.WithCancel(s.ctx)
	stop := context.AfterFunc(bound, end)
	stream, err := st.api.Subscribe(ctx)
	if err == nil {
		err = stream.Send(&pubsubpb.SubscribeRequest{Request: &pubsubpb.SubscribeRequest_Start{Start: start}})
		if errors.Is(err, io.EOF) {
			// The site ended the stream: Recv says why.
			err = nil
		}
	}
	var first *pubsubpb.SubscribeReply
	if err == nil {
		first, err = stream.Recv()
	}
	if !stop() && err == nil {
		err = bound.Err()
	}
	if err == nil {
		if sub, ok := first.Reply.(*pubsubpb.SubscribeReply_Subscribed); ok {
			s.subscribed(st, sub.Subscribed)
			return stream, end, nil
		}
		err = newError(s.op, st.addr, codes.Internal, fmt.Sprintf("the site answered the start with %T, not subscribed", first.Reply), ErrUnknownTopic)
	}
	end()
	if errors.Is(err, io.EOF) {
		err = newError(s.op, st.addr, codes.Unavailable, "the site ended the stream before it answered", ErrUnknownTopic)
	}
	return nil, nil, err
}

func (s *Subscription) subscribed(st site, info *pubsubpb.SubscriptionInfo) {
	s.c.learn(st.addr, info.GetSite())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.info = subscriptionInfoOf(info)
}

// errClosedByClose is why a subscription whose Close the site answered
// ended.
var errClosedByClose = errors.New("closed")

// run serves the subscription's streams, one after the other, until it
// ends: closed, the client closed, or a failure no other site can help
// with.
func (s *Subscription) run(stream pubsubpb.PubSub_SubscribeClient, end context.CancelFunc, st site) {
	defer close(s.done)
	defer s.cancel()
	for {
		err := s.serve(stream, end, st)
		durable := s.start.Durable != ""
		s.mu.Lock()
		s.mu.gen++
		s.mu.acks = nil
		if durable {
			// The next site delivers them again, from the stored position.
			s.mu.queue, s.mu.queued = nil, map[msgKey]*Msg{}
		}
		closing, closed := s.mu.closing, s.mu.closed
		s.mu.Unlock()
		switch {
		case closed || errors.Is(err, errClosedByClose):
			s.finish(nil)
			return
		case s.ctx.Err() != nil:
			s.finish(errClientClosed(s.op))
			return
		case closing:
			s.finish(&Error{Op: s.op, Code: codes.Unavailable, Site: st.addr, kind: ErrUnavailable,
				Msg: "the site was lost before it stored the position: the acks it had stored count"})
			return
		case !errors.Is(err, io.EOF) && !lostSite(err):
			s.finish(siteErr(s.op, st.addr, err))
			return
		}
		s.c.failover(st.gen)
		if stream, end, st, err = s.reopen(); err != nil {
			s.finish(err)
			return
		}
	}
}

// finish records why the subscription ended.
func (s *Subscription) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = &Error{Op: s.op, Code: codes.Canceled, Msg: "subscription closed", kind: ErrClosed}
		s.mu.closed = true
	}
	if s.mu.err == nil {
		s.mu.err = err
	}
	s.changedLocked()
}

func (s *Subscription) changedLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// serve reads one stream until it ends, with a goroutine that sends the
// acks and the Close; it returns errClosedByClose once the site answered
// Close.
func (s *Subscription) serve(stream pubsubpb.PubSub_SubscribeClient, end context.CancelFunc, st site) error {
	s.mu.Lock()
	gen := s.mu.gen
	s.mu.Unlock()
	sent := make(chan struct{})
	if !s.c.goroutine(func() { defer close(sent); s.send(stream, gen) }) {
		return errClientClosed(s.op)
	}
	// The sender stops once the stream's context ends.
	defer func() { end(); <-sent }()
	// It looks at once for what was queued before it started.
	signal(s.ackWake)
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		switch x := r.Reply.(type) {
		case *pubsubpb.SubscribeReply_Deliveries:
			s.deliver(gen, x.Deliveries.GetDeliveries())
		case *pubsubpb.SubscribeReply_AckErrors:
			s.ackErrors(x.AckErrors.GetErrors())
		case *pubsubpb.SubscribeReply_Subscribed:
			s.subscribed(st, x.Subscribed)
		case *pubsubpb.SubscribeReply_Closed:
			s.subscribed(st, x.Closed)
			s.mu.Lock()
			s.mu.closed = true
			s.mu.Unlock()
			return errClosedByClose
		}
	}
}

// send sends the acks of stream gen as they are queued, then the Close
// once Close is called, until the stream ends.
func (s *Subscription) send(stream pubsubpb.PubSub_SubscribeClient, gen uint64) {
	done := stream.Context().Done()
	for {
		select {
		case <-s.ackWake:
		case <-done:
			return
		}
		for {
			s.mu.Lock()
			if s.mu.gen != gen {
				s.mu.Unlock()
				return
			}
			acks := s.mu.acks
			s.mu.acks = nil
			sendClose := s.mu.closing && !s.mu.closeSent
			if sendClose {
				s.mu.closeSent = true
			}
			s.mu.Unlock()
			for len(acks) > 0 {
				n := min(len(acks), maxAcksPerMessage)
				err := stream.Send(&pubsubpb.SubscribeRequest{Request: &pubsubpb.SubscribeRequest_Acks{Acks: &pubsubpb.Acks{Acks: acks[:n]}}})
				if err != nil {
					return // the reader learns why
				}
				acks = acks[n:]
			}
			if sendClose {
				if stream.Send(&pubsubpb.SubscribeRequest{Request: &pubsubpb.SubscribeRequest_Close{Close: &pubsubpb.Close{}}}) == nil {
					_ = stream.CloseSend()
				}
				return
			}
			s.mu.Lock()
			more := len(s.mu.acks) > 0
			s.mu.Unlock()
			if !more {
				break
			}
		}
	}
}

// deliver queues the deliveries of stream gen for Next. A redelivery of a
// message still queued replaces it.
func (s *Subscription) deliver(gen uint64, ds []*pubsubpb.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		m := msgOf(d)
		m.sub, m.gen = s, gen
		k := msgKey{m.Origin, m.Seq}
		if q := s.mu.queued[k]; q != nil {
			*q = *m
			continue
		}
		s.mu.queue = append(s.mu.queue, m)
		s.mu.queued[k] = m
		s.mu.delivered[m.Origin] = max(s.mu.delivered[m.Origin], m.Seq)
	}
	s.changedLocked()
}

// reopen subscribes again at the site in use, moving on round the
// addresses (pausing, longer each round, after each round in which no site
// answered) until one answers, the subscription is closed, or a site
// refuses it for good.
func (s *Subscription) reopen() (pubsubpb.PubSub_SubscribeClient, context.CancelFunc, site, error) {
	pause := 100 * time.Millisecond
	for {
		for range s.c.addrs {
			st, err := s.c.current()
			if err != nil {
				return nil, nil, site{}, errClientClosed(s.op)
			}
			if s.isClosing() {
				return nil, nil, site{}, &Error{Op: s.op, Code: codes.Unavailable, kind: ErrUnavailable,
					Msg: "closed while moving to another site: the acks the sites had stored count"}
			}
			bound, cancel := context.WithTimeout(s.ctx, s.c.timeout)
			start, err := s.resumeStart(bound, st)
			var stream pubsubpb.PubSub_SubscribeClient
			var end context.CancelFunc
			if err == nil {
				stream, end, err = s.open(bound, st, start)
			}
			timedOut := bound.Err() != nil
			cancel()
			if err == nil {
				return stream, end, st, nil
			}
			if s.ctx.Err() != nil {
				return nil, nil, site{}, errClientClosed(s.op)
			}
			if !lostSite(err) && !timedOut {
				return nil, nil, site{}, siteErr(s.op, st.addr, err)
			}
			s.c.failover(st.gen)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-s.ctx.Done():
		case <-s.closing:
		}
		t.Stop()
		pause = min(2*pause, 5*time.Second)
	}
}

func (s *Subscription) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

// resumeStart is the start to send at st after a failover: the same for a
// durable subscription; for an ephemeral one, per origin, the seq after
// the last message received.
func (s *Subscription) resumeStart(ctx context.Context, st site) (*pubsubpb.SubscribeStart, error) {
	if s.start.Durable != "" {
		return s.start, nil
	}
	s.mu.Lock()
	delivered := maps.Clone(s.mu.delivered)
	s.mu.Unlock()
	seqs := map[string]uint64{}
	switch s.start.Start.GetKind() {
	case pubsubpb.StartPosition_SEQ:
		maps.Copy(seqs, s.start.Start.Seqs)
	case pubsubpb.StartPosition_NEW, pubsubpb.StartPosition_LAST, pubsubpb.StartPosition_TIME:
		// SEQ starts the origins it does not name at their first message:
		// name each origin the site knows.
		t, err := st.api.GetTopic(ctx, &pubsubpb.GetTopicRequest{Name: s.start.Topic})
		if err != nil {
			return nil, err
		}
		for _, o := range t.Origins {
			seqs[o.Origin] = o.LastSeq + 1
		}
	}
	for o, last := range delivered {
		seqs[o] = last + 1
	}
	start := proto.Clone(s.start).(*pubsubpb.SubscribeStart)
	start.Start = &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_SEQ, Seqs: seqs}
	return start, nil
}

// Next returns the next message, waiting for one as long as ctx allows.
// It fails with ErrClosed once Close was called, and with the reason once
// the subscription ended (after the messages already received, unless it
// was closed). A subscription that moves to another site goes on: Next
// does not report that.
func (s *Subscription) Next(ctx context.Context) (*Msg, error) {
	for {
		s.mu.Lock()
		if s.mu.closing {
			s.mu.Unlock()
			return nil, &Error{Op: s.op, Code: codes.Canceled, Msg: "subscription closed", kind: ErrClosed}
		}
		if len(s.mu.queue) > 0 {
			m := s.mu.queue[0]
			s.mu.queue[0] = nil
			s.mu.queue = s.mu.queue[1:]
			delete(s.mu.queued, msgKey{m.Origin, m.Seq})
			s.mu.Unlock()
			return m, nil
		}
		if err := s.mu.err; err != nil {
			s.mu.Unlock()
			return nil, err
		}
		ch := s.mu.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("pubsub: next message of %q: %w", s.start.Topic, ctx.Err())
		}
	}
}

// Close answers the acks made so far, asks the site to store the durable
// position and waits until it did (ctx, or the client's timeout, bounds
// that; then the stream is ended without it). Next then fails with
// ErrClosed, and the messages not acked are delivered again to the
// subscription's next consumer. Close is idempotent; when the subscription
// had already ended, it returns nil (Next reported why).
func (s *Subscription) Close(ctx context.Context) error {
	s.mu.Lock()
	first := !s.mu.closing
	if first {
		s.mu.closing = true
		close(s.closing)
		s.changedLocked()
	}
	ended := s.mu.err != nil
	s.mu.Unlock()
	if ended {
		<-s.done
		return nil
	}
	signal(s.ackWake)
	ctx, cancel := s.c.bound(ctx, 0)
	defer cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return fmt.Errorf("pubsub: close subscription to %q: the site did not confirm the position: %w", s.start.Topic, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || !first {
		return nil
	}
	return s.mu.err
}

// Info describes the subscription as the site last did: when it
// subscribed, or when it answered Close.
func (s *Subscription) Info() SubscriptionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.info.clone()
}

// AckError is an ack the site refused.
type AckError struct {
	Origin  string
	Seq     uint64
	Attempt int
	Kind    string // ack, nak, in_progress or term
	Code    codes.Code
	Msg     string // the site's message
}

func (e AckError) Error() string {
	return fmt.Sprintf("pubsub: %s of %s/%d (attempt %d): %s", e.Kind, e.Origin, e.Seq, e.Attempt, e.Msg)
}

func (s *Subscription) ackErrors(es []*pubsubpb.AckError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		a := e.GetAck()
		s.mu.ackErrs = append(s.mu.ackErrs, AckError{Origin: a.GetOrigin(), Seq: a.GetSeq(), Attempt: int(a.GetAttempt()),
			Kind: strings.ToLower(a.GetKind().String()), Code: codes.Code(e.Code), Msg: e.Error})
	}
	if n := len(s.mu.ackErrs); n > maxAckErrors {
		s.mu.ackErrs = append(s.mu.ackErrs[:0], s.mu.ackErrs[n-maxAckErrors:]...)
	}
}

// AckErrors returns the acks the site refused since the last call, oldest
// first, and forgets them. The site refuses an ack it cannot match with an
// unanswered delivery: one answered already, or one whose ack wait ran out
// and that was delivered again. The Subscription keeps the last 1024.
func (s *Subscription) AckErrors() []AckError {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.mu.ackErrs
	s.mu.ackErrs = nil
	return out
}

// Msg is one delivery of a message to a subscription. Answer it with
// exactly one of Ack, Nak or Term (InProgress any number of times before).
type Msg struct {
	Topic   string            `json:"topic"`
	Origin  string            `json:"origin"` // the site it was published at
	Seq     uint64            `json:"seq"`    // its seq on the origin's pubsub stream
	HLC     HLC               `json:"hlc"`
	ID      string            `json:"id,omitempty"` // the publisher's message id
	Headers map[string]string `json:"headers,omitempty"`
	Data    []byte            `json:"data"`
	// Attempt is 1 for the first delivery, 2 for the first redelivery...
	Attempt int `json:"attempt"`

	sub      *Subscription
	gen      uint64 // the stream it came on
	answered bool   // Ack, Nak or Term was called; guarded by sub.mu
}

func msgOf(d *pubsubpb.Delivery) *Msg {
	m := d.Message
	if m == nil {
		m = &pubsubpb.Message{}
	}
	return &Msg{Topic: m.Topic, Origin: m.Origin, Seq: m.Seq, HLC: hlcOf(m.Hlc), ID: m.MsgId,
		Headers: maps.Clone(m.Headers), Data: m.Data, Attempt: int(d.Attempt)}
}

// Ack tells the site the message is handled: it is not delivered again.
// Acks are queued and sent in batches on the subscription's stream; the
// site's refusals come back through Subscription.AckErrors. Ack returns
// ErrAlreadyAcked after Ack, Nak or Term, ErrClosed once the subscription
// ended or its Close was sent, and nil for a message from a site the
// subscription has since moved away from (the ack is dropped).
func (m *Msg) Ack() error { return m.sub.ack(m, pubsubpb.Ack_ACK, 0, true) }

// Nak asks the site to deliver the message again after delay.
func (m *Msg) Nak(delay time.Duration) error {
	return m.sub.ack(m, pubsubpb.Ack_NAK, max(delay, 0), true)
}

// InProgress restarts the message's ack wait: it is still being handled.
func (m *Msg) InProgress() error { return m.sub.ack(m, pubsubpb.Ack_IN_PROGRESS, 0, false) }

// Term tells the site never to deliver the message again, handled or not.
func (m *Msg) Term() error { return m.sub.ack(m, pubsubpb.Ack_TERM, 0, true) }

func (s *Subscription) ack(m *Msg, kind pubsubpb.Ack_Kind, delay time.Duration, final bool) error {
	if s == nil {
		return errors.New("pubsub: ack: the message did not come from a Subscription")
	}
	op := strings.ToLower(kind.String())
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.answered {
		return fmt.Errorf("pubsub: %s of %s/%d: %w", op, m.Origin, m.Seq, ErrAlreadyAcked)
	}
	if s.mu.closeSent || s.mu.err != nil {
		return &Error{Op: fmt.Sprintf("%s of %s/%d", op, m.Origin, m.Seq), Code: codes.Canceled, Msg: "subscription closed", kind: ErrClosed}
	}
	if final {
		m.answered = true
	}
	if m.gen != s.mu.gen {
		return nil
	}
	s.mu.acks = append(s.mu.acks, &pubsubpb.Ack{Origin: m.Origin, Seq: m.Seq, Attempt: uint32(m.Attempt), Kind: kind, DelayMs: delay.Milliseconds()})
	if len(s.mu.acks) == 1 {
		signal(s.ackWake)
	}
	return nil
}
