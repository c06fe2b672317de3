package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// Client is the Go client of the pub/sub API of a set of sites. It talks
// to one site at a time, the first reachable of the addresses it was given,
// and moves to the next when that site is lost.
type Client struct {
	addrs   []string
	timeout time.Duration
	window  chan struct{} // a slot per PublishAsync in flight
	dialOpt []grpc.DialOption

	ctx    context.Context // ended by Close; streams run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the client, started by goroutine

	mu struct {
		sync.Mutex
		closed bool
		cur    int                // index in addrs of the site in use
		gen    uint64             // counts moves to another site
		conns  []*grpc.ClientConn // by index in addrs, nil until used
		names  map[string]string  // address -> site name, once known
		pub    *publisher         // the Publishes stream, nil until PublishAsync
	}
}

// Option configures Dial.
type Option func(*config)

type config struct {
	dialOpts []grpc.DialOption
	timeout  time.Duration
	window   int
}

// WithDialOptions replaces the default gRPC dial options (plaintext, which
// sites accept only when configured insecure): pass credentials here.
func WithDialOptions(o ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, o...) }
}

// WithTimeout bounds each call whose ctx has no deadline (default 10 s):
// the site's wait for a publish's predicate, a topic request, Dial's wait
// for a site, a Subscribe's wait for its answer and a Close's. It is sent
// along with each publish, so that the site answers DeadlineExceeded
// saying how far the acks got before the client gives up.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithWindow bounds the PublishAsync calls in flight (default 4096, what a
// site reads of one stream before it waits for acks).
func WithWindow(n int) Option { return func(c *config) { c.window = n } }

// DefaultTimeout is the bound WithTimeout sets by default.
const DefaultTimeout = 10 * time.Second

// grace is how much longer than the timeout sent with a request the
// client waits for its answer: the site's DeadlineExceeded says more than
// the client's own.
const grace = 2 * time.Second

// Dial connects to the first of addrs (sites' client addresses) that
// answers within the timeout; it fails with ErrUnavailable when none does.
// The client later moves to the next address, round the list, whenever the
// site in use is lost.
func Dial(addrs []string, opts ...Option) (*Client, error) {
	cfg := config{timeout: DefaultTimeout, window: pubsubpb.MaxUnanswered}
	for _, o := range opts {
		o(&cfg)
	}
	var bad []string
	if len(addrs) == 0 {
		bad = append(bad, "no address given")
	}
	for i, a := range addrs {
		if strings.TrimSpace(a) == "" {
			bad = append(bad, fmt.Sprintf("address %d is empty", i+1))
		}
	}
	if cfg.timeout <= 0 {
		bad = append(bad, fmt.Sprintf("WithTimeout(%s): want > 0", cfg.timeout))
	}
	if cfg.window <= 0 {
		bad = append(bad, fmt.Sprintf("WithWindow(%d): want > 0", cfg.window))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("pubsub: dial: %s", strings.Join(bad, "; "))
	}
	if len(cfg.dialOpts) == 0 {
		cfg.dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cfg.dialOpts = append(cfg.dialOpts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	c := &Client{addrs: append([]string(nil), addrs...), timeout: cfg.timeout, window: make(chan struct{}, cfg.window), dialOpt: cfg.dialOpts}
	c.mu.conns = make([]*grpc.ClientConn, len(addrs))
	c.mu.names = map[string]string{}

	deadline := time.Now().Add(cfg.timeout)
	var why []string
	for i, a := range addrs {
		conn, err := grpc.NewClient(a, c.dialOpt...)
		if err != nil {
			// A bad address or bad options: no other address helps.
			c.closeConns()
			return nil, fmt.Errorf("pubsub: dial %s: %w", a, err)
		}
		// Each address left gets its share of the time left.
		wait := time.Until(deadline) / time.Duration(len(addrs)-i)
		if err := probe(conn, wait); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", a, err))
			_ = conn.Close()
			continue
		}
		c.mu.conns[i], c.mu.cur = conn, i
		c.ctx, c.cancel = context.WithCancel(context.Background())
		return c, nil
	}
	return nil, &Error{Op: "dial", Code: codes.Unavailable, kind: ErrUnavailable,
		Msg: "no site reachable: " + strings.Join(why, "; ")}
}

// closeConns closes the connections Dial made.
func (c *Client) closeConns() {
	for _, conn := range c.mu.conns {
		if conn != nil {
			_ = conn.Close()
		}
	}
}

// probe connects conn and waits until it is ready, fails or wait passes.
func probe(conn *grpc.ClientConn, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn.Connect()
	for {
		switch s := conn.GetState(); s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return errors.New("connection failed")
		default:
			if !conn.WaitForStateChange(ctx, s) {
				return fmt.Errorf("no connection within %s", wait.Round(time.Millisecond))
			}
		}
	}
}

