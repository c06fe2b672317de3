package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// byHand leaves retention and truncation to the test (retainAt,
// truncateNow): the loops' own passes would race with its assertions.
func byHand(_ string, cfg *Config) { cfg.RetentionEvery, cfg.TruncateEvery = time.Hour, time.Hour }

// retainAt runs one retention pass at each of the sites and waits for it.
func (c *cluster) retainAt(t *testing.T, sites ...string) {
	t.Helper()
	for _, s := range sites {
		if err := c.broker(s).retainNow(ctxT(t)); err != nil {
			t.Fatalf("retention at %s: %v", s, err)
		}
	}
}

// waitStored waits until each site stored origin's messages of topic up to
// seq.
func (c *cluster) waitStored(t *testing.T, topic, origin string, seq uint64, sites ...string) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range sites {
			if got := c.broker(s).store.statsOf(topic, origin).LastSeq; got < seq {
				return fmt.Errorf("%s stored %s's %q up to %d, want %d", s, origin, topic, got, seq)
			}
		}
		return nil
	})
}

// originOf is what a site's TopicInfo says of one origin.
func originOf(t *testing.T, b *Broker, topic, origin string) OriginInfo {
	t.Helper()
	info, err := b.TopicInfo(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range info.Origins {
		if o.Origin == origin {
			return o
		}
	}
	return OriginInfo{Origin: origin}
}

func droppedBy(b *Broker, topic, reason string) float64 {
	return testutil.ToFloat64(b.metrics.droppedMsgs.WithLabelValues(topic, reason))
}

func sameStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// max_messages is per topic across origins: every site keeps the newest
// by HLC and drops the oldest, whichever origin published them; the
// counts, the floor, the first retained seq and the metrics say so. The
// retention loop gets there by itself, whatever order the messages
// arrive in at each site.
func TestRetentionMaxMessages(t *testing.T) {
	c := newCluster(t, func(_ string, cfg *Config) { cfg.RetentionEvery = 10 * time.Millisecond }, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", Retention: Retention{MaxMessages: 4}})
	fromUS := publishN(t, c.broker(us), "jobs.events", 3, "us")
	// eu's clock has seen us's messages: its own get later HLCs.
	c.waitStored(t, "jobs.events", us, fromUS[2].Seq, eu)
	fromEU := publishN(t, c.broker(eu), "jobs.events", 3, "eu")
	c.waitStored(t, "jobs.events", us, fromUS[2].Seq, sites3...)
	c.waitStored(t, "jobs.events", eu, fromEU[2].Seq, sites3...)
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range sites3 {
			b := c.broker(s)
			u, e := originOf(t, b, "jobs.events", us), originOf(t, b, "jobs.events", eu)
			if u.Messages != 1 || u.Truncated != fromUS[1].Seq || u.FirstSeq != fromUS[2].Seq || u.Dropped != 2 || e.Messages != 3 || e.Truncated != 0 {
				return fmt.Errorf("at %s: %s %+v, %s %+v; want 1 of %s's left (from seq %d) and 3 of %s's", s, us, u, eu, e, us, fromUS[2].Seq, eu)
			}
			if got := droppedBy(b, "jobs.events", reasonLimitsMessages); got != 2 {
				return fmt.Errorf("at %s: %v dropped for limits_messages, want 2", s, got)
			}
			if got := testutil.ToFloat64(b.metrics.droppedBytes.WithLabelValues("jobs.events")); got == 0 {
				return fmt.Errorf("at %s: no dropped bytes counted", s)
			}
		}
		return nil
	})
	cn, err := c.broker(ap).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	got := data(receive(t, ctx, cn, 4, true))
	// Per origin in order; across origins the pump serves both.
	var gotUS, gotEU []string
	for _, d := range got {
		if strings.HasPrefix(d, "us") {
			gotUS = append(gotUS, d)
		} else {
			gotEU = append(gotEU, d)
		}
	}
	sameStrings(t, "us-east-1's retained", gotUS, "us-2")
	sameStrings(t, "eu-west-1's retained", gotEU, "eu-0", "eu-1", "eu-2")
	none(t, cn, 50*time.Millisecond)
}

