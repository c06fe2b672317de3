package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// MaxTopicNameLen bounds a topic's name.
const MaxTopicNameLen = 200

// topicsPrefix is where topic definitions live in the KV: replicated to
// every site like any key, last writer wins between concurrent creations.
const topicsPrefix = "/pubsub/topics/"

// Topic is a topic's definition, the same at every site.
type Topic struct {
	Name string `json:"name"`
	// PublishAck is the predicate Publish waits for (name, source, or
	// "audience"). Default "majority".
	PublishAck string `json:"publish_ack"`
	// Delivery is the predicate a subscriber's site waits for before it
	// delivers; "" means once the site persisted the message.
	Delivery string `json:"delivery,omitempty"`
	// MaxMessageBytes bounds data plus headers. Default 1 MiB.
	MaxMessageBytes uint64 `json:"max_message_bytes"`
	// Retention says what each site keeps of the topic.
	Retention Retention `json:"retention"`
}

// Retention says what each site keeps of a topic (see the package
// documentation, "Retention"). Policy says when a message may go besides
// the limits: "limits" (the default) never; "interest" once every durable
// subscription (and every subscription live at the site) acked it, at
// once when there is none, as in NATS JetStream; "workqueue" once its one
// durable subscription acked it, never while there is none. The limits
// apply under every policy, per topic across origins: past one, the oldest
// messages by HLC go. A zero limit is none.
type Retention struct {
	Policy string `json:"policy"`
	// MaxMessages bounds the messages stored per site.
	MaxMessages uint64 `json:"max_messages,omitempty"`
	// MaxBytes bounds their bytes as stored (data, headers and id,
	// encoded); at least MaxMessageBytes.
	MaxBytes uint64 `json:"max_bytes,omitempty"`
	// MaxAge drops messages whose HLC (their publication at the origin) is
	// older than this by the site's clock; 0 or at least 1ms.
	MaxAge time.Duration `json:"max_age,omitempty"`
}

// canonicalPolicy is the policy a name means: "" and the former "all" are
// limits.
func canonicalPolicy(p string) string {
	if p == "" || p == pubsubpb.RetentionAll {
		return pubsubpb.RetentionLimits
	}
	return p
}

// check fills the default policy and reports every bad field.
func (r *Retention) check(maxMessageBytes uint64) error {
	var bad []string
	r.Policy = canonicalPolicy(r.Policy)
	switch r.Policy {
	case pubsubpb.RetentionLimits, pubsubpb.RetentionInterest, pubsubpb.RetentionWorkQueue:
	default:
		bad = append(bad, fmt.Sprintf("retention.policy %q is unknown (known: limits, interest, workqueue)", r.Policy))
	}
	switch {
	case r.MaxAge < 0:
		bad = append(bad, fmt.Sprintf("retention.max_age %v is negative", r.MaxAge))
	case r.MaxAge > 0 && r.MaxAge < time.Millisecond:
		bad = append(bad, fmt.Sprintf("retention.max_age %v is below 1ms", r.MaxAge))
	}
	if r.MaxBytes != 0 && r.MaxBytes < maxMessageBytes {
		bad = append(bad, fmt.Sprintf("retention.max_bytes %d is below max_message_bytes %d: one message could exceed it", r.MaxBytes, maxMessageBytes))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

func (r Retention) String() string {
	s := r.Policy
	if r.MaxMessages != 0 {
		s += fmt.Sprintf(", max %d messages", r.MaxMessages)
	}
	if r.MaxBytes != 0 {
		s += fmt.Sprintf(", max %d bytes", r.MaxBytes)
	}
	if r.MaxAge != 0 {
		s += fmt.Sprintf(", max age %v", r.MaxAge)
	}
	return s
}

// topicRecord is a topic as the KV holds it.
type topicRecord struct {
	Topic
	CreatedAt string         `json:"created_at"`
	Created   stabilizer.HLC `json:"created"`
}

// checkTopicName refuses names that would not fit the key layout or read
// well on a command line.
func checkTopicName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrBadTopic)
	}
	if len(name) > MaxTopicNameLen {
		return fmt.Errorf("%w: %q is %d bytes, at most %d", ErrBadTopic, name, len(name), MaxTopicNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/:", r)
		if !ok {
			return fmt.Errorf("%w: %q: character %q at %d (use letters, digits and . _ - / :)", ErrBadTopic, name, r, i)
		}
	}
	return nil
}

