package consumer_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

func TestConfig(t *testing.T) {
	err := consumer.Config{AckWait: -time.Second, MaxDeliver: -1, MaxAckPending: -2}.Validate()
	for _, want := range []string{"AckWait: -1s is negative", "MaxDeliver: -1 is negative", "MaxAckPending: -2 is negative"} {
		if err == nil || !strings.Contains(err.Error(), "consumer: config: "+want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if err := (consumer.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, c := range []struct{ in, want consumer.Config }{
		{consumer.Config{}, consumer.Config{AckWait: 30 * time.Second, MaxAckPending: 1000}},
		{consumer.Config{AckWait: -1, MaxDeliver: -1, MaxAckPending: -1}, consumer.Config{AckWait: 30 * time.Second, MaxAckPending: 1000}},
		{consumer.Config{AckWait: time.Second, MaxDeliver: 3, MaxAckPending: 7}, consumer.Config{AckWait: time.Second, MaxDeliver: 3, MaxAckPending: 7}},
	} {
		if got := consumer.New(c.in, nil).Config(); got != c.want {
			t.Errorf("New(%+v).Config() = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestOffer(t *testing.T) {
	type step struct {
		m   consumer.MsgID
		err error
	}
	for _, c := range []struct {
		name    string
		pos     consumer.Position
		steps   []step
		offered uint64
		room    int
	}{
		{name: "in order, with gaps", steps: []step{{id("a", 1), nil}, {id("a", 4), nil}, {id("b", 2), nil}}, offered: 3, room: 0},
		{name: "offered again is ignored", steps: []step{{id("a", 1), nil}, {id("a", 2), nil}, {id("a", 1), nil}, {id("a", 2), nil}}, offered: 2, room: 1},
		{name: "acked per position is ignored", pos: consumer.Position{"a": {Floor: 5, Acked: []uint64{7}}},
			steps: []step{{id("a", 3), nil}, {id("a", 5), nil}, {id("a", 6), nil}, {id("a", 7), nil}, {id("a", 8), nil}}, offered: 2, room: 1},
		{name: "below the last offered", steps: []step{{id("a", 5), nil}, {id("a", 7), nil}, {id("a", 6), consumer.ErrOrder}, {id("b", 3), nil}}, offered: 3, room: 0},
		// Below the lowest pending one, the floor claims it: it counts as
		// acked. Only an offer in between can be caught.
		{name: "below the floor", steps: []step{{id("a", 5), nil}, {id("a", 3), nil}}, offered: 1, room: 2},
		{name: "seq 0 names nothing", steps: []step{{id("a", 0), nil}}, offered: 0, room: 3},
		{name: "beyond room", steps: []step{{id("a", 1), nil}, {id("a", 2), nil}, {id("b", 1), nil}, {id("b", 2), consumer.ErrFull}, {id("a", 3), consumer.ErrFull}, {id("a", 2), nil}}, offered: 3, room: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := consumer.New(consumer.Config{MaxAckPending: 3}, c.pos)
			for _, st := range c.steps {
				if err := s.Offer(st.m, t0); !errors.Is(err, st.err) || (err == nil) != (st.err == nil) {
					t.Errorf("Offer(%v) = %v, want %v", st.m, err, st.err)
				}
				check(t, s)
			}
			if got := s.Stats().Offered; got != c.offered {
				t.Errorf("offered %d, want %d", got, c.offered)
			}
			if got := s.Room(); got != c.room {
				t.Errorf("Room() = %d, want %d", got, c.room)
			}
		})
	}
}

func TestOfferAfterFullTakesTheMessage(t *testing.T) {
	s := consumer.New(consumer.Config{MaxAckPending: 1}, nil)
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1))
	err := s.Offer(id("a", 2), t0)
	if !errors.Is(err, consumer.ErrFull) || !strings.Contains(err.Error(), "a:2") {
		t.Fatalf("Offer beyond room = %v", err)
	}
	d := next(t, s, t0, "a:1>c1#1")
	must(t, s.Ack(1, d[0].Msg, 1, t0))
	offer(t, s, t0, id("a", 2)) // refused before, so not yet offered
	next(t, s, t0, "a:2>c1#1")
}

func TestNextSpreadsOverConsumers(t *testing.T) {
	s := consumer.New(consumer.Config{}, nil)
	if ds := s.Next(t0); ds != nil {
		t.Fatalf("Next with nothing = %v", ds)
	}
	offer(t, s, t0, id("a", 1), id("a", 2), id("a", 3), id("a", 4), id("a", 5), id("a", 6), id("a", 7))
	next(t, s, t0) // no consumer: nothing
	if st := s.Stats(); st.Ready != 7 {
		t.Fatalf("ready %d, want 7", st.Ready)
	}
	s.Attach(3, 0)
	s.Attach(1, 1)
	s.Attach(2, 2)
	// Fewest in flight first, the lowest id among equals, each within its bound.
	next(t, s, t0, "a:1>c1#1", "a:2>c2#1", "a:3>c3#1", "a:4>c2#1", "a:5>c3#1", "a:6>c3#1", "a:7>c3#1")
}

func TestNextOrder(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
	s.Attach(1, 2)
	offer(t, s, t0, id("a", 1), id("a", 2), id("a", 3))
	next(t, s, t0, "a:1>c1#1", "a:2>c1#1")
	must(t, s.Nak(1, id("a", 1), 1, 0, t0))
	offer(t, s, t0, id("a", 4))
	// The redelivery of a:1 goes before a:3 and a:4: lowest seq first.
	next(t, s, t0, "a:1>c1#2")
	must(t, s.Ack(1, id("a", 1), 2, t0))
	must(t, s.Ack(1, id("a", 2), 1, t0))
	s.Attach(1, 0)
	offer(t, s, t0, id("b", 1), id("b", 2), id("c", 7))
	// Origins take turns.
	next(t, s, t0, "a:3>c1#1", "b:1>c1#1", "c:7>c1#1", "a:4>c1#1", "b:2>c1#1")
}

func TestMaxInFlight(t *testing.T) {
	s := consumer.New(consumer.Config{}, nil)
	s.Attach(1, 2)
	offer(t, s, t0, id("a", 1), id("a", 2), id("a", 3), id("a", 4), id("a", 5))
	next(t, s, t0, "a:1>c1#1", "a:2>c1#1")
	next(t, s, t0)
	must(t, s.Ack(1, id("a", 2), 1, t0))
	next(t, s, t0, "a:3>c1#1")
	s.Attach(1, 4) // a new bound for an attached consumer
	next(t, s, t0, "a:4>c1#1", "a:5>c1#1")
	s.Attach(1, 1) // lower: it keeps what it holds and gets nothing until below
	offer(t, s, t0, id("a", 6))
	next(t, s, t0)
	for _, seq := range []uint64{1, 3, 4} {
		must(t, s.Ack(1, id("a", seq), 1, t0))
	}
	next(t, s, t0)
	must(t, s.Ack(1, id("a", 5), 1, t0))
	next(t, s, t0, "a:6>c1#1")
}

// TestReplyErrors runs every reply kind against each way a reply can miss.
func TestReplyErrors(t *testing.T) {
	const wait = 10 * time.Second
	type reply func(s *consumer.State, c consumer.ConsumerID, m consumer.MsgID, attempt int, now time.Time) error
	replies := map[string]reply{
		"ack":         (*consumer.State).Ack,
		"in progress": (*consumer.State).InProgress,
		"term":        (*consumer.State).Term,
		"nak": func(s *consumer.State, c consumer.ConsumerID, m consumer.MsgID, attempt int, now time.Time) error {
			return s.Nak(c, m, attempt, time.Second, now)
		},
	}
	a1 := id("a", 1)
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, s *consumer.State) // after a:1 went to c1 at t0, attempt 1
		c       consumer.ConsumerID
		m       consumer.MsgID
		attempt int
		now     time.Time
		want    error
	}{
		{name: "current delivery", c: 1, m: a1, attempt: 1, now: at(wait - 1)},
		{name: "never offered", c: 1, m: id("a", 9), attempt: 1, now: t0, want: consumer.ErrUnknownDelivery},
		{name: "unknown origin", c: 1, m: id("z", 1), attempt: 1, now: t0, want: consumer.ErrUnknownDelivery},
		{name: "other consumer", c: 2, m: a1, attempt: 1, now: t0, want: consumer.ErrUnknownDelivery},
		{name: "attempt never made", c: 1, m: a1, attempt: 2, now: t0, want: consumer.ErrUnknownDelivery},
		{name: "attempt 0", c: 1, m: a1, attempt: 0, now: t0, want: consumer.ErrUnknownDelivery},
		{name: "at the deadline", c: 1, m: a1, attempt: 1, now: at(wait), want: consumer.ErrExpired},
		{name: "after the deadline, ticked", c: 1, m: a1, attempt: 1, now: at(wait + 1),
			setup: func(t *testing.T, s *consumer.State) { s.Tick(at(wait)) }, want: consumer.ErrExpired},
		{name: "older attempt", c: 1, m: a1, attempt: 1, now: at(wait),
			setup: func(t *testing.T, s *consumer.State) { next(t, s, at(wait), "a:1>c1#2") }, want: consumer.ErrExpired},
		{name: "older attempt, now another's", c: 1, m: a1, attempt: 1, now: at(wait),
			setup: redeliverToC2, want: consumer.ErrExpired},
		{name: "older attempt, from another", c: 2, m: a1, attempt: 1, now: at(wait),
			setup: redeliverToC2, want: consumer.ErrExpired},
		{name: "redelivery", c: 2, m: a1, attempt: 2, now: at(wait), setup: redeliverToC2},
		{name: "another's redelivery", c: 1, m: a1, attempt: 2, now: at(wait),
			setup: redeliverToC2, want: consumer.ErrUnknownDelivery},
		{name: "after a nak", c: 1, m: a1, attempt: 1, now: t0,
			setup: func(t *testing.T, s *consumer.State) { must(t, s.Nak(1, a1, 1, time.Hour, t0)) }, want: consumer.ErrExpired},
		{name: "after an ack", c: 1, m: a1, attempt: 1, now: t0,
			setup: func(t *testing.T, s *consumer.State) { must(t, s.Ack(1, a1, 1, t0)) }, want: consumer.ErrUnknownDelivery},
		{name: "after a term", c: 1, m: a1, attempt: 1, now: t0,
			setup: func(t *testing.T, s *consumer.State) { must(t, s.Term(1, a1, 1, t0)) }, want: consumer.ErrUnknownDelivery},
		{name: "after its consumer detached", c: 1, m: a1, attempt: 1, now: t0,
			setup: func(t *testing.T, s *consumer.State) { s.Detach(1, t0) }, want: consumer.ErrExpired},
		{name: "after in progress", c: 1, m: a1, attempt: 1, now: at(wait + 1),
			setup: func(t *testing.T, s *consumer.State) { must(t, s.InProgress(1, a1, 1, at(2))) }},
		{name: "acked at another site", c: 1, m: a1, attempt: 1, now: t0,
			setup: func(t *testing.T, s *consumer.State) { s.Merge(consumer.Position{"a": {Floor: 1}}) }, want: consumer.ErrUnknownDelivery},
	} {
		for kind, r := range replies {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				s := consumer.New(consumer.Config{AckWait: wait}, nil)
				s.Attach(1, 1)
				offer(t, s, t0, a1)
				next(t, s, t0, "a:1>c1#1")
				s.Attach(2, 0)
				if c.setup != nil {
					c.setup(t, s)
				}
				before := s.Stats()
				err := r(s, c.c, c.m, c.attempt, c.now)
				check(t, s)
				if c.want == nil {
					if err != nil {
						t.Fatalf("%s: %v", kind, err)
					}
					return
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("%s = %v, want %v", kind, err, c.want)
				}
				msg := err.Error()
				for _, part := range []string{"consumer: ", kind + " ", c.m.String(), fmt.Sprintf("attempt %d", c.attempt)} {
					if !strings.Contains(msg, part) {
						t.Errorf("error %q does not say %q", msg, part)
					}
				}
				if after := s.Stats(); after != before {
					t.Errorf("a refused %s changed the stats:\n%+v\n%+v", kind, before, after)
				}
			})
		}
	}
}