// Close ends every subscription (without storing durable positions: use
// Subscription.Close for that) and fails the PublishAsync futures not yet
// answered with ErrClosed, waits for the client's goroutines and closes
// its connections. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	var first error
	c.mu.Lock()
	conns := c.mu.conns
	c.mu.conns = make([]*grpc.ClientConn, len(conns))
	c.mu.Unlock()
	for _, conn := range conns {
		if conn != nil {
			if err := conn.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// goroutine starts f as one of the client's goroutines, which Close waits
// for; false, and f not started, once Close began.
func (c *Client) goroutine(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return false
	}
	c.wg.Go(f)
	return true
}

// site is the site a call is about to use: its API, its address and the
// generation to name when it is lost.
type site struct {
	api  pubsubpb.PubSubClient
	addr string
	gen  uint64
}

// current returns the site in use, connecting to it if it has no
// connection yet (which does no IO: gRPC connects on the first request).
func (c *Client) current() (site, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currentLocked()
}

func (c *Client) currentLocked() (site, error) {
	if c.mu.closed {
		return site{}, ErrClosed
	}
	i := c.mu.cur
	if c.mu.conns[i] == nil {
		conn, err := grpc.NewClient(c.addrs[i], c.dialOpt...)
		if err != nil {
			return site{}, &Error{Op: "dial", Code: codes.Unavailable, Msg: err.Error(), Site: c.addrs[i], kind: ErrUnavailable}
		}
		c.mu.conns[i] = conn
	}
	return site{api: pubsubpb.NewPubSubClient(c.mu.conns[i]), addr: c.addrs[i], gen: c.mu.gen}, nil
}

// failover moves the client to the next address after the site of
// generation gen was lost; a no-op when another call moved it already.
func (c *Client) failover(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.gen != gen || c.mu.closed {
		return
	}
	c.mu.gen++
	c.mu.cur = (c.mu.cur + 1) % len(c.addrs)
}

// learn records the site name an address answered with.
func (c *Client) learn(addr, name string) {
	if name == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.names[addr] = name
}

// Site returns the name of the site in use when the client has learned it
// (from a publish or a subscription), its address otherwise.
func (c *Client) Site() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.addrs[c.mu.cur]
	if n := c.mu.names[a]; n != "" {
		return n
	}
	return a
}

// Addr returns the address of the site in use.
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[c.mu.cur]
}

// Sites returns the site names learned so far, by address.
func (c *Client) Sites() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.mu.names)
}

// bound gives ctx the client's timeout (plus extra) when it has no
// deadline.
func (c *Client) bound(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout+extra)
}

// call runs f at the site in use and, when the site is lost and retry
// allows, at the next ones: each address at most once.
func call[T any](ctx context.Context, c *Client, op string, retry bool, notFound error, f func(ctx context.Context, s site) (T, error)) (T, error) {
	var zero T
	ctx, cancel := c.bound(ctx, 0)
	defer cancel()
	var last error
	for range c.addrs {
		s, err := c.current()
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return zero, errClientClosed(op)
			}
			return zero, err
		}
		r, err := f(ctx, s)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return zero, wrapErr(ctx, op, s.addr, err)
		}
		if !lostSite(err) {
			err = wrapErr(ctx, op, s.addr, err)
			var e *Error
			if errors.As(err, &e) && e.Code == codes.NotFound {
				e.kind = notFound
			}
			return zero, err
		}
		c.failover(s.gen)
		last = wrapErr(ctx, op, s.addr, err)
		if !retry {
			return zero, last
		}
	}
	return zero, last
}

// CreateTopic defines a topic at every site. It returns the existing
// topic when one with the same definition exists, and fails with
// ErrTopicExists when it has another. It is retried at the next site when
// the site is lost.
func (c *Client) CreateTopic(ctx context.Context, t Topic) (TopicInfo, error) {
	return call(ctx, c, fmt.Sprintf("create topic %q", t.Name), true, ErrUnknownTopic, func(ctx context.Context, s site) (TopicInfo, error) {
		r, err := s.api.CreateTopic(ctx, &pubsubpb.CreateTopicRequest{Topic: topicToPB(t)})
		if err != nil {
			return TopicInfo{}, err
		}
		return topicInfoOf(r), nil
	})
}

// GetTopic describes a topic as the site in use knows it; ErrUnknownTopic
// when it does not.
func (c *Client) GetTopic(ctx context.Context, name string) (TopicInfo, error) {
	return call(ctx, c, fmt.Sprintf("get topic %q", name), true, ErrUnknownTopic, func(ctx context.Context, s site) (TopicInfo, error) {
		r, err := s.api.GetTopic(ctx, &pubsubpb.GetTopicRequest{Name: name})
		if err != nil {
			return TopicInfo{}, err
		}
		return topicInfoOf(r), nil
	})
}

