package pubsubclienttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// Server is one fake site: a gRPC server of the pub/sub API on 127.0.0.1,
// publishing as origin Site into its Cluster.
type Server struct {
	pubsubpb.UnimplementedPubSubServer
	Site string
	Addr string

	c       *Cluster
	gs      *grpc.Server
	wg      sync.WaitGroup // Serve
	readers sync.WaitGroup // the readers of Subscribe streams

	mu struct {
		sync.Mutex
		hold      bool
		held      []*held
		maxHeld   int
		stopped   bool
		inject    map[string][]error
		publishes []*pubsubpb.PublishRequest
		starts    []*pubsubpb.SubscribeStart
		acks      []*pubsubpb.Ack
		closes    int
		changed   chan struct{}
	}
}

// held is a publish made whose answer waits for the test.
type held struct {
	answer func() // sends the answer; never blocks
}

// Start starts a fake site of the cluster named site; the test's cleanup
// stops it.
func (c *Cluster) Start(t testing.TB, site string) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Site: site, Addr: lis.Addr().String(), c: c, gs: grpc.NewServer(grpc.WaitForHandlers(true))}
	s.mu.inject = map[string][]error{}
	s.mu.changed = make(chan struct{})
	pubsubpb.RegisterPubSubServer(s.gs, s)
	s.wg.Go(func() { _ = s.gs.Serve(lis) })
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the site at once, as a crash would: its connections close and
// its clients see Unavailable. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	s.mu.stopped = true
	// Their callers see the connection go.
	s.mu.held = nil
	s.changedLocked()
	s.mu.Unlock()
	s.gs.Stop() // returns once every handler did: no reader starts after it
	s.wg.Wait()
	s.readers.Wait()
}

func (s *Server) changedLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// WaitFor waits until cond holds, looking again on every change of the
// server's or the cluster's state; it fails the test after 10 s.
func (s *Server) WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.mu.changed
		s.mu.Unlock()
		cc := s.c.watch()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-cc:
		case <-deadline.C:
			t.Fatalf("%s: waited 10s for %s", s.Site, what)
		}
	}
}

// FailNext makes the next call of method (CreateTopic, GetTopic,
// ListTopics, DeleteTopic, Publish, Publishes for one request of the
// stream, Subscribe, ListSubscriptions, DeleteSubscription) fail with err. Calls queue up.
func (s *Server) FailNext(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.inject[method] = append(s.mu.inject[method], err)
}

func (s *Server) injected(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.mu.inject[method]
	if len(errs) == 0 {
		return nil
	}
	s.mu.inject[method] = errs[1:]
	return errs[0]
}

// HoldAcks makes publishes wait for ReleaseNewest or ReleaseAll before
// they are answered (they are made at once), or answers them as they come
// again.
func (s *Server) HoldAcks(on bool) {
	s.mu.Lock()
	s.mu.hold = on
	s.mu.Unlock()
	if !on {
		s.ReleaseAll()
	}
}

// Held is how many publishes wait for their answer.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.held)
}

// MaxHeld is the most publishes that waited at once.
func (s *Server) MaxHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.maxHeld
}

// ReleaseNewest answers the publish that has waited least; false if none
// waits.
func (s *Server) ReleaseNewest() bool {
	s.mu.Lock()
	n := len(s.mu.held)
	if n == 0 {
		s.mu.Unlock()
		return false
	}
	h := s.mu.held[n-1]
	s.mu.held = s.mu.held[:n-1]
	s.changedLocked()
	s.mu.Unlock()
	h.answer()
	return true
}

// ReleaseAll answers every publish that waits, oldest first.
func (s *Server) ReleaseAll() {
	s.mu.Lock()
	hs := s.mu.held
	s.mu.held = nil
	s.changedLocked()
	s.mu.Unlock()
	for _, h := range hs {
		h.answer()
	}
}

