package consumer

import (
	"container/heap"
	"fmt"
	"time"
)

// reply finds the delivery that a consumer's reply is for. Only a reply from
// the consumer that got the current attempt, for that attempt, before its
// ack deadline, is taken.
func (s *State) reply(op string, c ConsumerID, m MsgID, attempt int, now time.Time) (*entry, error) {
	e := s.lookup(m)
	if e == nil {
		return nil, fmt.Errorf("%w: %s %v attempt %d: not pending", ErrUnknownDelivery, op, m, attempt)
	}
	switch {
	case attempt < 1 || attempt > e.attempts:
		return nil, fmt.Errorf("%w: %s %v attempt %d: delivered %d times", ErrUnknownDelivery, op, m, attempt, e.attempts)
	case attempt < e.attempts:
		return nil, fmt.Errorf("%w: %s %v attempt %d: attempt %d is current", ErrExpired, op, m, attempt, e.attempts)
	case e.consumer != c:
		return nil, fmt.Errorf("%w: %s %v attempt %d: delivered to consumer %d, not %d", ErrUnknownDelivery, op, m, attempt, e.consumer, c)
	case e.phase != phaseInFlight:
		return nil, fmt.Errorf("%w: %s %v attempt %d: no longer in flight", ErrExpired, op, m, attempt)
	case !now.Before(e.at):
		return nil, fmt.Errorf("%w: %s %v attempt %d: ack wait ended at %v", ErrExpired, op, m, attempt, e.at)
	}
	return e, nil
}

// Ack resolves a message: its delivery with this attempt went to consumer c
// and the ack wait has not passed.
func (s *State) Ack(c ConsumerID, m MsgID, attempt int, now time.Time) error {
	e, err := s.reply("ack", c, m, attempt, now)
	if err != nil {
		return err
	}
	s.resolve(e)
	s.stats.Acked++
	s.assertInvariants()
	return nil
}

// Nak asks for redelivery not before now+delay (at once when delay <= 0). A
// message already delivered MaxDeliver times goes to DeadLetters instead.
func (s *State) Nak(c ConsumerID, m MsgID, attempt int, delay time.Duration, now time.Time) error {
	e, err := s.reply("nak", c, m, attempt, now)
	if err != nil {
		return err
	}
	s.stats.Naks++
	s.leave(e)
	if delay > 0 && !s.exhausted(e) {
		s.toDelayed(e, now.Add(delay))
	} else {
		s.retry(e)
	}
	s.assertInvariants()
	return nil
}

// InProgress restarts the ack wait of a delivery: its deadline becomes
// now+AckWait.
func (s *State) InProgress(c ConsumerID, m MsgID, attempt int, now time.Time) error {
	e, err := s.reply("in progress", c, m, attempt, now)
	if err != nil {
		return err
	}
	e.at = now.Add(s.cfg.AckWait)
	heap.Fix(&s.timers, e.tidx)
	s.assertInvariants()
	return nil
}

// Term gives up on a message: it is never redelivered and counts as resolved
// for the position, like an ack.
func (s *State) Term(c ConsumerID, m MsgID, attempt int, now time.Time) error {
	e, err := s.reply("term", c, m, attempt, now)
	if err != nil {
		return err
	}
	s.resolve(e)
	s.stats.Terminated++
	s.assertInvariants()
	return nil
}

// Resolve ends a dead letter: the I/O part published it to the dead-letter
// topic (or there is none), and it now counts as resolved for the position.
// A message the position already has resolved is fine (nil), so that a retry
// after a crash or a Merge does no harm; any other message fails with
// ErrUnknownDelivery.
func (s *State) Resolve(m MsgID) error {
	e := s.lookup(m)
	switch {
	case e == nil && s.Acked(m):
		return nil
	case e == nil:
		return fmt.Errorf("%w: resolve %v: not pending", ErrUnknownDelivery, m)
	case e.phase != phaseDead:
		return fmt.Errorf("%w: resolve %v: not a dead letter", ErrUnknownDelivery, m)
	}
	s.resolve(e)
	s.stats.Resolved++
	s.assertInvariants()
	return nil
}

// resolve takes a message out of pending and into the position.
func (s *State) resolve(e *entry) {
	s.finish(e)
	e.o.resolved(e.seq)
}
