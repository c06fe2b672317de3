package core_test

import (
	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// Truncation and state transfer in the simulation. Sites truncate streams
// at random: within what every peer persisted, or beyond it when every
// site lacking the entries is down (a site down longer than its peers
// retain). Sites are wiped at random, several at once too: they lose
// their store. Both kinds catch up, stream by stream, from a snapshot of
// another site's application state of that stream, which in the
// simulation is its applied position (the application keeps nothing
// else). The invariants of the simulation hold throughout; truncations
// within peers are checked against the peers' stores, and heal requires
// every site to converge.

// voidPayload marks the ground truth's placeholders for abandoned seqs.
var voidPayload = []byte("\x00void")

func isVoid(e core.Entry) bool { return string(e.Payload) == string(voidPayload) }

// truncations writes a Ready's truncations into the site's store.
func (s *sim) truncations(site *simSite, rd core.Ready) {
	st := site.store
	for _, t := range rd.Truncations {
		l := st.log[t.Stream]
		if t.Seq > uint64(len(l)) {
			tl := s.truth[t.Stream]
			if t.Skip && t.Stream.Origin == site.name && t.Seq > uint64(len(tl)) {
				// Seqs the wiped site's earlier incarnation gave out and
				// nobody holds: abandoned, in the truth too.
				for seq := uint64(len(tl)) + 1; seq <= t.Seq; seq++ {
					tl = append(tl, core.Entry{Stream: t.Stream, Seq: seq, HLC: t.HLC, Payload: voidPayload})
				}
				s.truth[t.Stream] = tl
				s.counts["abandoned"]++
			}
			if !t.Skip || t.Seq > uint64(len(tl)) {
				s.failf("%s: truncates %s to %d beyond its log %d (skip %v, truth %d)", site.name, t.Stream, t.Seq, len(l), t.Skip, len(tl))
				return
			}
			st.log[t.Stream] = append(l, tl[len(l):t.Seq]...)
		}
		if !t.Skip && t.Seq > st.app[t.Stream] {
			s.failf("%s: truncates %s to %d beyond what it applied, %d", site.name, t.Stream, t.Seq, st.app[t.Stream])
		}
		if !t.Skip && t.Seq > site.beyond[t.Stream] {
			for _, o := range s.sites {
				if o != site && !o.wiped && uint64(len(o.store.log[t.Stream])) < t.Seq {
					s.failf("%s: truncates %s to %d, which %s has not persisted (%d)", site.name, t.Stream, t.Seq, o.name, len(o.store.log[t.Stream]))
				}
			}
		}
		if t.Skip && t.Seq > st.app[t.Stream] {
			// A skip moves the application's position with the head:
			// the driver records both in one write.
			st.app[t.Stream] = t.Seq
			site.expect[t.Stream] = t.Seq + 1
			delete(site.queue, t.Stream)
		}
		st.floor[t.Stream] = max(st.floor[t.Stream], t.Seq)
		s.counts["truncated"]++
	}
	if rd.Incarnation != 0 {
		st.incarnation = rd.Incarnation
	}
	if rd.Recovery != nil {
		st.recovery = *rd.Recovery
	}
	if len(rd.Behind) > 0 {
		s.counts["behind"]++
	}
}

// truncate has a site truncate one of its streams.
func (s *sim) truncate() {
	site := s.anyUp()
	if site == nil || site.wiped {
		return
	}
	ids := site.core.Streams()
	if len(ids) == 0 {
		return
	}
	id := ids[s.rng.IntN(len(ids))]
	head, _, _ := site.core.Head(id)
	upto := uint64(s.rng.IntN(int(head) + 1))
	beyond := s.rng.IntN(2) == 0
	for _, o := range s.sites {
		if o != site && o.up && uint64(len(o.store.log[id])) < upto {
			beyond = false // only the down may be left behind
		}
	}
	if beyond {
		site.beyond[id] = max(site.beyond[id], upto)
		s.counts["truncate.beyond"]++
	}
	s.logf("truncate %s %s to %d beyond=%v", site.name, id, upto, beyond)
	_, err := site.core.Truncate(id, upto, beyond)
	s.check(err, "truncate")
}

// wipe crashes a site and takes its store: what only it held is gone from
// the ground truth too (its own streams', and others' whose origin was
// wiped before).
func (s *sim) wipe() {
	site := s.anyUp()
	if site == nil || len(s.upSites()) < 2 {
		return
	}
	s.logf("wipe %s", site.name)
	s.crash(site)
	s.counts["wipe"]++
	site.wiped, site.everWiped = true, true
	site.store = newStore()
	site.store.siteIdx = site.idx
	site.verified = map[core.StreamID]uint64{}
	site.claimed = nil
	site.defs = nil // run-time predicates went with the store
	s.pub[site.idx] = map[fkey]uint64{}
	s.pubTime[site.idx] = map[string]core.HLC{}
	for id, tl := range s.truth {
		kept := 0
		for _, o := range s.sites {
			// Bulk entries written and not synced are held too: they
			// become durable unless a crash takes them first.
			kept = max(kept, len(o.store.log[id])+len(o.store.bulk[id]))
		}
		s.truth[id] = tl[:min(kept, len(tl))]
	}
}

// catchUp has every site that needs a snapshot try to install one, per
// stream: the streams whose origins (or relays) dropped what it lacks,
// and, once it heard every peer, a wiped site's own streams that peers
// hold beyond its log.
func (s *sim) catchUp() {
	for _, site := range s.sites {
		if !site.up {
			continue
		}
		need := site.core.Behind()
		if site.wiped && !site.core.Joining() {
			// Lost is complete only once every peer was heard.
			need = append(need, site.core.Lost()...)
		}
		for _, q := range need {
			s.restore(site, q)
		}
		site.wiped = site.wiped && (site.core.Joining() || len(site.core.Lost()) > 0)
	}
}

// restore installs at site a snapshot of stream q.Stream's application
// state from the site that applied most of it, if that is more than the
// site holds: past q.Seq if it can, else as far as live sites go (the
// holder of the rest may be down), and not below what the site dropped.
func (s *sim) restore(site *simSite, q core.Position) bool {
	head, _, _ := site.core.Head(q.Stream)
	var best *simSite
	for _, k := range s.rng.Perm(len(s.sites)) {
		src := s.sites[k]
		a := src.store.app[q.Stream]
		if src == site || !src.up || a <= head || (best != nil && a <= best.store.app[q.Stream]) {
			continue
		}
		best = src
	}
	if best == nil {
		return false
	}
	a := best.store.app[q.Stream]
	pos := []core.Position{{Stream: q.Stream, Seq: a, HLC: s.truth[q.Stream][a-1].HLC}}
	if err := site.core.CheckSnapshot(pos); err != nil {
		s.logf("restore %s of %s from %s: %v", site.name, q.Stream, best.name, err)
		return false
	}
	s.install(site, best, pos)
	return true
}

// install does what a driver does once a snapshot arrived: the
// application's state of the streams (here, its positions) and their
// skipped heads in one durable write, then the core.
func (s *sim) install(site, src *simSite, pos []core.Position) {
	st := site.store
	for _, q := range pos {
		st.app[q.Stream] = q.Seq
		site.verified[q.Stream] = min(site.verified[q.Stream], q.Seq)
		if l := st.log[q.Stream]; uint64(len(l)) < q.Seq {
			st.log[q.Stream] = append(l, s.truth[q.Stream][len(l):q.Seq]...)
			st.floor[q.Stream] = q.Seq
			// The stream skips past its unsynced bulk writes: the core
			// takes a snapshot among them only once they are durable
			// (ErrNotDurable), so all of them lie below it.
			delete(st.bulk, q.Stream)
		}
		delete(site.queue, q.Stream)
		site.expect[q.Stream] = q.Seq + 1
	}
	s.logf("install at %s snapshot from %s: %v clock %s", site.name, src.name, pos, src.core.Clock())
	s.check(site.core.InstallSnapshot(pos, src.core.Clock()), "install snapshot")
	s.counts["snapshot"]++
	if site.wiped {
		s.counts["snapshot.wiped"]++
	}
}
