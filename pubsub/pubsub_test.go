package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// Every site's subscribers receive every origin's messages, in order per
// origin, and each once.
func TestEveryOriginReachesEverySubscriberInOrder(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events"})
	var cons []*Consumer
	for _, s := range sites3 {
		cn, err := c.broker(s).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "sched", Start: StartAll})
		if err != nil {
			t.Fatal(err)
		}
		cons = append(cons, cn)
	}
	var wg sync.WaitGroup
	for _, s := range sites3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := c.broker(s).Publish(ctx, Message{Topic: "jobs.events", Data: fmt.Appendf(nil, "%s-%d", s, i)}, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, cn := range cons {
		ds := receive(t, ctx, cn, 120, true)
		last := map[string]uint64{}
		count := map[string]int{}
		for _, d := range ds {
			o := d.Msg.Origin
			if d.Msg.Seq <= last[o] {
				t.Fatalf("at %s: %s/%d after %s/%d", sites3[i], o, d.Msg.Seq, o, last[o])
			}
			if want := fmt.Sprintf("%s-%d", o, count[o]); string(d.Msg.Data) != want {
				t.Fatalf("at %s: message %q, want %q", sites3[i], d.Msg.Data, want)
			}
			last[o] = d.Msg.Seq
			count[o]++
		}
		none(t, cn, 50*time.Millisecond)
	}
}

// A delivery predicate the acks cannot satisfy delivers nothing; once they
// can, everything.
func TestDeliveryWaitsForItsPredicate(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ckpt.done", PublishAck: "local", Delivery: "all"})
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "ckpt.done", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	c.Isolate(ap, true)
	acks := publishN(t, c.broker(us), "ckpt.done", 10, "ev")
	last := acks[len(acks)-1]
	stabilizertest.Eventually(t, 0, func() error {
		info, err := c.broker(eu).TopicInfo(ctx, "ckpt.done")
		if err != nil || len(info.Origins) == 0 || info.Origins[0].LastSeq < last.Seq {
			return fmt.Errorf("%s has not stored them yet: %+v %v", eu, info.Origins, err)
		}
		if info.Origins[0].DeliveryFrontier != 0 {
			return fmt.Errorf("delivery frontier %d with %s cut off", info.Origins[0].DeliveryFrontier, ap)
		}
		return nil
	})
	none(t, cn, 200*time.Millisecond)
	c.Isolate(ap, false)
	ds := receive(t, ctx, cn, 10, true)
	if ds[9].Msg.Seq != last.Seq {
		t.Fatalf("last delivery %d, want %d", ds[9].Msg.Seq, last.Seq)
	}
}

// A durable consumer that leaves one site and subscribes at another loses
// nothing and is redelivered only what it had not acked.
func TestDurableMovesBetweenSites(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events"})
	a, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, c.broker(eu), "jobs.events", 30, "eu")
	publishN(t, c.broker(us), "jobs.events", 30, "us")
	got := receive(t, ctx, a, 60, false)
	acked := map[string]bool{}
	for i, d := range got {
		if i%3 != 0 { // leave every third one unacked
			if err := a.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt}); err != nil {
				t.Fatal(err)
			}
			acked[string(d.Msg.Data)] = true
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	publishN(t, c.broker(ap), "jobs.events", 10, "ap")
	b, err := c.broker(ap).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash", Start: StartNew})
	if err != nil {
		t.Fatal(err)
	}
	rest := receive(t, ctx, b, 30, true) // 20 unacked + 10 new
	seen := map[string]bool{}
	for _, d := range rest {
		if acked[string(d.Msg.Data)] {
			t.Fatalf("%q was acked at %s and delivered again at %s", d.Msg.Data, us, ap)
		}
		seen[string(d.Msg.Data)] = true
	}
	for _, d := range got {
		if k := string(d.Msg.Data); !acked[k] && !seen[k] {
			t.Fatalf("%q, unacked when the consumer left, was lost", k)
		}
	}
	none(t, b, 50*time.Millisecond)
}

// Several consumers of one durable subscription share its messages; what
// one leaves unacked goes to another.
func TestSharedConsumers(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "work"})
	x, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "work", Durable: "w", Start: StartAll, MaxInFlight: 5})
	if err != nil {
		t.Fatal(err)
	}
	y, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "work", Durable: "w", Start: StartAll, MaxInFlight: 5})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, c.broker(us), "work", 10, "job")
	gx := receive(t, ctx, x, 5, false)
	gy := receive(t, ctx, y, 5, true)
	seen := map[uint64]bool{}
	for _, d := range append(gx, gy...) {
		if seen[d.Msg.Seq] {
			t.Fatalf("seq %d went to both consumers", d.Msg.Seq)
		}
		seen[d.Msg.Seq] = true
	}
	if err := x.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again := receive(t, ctx, y, 5, true)
	for _, d := range again {
		if d.Attempt != 2 {
			t.Fatalf("redelivery of %d has attempt %d, want 2", d.Msg.Seq, d.Attempt)
		}
	}
}

