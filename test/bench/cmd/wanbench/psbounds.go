package main

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/wan"
)

// The lower bounds of the pub/sub bench, from the topology's delays alone:
// what the speed of light allows each row. Each is a pure function of the
// topology and the sites involved.

// sitePred says whether the sites that have a message persisted (and
// whose acks have arrived) satisfy a predicate.
type sitePred func(have map[string]bool) bool

// predMajority holds once more than half of sites have it.
func predMajority(sites []string) sitePred {
	return func(have map[string]bool) bool { return count(have, sites) > len(sites)/2 }
}

// predAll holds once every site has it.
func predAll(sites []string) sitePred {
	return func(have map[string]bool) bool { return count(have, sites) == len(sites) }
}

// predAudience is our audience predicate with live subscribers at
// subscribers: the origin and every subscriber's site have it.
func predAudience(origin string, subscribers []string) sitePred {
	need := append([]string{origin}, subscribers...)
	return func(have map[string]bool) bool { return count(have, need) == len(need) }
}

// predPersistedAt holds once site has it: our default delivery predicate
// for a subscriber at site.
func predPersistedAt(site string) sitePred {
	return func(have map[string]bool) bool { return have[site] }
}

func count(have map[string]bool, sites []string) int {
	n := 0
	for _, s := range sites {
		if have[s] {
			n++
		}
	}
	return n
}

func rtt(topo *wan.Topology, a, b string) time.Duration {
	if a == b {
		return 0
	}
	d, _ := topo.RTT(a, b)
	return d
}

func owd(topo *wan.Topology, from, to string) time.Duration {
	if from == to {
		return 0
	}
	d, _ := topo.OneWay(from, to)
	return d
}

// arrival is when a site's ack can be where it is needed.
type arrival struct {
	site string
	at   time.Duration
}

// firstHolding adds the sites in the order of their arrival and returns the
// arrival at which pred first holds, or -1 if it never does.
func firstHolding(as []arrival, pred sitePred) time.Duration {
	slices.SortStableFunc(as, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	have := map[string]bool{}
	for _, a := range as {
		have[a.site] = true
		if pred(have) {
			return a.at
		}
	}
	return -1
}

// publishBound is the least publish-ack latency at origin under pred: the
// smallest round trip within which the sites pred needs are reached, the
// origin's own site at 0. -1 if the topology's sites never satisfy pred.
func publishBound(topo *wan.Topology, origin string, pred sitePred) time.Duration {
	var as []arrival
	for _, s := range topo.Sites {
		as = append(as, arrival{s, rtt(topo, origin, s)})
	}
	return firstHolding(as, pred)
}

// deliveryBound is the least latency of a message published at from and
// delivered to a subscriber at to once pred holds there: site s's ack can
// reach to after OWD(from, s) + OWD(s, to) (the message to s, then its ack
// to to), from's and to's own after OWD(from, to); the bound is the first
// of those times at which the arrived sites satisfy pred, and never less
// than OWD(from, to), when to has the message at the earliest. -1 if pred
// never holds.
func deliveryBound(topo *wan.Topology, from, to string, pred sitePred) time.Duration {
	direct := owd(topo, from, to)
	var as []arrival
	for _, s := range topo.Sites {
		at := owd(topo, from, s) + owd(topo, s, to)
		if s == from || s == to {
			at = direct
		}
		as = append(as, arrival{s, at})
	}
	b := firstHolding(as, pred)
	if b < 0 {
		return -1
	}
	return max(b, direct)
}

// natsBound is the least publish-ack latency of a JetStream client at
// client whose stream, replicated at replicas, is led at leader: the round
// trip to the leader (nothing when client is the leader's region) plus the
// leader's round trip to its nearest other replica (for R3, the quorum of
// two). -1 if leader is not a replica.
func natsBound(topo *wan.Topology, replicas []string, leader, client string) time.Duration {
	if !slices.Contains(replicas, leader) {
		return -1
	}
	var nearest time.Duration = -1
	for _, r := range replicas {
		if r != leader && (nearest < 0 || rtt(topo, leader, r) < nearest) {
			nearest = rtt(topo, leader, r)
		}
	}
	return rtt(topo, client, leader) + max(nearest, 0)
}

// closestPair is the two sites with the smallest round trip between them,
// in topology order: where the bench puts the audience's subscribers.
func closestPair(topo *wan.Topology) []string {
	var best []string
	var bestRTT time.Duration
	for i, a := range topo.Sites {
		for _, b := range topo.Sites[i+1:] {
			if d := rtt(topo, a, b); best == nil || d < bestRTT {
				best, bestRTT = []string{a, b}, d
			}
		}
	}
	return best
}

// gainPair is one (region, leader placement) of the publish-ack comparison:
// our p50 there and NATS's with its stream led at Leader, and both bounds.
type gainPair struct {
	Region, Leader       string
	Ours, NATS           float64 // p50, ms
	OursBound, NATSBound float64 // ms
}

// meanGain is the mean over pairs of the gain 1 − ours/NATS at p50, and
// the ceiling: the mean of the same ratio of the bounds, what the RTT
// matrix allows. Pairs whose either p50 or bound is missing are left out
// of both; n counts those used.
func meanGain(pairs []gainPair) (measured, ceiling float64, n int) {
	var gs, cs []float64
	for _, p := range pairs {
		g, c := gain(p.Ours, p.NATS), gainOfBounds(p.OursBound, p.NATSBound)
		if math.IsNaN(g) || math.IsNaN(c) {
			continue
		}
		gs, cs = append(gs, g), append(cs, c)
	}
	return mean(gs), mean(cs), len(gs)
}

// gainOfBounds is 1 − ours/theirs for bounds, where ours may be 0 (a
// predicate the origin satisfies alone).
func gainOfBounds(ours, theirs float64) float64 {
	if ours < 0 || theirs <= 0 {
		return math.NaN()
	}
	return 1 - ours/theirs
}
