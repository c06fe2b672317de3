package consumer

import "errors"

// Sentinel errors. Returned errors wrap them and name the message, the
// attempt and why; match them with errors.Is.
var (
	// ErrUnknownDelivery: no such delivery is waiting for this reply: the
	// message was never offered, is already resolved (acked, termed,
	// dead-letter resolved, or acked in a merged position), this attempt was
	// never delivered, or it was delivered to another consumer. Resolve
	// returns it for a pending message that is not dead-lettered.
	ErrUnknownDelivery = errors.New("consumer: unknown delivery")
	// ErrExpired: the reply is for an attempt older than the current one, or
	// for a delivery whose ack wait passed (or that was nak'ed, or whose
	// consumer detached): the message will be, or was, redelivered, and only
	// the reply to that redelivery counts.
	ErrExpired = errors.New("consumer: delivery expired")
	// ErrFull: Offer beyond Room; offer the message again after acks made
	// room.
	ErrFull = errors.New("consumer: subscription full")
	// ErrOrder: Offer of a message below the last one offered of its origin
	// that was neither offered nor acked before. Accepting it could let the
	// position claim a message that was never acked, since the floor skips
	// every seq that was not offered.
	ErrOrder = errors.New("consumer: offered out of order")
)