// A message past its max deliveries goes to the dead-letter topic.
func TestDeadLetter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newCluster(t, func(_ string, cfg *Config) { cfg.Now = clock }, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs"})
	c.createTopic(t, us, Topic{Name: "jobs.dead"})
	dl, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.dead", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	cn, err := c.broker(us).Subscribe(ctx, SubOptions{Topic: "jobs", Durable: "d", Start: StartAll, MaxDeliver: 2,
		AckWait: time.Second, DeadLetter: "jobs.dead"})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, c.broker(us), "jobs", 1, "poison")
	d1 := receive(t, ctx, cn, 1, false)[0]
	if err := cn.Ack(AckRequest{Origin: d1.Msg.Origin, Seq: d1.Msg.Seq, Attempt: d1.Attempt, Kind: Nak}); err != nil {
		t.Fatal(err)
	}
	d2 := receive(t, ctx, cn, 1, false)[0]
	if d2.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", d2.Attempt)
	}
	advance(2 * time.Second) // the ack wait passes: no third delivery
	cn.s.signal()
	got := receive(t, ctx, dl, 1, true)[0]
	if string(got.Msg.Data) != "poison-0" || got.Msg.Headers["stabilizer-dead-letter-deliveries"] != "2" {
		t.Fatalf("dead letter %q %v", got.Msg.Data, got.Msg.Headers)
	}
	err = cn.Ack(AckRequest{Origin: d2.Msg.Origin, Seq: d2.Msg.Seq, Attempt: d2.Attempt})
	if !errors.Is(err, consumer.ErrUnknownDelivery) && !errors.Is(err, consumer.ErrExpired) {
		t.Fatalf("ack after dead letter: %v", err)
	}
}

