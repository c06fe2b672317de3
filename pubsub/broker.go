package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// Stream is the name of every site's pub/sub stream, shared by its topics.
const Stream = pubsubpb.Stream

// Channel is the application channel on which sites tell each other which
// topics have live subscribers there (for audience).
const Channel = 0x91

// MaxMessageBytes is the largest message limit a topic may set: a message
// travels in one stream entry, and entries are batched up to 1 MiB plus one.
const MaxMessageBytes = 8 << 20

// Sentinel errors; returned errors wrap them and name the operand.
var (
	ErrUnknownTopic        = errors.New("pubsub: unknown topic")
	ErrTopicExists         = errors.New("pubsub: topic exists")
	ErrBadTopic            = errors.New("pubsub: bad topic")
	ErrBadPredicate        = errors.New("pubsub: bad predicate")
	ErrRetention           = errors.New("pubsub: bad retention")
	ErrTruncated           = errors.New("pubsub: position dropped by retention")
	ErrTooLarge            = errors.New("pubsub: message too large")
	ErrUnknownSubscription = errors.New("pubsub: unknown subscription")
	ErrBadSubscription     = errors.New("pubsub: bad subscription")
	ErrClosed              = errors.New("pubsub: broker closed")
)

// Defaults for zero Config fields.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultDuplicateWindow  = 2 * time.Minute
	DefaultPositionInterval = 20 * time.Millisecond
	DefaultAudienceEvery    = time.Second
	DefaultTopicRescan      = 2 * time.Second
	DefaultRetentionEvery   = time.Second
	DefaultTruncateEvery    = 5 * time.Second
)

// Config configures a Broker.
type Config struct {
	// Node is the site; New registers the broker's applier and channel,
	// so call New before Node.Start and Start after it. Required.
	Node *stabilizer.Node
	// KV holds topic definitions and durable positions. Required.
	KV *kv.Store
	// DefinitionWait is what creating or deleting a topic waits for.
	// Default "majority".
	DefinitionWait string
	// DefaultTimeout bounds publishes without a deadline. Default 10s.
	DefaultTimeout time.Duration
	// DuplicateWindow is how long a message id is remembered: a publish
	// with an id seen within it is not published again. Default 2m.
	DuplicateWindow time.Duration
	// PositionInterval is how often an active durable subscription stores
	// its position when acks changed it; it bounds what a crash of the
	// site can forget (then redelivered). Default 20ms.
	PositionInterval time.Duration
	// AudienceEvery is how often a site repeats which topics have live
	// subscribers there; a site not heard from for three times this long
	// leaves every audience. Default 1s.
	AudienceEvery time.Duration
	// TopicRescan is how often the topic definitions are read again in
	// full, beside the watch that follows them. Default 2s.
	TopicRescan time.Duration
	// RetentionEvery is how often the site applies every topic's
	// retention to what it stores: a topic may go past a limit by what
	// arrives meanwhile. Default 1s.
	RetentionEvery time.Duration
	// TruncateEvery is how often the site truncates the log of every
	// origin's pub/sub stream up to what every site applied (the broker
	// keeps the messages in its namespace). Default 5s.
	TruncateEvery time.Duration
	// TruncateLag keeps this many entries of each pub/sub stream in the
	// log beyond what every site applied. Default 0.
	TruncateLag uint64
	// Logger; default none.
	Logger hclog.Logger
	// Registerer for metrics; default none.
	Registerer prometheus.Registerer
	// Now is the clock of ack waits, nak delays and max_age. Default
	// time.Now.
	Now func() time.Time
}