// normalize fills defaults and refuses what this site cannot honour.
func (b *Broker) normalize(ctx context.Context, t *Topic) error {
	if err := checkTopicName(t.Name); err != nil {
		return err
	}
	if t.PublishAck == "" {
		t.PublishAck = pubsubpb.DefaultPublishAck
	}
	if t.PublishAck != pubsubpb.Audience {
		if _, err := b.node.Predicate(ctx, t.PublishAck); err != nil {
			return fmt.Errorf("%w: topic %q: publish-ack %q: %v", ErrBadPredicate, t.Name, t.PublishAck, err)
		}
	}
	if t.Delivery != "" {
		if _, err := b.node.Predicate(ctx, t.Delivery); err != nil {
			return fmt.Errorf("%w: topic %q: delivery %q: %v", ErrBadPredicate, t.Name, t.Delivery, err)
		}
	}
	if t.MaxMessageBytes == 0 {
		t.MaxMessageBytes = pubsubpb.DefaultMaxMessageBytes
	}
	if t.MaxMessageBytes > MaxMessageBytes {
		return fmt.Errorf("%w: topic %q: max message bytes %d is above the site's limit %d", ErrBadTopic, t.Name, t.MaxMessageBytes, MaxMessageBytes)
	}
	if err := t.Retention.check(t.MaxMessageBytes); err != nil {
		return fmt.Errorf("%w: topic %q: %v", ErrRetention, t.Name, err)
	}
	return nil
}

// CreateTopic defines a topic at every site. Creating a topic that exists
// with the same definition returns it; with another, ErrTopicExists.
func (b *Broker) CreateTopic(ctx context.Context, t Topic) (TopicInfo, error) {
	if err := b.normalize(ctx, &t); err != nil {
		return TopicInfo{}, err
	}
	if cur, ok := b.topic(t.Name); ok {
		if cur.def.Topic == t {
			return b.info(ctx, cur), nil
		}
		return TopicInfo{}, fmt.Errorf("%w: %q, with publish-ack %q, delivery %q and retention %s (delete it first to change it)",
			ErrTopicExists, t.Name, cur.def.PublishAck, cur.def.Delivery, cur.def.Retention)
	}
	rec := topicRecord{Topic: t, CreatedAt: b.node.Site()}
	val, err := json.Marshal(rec)
	if err != nil {
		return TopicInfo{}, err
	}
	res, err := b.kv.Put(ctx, topicsPrefix+t.Name, val, kv.WriteOptions{Wait: b.cfg.DefinitionWait})
	if err != nil {
		return TopicInfo{}, fmt.Errorf("pubsub: create topic %q: %w", t.Name, err)
	}
	rec.Created = res.HLC
	return b.info(ctx, b.learnTopic(rec, res.HLC, res.Origin)), nil
}

// DeleteTopic removes a topic's definition everywhere; publishing to it
// fails. The messages sites stored stay: retention runs on the topics a
// site knows.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if _, ok := b.topic(name); !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	res, err := b.kv.Delete(ctx, topicsPrefix+name, kv.WriteOptions{Wait: b.cfg.DefinitionWait})
	if err != nil {
		return fmt.Errorf("pubsub: delete topic %q: %w", name, err)
	}
	b.forgetTopic(name, res.HLC, res.Origin)
	return nil
}

// followTopics keeps the site's topics current: a watch of the KV's topic
// definitions, and a full scan at start and every TopicRescan, which also
// catches what a watch that fell behind (or started late) missed;
// learnTopic and forgetTopic ignore what is older than what they know.
func (b *Broker) followTopics(ctx context.Context) {
	b.goBackground(func() {
		for ctx.Err() == nil {
			err := b.kv.Watch(ctx, topicsPrefix, "", func(v kv.Version) error {
				b.applyTopicVersion(v)
				return nil
			})
			if err != nil && ctx.Err() == nil {
				b.log.Debug("topic watch ended, starting again", "error", err)
			}
		}
	})
	b.goBackground(func() {
		t := time.NewTicker(b.cfg.TopicRescan)
		defer t.Stop()
		for {
			b.scanTopics(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

func (b *Broker) scanTopics(ctx context.Context) {
	scanned := b.cfg.Now()
	vs, err := b.kv.Scan(ctx, topicsPrefix, 0, kv.ReadOptions{})
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("scan topics", "error", err)
		}
		return
	}
	seen := map[string]bool{}
	for _, v := range vs {
		seen[strings.TrimPrefix(v.Key, topicsPrefix)] = true
		b.applyTopicVersion(v)
	}
	b.dropUnseen(seen, scanned)
}

func (b *Broker) applyTopicVersion(v kv.Version) {
	name := strings.TrimPrefix(v.Key, topicsPrefix)
	if v.Deleted {
		b.forgetTopic(name, v.HLC, v.Origin)
		return
	}
	var rec topicRecord
	if err := json.Unmarshal(v.Value, &rec); err != nil {
		b.log.Warn("bad topic definition", "key", v.Key, "error", err)
		return
	}
	rec.Created = v.HLC
	rec.Retention.Policy = canonicalPolicy(rec.Retention.Policy) // written as "all" by earlier releases
	b.learnTopic(rec, v.HLC, v.Origin)
}