// max_bytes keeps the newest messages whose stored bytes fit, no fewer.
func TestRetentionMaxBytes(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "metrics", MaxMessageBytes: 100, Retention: Retention{MaxBytes: 300}})
	acks := publishN(t, c.broker(us), "metrics", 10, strings.Repeat("x", 50))
	c.waitStored(t, "metrics", us, acks[9].Seq, sites3...)
	size := c.broker(us).store.statsOf("metrics", us).Bytes / 10 // every payload has the same size
	keep := 300 / size
	c.retainAt(t, us, eu)
	for _, s := range []string{us, eu} {
		o := originOf(t, c.broker(s), "metrics", us)
		if o.Messages != keep || o.Bytes != keep*size || o.FirstSeq != acks[10-keep].Seq {
			t.Fatalf("at %s: %+v, want the last %d messages of %d bytes", s, o, keep, size)
		}
		if got := droppedBy(c.broker(s), "metrics", reasonLimitsBytes); got != float64(10-keep) {
			t.Fatalf("at %s: %v dropped for limits_bytes, want %d", s, got, 10-keep)
		}
	}
	// ap has not run retention: it still has them all. Sites drop on
	// their own.
	if o := originOf(t, c.broker(ap), "metrics", us); o.Messages != 10 || o.Truncated != 0 {
		t.Fatalf("at %s, which ran no pass: %+v", ap, o)
	}
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "metrics", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	ds := receive(t, ctx, cn, int(keep), true)
	if ds[0].Msg.Seq != acks[10-keep].Seq {
		t.Fatalf("first delivery seq %d, want %d", ds[0].Msg.Seq, acks[10-keep].Seq)
	}
}

// fakeClock is a broker clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time  { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) set(t time.Time) { f.mu.Lock(); f.now = t; f.mu.Unlock() }

// max_age drops what is older than the site's clock allows, by the
// messages' HLCs.
func TestRetentionMaxAge(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	c := newCluster(t, func(site string, cfg *Config) { byHand(site, cfg); cfg.Now = clock.Now }, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ckpt.done", Retention: Retention{MaxAge: time.Hour}})
	c.createTopic(t, us, Topic{Name: "probe"})
	old := publishN(t, c.broker(us), "ckpt.done", 3, "old")
	// The HLC's wall moves on with the node's ticks: publish elsewhere
	// until it did, so that the fresh ones are younger than the old ones.
	stabilizertest.Eventually(t, 0, func() error {
		if p := publishN(t, c.broker(us), "probe", 1, "tick"); p[0].HLC.Wall <= old[2].HLC.Wall {
			return fmt.Errorf("the wall is still at %d", p[0].HLC.Wall)
		}
		return nil
	})
	fresh := publishN(t, c.broker(us), "ckpt.done", 2, "new")
	c.waitStored(t, "ckpt.done", us, fresh[1].Seq, us, eu)
	c.retainAt(t, us, eu)
	if o := originOf(t, c.broker(eu), "ckpt.done", us); o.Messages != 5 {
		t.Fatalf("nothing is an hour old yet, but %+v", o)
	}
	// An hour after the first fresh one was published: the old ones are
	// past max_age, the fresh ones not.
	clock.set(time.Unix(0, fresh[0].HLC.Wall).Add(time.Hour))
	c.retainAt(t, us, eu)
	for _, s := range []string{us, eu} {
		o := originOf(t, c.broker(s), "ckpt.done", us)
		if o.Messages != 2 || o.Truncated != old[2].Seq || o.FirstSeq != fresh[0].Seq {
			t.Fatalf("at %s: %+v, want the 2 fresh ones from seq %d", s, o, fresh[0].Seq)
		}
		if got := droppedBy(c.broker(s), "ckpt.done", reasonMaxAge); got != 3 {
			t.Fatalf("at %s: %v dropped for max_age, want 3", s, got)
		}
	}
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "ckpt.done", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "delivered", data(receive(t, ctx, cn, 2, true)), "new-0", "new-1")
	clock.set(time.Unix(0, fresh[1].HLC.Wall).Add(time.Hour + time.Nanosecond))
	c.retainAt(t, eu)
	if o := originOf(t, c.broker(eu), "ckpt.done", us); o.Messages != 0 || o.FirstSeq != 0 || o.Truncated != fresh[1].Seq {
		t.Fatalf("all past max_age: %+v", o)
	}
}

// waitPosition waits until a site's KV holds a durable subscription's
// position with a floor of at least seq for origin.
func (c *cluster) waitPosition(t *testing.T, site, topic, name, origin string, seq uint64) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		stored, err := c.broker(site).storedSubscriptions(ctxT(t), topic)
		if err != nil {
			return err
		}
		rec, ok := stored[subKey{topic, name}]
		if !ok {
			return fmt.Errorf("%s does not know %q yet", site, name)
		}
		if got := rec.Position[origin].Floor; got < seq {
			return fmt.Errorf("%s sees %q's floor at %d, want %d", site, name, got, seq)
		}
		return nil
	})
}

