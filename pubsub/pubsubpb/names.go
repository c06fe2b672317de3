package pubsubpb

// Names and defaults that the sites and the clients of this API agree on.
// This file is written by hand; the rest of the package is generated from
// pubsub.proto.
const (
	// Stream is the name of every site's pub/sub stream: all topics
	// published at a site share it, and a message's seq is its seq there
	// (increasing per origin, not contiguous per topic).
	Stream = "pubsub"
	// Audience as a topic's publish-ack predicate: persisted at the origin
	// and at every site with live subscribers of the topic.
	Audience = "audience"
	// DefaultPublishAck is the publish-ack predicate of a topic that names none.
	DefaultPublishAck = "majority"
	// DefaultMaxMessageBytes bounds a message's data and headers.
	DefaultMaxMessageBytes = 1 << 20
	// RetentionLimits, RetentionInterest and RetentionWorkQueue are the
	// retention policies of a topic (Retention.policy); "" means limits.
	// RetentionAll is the former name of limits, still read as it.
	RetentionLimits    = "limits"
	RetentionInterest  = "interest"
	RetentionWorkQueue = "workqueue"
	RetentionAll       = "all"
	// DefaultAckWaitMs is how long a delivery waits for its ack before it
	// is redelivered.
	DefaultAckWaitMs = 30_000
	// DefaultMaxAckPending bounds a subscription's unacked messages.
	DefaultMaxAckPending = 1000
	// MaxUnanswered is how many publishes of one Publishes stream may wait
	// for their acks before the site stops reading it.
	MaxUnanswered = 4096
	// PublishesBatchHeader is the metadata key by which a Publishes client
	// and site say they read messages carrying several publishes or
	// answers (PublishRequest.more, PublishReply.more): one gRPC message
	// per batch instead of per publish, on both sides.
	PublishesBatchHeader = "pubsub-publishes-batch"
	// HeaderDeadLetterTopic, HeaderDeadLetterOrigin, HeaderDeadLetterSeq
	// and HeaderDeadLetterDeliveries are set on a message a subscription
	// sent to its dead-letter topic.
	HeaderDeadLetterTopic      = "stabilizer-dead-letter-topic"
	HeaderDeadLetterOrigin     = "stabilizer-dead-letter-origin"
	HeaderDeadLetterSeq        = "stabilizer-dead-letter-seq"
	HeaderDeadLetterDeliveries = "stabilizer-dead-letter-deliveries"
)