// PublishRequests returns the publish requests the site received, in
// order, by Publish and Publishes.
func (s *Server) PublishRequests() []*pubsubpb.PublishRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pubsubpb.PublishRequest(nil), s.mu.publishes...)
}

// Starts returns the SubscribeStarts the site received, in order.
func (s *Server) Starts() []*pubsubpb.SubscribeStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pubsubpb.SubscribeStart(nil), s.mu.starts...)
}

// Acks returns the acks the site received, in order.
func (s *Server) Acks() []*pubsubpb.Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pubsubpb.Ack(nil), s.mu.acks...)
}

// Closes is how many subscriptions the site closed on request.
func (s *Server) Closes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closes
}

func (s *Server) record(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	s.changedLocked()
}

func (s *Server) CreateTopic(_ context.Context, r *pubsubpb.CreateTopicRequest) (*pubsubpb.TopicInfo, error) {
	if err := s.injected("CreateTopic"); err != nil {
		return nil, err
	}
	return s.c.createTopic(s.Site, r.Topic)
}

func (s *Server) GetTopic(_ context.Context, r *pubsubpb.GetTopicRequest) (*pubsubpb.TopicInfo, error) {
	if err := s.injected("GetTopic"); err != nil {
		return nil, err
	}
	return s.c.getTopic(s.Site, r.Name)
}

func (s *Server) ListTopics(context.Context, *pubsubpb.ListTopicsRequest) (*pubsubpb.ListTopicsResponse, error) {
	if err := s.injected("ListTopics"); err != nil {
		return nil, err
	}
	return s.c.listTopics(s.Site), nil
}

func (s *Server) DeleteTopic(_ context.Context, r *pubsubpb.DeleteTopicRequest) (*pubsubpb.DeleteTopicResponse, error) {
	if err := s.injected("DeleteTopic"); err != nil {
		return nil, err
	}
	if err := s.c.deleteTopic(r.Name); err != nil {
		return nil, err
	}
	return &pubsubpb.DeleteTopicResponse{}, nil
}

func (s *Server) ListSubscriptions(_ context.Context, r *pubsubpb.ListSubscriptionsRequest) (*pubsubpb.ListSubscriptionsResponse, error) {
	if err := s.injected("ListSubscriptions"); err != nil {
		return nil, err
	}
	return s.c.listSubscriptions(s.Site, r.Topic), nil
}

func (s *Server) DeleteSubscription(_ context.Context, r *pubsubpb.DeleteSubscriptionRequest) (*pubsubpb.DeleteSubscriptionResponse, error) {
	if err := s.injected("DeleteSubscription"); err != nil {
		return nil, err
	}
	if err := s.c.deleteSubscription(r.Topic, r.Name); err != nil {
		return nil, err
	}
	return &pubsubpb.DeleteSubscriptionResponse{}, nil
}

// publish makes a publish; hold reports whether its answer must wait.
func (s *Server) publish(method string, r *pubsubpb.PublishRequest) (resp *pubsubpb.PublishResponse, hold bool, err error) {
	s.record(func() { s.mu.publishes = append(s.mu.publishes, proto.Clone(r).(*pubsubpb.PublishRequest)) })
	if err := s.injected(method); err != nil {
		return nil, false, err
	}
	resp, err = s.c.publish(s.Site, r)
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return resp, s.mu.hold, nil
}

func (s *Server) hold(h *held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.stopped {
		return
	}
	s.mu.held = append(s.mu.held, h)
	s.mu.maxHeld = max(s.mu.maxHeld, len(s.mu.held))
	s.changedLocked()
}