// Under interest a message goes once every durable subscription acked it,
// and not before; limits still apply.
func TestRetentionInterest(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", Retention: Retention{Policy: pubsubpb.RetentionInterest}})
	a, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "sched", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	acks := publishN(t, c.broker(us), "jobs.events", 4, "ev")
	receive(t, ctx, a, 4, true)
	for _, s := range sites3 {
		c.waitPosition(t, s, "jobs.events", "sched", us, acks[3].Seq)
		c.waitPosition(t, s, "jobs.events", "dash", us, 0)
	}
	c.retainAt(t, sites3...)
	for _, s := range sites3 {
		if o := originOf(t, c.broker(s), "jobs.events", us); o.Messages != 4 {
			t.Fatalf("at %s after one of two acked everything: %+v", s, o)
		}
	}
	// dash acks the first two: those two go, everywhere.
	ds := receive(t, ctx, b, 4, false)
	for _, d := range ds[:2] {
		if err := b.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sites3 {
		c.waitPosition(t, s, "jobs.events", "dash", us, acks[1].Seq)
	}
	c.retainAt(t, sites3...)
	for _, s := range sites3 {
		o := originOf(t, c.broker(s), "jobs.events", us)
		if o.Messages != 2 || o.Truncated != acks[1].Seq || o.FirstSeq != acks[2].Seq {
			t.Fatalf("at %s after both acked 2: %+v", s, o)
		}
		if got := droppedBy(c.broker(s), "jobs.events", reasonInterest); got != 2 {
			t.Fatalf("at %s: %v dropped for interest, want 2", s, got)
		}
	}
	// The rest goes once dash acks it too.
	for _, d := range ds[2:] {
		if err := b.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitPosition(t, us, "jobs.events", "dash", us, acks[3].Seq)
	c.retainAt(t, us)
	if o := originOf(t, c.broker(us), "jobs.events", us); o.Messages != 0 {
		t.Fatalf("after both acked all: %+v", o)
	}
}

// Under interest with no durable subscription, messages go at once, as in
// JetStream; a subscription live at a site holds them there until it acked
// them, so sites drop at different times.
func TestRetentionInterestWithoutSubscriptions(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ev", Retention: Retention{Policy: pubsubpb.RetentionInterest}})
	acks := publishN(t, c.broker(us), "ev", 3, "nobody")
	c.waitStored(t, "ev", us, acks[2].Seq, sites3...)
	c.retainAt(t, sites3...)
	for _, s := range sites3 {
		if o := originOf(t, c.broker(s), "ev", us); o.Messages != 0 || o.Dropped != 3 {
			t.Fatalf("at %s with nobody interested: %+v", s, o)
		}
	}
	live, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "ev", Start: StartNew})
	if err != nil {
		t.Fatal(err)
	}
	more := publishN(t, c.broker(us), "ev", 2, "watched")
	c.waitStored(t, "ev", us, more[1].Seq, sites3...)
	c.retainAt(t, us, eu)
	if o := originOf(t, c.broker(eu), "ev", us); o.Messages != 2 {
		t.Fatalf("at %s, which has a live subscriber: %+v", eu, o)
	}
	if o := originOf(t, c.broker(us), "ev", us); o.Messages != 0 {
		t.Fatalf("at %s, which has none: %+v", us, o)
	}
	sameStrings(t, "delivered", data(receive(t, ctx, live, 2, true)), "watched-0", "watched-1")
	stabilizertest.Eventually(t, 0, func() error {
		c.retainAt(t, eu)
		if o := originOf(t, c.broker(eu), "ev", us); o.Messages != 0 {
			return fmt.Errorf("at %s after its subscriber acked: %+v", eu, o)
		}
		return nil
	})
}

