package consumer

import (
	"cmp"
	"fmt"
	"slices"
)

// checkInvariants checks the State's internal consistency: every pending
// message is in exactly the home of its phase, counts agree, and the
// position claims no pending message. The model test calls it after every
// step; under the invariants build tag every input does.
func (s *State) checkInvariants() error {
	if err := s.checkOrigins(); err != nil {
		return err
	}
	if err := s.checkTimers(); err != nil {
		return err
	}
	return s.checkConsumers()
}

func (s *State) checkOrigins() error {
	var inPhase [numPhases]int
	pending := 0
	if len(s.list) != len(s.origins) || !slices.IsSortedFunc(s.list, func(a, b *origin) int { return cmp.Compare(a.name, b.name) }) {
		return fmt.Errorf("consumer: invariant: origin list %d, map %d, or unsorted", len(s.list), len(s.origins))
	}
	for _, o := range s.list {
		if s.origins[o.name] != o {
			return fmt.Errorf("consumer: invariant: origin %s not in the map", o.name)
		}
		if err := o.check(); err != nil {
			return err
		}
		pending += o.pend.len()
		for _, e := range o.pend.all() {
			inPhase[e.phase]++
			if err := s.checkEntry(e); err != nil {
				return err
			}
		}
	}
	if pending != s.pending || pending > s.cfg.MaxAckPending {
		return fmt.Errorf("consumer: invariant: %d pending, counted %d, MaxAckPending %d", pending, s.pending, s.cfg.MaxAckPending)
	}
	if inPhase != s.inPhase {
		return fmt.Errorf("consumer: invariant: phases %v, counted %v", inPhase, s.inPhase)
	}
	return nil
}

// check verifies the lists of one origin and how they relate to its floor.
func (o *origin) check() error {
	acked := o.acked.all()
	for i, v := range acked {
		if v <= o.floor || i > 0 && v <= acked[i-1] {
			return fmt.Errorf("consumer: invariant: %s acked %v with floor %d", o.name, acked, o.floor)
		}
	}
	pend := o.pend.all()
	if len(pend) > 0 && o.floor != pend[0].seq-1 || len(pend) == 0 && o.floor < o.cursor {
		return fmt.Errorf("consumer: invariant: %s floor %d, cursor %d, %d pending", o.name, o.floor, o.cursor, len(pend))
	}
	var ready []*entry
	for i, e := range pend {
		if e.o != o || e.seq > o.cursor || o.claims(e.seq) || i > 0 && e.seq <= pend[i-1].seq {
			return fmt.Errorf("consumer: invariant: %s pending %d: cursor %d, floor %d, claimed %v", o.name, e.seq, o.cursor, o.floor, o.claims(e.seq))
		}
		if e.phase == phaseReady {
			ready = append(ready, e)
		}
	}
	if !slices.Equal(ready, o.ready.all()) {
		return fmt.Errorf("consumer: invariant: %s ready list differs from the ready pending ones", o.name)
	}
	return nil
}

func (s *State) checkEntry(e *entry) error {
	inTimers := e.tidx >= 0 && e.tidx < len(s.timers) && s.timers[e.tidx] == e
	wantTimers := e.phase == phaseInFlight || e.phase == phaseDelayed
	switch {
	case inTimers != wantTimers || !wantTimers && e.tidx != -1:
		return fmt.Errorf("consumer: invariant: %v phase %d, timer index %d", e.id(), e.phase, e.tidx)
	case e.phase == phaseDone:
		return fmt.Errorf("consumer: invariant: %v done but pending", e.id())
	case e.phase == phaseInFlight && (e.attempts < 1 || s.getConsumer(e.consumer) == nil):
		return fmt.Errorf("consumer: invariant: %v in flight to consumer %d (attached %v), attempt %d", e.id(), e.consumer, s.getConsumer(e.consumer) != nil, e.attempts)
	case e.phase == phaseDead && !s.exhausted(e):
		return fmt.Errorf("consumer: invariant: %v dead after %d deliveries, MaxDeliver %d", e.id(), e.attempts, s.cfg.MaxDeliver)
	case e.phase == phaseDelayed && e.attempts < 1:
		return fmt.Errorf("consumer: invariant: %v delayed before its first delivery", e.id())
	}
	return nil
}

func (s *State) checkTimers() error {
	for i, e := range s.timers {
		if e.tidx != i {
			return fmt.Errorf("consumer: invariant: timer %d holds index %d", i, e.tidx)
		}
		if i > 0 && s.timers.Less(i, (i-1)/2) {
			return fmt.Errorf("consumer: invariant: timer heap order broken at %d", i)
		}
	}
	if n := s.inPhase[phaseInFlight] + s.inPhase[phaseDelayed]; n != len(s.timers) {
		return fmt.Errorf("consumer: invariant: %d timers, %d in flight or delayed", len(s.timers), n)
	}
	return nil
}

func (s *State) checkConsumers() error {
	held := make(map[ConsumerID]int)
	for _, e := range s.timers {
		if e.phase == phaseInFlight {
			held[e.consumer]++
		}
	}
	for i, c := range s.consumers {
		if i > 0 && c.id <= s.consumers[i-1].id {
			return fmt.Errorf("consumer: invariant: consumers unsorted at %d", i)
		}
		if c.inflight != held[c.id] || c.inflight < 0 {
			return fmt.Errorf("consumer: invariant: consumer %d counts %d in flight, holds %d", c.id, c.inflight, held[c.id])
		}
	}
	return nil
}
