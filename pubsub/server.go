package pubsub

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Server serves a broker's gRPC API (pubsubpb.PubSub).
type Server struct {
	pubsubpb.UnimplementedPubSubServer
	b *Broker
}

// NewServer returns the gRPC service of a broker.
func NewServer(b *Broker) *Server { return &Server{b: b} }

func (s *Server) CreateTopic(ctx context.Context, r *pubsubpb.CreateTopicRequest) (*pubsubpb.TopicInfo, error) {
	if r.Topic == nil {
		return nil, status.Error(codes.InvalidArgument, "pubsub: create topic: no topic given")
	}
	info, err := s.b.CreateTopic(ctx, fromPBTopic(r.Topic))
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBTopicInfo(info), nil
}

func (s *Server) GetTopic(ctx context.Context, r *pubsubpb.GetTopicRequest) (*pubsubpb.TopicInfo, error) {
	info, err := s.b.TopicInfo(ctx, r.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBTopicInfo(info), nil
}

func (s *Server) ListTopics(ctx context.Context, _ *pubsubpb.ListTopicsRequest) (*pubsubpb.ListTopicsResponse, error) {
	out := &pubsubpb.ListTopicsResponse{}
	for _, t := range s.b.Topics(ctx) {
		out.Topics = append(out.Topics, toPBTopicInfo(t))
	}
	return out, nil
}

func (s *Server) DeleteTopic(ctx context.Context, r *pubsubpb.DeleteTopicRequest) (*pubsubpb.DeleteTopicResponse, error) {
	if err := s.b.DeleteTopic(ctx, r.Name); err != nil {
		return nil, toStatus(err)
	}
	return &pubsubpb.DeleteTopicResponse{}, nil
}

func (s *Server) Publish(ctx context.Context, r *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	ack, err := s.b.Publish(ctx, fromPBPublish(r), time.Duration(r.TimeoutMs)*time.Millisecond)
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBAck(ack), nil
}

// Publishes serves pipelined publishes: whatever has been read is
// published as one batch (one append, one wait per topic), and each
// request is answered by its id when its wait holds. At most
// MaxUnanswered requests are read and not answered.
func (s *Server) Publishes(stream pubsubpb.PubSub_PublishesServer) error {
	ctx := stream.Context()
	batched := false
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(pubsubpb.PublishesBatchHeader)) > 0 {
		// Said at once, so that the client may batch its first publishes.
		if err := stream.SendHeader(metadata.Pairs(pubsubpb.PublishesBatchHeader, "1")); err != nil {
			return err
		}
		batched = true
	}
	slots := make(chan struct{}, pubsubpb.MaxUnanswered)
	replies := make(chan []*pubsubpb.PublishReply, pubsubpb.MaxUnanswered)
	var work sync.WaitGroup
	sendErr := make(chan error, 1)
	go func() { sendErr <- sendReplies(stream, replies, slots, batched) }()
	reqs := make(chan *pubsubpb.PublishRequest, pubsubpb.MaxUnanswered)
	readErr := make(chan error, 1)
	go func() {
		defer close(reqs)
		for {
			r, err := stream.Recv()
			if err != nil {
				if err != io.EOF {
					readErr <- err
				}
				return
			}
			more := r.More
			r.More = nil
			for _, q := range append([]*pubsubpb.PublishRequest{r}, more...) {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				reqs <- q
			}
		}
	}()
	for r := range reqs {
		batch := []*pubsubpb.PublishRequest{r}
	more:
		for len(batch) < 1024 {
			select {
			case r, ok := <-reqs:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		// Appended here, one batch after the other, so that a stream's
		// publishes keep their order; the waits run beside.
		ms, timeout := fromPBPublishes(batch)
		wctx, cancel := s.b.withTimeout(ctx, timeout)
		out := s.b.appendBatch(wctx, ms)
		work.Add(1)
		go func() {
			defer work.Done()
			defer cancel()
			s.b.waitAll(wctx, ms, out)
			replies <- publishReplies(batch, out)
		}()
	}
	work.Wait()
	close(replies)
	err := <-sendErr
	select {
	case rerr := <-readErr:
		if err == nil && ctx.Err() == nil {
			err = rerr
		}
	default:
	}
	return err
}

// maxBatchReplies bounds the answers in one message.
const maxBatchReplies = 256

// sendReplies sends the answers as they come, several to a message to a
// client that reads batches, and frees a slot per answer.
func sendReplies(stream pubsubpb.PubSub_PublishesServer, replies <-chan []*pubsubpb.PublishReply, slots chan struct{}, batched bool) error {
	var failed error
	for rs := range replies {
		if failed != nil {
			continue // let the publishers finish
		}
		for len(rs) > 0 {
			n := 1
			if batched {
				n = min(len(rs), maxBatchReplies)
			}
			m := rs[0]
			m.More = rs[1:n]
			if err := stream.Send(m); err != nil {
				failed = err
				break
			}
			for range n {
				<-slots
			}
			rs = rs[n:]
		}
	}
	return failed
}

func fromPBPublishes(batch []*pubsubpb.PublishRequest) ([]Message, time.Duration) {
	ms := make([]Message, len(batch))
	timeout := time.Duration(0)
	for i, r := range batch {
		ms[i] = fromPBPublish(r)
		timeout = max(timeout, time.Duration(r.TimeoutMs)*time.Millisecond)
	}
	return ms, timeout
}

func publishReplies(batch []*pubsubpb.PublishRequest, res []PublishResult) []*pubsubpb.PublishReply {
	out := make([]*pubsubpb.PublishReply, len(batch))
	for i, r := range res {
		out[i] = &pubsubpb.PublishReply{ReqId: batch[i].ReqId}
		if r.Seq != 0 {
			out[i].Result = toPBAck(r.PubAck) // where it went, also when its wait failed
		}
		if r.Err != nil {
			st, _ := status.FromError(toStatus(r.Err))
			out[i].Code, out[i].Error = int32(st.Code()), st.Message()
		}
	}
	return out
}

// Subscribe serves one consumer: the first request starts it, acks follow;
// deliveries go out as the subscription hands them to this consumer.
func (s *Server) Subscribe(stream pubsubpb.PubSub_SubscribeServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "pubsub: subscribe: the first request must be a start")
	}
	c, err := s.b.Subscribe(ctx, fromPBStart(start))
	if err != nil {
		return toStatus(err)
	}
	// The reader below may outlive the handler by a moment (until the
	// stream's context ends): it must not send after the handler returned.
	var sendMu sync.Mutex
	finished := false
	send := func(r *pubsubpb.SubscribeReply) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if finished {
			return io.EOF
		}
		return stream.Send(r)
	}
	if err := send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Subscribed{Subscribed: toPBSubInfo(c.Info())}}); err != nil {
		_ = c.Close(context.WithoutCancel(ctx))
		return err
	}
	closed := make(chan struct{})
	var closing atomic.Bool // the client asked to close: answer it before returning
	go func() {
		defer close(closed)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			switch req := r.Request.(type) {
			case *pubsubpb.SubscribeRequest_Acks:
				if errs := s.acks(c, req.Acks); len(errs) > 0 {
					_ = send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_AckErrors{AckErrors: &pubsubpb.AckErrors{Errors: errs}}})
				}
			case *pubsubpb.SubscribeRequest_Close:
				closing.Store(true)
				err := c.Close(ctx)
				info := toPBSubInfo(c.Info())
				if err != nil {
					_ = send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_AckErrors{AckErrors: &pubsubpb.AckErrors{
						Errors: []*pubsubpb.AckError{{Code: int32(codes.Unavailable), Error: err.Error()}}}}})
				}
				_ = send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Closed{Closed: info}})
				return
			}
		}
	}()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-closed
		cancel()
	}()
	var failed error // why the subscription stopped, to tell the client
	for {
		ds, err := c.Next(dctx)
		if err != nil {
			if errors.Is(err, ErrTruncated) {
				failed = err
			}
			break
		}
		out := &pubsubpb.Deliveries{Deliveries: make([]*pubsubpb.Delivery, len(ds))}
		for i, d := range ds {
			out.Deliveries[i] = &pubsubpb.Delivery{Message: d.Msg, Attempt: uint32(d.Attempt)}
		}
		if err := send(&pubsubpb.SubscribeReply{Reply: &pubsubpb.SubscribeReply_Deliveries{Deliveries: out}}); err != nil {
			break
		}
	}
	// The consumer left (or the stream broke, or the broker closed): what
	// it had not acked goes to the others, or the subscription stores its
	// position. Returning ends the stream, and with it the reader.
	_ = c.Close(context.WithoutCancel(ctx))
	if closing.Load() {
		<-closed // it sends the answer to Close, then ends
	}
	sendMu.Lock()
	finished = true
	sendMu.Unlock()
	return toStatus(failed)
}

