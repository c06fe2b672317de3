package consumer

import (
	"fmt"
	"time"
)

// MsgID names one message of a subscription's topic: its origin site and its
// seq in that origin's pub/sub stream. Seqs of one topic are increasing per
// origin but not contiguous, since the topics of a site share one stream.
type MsgID struct {
	Origin string
	Seq    uint64
}

func (m MsgID) String() string { return fmt.Sprintf("%s:%d", m.Origin, m.Seq) }

// ConsumerID names one consumer of a shared subscription, such as one
// Subscribe stream. The I/O part chooses them; they only need to be unique
// among the attached consumers.
type ConsumerID uint64

// OriginPos is the durable position of one origin: every message of the
// origin with seq <= Floor is resolved (acked, termed or dead-lettered), and
// so is every seq in Acked, which is sorted, has no duplicates and holds only
// seqs above Floor.
type OriginPos struct {
	Floor uint64
	Acked []uint64
}

// Position is a subscription's durable position, per origin. An origin that
// is not named has floor 0 and nothing acked.
type Position map[string]OriginPos

// Delivery is one message to send to one consumer. Attempt is 1 for the first
// delivery and grows by one with each redelivery; the consumer's reply must
// carry it. Deadline is when the ack wait ends and the message becomes due
// for redelivery (later if the consumer reports it in progress).
type Delivery struct {
	Msg      MsgID
	Consumer ConsumerID
	Attempt  int
	Deadline time.Time
}

// DeadLetter is a message that was delivered Config.MaxDeliver times without
// being acked. The I/O part publishes it to the subscription's dead-letter
// topic (if any) and then calls State.Resolve.
type DeadLetter struct {
	Msg        MsgID
	Deliveries int
}

// Stats describes a State: gauges of what it holds now, and counters of what
// happened since New. Pending = InFlight + Ready + Delayed + Dead.
type Stats struct {
	// Pending counts messages offered and not resolved; never above
	// Config.MaxAckPending.
	Pending uint64
	// InFlight counts messages delivered and waiting for their reply.
	InFlight uint64
	// Ready counts messages waiting for a consumer with room: new ones, and
	// ones to redeliver now (ack wait passed, nak'ed without delay, or their
	// consumer detached).
	Ready uint64
	// Delayed counts nak'ed messages waiting for their delay to end.
	Delayed uint64
	// Dead counts messages past MaxDeliver waiting for Resolve, whether
	// DeadLetters handed them out yet or not.
	Dead uint64
	// Consumers counts the attached consumers.
	Consumers uint64

	// Offered counts messages Offer accepted (not the ones it ignored).
	Offered uint64
	// Delivered counts deliveries handed out by Next, redeliveries included.
	Delivered uint64
	// Redelivered counts deliveries with an attempt above 1.
	Redelivered uint64
	// Acked counts messages resolved by Ack.
	Acked uint64
	// Naks counts accepted Naks.
	Naks uint64
	// Expired counts deliveries whose ack wait passed without a reply.
	Expired uint64
	// Terminated counts messages resolved by Term.
	Terminated uint64
	// DeadLettered counts messages that went to DeadLetters past MaxDeliver.
	DeadLettered uint64
	// Resolved counts dead letters resolved by Resolve.
	Resolved uint64
	// Skipped counts the Skips that moved an origin past messages
	// retention dropped before they were offered.
	Skipped uint64
	// Dropped counts pending messages Drop ended: retention dropped them
	// after they were offered, before they were resolved.
	Dropped uint64
	// Merged counts pending messages dropped because a position given to
	// Merge had them acked (at another site).
	Merged uint64
}