// ListTopics describes every topic the site in use knows.
func (c *Client) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	return call(ctx, c, "list topics", true, ErrUnknownTopic, func(ctx context.Context, s site) ([]TopicInfo, error) {
		r, err := s.api.ListTopics(ctx, &pubsubpb.ListTopicsRequest{})
		if err != nil {
			return nil, err
		}
		out := make([]TopicInfo, 0, len(r.Topics))
		for _, t := range r.Topics {
			out = append(out, topicInfoOf(t))
		}
		return out, nil
	})
}

// DeleteTopic removes a topic's definition everywhere. It is retried at
// the next site when the site is lost, so it may fail with ErrUnknownTopic
// when the lost site deleted it before it went.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := call(ctx, c, fmt.Sprintf("delete topic %q", name), true, ErrUnknownTopic, func(ctx context.Context, s site) (struct{}, error) {
		_, err := s.api.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Name: name})
		return struct{}{}, err
	})
	return err
}

// ListSubscriptions describes the subscriptions of a topic ("": of every
// topic) at the site in use.
func (c *Client) ListSubscriptions(ctx context.Context, topic string) ([]SubscriptionInfo, error) {
	return call(ctx, c, fmt.Sprintf("list subscriptions of %q", topic), true, ErrUnknownTopic, func(ctx context.Context, s site) ([]SubscriptionInfo, error) {
		r, err := s.api.ListSubscriptions(ctx, &pubsubpb.ListSubscriptionsRequest{Topic: topic})
		if err != nil {
			return nil, err
		}
		out := make([]SubscriptionInfo, 0, len(r.Subscriptions))
		for _, si := range r.Subscriptions {
			out = append(out, subscriptionInfoOf(si))
		}
		return out, nil
	})
}

// DeleteSubscription forgets a durable subscription's position at every
// site; ErrUnknownSubscription when there is none of that name.
func (c *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	_, err := call(ctx, c, fmt.Sprintf("delete subscription %q of %q", name, topic), true, ErrUnknownSubscription, func(ctx context.Context, s site) (struct{}, error) {
		_, err := s.api.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Topic: topic, Name: name})
		return struct{}{}, err
	})
	return err
}

// PublishOption configures one publish.
type PublishOption func(*publishConfig)

type publishConfig struct {
	msgID   string
	headers map[string]string
}

// MsgID gives the message an id: a site that has seen the id within the
// topic's duplicate window (from any origin) publishes nothing and answers
// with the original's origin and seq (PubAck.Duplicate). Only a publish
// with an id is retried at another site when its site is lost.
func MsgID(id string) PublishOption { return func(c *publishConfig) { c.msgID = id } }

// Headers adds headers to the message; they count toward the topic's
// max_message_bytes. Several Headers options add up.
func Headers(h map[string]string) PublishOption {
	return func(c *publishConfig) {
		if c.headers == nil {
			c.headers = make(map[string]string, len(h))
		}
		maps.Copy(c.headers, h)
	}
}

func (c *Client) publishRequest(topic string, data []byte, opts []PublishOption) *pubsubpb.PublishRequest {
	var cfg publishConfig
	for _, o := range opts {
		o(&cfg)
	}
	return &pubsubpb.PublishRequest{Topic: topic, Data: data, MsgId: cfg.msgID, Headers: cfg.headers}
}

func publishOp(topic string) string { return fmt.Sprintf("publish to %q", topic) }

// Publish publishes one message and returns once the topic's publish-ack
// predicate covers it. When the site is lost (Unavailable), a message with
// a MsgID is published again at the next site (the id makes that safe);
// one without fails with ErrUnavailable, since it may have been published.
// On ErrTimeout the message may be published too; the error says how far
// its acks got.
func (c *Client) Publish(ctx context.Context, topic string, data []byte, opts ...PublishOption) (PubAck, error) {
	req := c.publishRequest(topic, data, opts)
	if _, ok := ctx.Deadline(); !ok {
		req.TimeoutMs = c.timeout.Milliseconds()
	}
	ctx, cancel := c.bound(ctx, grace)
	defer cancel()
	return call(ctx, c, publishOp(topic), req.MsgId != "", ErrUnknownTopic, func(ctx context.Context, s site) (PubAck, error) {
		r, err := s.api.Publish(ctx, req)
		if err != nil {
			return PubAck{}, err
		}
		if !r.Duplicate {
			c.learn(s.addr, r.Origin)
		}
		return pubAckOf(r), nil
	})
}
