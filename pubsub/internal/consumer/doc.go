// Package consumer is the deterministic state machine of one subscription at
// one site: which offered message goes to which consumer, acks, naks with a
// delay, in-progress, term, redelivery after the ack wait, dead letters past
// a maximum number of deliveries, the bound on unacked messages, and the
// durable position that lets the subscription move to another site. It does
// no I/O, reads no clock (every input carries now), starts no goroutines and
// imports only the standard library, so that tests drive it with a fake
// clock and compare it with a reference model.
//
// # The position
//
// The one idea: a subscription's durable position is, per origin, a floor
// (every message up to it is resolved) plus the set of resolved seqs above
// it, and the floor is computed from the order messages were offered in,
// not from seq arithmetic. The topics of a site share one stream, so a
// topic's seqs have gaps; but the pump offers each origin's messages in
// increasing seq and skips the ones the position has, so every seq below
// the lowest pending one was resolved, acked before, or is not this topic's.
// Hence floor = lowest pending seq - 1 while a message is pending, else the
// last seq offered. An ack that overtakes a slower one lands in the set
// above the floor until the floor passes it, so the set holds only what
// is resolved out of order.
//
// Resolved means acked, termed, dead-lettered and then Resolved, or gone
// from the store after it was offered (Drop); the position never claims a
// message that was offered and is not resolved,
// and it never moves back. The argument needs offers in order, so Offer
// refuses (ErrOrder) a message below the last offered one that it has not
// seen, wherever that is still above the floor. A site that takes the subscription over starts
// from the stored position (New, or Merge into a running State): its pump
// skips what Acked reports, so it delivers again at most the messages that
// were not resolved when the position was stored, and loses none. Attempt
// counts are not part of the position: at the new site MaxDeliver counts
// from 1 again.
//
// # Flow control
//
// Pending messages (offered and not resolved: in flight, waiting to be sent,
// waiting for a nak delay or a redelivery, dead letters waiting for Resolve)
// never exceed Config.MaxAckPending: Offer refuses with ErrFull beyond Room,
// and the pump waits. A consumer never gets more than its maxInFlight
// deliveries at a time. A stopped consumer thus holds at most its bound,
// and its deliveries come back after the ack wait; memory stays bounded
// whatever it does. One exception is by construction: a message that stays
// pending (a consumer that keeps reporting it in progress) holds the floor,
// and the acked set above it grows with every later ack.
//
// # Replies
//
// A reply (Ack, Nak, InProgress, Term) counts only from the consumer that
// got the current attempt, for that attempt, before its deadline
// (Delivery.Deadline, moved by InProgress). A reply to an older attempt,
// or to one whose deadline passed, fails with ErrExpired even if Tick has
// not run yet: the message will be redelivered, and only the reply to the
// redelivery counts. A reply for a message that is not pending, an attempt
// never made, or another consumer's delivery fails with ErrUnknownDelivery.
//
// # Choices
//
// Where the design is silent: Next ticks before it delivers; each delivery
// goes to the consumer with room that has the fewest in flight, the lowest
// id among equals, redeliveries too (the consumer that let it expire is not
// avoided); Attach of an attached consumer changes its bound; Detach makes
// its deliveries ready at once and counts them as attempts; Term resolves
// like an ack; a dead letter keeps its room until Resolve, so a dead-letter
// topic that refuses publishes stalls the subscription rather than losing
// messages; Resolve of a resolved message is not an error; Merge drops the
// pending messages it acks, in flight or not; seq 0 names no message and
// counts as acked.
//
// # Usage
//
// The I/O part owns one State per subscription and serialises every call:
//
//	s := consumer.New(cfg, stored) // stored: the durable position, or nil
//	s.Attach(id, maxInFlight)      // a Subscribe stream opened
//	// pump: per origin, in seq order, the topic's deliverable messages
//	for _, m := range next {
//		if s.Acked(m) {
//			continue
//		}
//		if s.Room() == 0 {
//			break // resume once acks made room
//		}
//		s.Offer(m, now)
//	}
//	// then, after any input (Offer, Attach, Detach, a reply, Merge, Tick):
//	for _, d := range s.Next(now) {
//		send(d) // to d.Consumer, with d.Attempt
//	}
//	for _, dl := range s.DeadLetters() {
//		publishDeadLetter(dl) // then:
//		s.Resolve(dl.Msg)
//	}
//	if t, ok := s.NextDeadline(); ok {
//		timer.Reset(t.Sub(now)) // and at t: s.Tick(t), then Next
//	}
//	store(s.Position()) // under the position predicate
//
// Replies go in as s.Ack, s.Nak, s.InProgress and s.Term; a position stored
// by another site goes in with s.Merge; a closed stream with s.Detach.
// Retention goes in as s.Skip (messages dropped before they were offered:
// the origin moves past them) and s.Drop (a pending message whose body is
// gone: it ends, resolved).
//
// # Concurrency
//
// None: a State is not safe for concurrent use; its owner serialises all
// calls. It keeps no references to the caller's slices or maps.
package consumer