// redeliverToC2 makes a:1, delivered to c1 at t0, go to c2 as attempt 2.
func redeliverToC2(t *testing.T, s *consumer.State) {
	s.Detach(1, at(10*time.Second))
	next(t, s, at(10*time.Second), "a:1>c2#2")
	s.Attach(1, 0)
}

func TestAckResolves(t *testing.T) {
	s := consumer.New(consumer.Config{}, nil)
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1))
	next(t, s, t0, "a:1>c1#1")
	must(t, s.Ack(1, id("a", 1), 1, t0))
	if !s.Acked(id("a", 1)) || s.Stats().Pending != 0 || s.Room() != consumer.DefaultMaxAckPending {
		t.Fatalf("after ack: acked %v, %+v", s.Acked(id("a", 1)), s.Stats())
	}
	if _, ok := s.NextDeadline(); ok {
		t.Fatal("a deadline left after the only ack")
	}
	next(t, s, at(time.Hour)) // never redelivered
}

func TestExpiryRedelivers(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
	s.Attach(1, 0)
	s.Attach(2, 0)
	offer(t, s, t0, id("a", 1), id("a", 2))
	ds := next(t, s, t0, "a:1>c1#1", "a:2>c2#1")
	if ds[0].Deadline != at(10*time.Second) {
		t.Fatalf("deadline %v", ds[0].Deadline)
	}
	must(t, s.Ack(2, id("a", 2), 1, at(time.Second)))
	s.Tick(at(10*time.Second - 1))
	if st := s.Stats(); st.Expired != 0 || st.InFlight != 1 {
		t.Fatalf("before the deadline: %+v", st)
	}
	s.Tick(at(10 * time.Second))
	if st := s.Stats(); st.Expired != 1 || st.InFlight != 0 || st.Ready != 1 {
		t.Fatalf("at the deadline: %+v", st)
	}
	// To the consumer with the fewest in flight: both have none, c1 is lower.
	next(t, s, at(11*time.Second), "a:1>c1#2")
	if st := s.Stats(); st.Delivered != 3 || st.Redelivered != 1 {
		t.Fatalf("%+v", st)
	}
	// Next ticks too: the second expiry needs no Tick call.
	next(t, s, at(21*time.Second), "a:1>c1#3")
}

