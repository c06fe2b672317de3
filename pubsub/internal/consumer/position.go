package consumer

import (
	"maps"
	"slices"
)

// origin is what a subscription knows of one origin's messages.
//
// The position is floor plus acked, and the floor is computed from what was
// offered: the pump offers an origin's messages in increasing seq and skips
// the acked ones, so every seq below the lowest pending one was either
// resolved here, acked before, or is not a message of this topic (topics
// share the stream, so a topic's seqs have gaps). Hence floor = lowest
// pending seq - 1 while anything is pending, else the last seq offered; and
// acked holds the seqs resolved above the floor, which is where an ack that
// overtakes a slower one lands.
type origin struct {
	name   string
	floor  uint64
	acked  seqs    // resolved seqs > floor
	cursor uint64  // the last seq offered (or skipped as acked); offers must pass it
	pend   entries // pending messages, by seq; all > floor
	ready  entries // the pending ones in phaseReady, by seq
}

// claims reports whether the position has seq resolved.
func (o *origin) claims(seq uint64) bool {
	if seq <= o.floor {
		return true
	}
	_, ok := findSeq(&o.acked, seq)
	return ok
}

// newFloor is the floor that what was offered and what is pending allow.
func (o *origin) newFloor() uint64 {
	if o.pend.len() > 0 {
		return o.pend.all()[0].seq - 1 // > floor: pending ones are never claimed
	}
	return max(o.floor, o.cursor)
}

// setFloor raises the floor to f and drops the acked seqs it now covers,
// which keeps the position small.
func (o *origin) setFloor(f uint64) {
	o.floor = f
	all := o.acked.all()
	if len(all) == 0 || all[0] > f {
		return
	}
	i, found := slices.BinarySearch(all, f)
	if found {
		i++
	}
	o.acked.dropFront(i)
}

// resolved records that the offered seq, no longer pending, is resolved.
func (o *origin) resolved(seq uint64) {
	f := o.newFloor()
	if seq > f {
		i, _ := findSeq(&o.acked, seq)
		o.acked.insert(i, seq)
	}
	o.setFloor(f)
}

// join takes in another position of this origin: the higher floor and the
// union of the acked seqs above it.
func (o *origin) join(p OriginPos) {
	floor := max(o.floor, p.Floor)
	a, b := o.acked.all(), p.Acked
	merged := make([]uint64, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		var v uint64
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			v, a = a[0], a[1:]
		case len(a) == 0 || b[0] < a[0]:
			v, b = b[0], b[1:]
		default: // equal
			v, a, b = a[0], a[1:], b[1:]
		}
		if v > floor {
			merged = append(merged, v)
		}
	}
	o.floor = floor
	o.acked = seqs{buf: merged}
}

// normalize returns a copy of p with Acked sorted, without duplicates and
// above Floor; nil when empty.
func normalize(p OriginPos) OriginPos {
	acked := slices.Clone(p.Acked)
	slices.Sort(acked)
	acked = slices.Compact(acked)
	i, found := slices.BinarySearch(acked, p.Floor)
	if found {
		i++
	}
	acked = acked[i:]
	if len(acked) == 0 {
		acked = nil
	}
	return OriginPos{Floor: p.Floor, Acked: acked}
}

// Acked reports whether the position has m resolved: acked, termed or
// dead-letter resolved, here, before New, or at a site whose position was
// merged. The pump skips these. Seq 0 names no message and counts as acked.
func (s *State) Acked(m MsgID) bool {
	o := s.origins[m.Origin]
	if o == nil {
		return m.Seq == 0
	}
	return o.claims(m.Seq)
}

// Position returns the durable position now, a copy. Origins with nothing
// resolved are left out. It claims no message that was offered and is not
// resolved, and it never moves back: a floor only rises, and a seq once in
// it stays (in Acked, or below the floor).
func (s *State) Position() Position {
	p := make(Position, len(s.list))
	for _, o := range s.list {
		if o.floor == 0 && o.acked.len() == 0 {
			continue
		}
		var acked []uint64
		if o.acked.len() > 0 {
			acked = slices.Clone(o.acked.all())
		}
		p[o.name] = OriginPos{Floor: o.floor, Acked: acked}
	}
	return p
}

// Merge joins a position stored by another site for this subscription (or
// an older one of its own): per origin the higher floor and the union of the
// acked seqs. Pending messages that p has acked are dropped, wherever they
// are; a reply to their delivery then fails with ErrUnknownDelivery.
func (s *State) Merge(p Position) {
	for _, name := range slices.Sorted(maps.Keys(p)) {
		o := s.origin(name)
		o.join(normalize(p[name]))
		var drop []*entry
		for _, e := range o.pend.all() {
			if o.claims(e.seq) {
				drop = append(drop, e)
			}
		}
		for _, e := range drop {
			s.finish(e)
			s.stats.Merged++
		}
		o.setFloor(o.newFloor())
	}
	s.assertInvariants()
}
