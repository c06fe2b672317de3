package pubsub

import (
	"maps"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer"
)

func fromPBTopic(t *pubsubpb.Topic) Topic {
	out := Topic{Name: t.Name, PublishAck: t.PublishAck, Delivery: t.Delivery, MaxMessageBytes: t.MaxMessageBytes}
	if r := t.Retention; r != nil {
		out.Retention = Retention{Policy: r.Policy, MaxMessages: r.MaxMessages, MaxBytes: r.MaxBytes, MaxAge: time.Duration(r.MaxAgeMs) * time.Millisecond}
	}
	return out
}

func toPBTopic(t Topic) *pubsubpb.Topic {
	return &pubsubpb.Topic{Name: t.Name, PublishAck: t.PublishAck, Delivery: t.Delivery, MaxMessageBytes: t.MaxMessageBytes,
		Retention: &pubsubpb.Retention{Policy: t.Retention.Policy, MaxMessages: t.Retention.MaxMessages,
			MaxBytes: t.Retention.MaxBytes, MaxAgeMs: t.Retention.MaxAge.Milliseconds()}}
}

func toPBHLC(h stabilizer.HLC) *pubsubpb.HLC {
	if h.IsZero() {
		return nil
	}
	return &pubsubpb.HLC{Wall: h.Wall, Logical: h.Logical}
}

func toPBTopicInfo(t TopicInfo) *pubsubpb.TopicInfo {
	out := &pubsubpb.TopicInfo{Topic: toPBTopic(t.Topic), CreatedAt: t.CreatedAt, Created: toPBHLC(t.Created),
		Audience: t.Audience, AudienceVersion: t.AudienceVersion, DuplicateWindowMs: t.DuplicateWindow.Milliseconds()}
	for _, o := range t.Origins {
		out.Origins = append(out.Origins, &pubsubpb.OriginStats{Origin: o.Origin, Messages: o.Messages, LastSeq: o.LastSeq,
			DeliveryFrontier: o.DeliveryFrontier, Bytes: o.Bytes, Truncated: o.Truncated, FirstSeq: o.FirstSeq, Dropped: o.Dropped})
	}
	for _, s := range t.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, toPBSubInfo(s))
	}
	return out
}

func toPBSubInfo(s SubscriptionInfo) *pubsubpb.SubscriptionInfo {
	out := &pubsubpb.SubscriptionInfo{Topic: s.Topic, Name: s.Name, Durable: s.Durable, Consumers: uint32(s.Consumers),
		Unacked: max(s.Stats.Pending, s.Backlog), Delivered: s.Stats.Delivered, Acked: s.Stats.Acked, Redelivered: s.Stats.Redelivered,
		DeadLettered: s.Stats.DeadLettered, DeadLetter: s.DeadLetter, Site: s.Site}
	for _, o := range slices.Sorted(maps.Keys(s.Position)) {
		p := s.Position[o]
		out.Position = append(out.Position, &pubsubpb.OriginPosition{Origin: o, Floor: p.Floor, Acked: p.Acked})
	}
	return out
}

func fromPBPublish(r *pubsubpb.PublishRequest) Message {
	return Message{Topic: r.Topic, Data: r.Data, Headers: r.Headers, ID: r.MsgId}
}

func toPBAck(a PubAck) *pubsubpb.PublishResponse {
	return &pubsubpb.PublishResponse{Origin: a.Origin, Seq: a.Seq, Hlc: toPBHLC(a.HLC), Duplicate: a.Duplicate,
		Frontier: &pubsubpb.Frontier{Predicate: a.Frontier.Predicate, Seq: a.Frontier.Seq, Version: a.Frontier.Version}}
}

func fromPBStart(s *pubsubpb.SubscribeStart) SubOptions {
	o := SubOptions{Topic: s.Topic, Durable: s.Durable, AckWait: time.Duration(s.AckWaitMs) * time.Millisecond,
		MaxDeliver: int(s.MaxDeliver), MaxAckPending: int(s.MaxAckPending), DeadLetter: s.DeadLetter,
		PositionPredicate: s.PositionPredicate, MaxInFlight: int(s.MaxInFlight)}
	switch s.OnTruncated {
	case pubsubpb.SubscribeStart_TRUNCATED_ERROR:
	case pubsubpb.SubscribeStart_TRUNCATED_FIRST:
		o.OnTruncated = OnTruncatedFirst
	default:
		o.OnTruncated = TruncatedPolicy(-1)
	}
	if p := s.Start; p != nil {
		switch p.Kind {
		case pubsubpb.StartPosition_NEW:
			o.Start = StartNew
		case pubsubpb.StartPosition_ALL:
			o.Start = StartAll
		case pubsubpb.StartPosition_LAST:
			o.Start = StartLast
		case pubsubpb.StartPosition_SEQ:
			o.Start, o.Seqs = StartSeq, p.Seqs
		case pubsubpb.StartPosition_TIME:
			o.Start, o.Time = StartTime, time.Unix(0, p.TimeUnixNano)
		default:
			o.Start = StartKind(-1)
		}
	}
	return o
}