func TestNak(t *testing.T) {
	for _, c := range []struct {
		name  string
		delay time.Duration
		early time.Duration // a time before the redelivery, or -1
		due   time.Duration
	}{
		{"no delay", 0, -1, 1 * time.Second},
		{"negative delay", -time.Second, -1, 1 * time.Second},
		{"delay", 5 * time.Second, 6*time.Second - 1, 6 * time.Second},
		{"delay past the ack wait", time.Minute, 59 * time.Second, 61 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
			s.Attach(1, 0)
			offer(t, s, t0, id("a", 1))
			next(t, s, t0, "a:1>c1#1")
			must(t, s.Nak(1, id("a", 1), 1, c.delay, at(time.Second)))
			if c.early >= 0 {
				if d, ok := s.NextDeadline(); !ok || d != at(c.due) {
					t.Fatalf("NextDeadline() = %v %v, want %v", d.Sub(t0), ok, c.due)
				}
				next(t, s, at(c.early))
				if st := s.Stats(); st.Delayed != 1 {
					t.Fatalf("%+v", st)
				}
			} else if _, ok := s.NextDeadline(); ok {
				t.Fatal("a deadline for a nak without delay")
			}
			next(t, s, at(c.due), "a:1>c1#2")
			if st := s.Stats(); st.Naks != 1 || st.Expired != 0 {
				t.Fatalf("%+v", st)
			}
		})
	}
}