// A work queue keeps its messages until its one durable subscription acked
// them, refuses a second one and ephemeral ones, and shares the one among
// consumers at any site.
func TestRetentionWorkQueue(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.queue", Retention: Retention{Policy: pubsubpb.RetentionWorkQueue}})
	acks := publishN(t, c.broker(us), "jobs.queue", 3, "job")
	c.waitStored(t, "jobs.queue", us, acks[2].Seq, us, eu)
	c.retainAt(t, us, eu)
	if o := originOf(t, c.broker(us), "jobs.queue", us); o.Messages != 3 {
		t.Fatalf("a work queue without a subscription dropped messages: %+v", o)
	}
	err := subErr(c.broker(us), SubOptions{Topic: "jobs.queue"})
	if !errors.Is(err, ErrBadSubscription) || !strings.Contains(err.Error(), `"jobs.queue" is a work queue`) {
		t.Fatalf("ephemeral subscription of a work queue: %v", err)
	}
	w, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "jobs.queue", Durable: "workers", Start: StartAll, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.waitPosition(t, eu, "jobs.queue", "workers", us, 0)
	err = subErr(c.broker(eu), SubOptions{Topic: "jobs.queue", Durable: "others", Start: StartAll})
	if !errors.Is(err, ErrBadSubscription) || !strings.Contains(err.Error(), `durable subscription "workers"`) {
		t.Fatalf("a second durable subscription of a work queue: %v", err)
	}
	// Another consumer of the same one, at another site, is welcome.
	w2, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.queue", Durable: "workers", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d := receive(t, ctx, w, 1, true)[0]
	if d.Msg.Seq != acks[0].Seq {
		t.Fatalf("first job seq %d, want %d", d.Msg.Seq, acks[0].Seq)
	}
	c.waitPosition(t, us, "jobs.queue", "workers", us, acks[0].Seq)
	c.retainAt(t, us)
	o := originOf(t, c.broker(us), "jobs.queue", us)
	if o.Messages != 2 || o.Truncated != acks[0].Seq {
		t.Fatalf("after the first job was acked: %+v", o)
	}
	if got := droppedBy(c.broker(us), "jobs.queue", reasonWorkQueue); got != 1 {
		t.Fatalf("%v dropped for workqueue, want 1", got)
	}
}