func (s *Server) Publish(ctx context.Context, r *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	resp, hold, err := s.publish("Publish", r)
	if err != nil || !hold {
		return resp, err
	}
	released := make(chan struct{})
	s.hold(&held{answer: func() { close(released) }})
	var timeout <-chan time.Time
	if r.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(r.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-released:
		return resp, nil
	case <-timeout:
		return nil, status.Errorf(codes.DeadlineExceeded, "publish-ack predicate %s: acks got to seq %d of %s, the message is seq %d",
			resp.Frontier.Predicate, resp.Seq-1, s.Site, resp.Seq)
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (s *Server) Publishes(stream pubsubpb.PubSub_PublishesServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	replies := make(chan *pubsubpb.PublishReply)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	send := func(r *pubsubpb.PublishReply) {
		select {
		case replies <- r:
		case <-ctx.Done():
		}
	}
	wg.Go(func() {
		for {
			select {
			case r := <-replies:
				if stream.Send(r) != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	})
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, hold, err := s.publish("Publishes", r)
		reply := &pubsubpb.PublishReply{ReqId: r.ReqId, Result: resp}
		if err != nil {
			st := status.Convert(err)
			reply = &pubsubpb.PublishReply{ReqId: r.ReqId, Code: int32(st.Code()), Error: st.Message()}
		}
		if hold {
			s.hold(&held{answer: func() { send(reply) }})
			continue
		}
		send(reply)
	}
}

func (s *Server) Subscribe(stream pubsubpb.PubSub_SubscribeServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first request of a subscription must be a start")
	}
	s.record(func() { s.mu.starts = append(s.mu.starts, proto.Clone(start).(*pubsubpb.SubscribeStart)) })
	if err := s.injected("Subscribe"); err != nil {
		return err
	}
	cursors, minWall, acked, err := s.c.attach(start)
	if err != nil {
		return err
	}
	sub := &subscription{s: s, start: start, cursors: cursors, minWall: minWall, acked: acked,
		unacked: map[key]*inflight{}, wake: make(chan struct{}, 1)}
	if sub.acked == nil {
		sub.acked = map[string]map[uint64]bool{}
	}
	if err := stream.Send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Subscribed{Subscribed: sub.info()}}); err != nil {
		return err
	}
	// The reader ends when the stream does, after Subscribe returns.
	s.readers.Go(func() { sub.read(stream) })
	return sub.serve(stream)
}

type key struct {
	origin string
	seq    uint64
}

type inflight struct {
	m       *pubsubpb.Message
	attempt uint32
}

// subscription is one Subscribe stream of a fake site.
type subscription struct {
	s       *Server
	start   *pubsubpb.SubscribeStart
	minWall int64
	wake    chan struct{}

	mu        sync.Mutex
	cursors   map[string]uint64
	acked     map[string]map[uint64]bool // durable: stored; skipped when delivering
	unacked   map[key]*inflight
	redeliver []*inflight
	ackErrs   []*pubsubpb.AckError
	delivered uint64
	closing   bool
	ended     error
}

func (sub *subscription) info() *pubsubpb.SubscriptionInfo {
	sub.s.c.mu.Lock()
	info := sub.s.c.subInfoLocked(sub.s.Site, sub.start.Topic, sub.start.Durable, sub.start.DeadLetter)
	sub.s.c.mu.Unlock()
	sub.mu.Lock()
	info.Unacked, info.Delivered, info.Consumers = uint64(len(sub.unacked)), sub.delivered, 1
	sub.mu.Unlock()
	return info
}

func (sub *subscription) maxInFlight() int {
	n := sub.start.MaxInFlight
	if n == 0 {
		n = sub.start.MaxAckPending
	}
	if n == 0 {
		n = pubsubpb.DefaultMaxAckPending
	}
	return int(n)
}

// read applies the acks and the Close the client sends.
func (sub *subscription) read(stream pubsubpb.PubSub_SubscribeServer) {
	for {
		r, err := stream.Recv()
		if err != nil {
			sub.mu.Lock()
			sub.ended = err
			sub.mu.Unlock()
			signal(sub.wake)
			return
		}
		switch x := r.Request.(type) {
		case *pubsubpb.SubscribeRequest_Acks:
			for _, a := range x.Acks.Acks {
				sub.apply(a)
				// Recorded once applied: a test that saw it sees its effect.
				sub.s.record(func() { sub.s.mu.acks = append(sub.s.mu.acks, proto.Clone(a).(*pubsubpb.Ack)) })
			}
		case *pubsubpb.SubscribeRequest_Close:
			sub.mu.Lock()
			sub.closing = true
			sub.mu.Unlock()
		}
		signal(sub.wake)
	}
}

