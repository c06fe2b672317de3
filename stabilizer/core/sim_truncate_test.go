package core_test

import (
	"slices"

	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// Truncation and state transfer in the simulation. Sites truncate streams
// at random: within what every peer persisted, or beyond it when every
// site lacking the entries is down (a site down longer than its peers
// retain). Sites are wiped at random: they lose their store. Both kinds
// catch up from a snapshot of another site's application state, which in
// the simulation is its applied positions (the application keeps nothing
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
//
// One recovery at a time: a site is wiped only while no other is still
// catching up. With overlapping recoveries, what each site lacks may sit
// at different holders, and a snapshot of one application's whole state
// from one source cannot merge them; the sites would wait on each other.
func (s *sim) wipe() {
	site := s.anyUp()
	if site == nil || len(s.upSites()) < 2 || s.recovering() {
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
			kept = max(kept, len(o.store.log[id]))
		}
		s.truth[id] = tl[:kept]
	}
}

// recovering reports whether some site is wiped and not whole again, or
// behind a truncation.
func (s *sim) recovering() bool {
	for _, o := range s.sites {
		if o.wiped || (o.up && len(o.core.Behind()) > 0) {
			return true
		}
	}
	return false
}

// catchUp has every site that needs a snapshot try to install one: a
// wiped site for each name of its own streams, others for the streams
// whose origins truncated what they lack.
func (s *sim) catchUp() {
	for _, site := range s.sites {
		if !site.up {
			continue
		}
		// Lost is complete only once every peer was heard.
		if site.wiped && !site.core.Joining() {
			for _, l := range site.core.Lost() {
				s.restore(site, l.Stream.Name)
			}
		}
		site.wiped = site.wiped && (site.core.Joining() || len(site.core.Lost()) > 0)
		var names []string
		for _, b := range site.core.Behind() {
			if !slices.Contains(names, b.Stream.Name) {
				names = append(names, b.Stream.Name)
			}
		}
		for _, name := range names {
			s.restore(site, name)
		}
	}
}

// restore installs at site a snapshot of name's application from another
// site that holds enough: past the floors the site is behind, and,
// preferably, every entry of the site's own streams that peers hold (the
// driver learns that from every peer's acks); and nothing the site dropped
// and would need. A holder of the lost entries may be down: then a
// snapshot that only ends being behind will do, and a later one brings
// back the rest.
func (s *sim) restore(site *simSite, name string) bool {
	behind := map[core.StreamID]uint64{}
	for _, b := range site.core.Behind() {
		if b.Stream.Name == name {
			behind[b.Stream] = b.Seq
		}
	}
	lost := map[core.StreamID]uint64{}
	for _, l := range site.core.Lost() {
		if l.Stream.Name == name && !site.core.Joining() {
			// While joining, Lost is not complete: a later snapshot
			// covers it.
			lost[l.Stream] = l.Seq
		}
	}
	for _, needLost := range []bool{true, false} {
		if !needLost && len(behind) == 0 {
			break
		}
		for _, k := range s.rng.Perm(len(s.sites)) {
			src := s.sites[k]
			if src == site || !src.up || !covers(src, behind) || (needLost && !covers(src, lost)) {
				continue
			}
			var pos []core.Position
			for _, id := range sortedKeys(src.store.app, cmpIDs) {
				if a := src.store.app[id]; id.Name == name && a > 0 {
					pos = append(pos, core.Position{Stream: id, Seq: a, HLC: s.truth[id][a-1].HLC})
				}
			}
			if err := site.core.CheckSnapshot(name, pos); err != nil {
				s.logf("restore %s of %s from %s: %v", site.name, name, src.name, err)
				continue
			}
			s.install(site, src, name, pos)
			return true
		}
	}
	return false
}

// covers reports whether src's application applied each stream as far as
// need says.
func covers(src *simSite, need map[core.StreamID]uint64) bool {
	for id, want := range need {
		if src.store.app[id] < want {
			return false
		}
	}
	return true
}

// install does what a driver does once a snapshot arrived: the
// application's state (here, its positions) and the streams' skipped
// heads in one durable write, then the core.
func (s *sim) install(site, src *simSite, name string, pos []core.Position) {
	st := site.store
	at := map[core.StreamID]uint64{}
	for _, q := range pos {
		at[q.Stream] = q.Seq
	}
	for _, id := range sortedKeys(st.app, cmpIDs) {
		if id.Name == name {
			st.app[id] = 0
			site.verified[id] = 0
		}
	}
	for _, q := range pos {
		st.app[q.Stream] = q.Seq
		if l := st.log[q.Stream]; uint64(len(l)) < q.Seq {
			st.log[q.Stream] = append(l, s.truth[q.Stream][len(l):q.Seq]...)
			st.floor[q.Stream] = q.Seq
		}
	}
	for id := range site.queue {
		if id.Name == name {
			delete(site.queue, id)
		}
	}
	for _, id := range site.core.Streams() {
		if id.Name == name {
			site.expect[id] = at[id] + 1
		}
	}
	for _, q := range pos {
		site.expect[q.Stream] = q.Seq + 1
	}
	s.logf("install at %s snapshot of %s from %s: %v clock %s", site.name, name, src.name, pos, src.core.Clock())
	s.check(site.core.InstallSnapshot(name, pos, src.core.Clock()), "install snapshot")
	s.counts["snapshot"]++
	if site.wiped {
		s.counts["snapshot.wiped"]++
	}
}
