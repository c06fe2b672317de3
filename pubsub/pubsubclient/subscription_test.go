package pubsubclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// next returns the next message, failing the test on an error.
func next(t *testing.T, s *Subscription) *Msg {
	t.Helper()
	m, err := s.Next(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func desc(m *Msg) string {
	return fmt.Sprintf("%s/%d#%d:%s", m.Origin, m.Seq, m.Attempt, m.Data)
}

func acksOf(as []*pubsubpb.Ack) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s %s/%d#%d", strings.ToLower(a.Kind.String()), a.Origin, a.Seq, a.Attempt))
	}
	return strings.Join(out, ", ")
}

// TestSubscribeAcks: deliveries, ack, nak (delivered again), term, in
// progress; a second answer is refused locally, one the site refuses
// comes back through AckErrors; Close waits for the site.
func TestSubscribeAcks(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders")
	for _, d := range []string{"a", "b", "c"} {
		if _, err := c.Publish(ctx, "orders", []byte(d), Headers(map[string]string{"n": d})); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.Subscribe(ctx, "orders", StartAll(), AckWait(5*time.Second), MaxAckPending(10))
	if err != nil {
		t.Fatal(err)
	}
	if info := sub.Info(); info.Topic != "orders" || info.Durable || info.Site != "us-east-1" {
		t.Fatalf("info %+v", info)
	}
	st := ss[0].Starts()[0]
	if st.Start.Kind != pubsubpb.StartPosition_ALL || st.AckWaitMs != 5000 || st.MaxAckPending != 10 {
		t.Fatalf("start %v", st)
	}
	a, b, cm := next(t, sub), next(t, sub), next(t, sub)
	if got := desc(a) + " " + desc(b) + " " + desc(cm); got != "us-east-1/1#1:a us-east-1/2#1:b us-east-1/3#1:c" {
		t.Fatalf("got %s", got)
	}
	if a.Headers["n"] != "a" || a.Topic != "orders" || a.HLC.IsZero() {
		t.Fatalf("message %+v", a)
	}
	if err := a.InProgress(); err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(); !errors.Is(err, ErrAlreadyAcked) {
		t.Fatalf("second ack: %v", err)
	}
	if err := b.Nak(0); err != nil {
		t.Fatal(err)
	}
	if err := cm.Term(); err != nil {
		t.Fatal(err)
	}
	b2 := next(t, sub)
	if desc(b2) != "us-east-1/2#2:b" {
		t.Fatalf("after nak: %s", desc(b2))
	}
	if err := b2.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := a.InProgress(); !errors.Is(err, ErrAlreadyAcked) {
		t.Fatalf("in progress after ack: %v", err)
	}
	// An ack of a delivery the site does not know: it refuses it.
	forged := &Msg{sub: sub, gen: a.gen, Origin: "us-east-1", Seq: 99, Attempt: 1}
	if err := forged.Ack(); err != nil {
		t.Fatal(err)
	}
	ss[0].WaitFor(t, "6 acks", func() bool { return len(ss[0].Acks()) == 6 })
	if got := acksOf(ss[0].Acks()); got != "in_progress us-east-1/1#1, ack us-east-1/1#1, nak us-east-1/2#1, term us-east-1/3#1, ack us-east-1/2#2, ack us-east-1/99#1" {
		t.Fatalf("site got %s", got)
	}
	// The site sends its ack errors before later deliveries.
	if _, err := c.Publish(ctx, "orders", []byte("d")); err != nil {
		t.Fatal(err)
	}
	if d := next(t, sub); desc(d) != "us-east-1/4#1:d" {
		t.Fatalf("got %s", desc(d))
	}
	errs := sub.AckErrors()
	if len(errs) != 1 || errs[0].Kind != "ack" || errs[0].Seq != 99 || errs[0].Code != codes.NotFound ||
		errs[0].Error() != "pubsub: ack of us-east-1/99 (attempt 1): no unacked delivery of us-east-1/99 attempt 1" {
		t.Fatalf("ack errors %+v", errs)
	}
	if len(sub.AckErrors()) != 0 {
		t.Fatal("AckErrors did not forget what it returned")
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ss[0].Closes() != 1 {
		t.Fatalf("the site closed %d subscriptions", ss[0].Closes())
	}
	if _, err := sub.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestSubscribeOptions: the options reach the site's start; bad ones are
// all reported at once.
func TestSubscribeOptions(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders", "dlq")
	when := time.Unix(1_700_000_000, 5)
	sub, err := c.Subscribe(ctx, "orders", Durable("d"), StartTime(when), MaxDeliver(3), DeadLetter("dlq"),
		MaxInFlight(7), PositionPredicate("all"), OnTruncatedFirst())
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := &pubsubpb.SubscribeStart{Topic: "orders", Durable: "d", MaxDeliver: 3, DeadLetter: "dlq", MaxInFlight: 7,
		PositionPredicate: "all", Start: &pubsubpb.StartPosition{Kind: pubsubpb.StartPosition_TIME, TimeUnixNano: when.UnixNano()},
		OnTruncated: pubsubpb.SubscribeStart_TRUNCATED_FIRST}
	if got := ss[0].Starts()[0]; !proto.Equal(got, want) {
		t.Fatalf("start %v\nwant %v", got, want)
	}
	_, err = c.Subscribe(ctx, "orders", StartAll(), StartNew(), MaxDeliver(-1), PositionPredicate("all"), DeadLetter("orders"), AckWait(time.Microsecond))
	if !errors.Is(err, ErrInvalid) || err.Error() != `pubsub: subscribe to "orders": MaxDeliver(-1): want 0 (the site's default) to 4294967295; `+
		`AckWait(1µs): want 0 (the default, 30s) or at least 1ms; StartAll and StartNew: give one start position; `+
		`PositionPredicate without Durable: only a durable subscription has a stored position; DeadLetter("orders"): a topic cannot be its own dead-letter topic` {
		t.Fatalf("bad options: %v", err)
	}
	if _, err := c.Subscribe(ctx, "nope"); !errors.Is(err, ErrUnknownTopic) || err.Error() != `pubsub: subscribe to "nope": unknown topic nope` {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TestDeadLetter: past MaxDeliver, a nakked message goes to the dead-letter
// topic with the headers that say where it came from.
func TestDeadLetter(t *testing.T) {
	_, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "orders", "dlq")
	if _, err := c.Publish(ctx, "orders", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, "orders", StartAll(), MaxDeliver(2), DeadLetter("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		m := next(t, sub)
		if m.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", m.Attempt, attempt)
		}
		if err := m.Nak(0); err != nil {
			t.Fatal(err)
		}
	}
	dl, err := c.Subscribe(ctx, "dlq", StartAll())
	if err != nil {
		t.Fatal(err)
	}
	m := next(t, dl)
	if string(m.Data) != "poison" || m.Headers[pubsubpb.HeaderDeadLetterTopic] != "orders" ||
		m.Headers[pubsubpb.HeaderDeadLetterSeq] != "1" || m.Headers[pubsubpb.HeaderDeadLetterDeliveries] != "2" {
		t.Fatalf("dead letter %+v", m)
	}
	_ = sub.Close(ctx)
	_ = dl.Close(ctx)
}

// TestDurableFailover: a durable subscription whose site is lost resumes
// at the next with the same start; the site resumes from the stored
// position, so what was acked is not delivered again and what was not is.
func TestDurableFailover(t *testing.T) {
	cl, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "jobs")
	for i := 1; i <= 4; i++ {
		cl.PublishAt(t, "us-east-1", "jobs", fmt.Sprint(i))
	}
	// One in flight: nothing waits in the client when the site goes.
	sub, err := c.Subscribe(ctx, "jobs", Durable("workers"), StartAll(), MaxInFlight(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := next(t, sub).Ack(); err != nil {
			t.Fatal(err)
		}
	}
	ss[0].WaitFor(t, "2 acks stored", func() bool { return cl.Position("jobs", "workers") == "us-east-1:0+1,2" })
	third := next(t, sub) // not acked before the site goes
	ss[0].Stop()
	var got []string
	for range 2 {
		m := next(t, sub)
		got = append(got, desc(m))
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, " ") != "us-east-1/3#1:3 us-east-1/4#1:4" {
		t.Fatalf("after failover: %v; want 3 again, then 4", got)
	}
	// The ack of a message from the lost site is dropped.
	if err := third.Ack(); err != nil {
		t.Fatalf("ack from the lost site: %v", err)
	}
	if !proto.Equal(ss[0].Starts()[0], ss[1].Starts()[0]) {
		t.Fatalf("resumed with %v, started with %v", ss[1].Starts()[0], ss[0].Starts()[0])
	}
	if info := sub.Info(); info.Site != "eu-west-1" || info.Name != "workers" {
		t.Fatalf("info %+v", info)
	}
	// Publishing goes on at the new site too, and so does delivery.
	if _, err := c.Publish(ctx, "jobs", []byte("5")); err != nil {
		t.Fatal(err)
	}
	if m := next(t, sub); desc(m) != "eu-west-1/1#1:5" {
		t.Fatalf("got %s", desc(m))
	} else if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cl.Position("jobs", "workers"); got != "eu-west-1:0+1 us-east-1:0+1,2,3,4" {
		t.Fatalf("stored position %s", got)
	}
	if ss[1].Closes() != 1 {
		t.Fatal("Close did not reach the new site")
	}
}

// TestEphemeralResume: an ephemeral subscription whose site is lost starts
// again after the last message it received from each origin; origins it
// received nothing from start after their last message when it started at
// new, and at their first when it started at all.
func TestEphemeralResume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start SubscribeOption
		want  map[string]uint64 // the seqs of the resumed start
		pre   string            // what Next returns before the failover, sorted
	}{
		{"all", StartAll(), map[string]uint64{"us-east-1": 3, "ap-south-1": 2},
			"ap-south-1/1 us-east-1/1 us-east-1/2"},
		{"new", StartNew(), map[string]uint64{"us-east-1": 3, "ap-south-1": 2, "sa-east-1": 2},
			"ap-south-1/1 us-east-1/1 us-east-1/2"},
		{"seq", StartSeq(map[string]uint64{"us-east-1": 2, "sa-east-1": 5}), map[string]uint64{"us-east-1": 3, "ap-south-1": 2, "sa-east-1": 5},
			"ap-south-1/1 us-east-1/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, ss := fakes(t, "us-east-1", "eu-west-1")
			c := dial(t, ss)
			ctx := testCtx(t)
			mustCreate(t, c, "events")
			// An origin with an old message the subscription receives
			// only when it starts at all.
			if tc.name != "all" {
				cl.PublishAt(t, "sa-east-1", "events", "old")
			}
			sub, err := c.Subscribe(ctx, "events", tc.start)
			if err != nil {
				t.Fatal(err)
			}
			cl.PublishAt(t, "us-east-1", "events", "1")
			cl.PublishAt(t, "us-east-1", "events", "2")
			cl.PublishAt(t, "ap-south-1", "events", "3")
			var got []string
			for range strings.Count(tc.pre, " ") + 1 {
				m := next(t, sub)
				got = append(got, fmt.Sprintf("%s/%d", m.Origin, m.Seq))
				_ = m.Ack()
			}
			slices.Sort(got)
			if strings.Join(got, " ") != tc.pre {
				t.Fatalf("before the failover: %v, want %s", got, tc.pre)
			}
			ss[0].Stop()
			cl.PublishAt(t, "us-east-1", "events", "4")
			if m := next(t, sub); m.Origin != "us-east-1" || m.Seq != 3 {
				t.Fatalf("after the failover: %s, want us-east-1/3", desc(m))
			}
			starts := ss[1].Starts()
			if len(starts) != 1 || starts[0].Start.Kind != pubsubpb.StartPosition_SEQ || !maps.Equal(starts[0].Start.Seqs, tc.want) {
				t.Fatalf("resumed with %v, want seqs %v", starts, tc.want)
			}
			if err := sub.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSubscriptionEnds: a subscription ends with its client, and with a
// site that refuses it for good (here: its topic was deleted while it
// moved); Next says why once the messages received are handed out.
func TestSubscriptionEnds(t *testing.T) {
	cl, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "events")
	sub, err := c.Subscribe(ctx, "events", StartAll(), Durable("d"))
	if err != nil {
		t.Fatal(err)
	}
	cl.PublishAt(t, "us-east-1", "events", "1")
	next(t, sub)
	if err := c.DeleteTopic(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	ss[0].Stop()
	if _, err := sub.Next(ctx); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("topic gone: %v", err)
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatalf("Close of an ended subscription: %v", err)
	}

	mustCreate(t, c, "other")
	sub2, err := c.Subscribe(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub2.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("client closed: %v", err)
	}
	if _, err := c.Subscribe(ctx, "other"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

// TestNextCtx: Next waits as long as its ctx allows, and several
// goroutines may wait at once.
func TestNextCtx(t *testing.T) {
	cl, ss := fakes(t, "us-east-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "events")
	sub, err := c.Subscribe(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sub.Next(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	got := make(chan string, 2)
	for range 2 {
		go func() {
			m, err := sub.Next(ctx)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(m.Data)
		}()
	}
	cl.PublishAt(t, "us-east-1", "events", "x")
	cl.PublishAt(t, "us-east-1", "events", "y")
	r := []string{<-got, <-got}
	slices.Sort(r)
	if r[0] != "x" || r[1] != "y" {
		t.Fatalf("got %v", r)
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDurableFailoverDropsQueued: the messages a durable subscription had
// received from the lost site but not handed out are dropped: the next
// site delivers them again, and Next hands out only its deliveries.
func TestDurableFailoverDropsQueued(t *testing.T) {
	cl, ss := fakes(t, "us-east-1", "eu-west-1")
	c := dial(t, ss)
	ctx := testCtx(t)
	mustCreate(t, c, "jobs")
	for i := 1; i <= 3; i++ {
		cl.PublishAt(t, "us-east-1", "jobs", fmt.Sprint(i))
	}
	sub, err := c.Subscribe(ctx, "jobs", Durable("workers"), StartAll())
	if err != nil {
		t.Fatal(err)
	}
	if err := next(t, sub).Ack(); err != nil {
		t.Fatal(err)
	}
	ss[0].WaitFor(t, "the ack stored", func() bool { return cl.Position("jobs", "workers") == "us-east-1:0+1" })
	ss[0].Stop()
	ss[1].WaitFor(t, "the subscription at eu-west-1", func() bool { return len(ss[1].Starts()) == 1 })
	for _, want := range []string{"us-east-1/2#1:2", "us-east-1/3#1:3"} {
		m := next(t, sub)
		if desc(m) != want || m.gen != 1 {
			t.Fatalf("got %s from stream %d, want %s from the second", desc(m), m.gen, want)
		}
	}
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
