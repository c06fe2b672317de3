package natsps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
)

// DefaultStream is the stream of Config.Stream "".
const DefaultStream = "BENCH"

// Values of Config.ConsumerLeaders.
const (
	// ConsumersAtSubscriber leads a durable consumer in its subscriber's
	// region: deliveries leave from the subscriber's own server.
	ConsumersAtSubscriber = "subscriber"
	// ConsumersWithStream leads it where the stream is led: deliveries
	// leave as soon as the leader commits.
	ConsumersWithStream = "stream"
)

// Config says which servers to use.
type Config struct {
	// Servers maps each region to the client address (host:port) of its
	// server, whose server_name is the region. Required.
	Servers map[string]string
	// Stream is the stream every topic lives in; default DefaultStream.
	Stream string
	// Replicas of the stream; default 3.
	Replicas int
	// ConsumerLeaders says where Subscribe moves a durable consumer's
	// leader: ConsumersAtSubscriber, ConsumersWithStream, or "" to leave
	// it where NATS put it.
	ConsumerLeaders string
	// Logf, if set, is told of placement moves.
	Logf func(format string, args ...any)
}

// System is NATS JetStream as a psload.System.
type System struct {
	cfg     Config
	regions []string
	conns   map[string]*nats.Conn
	js      map[string]jetstream.JetStream
}

var _ psload.System = (*System)(nil)

// Dial connects to every server, retrying until ctx ends (servers may
// still be starting).
func Dial(ctx context.Context, cfg Config) (*System, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("natsps: Servers: missing")
	}
	switch cfg.ConsumerLeaders {
	case "", ConsumersAtSubscriber, ConsumersWithStream:
	default:
		return nil, fmt.Errorf("natsps: ConsumerLeaders: %q, want %q, %q or empty", cfg.ConsumerLeaders, ConsumersAtSubscriber, ConsumersWithStream)
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	s := &System{cfg: cfg, regions: slices.Sorted(maps.Keys(cfg.Servers)), conns: map[string]*nats.Conn{}, js: map[string]jetstream.JetStream{}}
	for _, r := range s.regions {
		nc, err := connect(ctx, r, cfg.Servers[r])
		if err != nil {
			s.Close()
			return nil, err
		}
		s.conns[r] = nc
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("natsps: %s: %w", r, err)
		}
		s.js[r] = js
	}
	return s, nil
}

func connect(ctx context.Context, region, addr string) (*nats.Conn, error) {
	for {
		nc, err := nats.Connect("nats://"+addr, nats.Name("wanbench-"+region), nats.MaxReconnects(-1))
		if err == nil {
			return nc, nil
		}
		if err := local.Sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, fmt.Errorf("natsps: connect to %s at %s: %w", region, addr, err)
		}
	}
}

func (s *System) admin() jetstream.JetStream { return s.js[s.regions[0]] }

func (s *System) subject(topic string) string { return s.cfg.Stream + "." + topic }

// CreateStream makes the stream (file storage, cfg.Replicas replicas, every
// subject under "<stream>.") once JetStream answers, and waits until it has
// a leader.
func (s *System) CreateStream(ctx context.Context) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.admin().CreateOrUpdateStream(cctx, jetstream.StreamConfig{Name: s.cfg.Stream, Subjects: []string{s.cfg.Stream + ".>"},
			Replicas: s.cfg.Replicas, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld})
		cancel()
		if err == nil {
			break
		}
		last = err
		if err := local.Sleep(ctx, 300*time.Millisecond); err != nil {
			return fmt.Errorf("natsps: create stream %s: %w (last: %v)", s.cfg.Stream, err, last)
		}
	}
	for {
		l, err := s.StreamLeader(ctx)
		if err == nil && l != "" {
			return nil
		}
		if err := local.Sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("natsps: stream %s has no leader: %w", s.cfg.Stream, err)
		}
	}
}

