package consumer_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

// stream is what every site stores of the sites' shared pub/sub streams:
// per origin, seqs 1..n, some of them the subscription's topic.
type stream struct {
	origins []string
	topic   map[consumer.MsgID]bool
	n       uint64
}

func newStream(rng *rand.Rand, n uint64) *stream {
	st := &stream{origins: []string{"eu", "us"}, topic: map[consumer.MsgID]bool{}, n: n}
	for _, o := range st.origins {
		for seq := uint64(1); seq <= n; seq++ {
			if rng.IntN(2) == 0 { // the other half is other topics
				st.topic[consumer.MsgID{Origin: o, Seq: seq}] = true
			}
		}
	}
	return st
}

// pump is the I/O part's reader at one site: per origin in seq order, the
// topic's messages the position does not have, while there is room.
type pump struct {
	st   *stream
	next map[string]uint64 // the next seq to read, per origin
}

func newPump(st *stream) *pump { return &pump{st: st, next: map[string]uint64{"eu": 1, "us": 1}} }

// done reports whether the pump read everything.
func (p *pump) done() bool {
	for _, o := range p.st.origins {
		if p.next[o] <= p.st.n {
			return false
		}
	}
	return true
}

func (p *pump) run(t *testing.T, s *consumer.State, now time.Time) {
	for _, o := range p.st.origins {
		for ; p.next[o] <= p.st.n; p.next[o]++ {
			m := consumer.MsgID{Origin: o, Seq: p.next[o]}
			if !p.st.topic[m] || s.Acked(m) {
				continue
			}
			if s.Room() == 0 {
				break
			}
			must(t, s.Offer(m, now))
		}
	}
}

// copyPosition is the position as stored and read back elsewhere.
func copyPosition(p consumer.Position) consumer.Position {
	out := consumer.Position{}
	for o, op := range p {
		out[o] = consumer.OriginPos{Floor: op.Floor, Acked: slices.Clone(op.Acked)}
	}
	return out
}

// TestMove moves a subscription from site A to site B in the middle of
// traffic, with acks out of order, naks, terms and expiries, and with A
// going on after its position was stored (it dies, and what it acked since
// is lost). B resumes from the stored position, through New or through
// Merge: it must see as acked exactly what A had resolved when the position
// was stored, deliver every other message of the topic, and so deliver
// again at most the messages A had not resolved by then.
func TestMove(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		for _, via := range []string{"new", "merge"} {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, via), func(t *testing.T) { testMove(t, seed, via) })
		}
	}
}