// A subscription that asks for messages retention dropped fails with an
// error naming the topic, the origin, the seq asked and the first retained
// one; with OnTruncatedFirst it starts at the first retained message.
func TestSubscribeBehindRetention(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", Retention: Retention{MaxMessages: 2}})
	d, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash", Start: StartAll, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	acks := publishN(t, c.broker(us), "jobs.events", 5, "ev")
	receive(t, ctx, d, 1, true)
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitStored(t, "jobs.events", us, acks[4].Seq, eu)
	c.retainAt(t, eu)

	var te *TruncatedError
	_, err = c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartSeq, Seqs: map[string]uint64{us: acks[1].Seq}})
	if !errors.As(err, &te) || !errors.Is(err, ErrTruncated) {
		t.Fatalf("start at a dropped seq: %v", err)
	}
	want := TruncatedError{Topic: "jobs.events", Origin: us, Asked: acks[1].Seq, Truncated: acks[2].Seq, FirstRetained: acks[3].Seq}
	if *te != want {
		t.Fatalf("error %+v, want %+v", *te, want)
	}
	for _, s := range []string{`"jobs.events"`, us, fmt.Sprint(acks[1].Seq), fmt.Sprint(acks[3].Seq)} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%q does not name %s", err, s)
		}
	}
	// The durable one resumes behind what is retained: the same.
	_, err = c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash"})
	if !errors.As(err, &te) || te.Asked != acks[0].Seq+1 || te.FirstRetained != acks[3].Seq {
		t.Fatalf("durable resumed behind retention: %v", err)
	}
	// A start that names no seq begins at what is retained.
	all, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "start all", data(receive(t, ctx, all, 2, true)), "ev-3", "ev-4")
	for _, o := range []SubOptions{
		{Topic: "jobs.events", Start: StartSeq, Seqs: map[string]uint64{us: acks[1].Seq}, OnTruncated: OnTruncatedFirst},
		{Topic: "jobs.events", Durable: "dash", OnTruncated: OnTruncatedFirst},
	} {
		cn, err := c.broker(eu).Subscribe(ctx, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		sameStrings(t, fmt.Sprintf("durable %q, first retained", o.Durable), data(receive(t, ctx, cn, 2, true)), "ev-3", "ev-4")
		none(t, cn, 50*time.Millisecond)
		if err := cn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// dash's position moved past what was dropped: it resumes now.
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash"})
	if err != nil {
		t.Fatalf("durable after it started at the first retained: %v", err)
	}
	_ = cn.Close(ctx)
}

// A live subscription that retention overtakes fails on its next Next, or
// with OnTruncatedFirst goes on from the first retained message; a message
// it had been delivered and not acked, gone meanwhile, is not delivered
// again.
func TestLiveSubscriptionOvertaken(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	c := newCluster(t, func(site string, cfg *Config) { byHand(site, cfg); cfg.Now = clock.Now }, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ev", Retention: Retention{MaxMessages: 2}})
	b := c.broker(us)
	slow, err := b.Subscribe(ctx, SubOptions{Topic: "ev", Start: StartNew, MaxAckPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Subscribe(ctx, SubOptions{Topic: "ev", Start: StartNew, MaxAckPending: 1, AckWait: time.Second, OnTruncated: OnTruncatedFirst})
	if err != nil {
		t.Fatal(err)
	}
	acks := publishN(t, b, "ev", 5, "ev")
	s0 := receive(t, ctx, slow, 1, false)[0]
	f0 := receive(t, ctx, first, 1, false)[0]
	c.waitStored(t, "ev", us, acks[4].Seq, us)
	c.retainAt(t, us) // ev-0..2 go; both hold ev-0, unacked
	if o := originOf(t, b, "ev", us); o.Truncated != acks[2].Seq {
		t.Fatalf("after retention: %+v", o)
	}
	// slow acks ev-0 (its body is not needed), makes room, and finds
	// ev-1 gone.
	if err := slow.Ack(AckRequest{Origin: s0.Msg.Origin, Seq: s0.Msg.Seq, Attempt: s0.Attempt}); err != nil {
		t.Fatal(err)
	}
	_, err = slow.Next(ctx)
	var te *TruncatedError
	if !errors.As(err, &te) || te.Topic != "ev" || te.Origin != us || te.Asked != acks[0].Seq+1 || te.FirstRetained != acks[3].Seq {
		t.Fatalf("slow subscription overtaken: %v", err)
	}
	if _, again := slow.Next(ctx); !errors.Is(again, ErrTruncated) {
		t.Fatalf("Next after the failure: %v", again)
	}
	if err := slow.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// first lets ev-0's ack wait pass: its redelivery finds the body gone,
	// drops it, and goes on from the first retained message.
	clock.set(clock.Now().Add(2 * time.Second))
	first.s.signal()
	ds := receive(t, ctx, first, 1, true)
	if ds[0].Msg.Seq != acks[3].Seq || ds[0].Attempt != 1 {
		t.Fatalf("after ev-0 was gone: %s attempt %d, want ev-3", ds[0].Msg.Data, ds[0].Attempt)
	}
	sameStrings(t, "the rest", data(receive(t, ctx, first, 1, true)), "ev-4")
	st := first.Info().Stats
	if st.Dropped != 1 || st.Skipped != 1 {
		t.Fatalf("stats %+v, want ev-0 dropped and one skip", st)
	}
	if err := first.Ack(AckRequest{Origin: f0.Msg.Origin, Seq: f0.Msg.Seq, Attempt: f0.Attempt}); err == nil {
		t.Fatal("ack of the dropped ev-0 succeeded")
	}
}

// A subscription that asked for no seq in particular is not failed when
// retention drops messages before it read any: it begins at what is
// retained. One that named a seq is. Here the delivery predicate holds
// the messages back until retention dropped the oldest.
func TestStartAtRetainedIsNoGap(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ckpt.done", Delivery: "all", Retention: Retention{MaxMessages: 2}})
	b := c.broker(us)
	all, err := b.Subscribe(ctx, SubOptions{Topic: "ckpt.done", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := b.Subscribe(ctx, SubOptions{Topic: "ckpt.done", Start: StartNew})
	if err != nil {
		t.Fatal(err)
	}
	c.Isolate(ap, true)
	acks := make([]PubAck, 5)
	for i := range acks {
		if acks[i], err = b.Publish(ctx, Message{Topic: "ckpt.done", Data: fmt.Appendf(nil, "ev-%d", i)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	named, err := b.Subscribe(ctx, SubOptions{Topic: "ckpt.done", Start: StartSeq, Seqs: map[string]uint64{us: acks[0].Seq}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitStored(t, "ckpt.done", us, acks[4].Seq, us)
	none(t, all, 50*time.Millisecond) // held back by the delivery predicate
	c.retainAt(t, us)
	c.Isolate(ap, false)
	for _, cn := range []*Consumer{all, fresh} {
		sameStrings(t, "begins at what is retained", data(receive(t, ctx, cn, 2, true)), "ev-3", "ev-4")
	}
	if _, err := named.Next(ctx); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a start at a dropped seq, overtaken before it read: %v", err)
	}
}