func TestInProgress(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1))
	next(t, s, t0, "a:1>c1#1")
	must(t, s.InProgress(1, id("a", 1), 1, at(8*time.Second)))
	if d, _ := s.NextDeadline(); d != at(18*time.Second) {
		t.Fatalf("NextDeadline() = %v", d.Sub(t0))
	}
	next(t, s, at(10*time.Second)) // the old deadline passes: no redelivery
	must(t, s.InProgress(1, id("a", 1), 1, at(17*time.Second)))
	must(t, s.Ack(1, id("a", 1), 1, at(26*time.Second)))
	if st := s.Stats(); st.Expired != 0 || st.Delivered != 1 || st.Acked != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestTerm(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second, MaxDeliver: 5}, nil)
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1), id("a", 2))
	next(t, s, t0, "a:1>c1#1", "a:2>c1#1")
	must(t, s.Term(1, id("a", 2), 1, t0))
	next(t, s, at(time.Hour), "a:1>c1#2") // a:2 never comes back
	if !s.Acked(id("a", 2)) || s.Acked(id("a", 1)) {
		t.Fatal("term does not count as resolved")
	}
	want := consumer.Position{"a": {Floor: 0, Acked: []uint64{2}}}
	if got := s.Position(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Position() = %v, want %v", got, want)
	}
	if st := s.Stats(); st.Terminated != 1 || st.DeadLettered != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestMaxDeliver(t *testing.T) {
	const wait = 10 * time.Second
	a1 := id("a", 1)
	for _, c := range []struct {
		name string
		max  int
		// fail makes the last delivery (attempt max, to c1 at now) fail.
		fail func(t *testing.T, s *consumer.State, now time.Time)
	}{
		{"expiry", 2, func(t *testing.T, s *consumer.State, now time.Time) { s.Tick(now.Add(wait)) }},
		{"nak with delay", 2, func(t *testing.T, s *consumer.State, now time.Time) { must(t, s.Nak(1, a1, 2, time.Hour, now)) }},
		{"detach", 1, func(t *testing.T, s *consumer.State, now time.Time) { s.Detach(1, now) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := consumer.New(consumer.Config{AckWait: wait, MaxDeliver: c.max, MaxAckPending: 2}, nil)
			s.Attach(1, 0)
			offer(t, s, t0, a1, id("a", 2))
			now := t0
			next(t, s, now, "a:1>c1#1", "a:2>c1#1")
			must(t, s.Ack(1, id("a", 2), 1, now))
			for attempt := 2; attempt <= c.max; attempt++ {
				now = now.Add(wait)
				next(t, s, now, fmt.Sprintf("a:1>c1#%d", attempt))
			}
			c.fail(t, s, now)
			check(t, s)
			s.Attach(1, 0)
			next(t, s, now.Add(time.Hour)) // never redelivered
			want := []consumer.DeadLetter{{Msg: a1, Deliveries: c.max}}
			if got := s.DeadLetters(); !reflect.DeepEqual(got, want) {
				t.Fatalf("DeadLetters() = %v, want %v", got, want)
			}
			if got := s.DeadLetters(); got != nil {
				t.Fatalf("DeadLetters() again = %v", got)
			}
			// Still pending: it holds room and the floor until resolved.
			if st := s.Stats(); st.Pending != 1 || st.Dead != 1 || st.DeadLettered != 1 || s.Room() != 1 || s.Acked(a1) {
				t.Fatalf("dead letter: room %d, %+v", s.Room(), st)
			}
			if got := s.Position(); !reflect.DeepEqual(got, consumer.Position{"a": {Acked: []uint64{2}}}) {
				t.Fatalf("Position() = %v", got)
			}
			if err := s.Ack(1, a1, c.max, now); !errors.Is(err, consumer.ErrExpired) {
				t.Fatalf("ack of a dead letter = %v", err)
			}
			must(t, s.Resolve(a1))
			must(t, s.Resolve(a1)) // again: already resolved
			if !s.Acked(a1) || s.Stats().Pending != 0 || s.Stats().Resolved != 1 {
				t.Fatalf("resolved: %+v", s.Stats())
			}
			if got := s.Position(); !reflect.DeepEqual(got, consumer.Position{"a": {Floor: 2}}) {
				t.Fatalf("Position() = %v", got)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	s := consumer.New(consumer.Config{MaxDeliver: 1, AckWait: time.Second}, nil)
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1), id("a", 2))
	next(t, s, t0, "a:1>c1#1", "a:2>c1#1")
	s.Tick(at(time.Second))
	for _, m := range []consumer.MsgID{id("a", 3), id("b", 1)} {
		if err := s.Resolve(m); !errors.Is(err, consumer.ErrUnknownDelivery) || !strings.Contains(err.Error(), "not pending") {
			t.Errorf("Resolve(%v) = %v", m, err)
		}
	}
	offer(t, s, t0, id("a", 3))
	if err := s.Resolve(id("a", 3)); !errors.Is(err, consumer.ErrUnknownDelivery) || !strings.Contains(err.Error(), "not a dead letter") {
		t.Errorf("Resolve(a:3) = %v", err)
	}
	// Resolved before DeadLetters handed it out: not handed out.
	must(t, s.Resolve(id("a", 1)))
	if got := s.DeadLetters(); !reflect.DeepEqual(got, []consumer.DeadLetter{{Msg: id("a", 2), Deliveries: 1}}) {
		t.Fatalf("DeadLetters() = %v", got)
	}
}

func TestDetach(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
	s.Attach(1, 2)
	offer(t, s, t0, id("a", 1), id("b", 1), id("a", 2))
	next(t, s, t0, "a:1>c1#1", "b:1>c1#1")
	s.Detach(9, t0) // unknown: nothing
	s.Detach(1, at(time.Second))
	if st := s.Stats(); st.Ready != 3 || st.InFlight != 0 || st.Consumers != 0 {
		t.Fatalf("after detach: %+v", st)
	}
	if _, ok := s.NextDeadline(); ok {
		t.Fatal("the detached deliveries still wait for a deadline")
	}
	if err := s.Ack(1, id("a", 1), 1, at(time.Second)); !errors.Is(err, consumer.ErrExpired) {
		t.Fatalf("ack from the detached consumer = %v", err)
	}
	s.Attach(2, 0)
	next(t, s, at(time.Second), "a:1>c2#2", "b:1>c2#2", "a:2>c2#1")
}

func TestNextDeadline(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: 10 * time.Second}, nil)
	if _, ok := s.NextDeadline(); ok {
		t.Fatal("deadline of an empty state")
	}
	s.Attach(1, 0)
	offer(t, s, t0, id("a", 1), id("a", 2))
	next(t, s, t0, "a:1>c1#1", "a:2>c1#1")
	if d, ok := s.NextDeadline(); !ok || d != at(10*time.Second) {
		t.Fatalf("NextDeadline() = %v %v", d.Sub(t0), ok)
	}
	must(t, s.Nak(1, id("a", 2), 1, 3*time.Second, at(time.Second)))
	if d, _ := s.NextDeadline(); d != at(4*time.Second) {
		t.Fatalf("NextDeadline() after nak = %v", d.Sub(t0))
	}
	must(t, s.InProgress(1, id("a", 1), 1, at(time.Second)))
	s.Tick(at(4 * time.Second))
	if d, _ := s.NextDeadline(); d != at(11*time.Second) {
		t.Fatalf("NextDeadline() after in progress = %v", d.Sub(t0))
	}
}

