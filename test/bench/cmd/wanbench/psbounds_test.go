package main

import (
	"math"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/wan"
)

// t5 is a made-up topology whose bounds can be checked by hand: a and b
// are close, c is close to b, d and e are far from everyone. One-way
// delays are half the round trips.
const t5 = `
name: t5
sites: [a, b, c, d, e]
rtt_ms:
  a: {b: 20, c: 40, d: 100, e: 200}
  b: {c: 20, d: 100, e: 200}
  c: {d: 100, e: 200}
  d: {e: 200}
`

// triangle breaks the triangle inequality: a to b directly is slower than
// through c.
const triangle = `
name: triangle
sites: [a, b, c]
rtt_ms:
  a: {b: 100, c: 20}
  b: {c: 20}
`

func topology(t *testing.T, src string) *wan.Topology {
	t.Helper()
	if src == "ec2-3" {
		topo, err := wan.Preset(src)
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	topo, err := wan.ParseTopology("test", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func msDur(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }

const (
	us = "us-east-1"
	eu = "eu-west-1"
	ap = "ap-northeast-1"
)

func TestPublishBound(t *testing.T) {
	ec2, five := topology(t, "ec2-3"), topology(t, t5)
	for _, c := range []struct {
		name   string
		topo   *wan.Topology
		origin string
		pred   sitePred
		want   float64
	}{
		{"majority us", ec2, us, predMajority(ec2.Sites), 69.7},
		{"majority eu", ec2, eu, predMajority(ec2.Sites), 69.7},
		{"majority ap", ec2, ap, predMajority(ec2.Sites), 149.6},
		{"all us", ec2, us, predAll(ec2.Sites), 149.6},
		{"all eu", ec2, eu, predAll(ec2.Sites), 202.4},
		{"all ap", ec2, ap, predAll(ec2.Sites), 202.4},
		// The bench's audience: subscribers in us-east-1 and eu-west-1.
		{"audience us", ec2, us, predAudience(us, []string{us, eu}), 69.7},
		{"audience eu", ec2, eu, predAudience(eu, []string{us, eu}), 69.7},
		{"audience ap", ec2, ap, predAudience(ap, []string{us, eu}), 202.4},
		{"audience without subscribers", ec2, ap, predAudience(ap, nil), 0},
		{"audience of one far site", ec2, us, predAudience(us, []string{ap}), 149.6},
		{"majority of five", five, "a", predMajority(five.Sites), 40},
		{"all of five", five, "a", predAll(five.Sites), 200},
		{"audience d", five, "a", predAudience("a", []string{"d"}), 100},
		{"audience b c", five, "a", predAudience("a", []string{"b", "c"}), 40},
		{"never", five, "a", predPersistedAt("z"), -1},
	} {
		want := msDur(c.want)
		if c.want < 0 {
			want = -1
		}
		if got := publishBound(c.topo, c.origin, c.pred); got != want {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
}

func TestDeliveryBound(t *testing.T) {
	ec2, five, tri := topology(t, "ec2-3"), topology(t, t5), topology(t, triangle)
	for _, c := range []struct {
		name     string
		topo     *wan.Topology
		from, to string
		pred     sitePred
		want     float64
	}{
		{"persisted at eu from us", ec2, us, eu, predPersistedAt(eu), 34.85},
		{"persisted at ap from eu", ec2, eu, ap, predPersistedAt(ap), 101.2},
		// With three sites the origin and the subscriber's site are a
		// majority as soon as the message arrives.
		{"majority us to eu", ec2, us, eu, predMajority(ec2.Sites), 34.85},
		{"majority ap to eu", ec2, ap, eu, predMajority(ec2.Sites), 101.2},
		{"all us to eu", ec2, us, eu, predAll(ec2.Sites), 74.8 + 101.2},
		{"persisted at b", five, "a", "b", predPersistedAt("b"), 10},
		// c's ack reaches b after 20 + 10 ms.
		{"majority of five", five, "a", "b", predMajority(five.Sites), 30},
		{"all of five", five, "a", "b", predAll(five.Sites), 200},
		// c's ack would be at b after 20 ms, before the message itself.
		{"never before the message", tri, "a", "b", predPersistedAt("c"), 50},
		{"never", five, "a", "b", predPersistedAt("z"), -1},
	} {
		want := msDur(c.want)
		if c.want < 0 {
			want = -1
		}
		if got := deliveryBound(c.topo, c.from, c.to, c.pred); got != want {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
}

func TestNATSBound(t *testing.T) {
	ec2, five := topology(t, "ec2-3"), topology(t, t5)
	for _, c := range []struct {
		topo           *wan.Topology
		replicas       []string
		leader, client string
		want           float64
	}{
		{ec2, ec2.Sites, us, us, 69.7},
		{ec2, ec2.Sites, us, eu, 139.4},
		{ec2, ec2.Sites, us, ap, 219.3},
		{ec2, ec2.Sites, eu, us, 139.4},
		{ec2, ec2.Sites, eu, eu, 69.7},
		{ec2, ec2.Sites, eu, ap, 272.1},
		{ec2, ec2.Sites, ap, us, 299.2},
		{ec2, ec2.Sites, ap, eu, 352},
		{ec2, ec2.Sites, ap, ap, 149.6},
		// R3 on three of five sites: b's nearest other replica is a or c.
		{five, []string{"a", "b", "c"}, "b", "e", 220},
		{five, []string{"a", "b", "c"}, "d", "e", -1},
	} {
		want := msDur(c.want)
		if c.want < 0 {
			want = -1
		}
		if got := natsBound(c.topo, c.replicas, c.leader, c.client); got != want {
			t.Errorf("leader %s, client %s: %v, want %v", c.leader, c.client, got, want)
		}
	}
}

func TestClosestPair(t *testing.T) {
	if got := closestPair(topology(t, "ec2-3")); len(got) != 2 || got[0] != us || got[1] != eu {
		t.Errorf("ec2-3: %v", got)
	}
	if got := closestPair(topology(t, triangle)); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Errorf("triangle: %v", got)
	}
}

// TestMeanGain: on ec2-3 with every row at its bound, the measured gain is
// the ceiling, 37.1%; pairs with a missing row are left out of both.
func TestMeanGain(t *testing.T) {
	topo := topology(t, "ec2-3")
	var pairs []gainPair
	for _, l := range topo.Sites {
		for _, r := range topo.Sites {
			ob, nb := ms(publishBound(topo, r, predMajority(topo.Sites))), ms(natsBound(topo, topo.Sites, l, r))
			pairs = append(pairs, gainPair{Region: r, Leader: l, Ours: ob, NATS: nb, OursBound: ob, NATSBound: nb})
		}
	}
	g, c, n := meanGain(pairs)
	if n != 9 || math.Abs(g-c) > 1e-9 || math.Abs(c-0.3708) > 5e-4 {
		t.Fatalf("gain %.4f, ceiling %.4f over %d pairs; want both 0.3708 over 9", g, c, n)
	}
	pairs[0].NATS = 0 // not measured
	pairs[1].Ours = pairs[1].OursBound * 2
	g, c, n = meanGain(pairs)
	if n != 8 || g >= c {
		t.Fatalf("gain %.4f, ceiling %.4f over %d pairs; want a smaller gain over 8", g, c, n)
	}
	for _, x := range []struct{ ours, theirs, want float64 }{{0, 100, 1}, {50, 100, .5}, {-1, 100, math.NaN()}, {10, 0, math.NaN()}} {
		if got := gainOfBounds(x.ours, x.theirs); !(got == x.want || math.IsNaN(got) && math.IsNaN(x.want)) {
			t.Errorf("gainOfBounds(%v, %v) = %v, want %v", x.ours, x.theirs, got, x.want)
		}
	}
}