// Validate reports every bad field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("pubsub: config: "+format, args...))
	}
	if c.Node == nil {
		bad("Node: missing")
	}
	if c.KV == nil {
		bad("KV: missing")
	}
	if c.Node != nil && c.DefinitionWait != "" {
		if _, err := c.Node.Predicate(context.Background(), c.DefinitionWait); err != nil {
			bad("DefinitionWait: %q: %v", c.DefinitionWait, err)
		}
	}
	for name, d := range map[string]time.Duration{"DefaultTimeout": c.DefaultTimeout, "DuplicateWindow": c.DuplicateWindow,
		"PositionInterval": c.PositionInterval, "AudienceEvery": c.AudienceEvery, "TopicRescan": c.TopicRescan,
		"RetentionEvery": c.RetentionEvery, "TruncateEvery": c.TruncateEvery} {
		if d < 0 {
			bad("%s: %v is negative", name, d)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	if c.DefinitionWait == "" {
		c.DefinitionWait = "majority"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.DefaultTimeout, DefaultTimeout)
	def(&c.DuplicateWindow, DefaultDuplicateWindow)
	def(&c.PositionInterval, DefaultPositionInterval)
	def(&c.AudienceEvery, DefaultAudienceEvery)
	def(&c.TopicRescan, DefaultTopicRescan)
	def(&c.RetentionEvery, DefaultRetentionEvery)
	def(&c.TruncateEvery, DefaultTruncateEvery)
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Broker is the pub/sub service of one site.
type Broker struct {
	cfg     Config
	node    *stabilizer.Node
	kv      *kv.Store
	log     hclog.Logger
	store   *store
	aud     *audience
	metrics *metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// retainReq and truncateReq ask the retention and truncation loops
	// for a pass at once; each answers on the channel it is sent.
	retainReq   chan chan error
	truncateReq chan chan error

	mu struct {
		sync.Mutex
		closed  bool
		started bool
		topics  map[string]*topicState
		subs    map[subKey]*subscription
		byTopic map[string]map[*subscription]struct{} // the same, by topic
		// byDelivery lists the topics gated by each delivery predicate
		// (by the name the core evaluates it under).
		byDelivery map[string]map[string]bool
		ephemeral  uint64               // names ephemeral subscriptions
		pending    map[string]pendingID // msg ids of own publishes not yet applied
	}
}

// topicState is what a site knows of one topic.
type topicState struct {
	def      topicRecord
	version  stabilizer.HLC // of the definition in the KV
	origin   string
	delivery string // the name the core evaluates the delivery predicate under; "" ungated
	learned  time.Time
	release  func() // ends the hold on an inline delivery predicate; never nil
}

type pendingID struct {
	stream stabilizer.StreamID
	seq    uint64
	hlc    stabilizer.HLC
}

// New creates the broker of a site and registers it with the node: call
// it before Node.Start, and Start after.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	ns, err := cfg.Node.Namespace("pubsub")
	if err != nil {
		return nil, fmt.Errorf("pubsub: %w", err)
	}
	b := &Broker{cfg: cfg, node: cfg.Node, kv: cfg.KV, log: cfg.Logger, retainReq: make(chan chan error), truncateReq: make(chan chan error)}
	b.store = newStore(ns)
	b.metrics = newMetrics(cfg.Registerer, cfg.Node.Site())
	b.mu.topics = map[string]*topicState{}
	b.mu.subs = map[subKey]*subscription{}
	b.mu.byTopic = map[string]map[*subscription]struct{}{}
	b.mu.byDelivery = map[string]map[string]bool{}
	b.mu.pending = map[string]pendingID{}
	b.aud = newAudience(b)
	if err := b.store.open(); err != nil {
		return nil, err
	}
	if err := cfg.Node.Handle(Stream, applier{b}); err != nil {
		return nil, err
	}
	if err := cfg.Node.EnableStateTransfer(Stream, ns, transferApp{b}); err != nil {
		return nil, err
	}
	if err := cfg.Node.HandleChannel(Channel, b.aud.frame); err != nil {
		return nil, err
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Start begins following topics and audiences; the node must be running.
func (b *Broker) Start() error {
	b.mu.Lock()
	if b.mu.closed || b.mu.started {
		b.mu.Unlock()
		return fmt.Errorf("pubsub: start: already started or closed")
	}
	b.mu.started = true
	b.mu.Unlock()
	b.scanTopics(b.ctx)
	b.followTopics(b.ctx)
	b.aud.start(b.ctx)
	b.goBackground(b.watchFrontiers)
	b.goBackground(b.writePositions)
	b.goBackground(b.retainLoop)
	b.goBackground(b.truncateLoop)
	return nil
}

// Close ends every subscription (storing durable positions as far as the
// node still allows) and stops the broker's goroutines. Call it before
// closing the node. It is idempotent.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.mu.closed = true
	subs := make([]*subscription, 0, len(b.mu.subs))
	for _, s := range b.mu.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.shutdown()
	}
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	for _, t := range b.mu.topics {
		t.release()
	}
	b.mu.Unlock()
	return nil
}

// goBackground starts an owned goroutine; after Close began it runs nothing.
func (b *Broker) goBackground(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
	return true
}

// closeGrace is how long a position being stored may still wait for its
// predicate once the broker closes: the peers may be gone too, and what is
// written replicates when the site comes back.
const closeGrace = time.Second

// graceContext bounds a final store: DefaultTimeout, or closeGrace after
// the broker began to close.
func (b *Broker) graceContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.DefaultTimeout)
	stop := context.AfterFunc(b.ctx, func() {
		t := time.AfterFunc(closeGrace, cancel)
		context.AfterFunc(ctx, func() { t.Stop() })
	})
	return ctx, func() { stop(); cancel() }
}

