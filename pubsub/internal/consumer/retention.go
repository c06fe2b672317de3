package consumer

import "fmt"

// What retention does to a subscription. The site's store may drop a topic's
// oldest messages (limits, interest, work queue); the I/O part notices when
// what it reads next is gone and tells the State with one of these.

// Skip moves an origin past messages up to seq that were dropped before
// they were offered: they are never delivered, and the position counts them
// as resolved, like the seqs of other topics the pump steps over. Offers of
// the origin must then come above seq. Pending messages at or below seq
// stay pending (their bodies may still be at hand; Drop ends those that are
// not). A seq at or below what was offered changes nothing.
func (s *State) Skip(origin string, seq uint64) {
	o := s.origin(origin)
	if seq <= o.cursor {
		return
	}
	o.cursor = seq
	o.setFloor(o.newFloor())
	s.stats.Skipped++
	s.assertInvariants()
}

// Drop ends a pending message whose body is gone: retention dropped it after
// it was offered, so it cannot be delivered again. It counts as resolved for
// the position, like Term, and Stats.Dropped counts it. A message the
// position already has resolved is fine (nil); any other message that is
// not pending fails with ErrUnknownDelivery.
func (s *State) Drop(m MsgID) error {
	e := s.lookup(m)
	switch {
	case e == nil && s.Acked(m):
		return nil
	case e == nil:
		return fmt.Errorf("%w: drop %v: not pending", ErrUnknownDelivery, m)
	}
	s.resolve(e)
	s.stats.Dropped++
	s.assertInvariants()
	return nil
}