func TestPosition(t *testing.T) {
	type op struct {
		kind string // offer, ack, term, dead (expire at MaxDeliver 1), resolve
		m    consumer.MsgID
	}
	ops := func(kind, origin string, seqs ...uint64) []op {
		var out []op
		for _, s := range seqs {
			out = append(out, op{kind, id(origin, s)})
		}
		return out
	}
	join := func(parts ...[]op) []op {
		var out []op
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		pos  consumer.Position
		ops  []op
		want consumer.Position
	}{
		{name: "nothing", want: consumer.Position{}},
		{name: "offered, none acked", ops: ops("offer", "a", 3, 5), want: consumer.Position{"a": {Floor: 2}}},
		{name: "ack out of order", ops: join(ops("offer", "a", 3, 5, 9), ops("ack", "a", 5)),
			want: consumer.Position{"a": {Floor: 2, Acked: []uint64{5}}}},
		{name: "gaps below the lowest pending", ops: join(ops("offer", "a", 3, 5, 9), ops("ack", "a", 5, 3)),
			want: consumer.Position{"a": {Floor: 8}}},
		{name: "all acked", ops: join(ops("offer", "a", 3, 5, 9), ops("ack", "a", 9, 5, 3)),
			want: consumer.Position{"a": {Floor: 9}}},
		{name: "origins apart", ops: join(ops("offer", "a", 1, 2), ops("offer", "b", 7, 8), ops("ack", "a", 2), ops("ack", "b", 7)),
			want: consumer.Position{"a": {Acked: []uint64{2}}, "b": {Floor: 7}}},
		{name: "term", ops: join(ops("offer", "a", 1, 2), ops("term", "a", 1)), want: consumer.Position{"a": {Floor: 1}}},
		{name: "dead letter holds the floor", ops: join(ops("offer", "a", 1, 2), ops("dead", "a", 1), ops("ack", "a", 2)),
			want: consumer.Position{"a": {Acked: []uint64{2}}}},
		{name: "resolved dead letter", ops: join(ops("offer", "a", 1, 2), ops("dead", "a", 1), ops("ack", "a", 2), ops("resolve", "a", 1)),
			want: consumer.Position{"a": {Floor: 2}}},
		{name: "from a stored position", pos: consumer.Position{"a": {Floor: 10, Acked: []uint64{12, 15}}},
			ops:  join(ops("offer", "a", 11, 13), ops("ack", "a", 13)),
			want: consumer.Position{"a": {Floor: 10, Acked: []uint64{12, 13, 15}}}},
		{name: "the floor passes stored acks", pos: consumer.Position{"a": {Floor: 10, Acked: []uint64{12, 15}}},
			ops:  join(ops("offer", "a", 11, 13), ops("ack", "a", 13, 11)),
			want: consumer.Position{"a": {Floor: 13, Acked: []uint64{15}}}},
		{name: "an acked offer moves the floor", pos: consumer.Position{"a": {Floor: 10, Acked: []uint64{12, 15}}},
			ops:  join(ops("offer", "a", 11, 13), ops("ack", "a", 13, 11), ops("offer", "a", 15)),
			want: consumer.Position{"a": {Floor: 15}}},
		// Retention: Skip steps over messages dropped before they were
		// offered; Drop ends pending ones whose body is gone.
		{name: "skip past dropped messages", ops: join(ops("offer", "a", 2), ops("ack", "a", 2), ops("skip", "a", 9)),
			want: consumer.Position{"a": {Floor: 9}}},
		{name: "skip does not pass a pending one", ops: join(ops("offer", "a", 2, 4), ops("ack", "a", 4), ops("skip", "a", 9)),
			want: consumer.Position{"a": {Floor: 1, Acked: []uint64{4}}}},
		{name: "skip behind the cursor", ops: join(ops("offer", "a", 5), ops("ack", "a", 5), ops("skip", "a", 3)),
			want: consumer.Position{"a": {Floor: 5}}},
		{name: "drop a pending one", ops: join(ops("offer", "a", 2, 4), ops("ack", "a", 4), ops("skip", "a", 9), ops("drop", "a", 2)),
			want: consumer.Position{"a": {Floor: 9}}},
		{name: "drop a resolved one", ops: join(ops("offer", "a", 2), ops("ack", "a", 2), ops("drop", "a", 2)),
			want: consumer.Position{"a": {Floor: 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := consumer.New(consumer.Config{MaxDeliver: 1, AckWait: time.Second}, c.pos)
			s.Attach(1, 0)
			now := t0
			for _, o := range c.ops {
				switch o.kind {
				case "offer":
					offer(t, s, now, o.m)
					s.Next(now)
				case "ack":
					must(t, s.Ack(1, o.m, 1, now))
				case "term":
					must(t, s.Term(1, o.m, 1, now))
				case "dead":
					must(t, s.Nak(1, o.m, 1, 0, now))
				case "resolve":
					must(t, s.Resolve(o.m))
				case "skip":
					s.Skip(o.m.Origin, o.m.Seq)
				case "drop":
					must(t, s.Drop(o.m))
				}
				check(t, s)
			}
			if got := s.Position(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Position() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestNewNormalizesPosition(t *testing.T) {
	acked := []uint64{9, 4, 12, 7, 9, 3}
	in := consumer.Position{"a": {Floor: 4, Acked: acked}, "b": {}}
	s := consumer.New(consumer.Config{}, in)
	acked[0] = 5 // the caller's slice is not kept
	want := consumer.Position{"a": {Floor: 4, Acked: []uint64{7, 9, 12}}}
	got := s.Position()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Position() = %v, want %v", got, want)
	}
	got["a"].Acked[0] = 8 // nor is the returned one
	if got := s.Position(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Position() after changing a copy = %v", got)
	}
	for seq, acked := range map[uint64]bool{0: true, 3: true, 4: true, 5: false, 7: true, 8: false, 12: true, 13: false} {
		if s.Acked(id("a", seq)) != acked {
			t.Errorf("Acked(a:%d) = %v", seq, !acked)
		}
	}
	if s.Acked(id("b", 1)) || !s.Acked(id("b", 0)) || s.Acked(id("c", 1)) {
		t.Error("Acked of an origin with nothing acked")
	}
	check(t, s)
}

func TestMerge(t *testing.T) {
	// Each case starts with a:1..a:4 and b:5 offered, a:1, a:2 and b:5 in
	// flight to c1 (bound 3), a:3 acked.
	for _, c := range []struct {
		name    string
		merge   consumer.Position
		want    consumer.Position
		dropped uint64
		next    []string // what Next delivers after the merge
	}{
		{name: "empty", merge: consumer.Position{}, want: consumer.Position{"a": {Acked: []uint64{3}}, "b": {Floor: 4}}},
		{name: "behind", merge: consumer.Position{"a": {Floor: 0, Acked: []uint64{3}}, "b": {Floor: 2}},
			want: consumer.Position{"a": {Acked: []uint64{3}}, "b": {Floor: 4}}},
		{name: "floor over pending ones", merge: consumer.Position{"a": {Floor: 2}}, dropped: 2,
			want: consumer.Position{"a": {Floor: 3}, "b": {Floor: 4}}, next: []string{"a:4>c1#1"}},
		{name: "acked set", merge: consumer.Position{"a": {Acked: []uint64{2, 4, 9}}}, dropped: 2,
			want: consumer.Position{"a": {Acked: []uint64{2, 3, 4, 9}}, "b": {Floor: 4}}},
		{name: "everything and beyond", merge: consumer.Position{"a": {Floor: 20}, "b": {Floor: 5, Acked: []uint64{8}}, "c": {Floor: 3}}, dropped: 4,
			want: consumer.Position{"a": {Floor: 20}, "b": {Floor: 5, Acked: []uint64{8}}, "c": {Floor: 3}}},
		{name: "unsorted input", merge: consumer.Position{"a": {Floor: 1, Acked: []uint64{4, 1, 4}}}, dropped: 2,
			want: consumer.Position{"a": {Floor: 1, Acked: []uint64{3, 4}}, "b": {Floor: 4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := consumer.New(consumer.Config{}, nil)
			s.Attach(1, 3)
			offer(t, s, t0, id("a", 1), id("a", 2), id("a", 3), id("b", 5))
			next(t, s, t0, "a:1>c1#1", "b:5>c1#1", "a:2>c1#1")
			s.Attach(1, 4)
			next(t, s, t0, "a:3>c1#1")
			must(t, s.Ack(1, id("a", 3), 1, t0))
			offer(t, s, t0, id("a", 4))
			s.Attach(1, 3)
			before := s.Stats().Pending

			s.Merge(c.merge)
			check(t, s)
			if got := s.Position(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Position() = %v, want %v", got, c.want)
			}
			st := s.Stats()
			if st.Merged != c.dropped || st.Pending != before-c.dropped {
				t.Fatalf("merged %d (pending %d of %d), want %d", st.Merged, st.Pending, before, c.dropped)
			}
			next(t, s, t0, c.next...)
			// Dropped in-flight ones are gone: their acks are unknown.
			for _, m := range []consumer.MsgID{id("a", 1), id("a", 2), id("b", 5)} {
				acked := s.Acked(m)
				if err := s.Ack(1, m, 1, t0); acked != errors.Is(err, consumer.ErrUnknownDelivery) || !acked && err != nil {
					t.Errorf("ack %v after merge: %v (acked before %v)", m, err, acked)
				}
			}
			// What the merge acked is skipped when offered.
			offer(t, s, t0, id("a", 9), id("b", 8))
			if got := s.Stats().Offered; got != 5+btoi(!s.Acked(id("a", 9)))+btoi(!s.Acked(id("b", 8))) {
				t.Errorf("offered %d", got)
			}
		})
	}
}

func btoi(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestStats follows one message through each kind of end.
func TestStats(t *testing.T) {
	s := consumer.New(consumer.Config{AckWait: time.Second, MaxDeliver: 2}, nil)
	s.Attach(1, 0)
	s.Attach(2, 0)
	offer(t, s, t0, id("a", 1), id("a", 2), id("a", 3), id("a", 4), id("a", 5))
	next(t, s, t0, "a:1>c1#1", "a:2>c2#1", "a:3>c1#1", "a:4>c2#1", "a:5>c1#1")
	must(t, s.Ack(1, id("a", 1), 1, t0))
	must(t, s.Term(2, id("a", 2), 1, t0))
	must(t, s.Nak(1, id("a", 3), 1, time.Minute, t0))
	next(t, s, at(time.Second), "a:4>c1#2", "a:5>c2#2")
	s.Tick(at(2 * time.Second))
	must(t, s.Resolve(id("a", 4)))
	want := consumer.Stats{
		Pending: 2, Delayed: 1, Dead: 1, Consumers: 2,
		Offered: 5, Delivered: 7, Redelivered: 2, Acked: 1, Naks: 1, Expired: 4, Terminated: 1, DeadLettered: 2, Resolved: 1,
	}
	if got := s.Stats(); got != want {
		t.Fatalf("Stats() =\n%+v, want\n%+v", got, want)
	}
}