// topic returns a topic this site knows.
func (b *Broker) topic(name string) (*topicState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.mu.topics[name]
	return t, ok
}

// knownTopic returns a topic this site knows, or why not: a name no topic
// can have, or one this site has no definition of.
func (b *Broker) knownTopic(name string) (*topicState, error) {
	if t, ok := b.topic(name); ok {
		return t, nil
	}
	if err := checkTopicName(name); err != nil {
		return nil, err
	}
	return nil, unknownTopic(name, b.node.Site())
}

// learnTopic records a definition unless the site knows a newer one.
func (b *Broker) learnTopic(rec topicRecord, v stabilizer.HLC, origin string) *topicState {
	delivery := ""
	release := func() {}
	if rec.Delivery != "" {
		name, err := b.node.Predicate(b.ctx, rec.Delivery)
		if err != nil {
			b.log.Warn("topic's delivery predicate does not compile here", "topic", rec.Name, "error", err)
			return nil
		}
		delivery = name
		if r, err := b.node.HoldOn(b.ctx, rec.Delivery, Stream); err == nil {
			release = r
		}
	}
	b.mu.Lock()
	cur, ok := b.mu.topics[rec.Name]
	if ok && !newer(v, origin, cur.version, cur.origin) {
		b.mu.Unlock()
		release()
		return cur
	}
	t := &topicState{def: rec, version: v, origin: origin, delivery: delivery, learned: b.cfg.Now(), release: release}
	if ok {
		b.unindexLocked(cur)
	}
	b.mu.topics[rec.Name] = t
	if delivery != "" {
		if b.mu.byDelivery[delivery] == nil {
			b.mu.byDelivery[delivery] = map[string]bool{}
		}
		b.mu.byDelivery[delivery][rec.Name] = true
	}
	b.mu.Unlock()
	if ok {
		cur.release()
	}
	b.wakeTopic(rec.Name)
	return t
}

// forgetTopic drops a topic unless its definition is newer than the deletion.
func (b *Broker) forgetTopic(name string, v stabilizer.HLC, origin string) {
	b.mu.Lock()
	cur, ok := b.mu.topics[name]
	if !ok || !newer(v, origin, cur.version, cur.origin) {
		b.mu.Unlock()
		return
	}
	delete(b.mu.topics, name)
	b.unindexLocked(cur)
	b.mu.Unlock()
	cur.release()
}

// dropUnseen forgets the topics a full scan did not find that were learned
// before it: they were deleted while a watch was not looking.
func (b *Broker) dropUnseen(seen map[string]bool, scanned time.Time) {
	b.mu.Lock()
	var gone []*topicState
	for name, t := range b.mu.topics {
		if !seen[name] && t.learned.Before(scanned) {
			delete(b.mu.topics, name)
			b.unindexLocked(t)
			gone = append(gone, t)
		}
	}
	b.mu.Unlock()
	for _, t := range gone {
		t.release()
	}
}

func (b *Broker) unindexLocked(t *topicState) {
	if t.delivery == "" {
		return
	}
	delete(b.mu.byDelivery[t.delivery], t.def.Name)
	if len(b.mu.byDelivery[t.delivery]) == 0 {
		delete(b.mu.byDelivery, t.delivery)
	}
}

// newer orders versions of a definition by (HLC, origin), as the KV's last
// writer wins does.
func newer(v stabilizer.HLC, origin string, than stabilizer.HLC, thanOrigin string) bool {
	if v != than {
		return than.Less(v)
	}
	return origin > thanOrigin
}

func unknownTopic(name, site string) error {
	return fmt.Errorf("%w: %q at %s (create it first)", ErrUnknownTopic, name, site)
}

// watchFrontiers wakes the subscriptions of the topics whose delivery
// predicate advanced on some origin's pub/sub stream. A watch that fell
// behind wakes every subscription: each reads the frontier itself.
func (b *Broker) watchFrontiers() {
	w := b.node.WatchFrontiers(4096, func(a stabilizer.FrontierAdvance) bool { return a.Stream.Name == Stream })
	defer w.Stop()
	var dropped uint64
	for {
		select {
		case <-b.ctx.Done():
			return
		case a, ok := <-w.C:
			if !ok {
				return
			}
			d := w.Dropped()
			b.wakeDelivery(a.Predicate, d != dropped)
			dropped = d
		}
	}
}

func (b *Broker) wakeDelivery(pred string, all bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if all {
		for _, subs := range b.mu.byTopic {
			for s := range subs {
				s.signal()
			}
		}
		return
	}
	// Only topics gated by this predicate: the others deliver what is
	// stored, and apply wakes them.
	for topic := range b.mu.byDelivery[pred] {
		for s := range b.mu.byTopic[topic] {
			s.signal()
		}
	}
}