// DeleteStream removes the stream.
func (s *System) DeleteStream(ctx context.Context) error {
	if err := s.admin().DeleteStream(ctx, s.cfg.Stream); err != nil {
		return fmt.Errorf("natsps: delete stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}

// StreamLeader names the server leading the stream, as its info says.
func (s *System) StreamLeader(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.admin().Stream(cctx, s.cfg.Stream)
	if err != nil {
		return "", fmt.Errorf("natsps: stream %s: %w", s.cfg.Stream, err)
	}
	info, err := st.Info(cctx)
	if err != nil {
		return "", fmt.Errorf("natsps: stream %s info: %w", s.cfg.Stream, err)
	}
	if info.Cluster == nil {
		return "", nil
	}
	return info.Cluster.Leader, nil
}

// ConsumerLeader names the server leading a durable consumer.
func (s *System) ConsumerLeader(ctx context.Context, durable string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.admin().Consumer(cctx, s.cfg.Stream, durable)
	if err != nil {
		return "", fmt.Errorf("natsps: consumer %s: %w", durable, err)
	}
	info, err := c.Info(cctx)
	if err != nil {
		return "", fmt.Errorf("natsps: consumer %s info: %w", durable, err)
	}
	if info.Cluster == nil {
		return "", nil
	}
	return info.Cluster.Leader, nil
}

// PlaceLeader moves the stream's leader to region's server and returns once
// the stream's info says it leads.
func (s *System) PlaceLeader(ctx context.Context, region string) error {
	return s.place(ctx, "stream "+s.cfg.Stream, region, s.StreamLeader, "$JS.API.STREAM.LEADER.STEPDOWN."+s.cfg.Stream)
}

// PlaceConsumer moves a durable consumer's leader to region's server.
func (s *System) PlaceConsumer(ctx context.Context, durable, region string) error {
	return s.place(ctx, "consumer "+durable, region, func(ctx context.Context) (string, error) { return s.ConsumerLeader(ctx, durable) },
		"$JS.API.CONSUMER.LEADER.STEPDOWN."+s.cfg.Stream+"."+durable)
}

type stepdownRequest struct {
	Placement struct {
		Preferred string `json:"preferred"`
	} `json:"placement"`
}

type apiResponse struct {
	Success bool `json:"success"`
	Error   *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// place asks the group's leader to step down in favour of want until want
// leads; each step-down may take an election, so it polls the info.
func (s *System) place(ctx context.Context, what, want string, leader func(context.Context) (string, error), subject string) error {
	if _, ok := s.cfg.Servers[want]; !ok {
		return fmt.Errorf("natsps: place %s: no server in %q", what, want)
	}
	var req stepdownRequest
	req.Placement.Preferred = want
	body, _ := json.Marshal(req)
	var last error
	for {
		cur, err := leader(ctx)
		switch {
		case err != nil:
			last = err
		case cur == want:
			return nil
		case cur == "":
			last = errors.New("no leader")
		default:
			last = s.stepdown(ctx, subject, body)
			if last == nil && s.cfg.Logf != nil {
				s.cfg.Logf("nats: %s: leader %s steps down for %s", what, cur, want)
			}
		}
		if err := local.Sleep(ctx, 250*time.Millisecond); err != nil {
			return fmt.Errorf("natsps: place %s in %s: %w (last: %v)", what, want, err, last)
		}
	}
}

func (s *System) stepdown(ctx context.Context, subject string, body []byte) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := s.conns[s.regions[0]].RequestWithContext(cctx, subject, body)
	if err != nil {
		return fmt.Errorf("step-down: %w", err)
	}
	var r apiResponse
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("step-down: %w: %q", err, m.Data)
	}
	if r.Error != nil {
		return fmt.Errorf("step-down: %s (%d)", r.Error.Description, r.Error.Code)
	}
	return nil
}

// CreateTopic accepts a topic with the default predicates only: NATS acks
// a publish at its stream's quorum and delivers what the stream committed.
func (s *System) CreateTopic(_ context.Context, t psload.Topic) error {
	if t.Name == "" || strings.ContainsAny(t.Name, ".*> \t\r\n") {
		return fmt.Errorf("natsps: topic %q: not a subject token", t.Name)
	}
	if t.PublishAck != "" || t.Delivery != "" {
		return fmt.Errorf("natsps: topic %s: NATS has no publish-ack or delivery predicates (publish_ack %q, delivery %q)", t.Name, t.PublishAck, t.Delivery)
	}
	return nil
}

func (s *System) client(region string) (jetstream.JetStream, error) {
	js, ok := s.js[region]
	if !ok {
		return nil, fmt.Errorf("natsps: no server in %q", region)
	}
	return js, nil
}

// Publish publishes through region's server and waits for the stream's ack.
func (s *System) Publish(ctx context.Context, region, topic string, data []byte) error {
	js, err := s.client(region)
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, s.subject(topic), data)
	return err
}

type future struct{ f jetstream.PubAckFuture }

func (f future) Wait(ctx context.Context) error {
	select {
	case <-f.f.Ok():
		return nil
	case err := <-f.f.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PublishAsync publishes through region's server without waiting.
func (s *System) PublishAsync(_ context.Context, region, topic string, data []byte) (psload.Future, error) {
	js, err := s.client(region)
	if err != nil {
		return nil, err
	}
	f, err := js.PublishAsync(s.subject(topic), data)
	if err != nil {
		return nil, err
	}
	return future{f}, nil
}

type subscription struct{ mc jetstream.MessagesContext }

func (s subscription) Next(ctx context.Context) (psload.Msg, error) {
	m, err := s.mc.Next(jetstream.NextContext(ctx))
	if err != nil {
		return psload.Msg{}, err
	}
	return psload.Msg{Data: m.Data(), Ack: m.Ack}, nil
}

func (s subscription) Close() error {
	s.mc.Stop()
	return nil
}

// Subscribe creates (or updates) the durable pull consumer durable on the
// topic's subject, explicit acks, delivering new messages, replicated like
// the stream, with NATS's default ack wait (30 s) and max ack pending
// (1000); moves its leader as Config.ConsumerLeaders says; and consumes it
// through region's server.
func (s *System) Subscribe(ctx context.Context, region, topic, durable string) (psload.Subscription, error) {
	js, err := s.client(region)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var c jetstream.Consumer
	for {
		c, err = js.CreateOrUpdateConsumer(cctx, s.cfg.Stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: s.subject(topic),
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err == nil {
			break
		}
		if werr := local.Sleep(cctx, 300*time.Millisecond); werr != nil {
			return nil, fmt.Errorf("natsps: consumer %s: %w", durable, err)
		}
	}
	switch s.cfg.ConsumerLeaders {
	case ConsumersAtSubscriber:
		if err := s.PlaceConsumer(cctx, durable, region); err != nil {
			return nil, err
		}
	case ConsumersWithStream:
		l, err := s.StreamLeader(cctx)
		if err == nil && l == "" {
			err = errors.New("the stream has no leader")
		}
		if err == nil {
			err = s.PlaceConsumer(cctx, durable, l)
		}
		if err != nil {
			return nil, fmt.Errorf("natsps: consumer %s with the stream's leader: %w", durable, err)
		}
	}
	mc, err := c.Messages()
	if err != nil {
		return nil, fmt.Errorf("natsps: consume %s: %w", durable, err)
	}
	return subscription{mc}, nil
}

// Close closes every connection, after flushing what was published.
func (s *System) Close() error {
	for _, nc := range s.conns {
		_ = nc.Flush()
		nc.Close()
	}
	return nil
}
