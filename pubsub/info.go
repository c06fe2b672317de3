package pubsub

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// OriginInfo is what a site stores of a topic from one origin.
type OriginInfo struct {
	Origin   string
	Messages uint64 // stored here now
	LastSeq  uint64
	Bytes    uint64 // stored here now
	// DeliveryFrontier: messages up to it may be delivered here.
	DeliveryFrontier uint64
	// Truncated: retention dropped every message up to it here (0:
	// none). FirstSeq is the first one still stored (0: none), Dropped
	// how many retention dropped.
	Truncated, FirstSeq, Dropped uint64
}

// SubscriptionInfo describes a subscription: live at this site, stored, or
// both.
type SubscriptionInfo struct {
	Topic, Name string
	Durable     bool
	Site        string // where it is live, or where its position was last stored
	Consumers   int
	Stats       consumer.Stats
	Position    consumer.Position
	DeadLetter  string
	// Backlog counts the messages this site stores of the topic that the
	// position has not acked (up to each origin's delivery frontier),
	// whether a consumer is attached or not: the backlog of a durable
	// subscription whose consumer died. At most maxBacklogCount.
	Backlog uint64
}

// maxBacklogCount bounds the messages counted for one subscription's
// Backlog, so that describing a topic with a long backlog stays cheap.
const maxBacklogCount = 1_000_000

// TopicInfo describes a topic at this site.
type TopicInfo struct {
	Topic
	CreatedAt       string
	Created         stabilizer.HLC
	Origins         []OriginInfo
	Subscriptions   []SubscriptionInfo
	Audience        []string
	AudienceVersion uint64
	DuplicateWindow time.Duration
}

func (b *Broker) info(ctx context.Context, t *topicState) TopicInfo {
	out := TopicInfo{Topic: t.def.Topic, CreatedAt: t.def.CreatedAt, Created: t.version, DuplicateWindow: b.cfg.DuplicateWindow}
	stats := b.store.stats(t.def.Name)
	for _, o := range slices.Sorted(maps.Keys(stats)) {
		st := stats[o]
		n, bytes := st.stored()
		oi := OriginInfo{Origin: o, Messages: n, LastSeq: st.LastSeq, Bytes: bytes, DeliveryFrontier: st.LastSeq,
			Truncated: st.Floor.Seq, Dropped: st.Floor.Messages}
		if n > 0 {
			oi.FirstSeq, _ = b.store.firstSeq(t.def.Name, o)
		}
		if upTo, ok := b.deliverable(ctx, t, o, st.LastSeq); ok {
			oi.DeliveryFrontier = upTo
		}
		out.Origins = append(out.Origins, oi)
	}
	out.Audience, out.AudienceVersion = b.aud.describe(t.def.Name)
	out.Subscriptions, _ = b.Subscriptions(ctx, t.def.Name)
	return out
}

// TopicInfo describes one topic.
func (b *Broker) TopicInfo(ctx context.Context, name string) (TopicInfo, error) {
	t, ok := b.topic(name)
	if !ok {
		return TopicInfo{}, unknownTopic(name, b.node.Site())
	}
	return b.info(ctx, t), nil
}

// Topics describes every topic this site knows, by name.
func (b *Broker) Topics(ctx context.Context) []TopicInfo {
	b.mu.Lock()
	ts := make([]*topicState, 0, len(b.mu.topics))
	for _, t := range b.mu.topics {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	slices.SortFunc(ts, func(x, y *topicState) int { return strings.Compare(x.def.Name, y.def.Name) })
	out := make([]TopicInfo, len(ts))
	for i, t := range ts {
		out[i] = b.info(ctx, t)
	}
	return out
}

// Subscriptions lists a topic's subscriptions (every topic's when topic is
// ""): those live here, and the durable ones stored by any site.
func (b *Broker) Subscriptions(ctx context.Context, topic string) ([]SubscriptionInfo, error) {
	b.mu.Lock()
	live := map[subKey]*subscription{}
	for k, s := range b.mu.subs {
		if topic == "" || k.topic == topic {
			live[k] = s
		}
	}
	b.mu.Unlock()
	stored, err := b.storedSubscriptions(ctx, topic)
	out := []SubscriptionInfo{}
	for k, s := range live {
		info := s.info()
		info.Backlog = b.backlog(ctx, k.topic, info.Position)
		out = append(out, info)
		delete(stored, k)
	}
	for k, rec := range stored {
		out = append(out, SubscriptionInfo{Topic: k.topic, Name: k.name, Durable: true, Site: rec.Site, Position: rec.Position, DeadLetter: rec.DeadLetter,
			Backlog: b.backlog(ctx, k.topic, rec.Position)})
	}
	slices.SortFunc(out, func(x, y SubscriptionInfo) int {
		return strings.Compare(x.Topic+"|"+x.Name, y.Topic+"|"+y.Name)
	})
	return out, err
}

// deliverable returns the last of origin's messages of t, up to last,
// that this site may deliver: last, or less under the topic's delivery
// predicate; false when that predicate's frontier cannot be read.
func (b *Broker) deliverable(ctx context.Context, t *topicState, origin string, last uint64) (uint64, bool) {
	if t.delivery == "" {
		return last, true
	}
	f, err := b.node.Frontier(ctx, stabilizer.StreamID{Origin: origin, Name: Stream}, t.delivery)
	if err != nil {
		return 0, false
	}
	return min(last, f.Seq), true
}

// backlog counts the messages of topic stored here above pos and not acked
// by it, up to each origin's delivery frontier (see SubscriptionInfo).
func (b *Broker) backlog(ctx context.Context, topic string, pos consumer.Position) uint64 {
	t, ok := b.topic(topic)
	if !ok {
		return 0
	}
	var n uint64
	for o, st := range b.store.stats(topic) {
		upTo := st.LastSeq
		if u, ok := b.deliverable(ctx, t, o, st.LastSeq); ok {
			upTo = u
		}
		p := pos[o]
		after := max(p.Floor, st.Floor.Seq)
		for after < upTo && n < maxBacklogCount {
			ms, err := b.store.metas(topic, o, after, 4096)
			if err != nil || len(ms) == 0 {
				break
			}
			for _, m := range ms {
				if m.Seq > upTo {
					break
				}
				if _, acked := slices.BinarySearch(p.Acked, m.Seq); !acked {
					n++
				}
			}
			after = ms[len(ms)-1].Seq
		}
	}
	return min(n, maxBacklogCount)
}

func (s *subscription) info() SubscriptionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := SubscriptionInfo{Topic: s.key.topic, Name: s.key.name, Durable: s.durable, Site: s.b.node.Site(),
		Consumers: len(s.mu.consumers), DeadLetter: s.opts.DeadLetter}
	if !s.durable {
		out.Name = ""
	}
	if s.mu.st != nil {
		out.Stats = s.mu.st.Stats()
		out.Position = s.mu.st.Position()
	}
	return out
}