// A retried publish with the same id, at another site, is not published
// again; subscribers get it once.
func TestIdempotentPublishAcrossSites(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", PublishAck: "all"})
	cn, err := c.broker(ap).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.broker(us).Publish(ctx, Message{Topic: "jobs.events", Data: []byte("started"), ID: "job-7/started"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	stabilizertest.Eventually(t, 0, func() error {
		if _, ok := c.broker(eu).store.lookupID("jobs.events", "job-7/started"); !ok {
			return errors.New("not applied at eu yet")
		}
		return nil
	})
	again, err := c.broker(eu).Publish(ctx, Message{Topic: "jobs.events", Data: []byte("started"), ID: "job-7/started"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Origin != first.Origin || again.Seq != first.Seq {
		t.Fatalf("retry: %+v, want the original %s/%d", again, first.Origin, first.Seq)
	}
	// A retry that reaches a site before the original did is published,
	// and every site drops whichever copy it applies second.
	c.Isolate(us, true)
	lost, err := c.broker(us).Publish(context.Background(), Message{Topic: "jobs.events", Data: []byte("scaled"), ID: "job-7/scaled"}, 10*time.Millisecond)
	if err == nil {
		t.Fatalf("publish under all with %s cut off: %+v", us, lost)
	}
	if _, err := c.broker(eu).Publish(context.Background(), Message{Topic: "jobs.events", Data: []byte("scaled"), ID: "job-7/scaled"}, 10*time.Millisecond); err == nil {
		t.Fatal("publish under all at eu with us cut off succeeded")
	}
	c.Isolate(us, false)
	ds := receive(t, ctx, cn, 2, true)
	if string(ds[0].Msg.Data) != "started" || string(ds[1].Msg.Data) != "scaled" {
		t.Fatalf("got %q, %q", ds[0].Msg.Data, ds[1].Msg.Data)
	}
	none(t, cn, 200*time.Millisecond)
}

// Bad input gets an error that names it.
func TestBadInput(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	b := c.broker(us)
	c.createTopic(t, us, Topic{Name: "small", MaxMessageBytes: 16})
	cases := []struct {
		name string
		err  error
		want error
		text string
	}{
		{"unknown topic", pubErr(b, Message{Topic: "nope", Data: []byte("x")}), ErrUnknownTopic, `"nope"`},
		{"too large", pubErr(b, Message{Topic: "small", Data: make([]byte, 17)}), ErrTooLarge, "17 bytes"},
		{"bad name", pubErr(b, Message{Topic: "a b", Data: []byte("x")}), ErrBadTopic, `' '`},
		{"bad predicate", createErr(b, Topic{Name: "t", PublishAck: "majorty"}), ErrBadPredicate, "majorty"},
		{"bad delivery", createErr(b, Topic{Name: "t", Delivery: "persisted(\"mars\")"}), ErrBadPredicate, "mars"},
		{"retention policy", createErr(b, Topic{Name: "t", Retention: Retention{Policy: "forever"}}), ErrRetention, `retention.policy "forever" is unknown`},
		{"retention fields", createErr(b, Topic{Name: "t", MaxMessageBytes: 64, Retention: Retention{MaxAge: -time.Second, MaxBytes: 10}}),
			ErrRetention, "retention.max_age -1s is negative; retention.max_bytes 10 is below max_message_bytes 64"},
		{"retention max age", createErr(b, Topic{Name: "t", Retention: Retention{MaxAge: time.Microsecond}}), ErrRetention, "retention.max_age 1µs is below 1ms"},
		{"exists", createErr(b, Topic{Name: "small", PublishAck: "all"}), ErrTopicExists, "small"},
		{"unknown durable", b.DeleteSubscription(ctx, "small", "ghost"), ErrUnknownSubscription, "ghost"},
		{"subscribe unknown", subErr(b, SubOptions{Topic: "nope"}), ErrUnknownTopic, "nope"},
		{"dead letter unknown", subErr(b, SubOptions{Topic: "small", DeadLetter: "nope"}), ErrUnknownTopic, "nope"},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, tc.err, tc.want, tc.text)
		}
	}
	// Acks of unknown or stale deliveries.
	cn, err := b.Subscribe(ctx, SubOptions{Topic: "small", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	if err := cn.Ack(AckRequest{Origin: us, Seq: 99, Attempt: 1}); !errors.Is(err, consumer.ErrUnknownDelivery) {
		t.Errorf("ack of an unknown delivery: %v", err)
	}
	publishN(t, b, "small", 1, "x")
	d := receive(t, ctx, cn, 1, true)[0]
	if err := cn.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt}); !errors.Is(err, consumer.ErrUnknownDelivery) {
		t.Errorf("second ack: %v", err)
	}
	// What was accepted before the bad input is still there.
	info, err := b.TopicInfo(ctx, "small")
	if err != nil || len(info.Origins) != 1 || info.Origins[0].Messages != 1 {
		t.Fatalf("after bad input: %+v %v", info, err)
	}
}

func pubErr(b *Broker, m Message) error {
	_, err := b.Publish(context.Background(), m, time.Second)
	return err
}

func createErr(b *Broker, tp Topic) error {
	_, err := b.CreateTopic(context.Background(), tp)
	return err
}

func subErr(b *Broker, o SubOptions) error {
	c, err := b.Subscribe(context.Background(), o)
	if err == nil {
		_ = c.Close(context.Background())
	}
	return err
}

// The audience follows subscribers: a publisher waits for the sites with
// live subscribers and for no other, and its frontier never moves back.
func TestAudienceFollowsSubscribers(t *testing.T) {
	c := newCluster(t, nil, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "ev", PublishAck: "audience"})
	b := c.broker(us)
	// ap is slow: a publish that waited for it would take 400 ms.
	c.Net.SetDelay(us, ap, 200*time.Millisecond)
	c.Net.SetDelay(ap, us, 200*time.Millisecond)
	stop := watchMonotone(t, b, "ev")
	defer stop()
	eusub, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "ev", Durable: "d"})
	if err != nil {
		t.Fatal(err)
	}
	waitAudience(t, b, "ev", us, eu)
	// Only eu reads: a publish needs no answer from ap.
	for i := range 5 {
		if _, err := b.Publish(context.Background(), Message{Topic: "ev", Data: []byte("x")}, 150*time.Millisecond); err != nil {
			t.Fatalf("publish %d with readers at %s only: %v", i, eu, err)
		}
	}
	apsub, err := c.broker(ap).Subscribe(ctx, SubOptions{Topic: "ev", Durable: "d2"})
	if err != nil {
		t.Fatal(err)
	}
	waitAudience(t, b, "ev", us, eu, ap)
	if _, err := b.Publish(context.Background(), Message{Topic: "ev", Data: []byte("w")}, 150*time.Millisecond); err == nil {
		t.Fatalf("publish returned within 150 ms though %s, 400 ms away, reads the topic", ap)
	}
	a, err := b.Publish(ctx, Message{Topic: "ev", Data: []byte("y")}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Node(us).Frontier(ctx, stabilizer.StreamID{Origin: us, Name: Stream}, `persisted("ap-south-1")`)
	if err != nil || f.Seq < a.Seq {
		t.Fatalf("publish returned before %s persisted it: %v %v", ap, f, err)
	}
	if err := apsub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitAudience(t, b, "ev", us, eu)
	if _, err := b.Publish(context.Background(), Message{Topic: "ev", Data: []byte("z")}, 150*time.Millisecond); err != nil {
		t.Fatalf("publish after %s's reader left: %v", ap, err)
	}
	_ = eusub.Close(ctx)
}

func waitAudience(t *testing.T, b *Broker, topic string, want ...string) {
	t.Helper()
	stabilizertest.Eventually(t, 0, func() error {
		// A publish creates the topic's first version.
		b.aud.current(topic)
		got, _ := b.aud.describe(topic)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("audience %v, want %v", got, want)
		}
		return nil
	})
}

// watchMonotone samples a topic's audience frontier until stopped and
// fails the test if it ever moves back.
func watchMonotone(t *testing.T, b *Broker, topic string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for {
			select {
			case <-done:
				return
			default:
			}
			f, err := b.aud.frontier(context.Background(), topic)
			if err == nil {
				if f.Seq < last {
					t.Errorf("audience frontier moved back from %d to %d", last, f.Seq)
					return
				}
				last = f.Seq
			}
			time.Sleep(time.Millisecond) // sampling, not synchronisation
		}
	}()
	return func() { close(done); wg.Wait() }
}