func (s *Server) acks(c *Consumer, as *pubsubpb.Acks) []*pubsubpb.AckError {
	var errs []*pubsubpb.AckError
	for _, a := range as.Acks {
		err := c.Ack(AckRequest{Origin: a.Origin, Seq: a.Seq, Attempt: int(a.Attempt), Kind: AckKind(a.Kind),
			Delay: time.Duration(a.DelayMs) * time.Millisecond})
		if err != nil {
			st, _ := status.FromError(toStatus(err))
			errs = append(errs, &pubsubpb.AckError{Ack: a, Code: int32(st.Code()), Error: st.Message()})
		}
	}
	return errs
}

func (s *Server) ListSubscriptions(ctx context.Context, r *pubsubpb.ListSubscriptionsRequest) (*pubsubpb.ListSubscriptionsResponse, error) {
	if r.Topic != "" {
		if _, ok := s.b.topic(r.Topic); !ok {
			return nil, toStatus(unknownTopic(r.Topic, s.b.node.Site()))
		}
	}
	subs, err := s.b.Subscriptions(ctx, r.Topic)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pubsubpb.ListSubscriptionsResponse{}
	for _, si := range subs {
		out.Subscriptions = append(out.Subscriptions, toPBSubInfo(si))
	}
	return out, nil
}