func testMove(t *testing.T, seed uint64, via string) {
	rng := rand.New(rand.NewPCG(seed, 0x30e))
	st := newStream(rng, 150)
	cfg := consumer.Config{AckWait: 5 * time.Second, MaxAckPending: 1 + rng.IntN(20), MaxDeliver: rng.IntN(3)}

	// Site A.
	a := consumer.New(cfg, nil)
	a.Attach(1, 1+rng.IntN(5))
	a.Attach(2, 0)
	pa := newPump(st)
	resolved := map[consumer.MsgID]bool{} // at A
	deliveredA := map[consumer.MsgID]bool{}
	now := t0
	var stored consumer.Position
	var resolvedAtStore map[consumer.MsgID]bool
	storeAt := 5 + rng.IntN(40)
	dieAt := storeAt + 1 + rng.IntN(20)
	for step := 0; step < dieAt; step++ {
		if step == storeAt {
			stored = copyPosition(a.Position())
			resolvedAtStore = maps.Clone(resolved)
		}
		pa.run(t, a, now)
		for _, d := range a.Next(now) {
			deliveredA[d.Msg] = true
			switch n := rng.IntN(10); {
			case n < 5:
				must(t, a.Ack(d.Consumer, d.Msg, d.Attempt, now))
				resolved[d.Msg] = true
			case n < 6:
				must(t, a.Term(d.Consumer, d.Msg, d.Attempt, now))
				resolved[d.Msg] = true
			case n < 7:
				must(t, a.Nak(d.Consumer, d.Msg, d.Attempt, time.Duration(rng.IntN(3))*time.Second, now))
			} // else: no reply, it expires
		}
		for _, dl := range a.DeadLetters() {
			must(t, a.Resolve(dl.Msg))
			resolved[dl.Msg] = true
		}
		now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		check(t, a)
	}
	if stored == nil {
		t.Fatal("no position stored")
	}

	// Site B takes over from the stored position.
	var b *consumer.State
	if via == "new" {
		b = consumer.New(cfg, stored)
	} else {
		b = consumer.New(cfg, nil)
		b.Merge(stored)
	}
	for m := range st.topic {
		if b.Acked(m) != resolvedAtStore[m] {
			t.Fatalf("B: Acked(%v) = %v, A had it resolved: %v (delivered at A %v)", m, b.Acked(m), resolvedAtStore[m], deliveredA[m])
		}
	}
	b.Attach(7, 0)
	pb := newPump(st)
	deliveredB := map[consumer.MsgID]bool{}
	for round := 0; b.Stats().Pending > 0 || !pb.done(); round++ {
		if round > 1000 {
			t.Fatalf("B does not finish: %+v", b.Stats())
		}
		pb.run(t, b, now)
		for _, d := range b.Next(now) {
			if resolvedAtStore[d.Msg] {
				t.Fatalf("B delivers %v, which A had resolved before it stored the position", d.Msg)
			}
			deliveredB[d.Msg] = true
			must(t, b.Ack(d.Consumer, d.Msg, d.Attempt, now))
		}
		for _, dl := range b.DeadLetters() {
			must(t, b.Resolve(dl.Msg))
		}
		now = now.Add(time.Second)
	}
	check(t, b)
	dups := 0
	for m := range st.topic {
		if !resolvedAtStore[m] && !deliveredB[m] {
			t.Fatalf("%v lost: not resolved at A when stored, not delivered at B", m)
		}
		if !b.Acked(m) {
			t.Fatalf("B: %v not acked at the end", m)
		}
		if deliveredA[m] && deliveredB[m] {
			dups++ // only ones A had not resolved when it stored, checked above
		}
	}
	t.Logf("%d topic messages, %d resolved at A when stored, %d delivered at B, %d of them delivered at A too",
		len(st.topic), len(resolvedAtStore), len(deliveredB), dups)
}

// TestMergeBothWays: two sites serve one durable subscription and each
// merges the other's position: what either resolved counts at both, and
// each drops what the other acked.
func TestMergeBothWays(t *testing.T) {
	cfg := consumer.Config{}
	a, b := consumer.New(cfg, nil), consumer.New(cfg, nil)
	a.Attach(1, 0)
	b.Attach(1, 0)
	for seq := uint64(1); seq <= 10; seq++ {
		offer(t, a, t0, id("us", seq*2))
		offer(t, b, t0, id("us", seq*2))
	}
	for _, d := range a.Next(t0) {
		if d.Msg.Seq%4 == 0 {
			must(t, a.Ack(1, d.Msg, 1, t0))
		}
	}
	for _, d := range b.Next(t0) {
		if d.Msg.Seq%4 != 0 && d.Msg.Seq > 6 {
			must(t, b.Ack(1, d.Msg, 1, t0))
		}
	}
	pa, pb := a.Position(), b.Position()
	a.Merge(pb)
	b.Merge(pa)
	check(t, a)
	check(t, b)
	// Left: us:2 and us:6, at both.
	want := consumer.Position{"us": {Floor: 1, Acked: []uint64{4, 8, 10, 12, 14, 16, 18, 20}}}
	if !reflect.DeepEqual(a.Position(), want) || !reflect.DeepEqual(b.Position(), want) {
		t.Fatalf("positions after merging both ways:\nA %v\nB %v\nwant %v", a.Position(), b.Position(), want)
	}
	if a.Stats().Pending != 2 || b.Stats().Pending != 2 {
		t.Fatalf("pending A %d, B %d, want 2", a.Stats().Pending, b.Stats().Pending)
	}
	for _, s := range []*consumer.State{a, b} {
		must(t, s.Ack(1, id("us", 2), 1, t0))
		must(t, s.Ack(1, id("us", 6), 1, t0))
		if got := s.Position(); !reflect.DeepEqual(got, consumer.Position{"us": {Floor: 20}}) {
			t.Fatalf("Position() = %v", got)
		}
	}
}
