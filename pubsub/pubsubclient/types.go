package pubsubclient

import (
	"fmt"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// The plain Go types of the API, one for each message of pubsub.proto a
// caller reads or writes. Their JSON names are the proto's field names.

// HLC is a hybrid logical clock reading: wall nanoseconds since the Unix
// epoch, then a counter that orders readings with the same wall time.
type HLC struct {
	Wall    int64  `json:"wall"`
	Logical uint32 `json:"logical"`
}

// Time is the HLC's wall time.
func (h HLC) Time() time.Time { return time.Unix(0, h.Wall).UTC() }

// IsZero reports whether h is unset.
func (h HLC) IsZero() bool { return h == HLC{} }

// String renders h as RFC 3339 with microseconds, then "+logical"; "-" when
// unset.
func (h HLC) String() string {
	if h.IsZero() {
		return "-"
	}
	return h.Time().Format("2006-01-02T15:04:05.000000Z") + fmt.Sprintf("+%d", h.Logical)
}

// Before orders HLCs by wall time, then counter.
func (h HLC) Before(o HLC) bool {
	return h.Wall < o.Wall || (h.Wall == o.Wall && h.Logical < o.Logical)
}

// Frontier is how far a predicate's frontier got on the origin's stream
// when a publish was answered: every seq up to Seq is covered.
type Frontier struct {
	Predicate string `json:"predicate"`
	Seq       uint64 `json:"seq"`
	Version   uint64 `json:"version"`
}

// Retention says what each site keeps of a topic. Policy (pubsubpb's
// Retention* names) says when a message may go besides the limits:
// "limits" (the default; sites read the former "all" as it) never;
// "interest" once every durable subscription acked it (with none, at
// once); "workqueue" once its one durable subscription acked it. The
// limits apply under every policy, per topic across origins, oldest
// messages by HLC first; 0 is no limit. Each site applies them to what it
// stores, so sites drop at slightly different times.
type Retention struct {
	Policy      string        `json:"policy,omitempty"` // "limits" | "interest" | "workqueue"
	MaxMessages uint64        `json:"max_messages,omitempty"`
	MaxBytes    uint64        `json:"max_bytes,omitempty"`  // at least the topic's MaxMessageBytes
	MaxAge      time.Duration `json:"max_age_ns,omitempty"` // sent in whole milliseconds
}

// Topic is a topic's definition.
type Topic struct {
	Name string `json:"name"`
	// PublishAck is when Publish returns: a predicate name or source, or
	// pubsubpb.Audience. "" means the site's default, majority.
	PublishAck string `json:"publish_ack,omitempty"`
	// Delivery is what a subscriber's site waits for before it delivers a
	// message; "" means persisted at the subscriber's own site.
	Delivery string `json:"delivery,omitempty"`
	// MaxMessageBytes bounds data plus headers; 0 means 1 MiB.
	MaxMessageBytes uint64    `json:"max_message_bytes,omitempty"`
	Retention       Retention `json:"retention"`
}

// OriginStats is what a site holds of one origin's messages of a topic.
type OriginStats struct {
	Origin   string `json:"origin"`
	Messages uint64 `json:"messages"` // stored at the site
	LastSeq  uint64 `json:"last_seq"`
	// DeliveryFrontier: messages below it may be delivered at the site.
	DeliveryFrontier uint64 `json:"delivery_frontier"`
	Bytes            uint64 `json:"bytes"` // stored at the site
	// Truncated: retention dropped every message up to it at the site (0:
	// none); FirstSeq is the first one still stored (0: none); Dropped
	// counts what retention dropped there.
	Truncated uint64 `json:"truncated,omitempty"`
	FirstSeq  uint64 `json:"first_seq,omitempty"`
	Dropped   uint64 `json:"dropped,omitempty"`
}

// OriginPosition is a durable subscription's position for one origin:
// every message up to Floor is acked, and so are those in Acked above it.
type OriginPosition struct {
	Origin string   `json:"origin"`
	Floor  uint64   `json:"floor"`
	Acked  []uint64 `json:"acked,omitempty"`
}

// SubscriptionInfo describes a subscription as a site knows it.
type SubscriptionInfo struct {
	Topic        string           `json:"topic"`
	Name         string           `json:"name,omitempty"` // "" for an ephemeral one
	Durable      bool             `json:"durable"`
	Consumers    uint32           `json:"consumers"`
	Unacked      uint64           `json:"unacked"`
	Delivered    uint64           `json:"delivered"`
	Acked        uint64           `json:"acked"`
	Redelivered  uint64           `json:"redelivered"`
	DeadLettered uint64           `json:"dead_lettered"`
	Position     []OriginPosition `json:"position,omitempty"`
	DeadLetter   string           `json:"dead_letter,omitempty"`
	Site         string           `json:"site,omitempty"`
}

// TopicInfo describes a topic as one site knows it.
type TopicInfo struct {
	Topic         Topic              `json:"topic"`
	CreatedAt     string             `json:"created_at"` // the site that created it
	Created       HLC                `json:"created"`
	Origins       []OriginStats      `json:"origins"`
	Subscriptions []SubscriptionInfo `json:"subscriptions"`
	// Audience lists the sites with live subscribers as this site knows
	// them; AudienceVersion counts how often it changed here.
	Audience        []string `json:"audience"`
	AudienceVersion uint64   `json:"audience_version"`
	// DuplicateWindow is how long the site remembers a message id: a
	// retry with the same id within it is not published again.
	DuplicateWindow time.Duration `json:"duplicate_window"`
}

// PubAck is a publish's answer: where the message is and how far the
// topic's publish-ack predicate got.
type PubAck struct {
	Origin   string   `json:"origin"`
	Seq      uint64   `json:"seq"`
	HLC      HLC      `json:"hlc"`
	Frontier Frontier `json:"frontier"`
	// Duplicate: the message id was seen before; Origin and Seq are the
	// original's, and nothing was published.
	Duplicate bool `json:"duplicate,omitempty"`
}

func hlcOf(h *pubsubpb.HLC) HLC {
	if h == nil {
		return HLC{}
	}
	return HLC{Wall: h.Wall, Logical: h.Logical}
}

func topicToPB(t Topic) *pubsubpb.Topic {
	return &pubsubpb.Topic{
		Name:            t.Name,
		PublishAck:      t.PublishAck,
		Delivery:        t.Delivery,
		MaxMessageBytes: t.MaxMessageBytes,
		Retention: &pubsubpb.Retention{
			Policy:      t.Retention.Policy,
			MaxMessages: t.Retention.MaxMessages,
			MaxBytes:    t.Retention.MaxBytes,
			MaxAgeMs:    t.Retention.MaxAge.Milliseconds(),
		},
	}
}

func topicOf(t *pubsubpb.Topic) Topic {
	if t == nil {
		return Topic{}
	}
	out := Topic{Name: t.Name, PublishAck: t.PublishAck, Delivery: t.Delivery, MaxMessageBytes: t.MaxMessageBytes}
	if r := t.Retention; r != nil {
		out.Retention = Retention{Policy: r.Policy, MaxMessages: r.MaxMessages, MaxBytes: r.MaxBytes,
			MaxAge: time.Duration(r.MaxAgeMs) * time.Millisecond}
	}
	return out
}

func subscriptionInfoOf(s *pubsubpb.SubscriptionInfo) SubscriptionInfo {
	if s == nil {
		return SubscriptionInfo{}
	}
	out := SubscriptionInfo{Topic: s.Topic, Name: s.Name, Durable: s.Durable, Consumers: s.Consumers,
		Unacked: s.Unacked, Delivered: s.Delivered, Acked: s.Acked, Redelivered: s.Redelivered,
		DeadLettered: s.DeadLettered, DeadLetter: s.DeadLetter, Site: s.Site}
	for _, p := range s.Position {
		out.Position = append(out.Position, OriginPosition{Origin: p.Origin, Floor: p.Floor, Acked: slices.Clone(p.Acked)})
	}
	return out
}

// clone is a deep copy, for handing out what a Subscription keeps.
func (s SubscriptionInfo) clone() SubscriptionInfo {
	s.Position = slices.Clone(s.Position)
	for i := range s.Position {
		s.Position[i].Acked = slices.Clone(s.Position[i].Acked)
	}
	return s
}

func topicInfoOf(t *pubsubpb.TopicInfo) TopicInfo {
	out := TopicInfo{Topic: topicOf(t.Topic), CreatedAt: t.CreatedAt, Created: hlcOf(t.Created),
		DuplicateWindow: time.Duration(t.DuplicateWindowMs) * time.Millisecond,
		Audience:        slices.Clone(t.Audience), AudienceVersion: t.AudienceVersion}
	for _, o := range t.Origins {
		out.Origins = append(out.Origins, OriginStats{Origin: o.Origin, Messages: o.Messages, LastSeq: o.LastSeq,
			DeliveryFrontier: o.DeliveryFrontier, Bytes: o.Bytes, Truncated: o.Truncated, FirstSeq: o.FirstSeq, Dropped: o.Dropped})
	}
	for _, s := range t.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, subscriptionInfoOf(s))
	}
	return out
}

func pubAckOf(r *pubsubpb.PublishResponse) PubAck {
	out := PubAck{Origin: r.Origin, Seq: r.Seq, HLC: hlcOf(r.Hlc), Duplicate: r.Duplicate}
	if f := r.Frontier; f != nil {
		out.Frontier = Frontier{Predicate: f.Predicate, Seq: f.Seq, Version: f.Version}
	}
	return out
}