func (sub *subscription) apply(a *pubsubpb.Ack) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	k := key{a.Origin, a.Seq}
	f := sub.unacked[k]
	if f == nil || f.attempt != a.Attempt {
		sub.ackErrs = append(sub.ackErrs, &pubsubpb.AckError{Ack: a, Code: int32(codes.NotFound),
			Error: fmt.Sprintf("no unacked delivery of %s/%d attempt %d", a.Origin, a.Seq, a.Attempt)})
		return
	}
	switch a.Kind {
	case pubsubpb.Ack_IN_PROGRESS:
		return
	case pubsubpb.Ack_ACK, pubsubpb.Ack_TERM:
		delete(sub.unacked, k)
		if sub.start.Durable != "" {
			sub.s.c.ack(sub.start.Topic, sub.start.Durable, a.Origin, a.Seq)
		}
	case pubsubpb.Ack_NAK:
		delete(sub.unacked, k)
		if n := sub.start.MaxDeliver; n > 0 && f.attempt >= n {
			if dl := sub.start.DeadLetter; dl != "" {
				sub.s.c.deadLetter(sub.s.Site, dl, sub.start.Topic, f.m, f.attempt)
			}
			if sub.start.Durable != "" {
				sub.s.c.ack(sub.start.Topic, sub.start.Durable, a.Origin, a.Seq)
			}
			return
		}
		sub.redeliver = append(sub.redeliver, &inflight{m: f.m, attempt: f.attempt + 1})
	}
}

// serve sends deliveries as messages and room come, and the ack errors,
// until the client closes the subscription or the stream ends.
func (sub *subscription) serve(stream pubsubpb.PubSub_SubscribeServer) error {
	for {
		changed := sub.s.c.watch()
		sub.mu.Lock()
		ended, closing := sub.ended, sub.closing
		ackErrs := sub.ackErrs
		sub.ackErrs = nil
		room := sub.maxInFlight() - len(sub.unacked)
		var ds []*pubsubpb.Delivery
		for room > 0 && len(sub.redeliver) > 0 {
			f := sub.redeliver[0]
			sub.redeliver = sub.redeliver[1:]
			sub.unacked[key{f.m.Origin, f.m.Seq}] = f
			ds = append(ds, &pubsubpb.Delivery{Message: f.m, Attempt: f.attempt})
			room--
		}
		if room > 0 && !closing {
			for _, m := range sub.s.c.next(sub.start.Topic, sub.cursors, sub.minWall, sub.acked, room) {
				sub.unacked[key{m.Origin, m.Seq}] = &inflight{m: m, attempt: 1}
				ds = append(ds, &pubsubpb.Delivery{Message: m, Attempt: 1})
			}
		}
		sub.delivered += uint64(len(ds))
		sub.mu.Unlock()
		if ended != nil && !closing {
			if errors.Is(ended, io.EOF) {
				return nil
			}
			return ended
		}
		if len(ackErrs) > 0 {
			if err := stream.Send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_AckErrors{AckErrors: &pubsubpb.AckErrors{Errors: ackErrs}}}); err != nil {
				return err
			}
		}
		if closing {
			sub.s.record(func() { sub.s.mu.closes++ })
			return stream.Send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Closed{Closed: sub.info()}})
		}
		if len(ds) > 0 {
			if err := stream.Send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Deliveries{Deliveries: &pubsubpb.Deliveries{Deliveries: ds}}}); err != nil {
				return err
			}
			continue
		}
		select {
		case <-sub.wake:
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