func (s *Server) DeleteSubscription(ctx context.Context, r *pubsubpb.DeleteSubscriptionRequest) (*pubsubpb.DeleteSubscriptionResponse, error) {
	if err := s.b.DeleteSubscription(ctx, r.Topic, r.Name); err != nil {
		return nil, toStatus(err)
	}
	return &pubsubpb.DeleteSubscriptionResponse{}, nil
}

// toStatus maps errors to gRPC codes a client can act on, keeping the
// message whole.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !strings.HasPrefix(err.Error(), "pubsub:") && !strings.HasPrefix(err.Error(), "stabilizer:") && !strings.HasPrefix(err.Error(), "kv:") {
		return err
	}
	code := codes.Internal
	var we *stabilizer.WaitError
	var fe *frontier.Error
	switch {
	case errors.As(err, &we), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, ErrUnknownTopic), errors.Is(err, ErrUnknownSubscription):
		code = codes.NotFound
	case errors.Is(err, ErrTopicExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrTooLarge), errors.Is(err, stabilizer.ErrDiskFull):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrBadTopic), errors.Is(err, ErrBadPredicate), errors.Is(err, ErrRetention),
		errors.Is(err, ErrBadSubscription), errors.Is(err, stabilizer.ErrUnknownPredicate), errors.As(err, &fe):
		code = codes.InvalidArgument
	case errors.Is(err, consumer.ErrUnknownDelivery), errors.Is(err, consumer.ErrExpired):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrTruncated):
		code = codes.OutOfRange
	case errors.Is(err, ErrClosed), errors.Is(err, stabilizer.ErrStopped):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}
