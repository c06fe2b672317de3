package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
)

// waitConnected waits until every running site of c says it is connected
// to every other: a test that kills a site must know that what the site
// had sent could reach everyone.
func waitConnected(t *testing.T, c *cluster, deadline time.Time) {
	t.Helper()
	until(t, deadline, func() error {
		for _, s := range c.sites {
			resp, err := http.Get("http://" + s.HTTP + "/status.json")
			if err != nil {
				return err
			}
			var v struct{ Connected map[string]bool }
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if err != nil {
				return err
			}
			for _, o := range c.sites {
				if o.Site != s.Site && !v.Connected[o.Site] {
					return fmt.Errorf("%s is not connected to %s yet", s.Site, o.Site)
				}
			}
		}
		return nil
	})
}

func dialPS(t *testing.T, c *cluster, sites ...string) *pubsubclient.Client {
	t.Helper()
	var addrs []string
	for _, s := range sites {
		addrs = append(addrs, c.info(s).Client)
	}
	cl, err := pubsubclient.Dial(addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// createTopicEverywhere creates a topic and waits until every site
// named knows it.
func createTopicEverywhere(t *testing.T, ctx context.Context, c *cluster, tp pubsubclient.Topic, sites ...string) {
	t.Helper()
	if _, err := dialPS(t, c, sites[0]).CreateTopic(ctx, tp); err != nil {
		t.Fatal(err)
	}
	deadline, _ := ctx.Deadline()
	for _, s := range sites {
		cl := dialPS(t, c, s)
		until(t, deadline, func() error {
			_, err := cl.GetTopic(ctx, tp.Name)
			return err
		})
	}
}

// collector consumes a durable subscription, acking everything, and
// counts what it got by message data.
type collector struct {
	mu   sync.Mutex
	seen map[string]int
	done chan struct{}
	err  error
}

func collect(ctx context.Context, sub *pubsubclient.Subscription) *collector {
	k := &collector{seen: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				k.mu.Lock()
				k.err = err
				k.mu.Unlock()
				return
			}
			k.mu.Lock()
			k.seen[string(m.Data)]++
			k.mu.Unlock()
			_ = m.Ack()
		}
	}()
	return k
}

func (k *collector) missing(want []string) (missing []string, dups int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range want {
		if k.seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	for _, n := range k.seen {
		dups += max(n-1, 0)
	}
	return missing, dups
}

// Three publishers publish under majority while one site is killed with
// kill -9: every message acknowledged to a publisher reaches the durable
// subscribers of the surviving sites.
func TestPubSubKill9DuringMajorityPublishes(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	waitConnected(t, c, deadline)
	createTopicEverywhere(t, ctx, c, pubsubclient.Topic{Name: "jobs.events", PublishAck: "majority"}, three...)
	survivors := []string{"us-east-1", "eu-west-1"}
	var cols []*collector
	for _, s := range survivors {
		// Each site its own durable subscription: one name at two sites
		// would be one subscription, whose acks at one count at the other.
		sub, err := dialPS(t, c, s).Subscribe(ctx, "jobs.events", pubsubclient.Durable("sched-"+s), pubsubclient.StartAll())
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, collect(ctx, sub))
	}
	var mu sync.Mutex
	var acked []string
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, site := range three {
		cl := dialPS(t, c, site)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := fmt.Sprintf("%s/job-%04d/checkpointed", site, i)
				pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
				_, err := cl.Publish(pctx, "jobs.events", []byte(data), pubsubclient.MsgID(data))
				pcancel()
				mu.Lock()
				if err == nil {
					acked = append(acked, data)
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the site is down: do not spin
				}
			}
		}()
	}
	waitAcked := func(n int) {
		until(t, deadline, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) >= n {
				return nil
			}
			return fmt.Errorf("only %d publishes acknowledged", len(acked))
		})
	}
	waitAcked(150)
	c.kill9("ap-south-1")
	mu.Lock()
	atKill := len(acked)
	mu.Unlock()
	waitAcked(atKill + 150)
	close(stop)
	wg.Wait()
	t.Logf("%d publishes acknowledged under majority, %d failed after ap-south-1 was killed", len(acked), failed)
	for i, k := range cols {
		var missing []string
		var dups int
		until(t, deadline, func() error {
			missing, dups = k.missing(acked)
			if len(missing) > 0 {
				return fmt.Errorf("%s's subscriber lacks %d acknowledged messages, e.g. %s\n%s", survivors[i], len(missing), missing[0],
					describeTopic(ctx, c, "jobs.events", survivors...))
			}
			return nil
		})
		t.Logf("%s: all %d acknowledged messages delivered, %d duplicates", survivors[i], len(acked), dups)
	}
}

// A durable consumer moves from one site to another, once leaving cleanly
// and once because its site was killed: nothing is lost, and the
// duplicates stay within the bound: what it had not acked, plus (after a
// kill) what the dead site had acked but not yet stored.
func TestPubSubConsumerMovesSites(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			c := startCluster(t, three...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			createTopicEverywhere(t, ctx, c, pubsubclient.Topic{Name: "jobs.events"}, three...)
			a := dialPS(t, c, "us-east-1")
			sub, err := a.Subscribe(ctx, "jobs.events", pubsubclient.Durable("dash"), pubsubclient.StartAll())
			if err != nil {
				t.Fatal(err)
			}
			pub := dialPS(t, c, "eu-west-1")
			var all []string
			for i := range 200 {
				data := fmt.Sprintf("job-%03d/started", i)
				if _, err := pub.Publish(ctx, "jobs.events", []byte(data)); err != nil {
					t.Fatal(err)
				}
				all = append(all, data)
			}
			acked := map[string]bool{}
			for i := range 150 {
				m, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if i < 120 {
					if err := m.Ack(); err != nil {
						t.Fatal(err)
					}
					acked[string(m.Data)] = true
				}
			}
			// What the other sites hold of the position when the consumer
			// leaves bounds the duplicates.
			b := dialPS(t, c, "ap-south-1")
			storedAcked := 0
			if kill {
				// Kill once most acks are stored elsewhere, so that the
				// test shows what a kill costs beyond them.
				deadline, _ := ctx.Deadline()
				until(t, deadline, func() error {
					if n := storedAckCount(t, ctx, b); n < 100 {
						return fmt.Errorf("%d acks stored at ap-south-1", n)
					}
					return nil
				})
				c.kill9("us-east-1")
				storedAcked = storedAckCount(t, ctx, b)
			} else {
				if err := sub.Close(ctx); err != nil {
					t.Fatal(err)
				}
				storedAcked = len(acked)
			}
			moved := time.Now()
			sub2, err := b.Subscribe(ctx, "jobs.events", pubsubclient.Durable("dash"), pubsubclient.StartNew())
			t.Logf("resubscribed at ap-south-1 in %v", time.Since(moved))
			if err != nil {
				t.Fatal(err)
			}
			// One origin, delivered in seq order: once every message that
			// was not acked has come, everything that will come has.
			got := map[string]int{}
			dups := 0
			for pending := len(all) - len(acked); pending > 0; {
				m, err := sub2.Next(ctx)
				if err != nil {
					t.Fatalf("after %d messages at ap-south-1: %v", len(got), err)
				}
				d := string(m.Data)
				switch {
				case acked[d]:
					dups++
				case got[d] == 0:
					pending--
				}
				got[d]++
				_ = m.Ack()
			}
			// The bound: the 30 delivered and not acked, plus what the
			// dead site had acked and not stored elsewhere.
			redelivered := dups + 30
			bound := 30 + len(acked) - storedAcked
			t.Logf("kill=%v: %d acked at us-east-1, %d of them stored elsewhere; %d delivered again (bound %d)",
				kill, len(acked), storedAcked, redelivered, bound)
			if redelivered > bound {
				t.Fatalf("%d messages delivered again, bound %d", redelivered, bound)
			}
		})
	}
}

// storedAckCount reads how many messages the position stored for "dash"
// says are acked, as the surviving sites see it.
func storedAckCount(t *testing.T, ctx context.Context, cl *pubsubclient.Client) int {
	t.Helper()
	subs, err := cl.ListSubscriptions(ctx, "jobs.events")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s.Name == "dash" {
			n := 0
			for _, p := range s.Position {
				n += int(p.Floor) + len(p.Acked) // one message per seq: the topic has the stream to itself here
			}
			return n
		}
	}
	t.Fatal("dash is not stored anywhere")
	return 0
}

// A publish retried at another site after its first site died is not
// published twice.
func TestPubSubIdempotentPublishAcrossFailover(t *testing.T) {
	c := startCluster(t, three...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	createTopicEverywhere(t, ctx, c, pubsubclient.Topic{Name: "jobs.events", PublishAck: "majority"}, three...)
	sub, err := dialPS(t, c, "ap-south-1").Subscribe(ctx, "jobs.events", pubsubclient.Durable("audit"), pubsubclient.StartAll())
	if err != nil {
		t.Fatal(err)
	}
	k := collect(ctx, sub)
	cl := dialPS(t, c, "us-east-1", "eu-west-1")
	first, err := cl.Publish(ctx, "jobs.events", []byte("job-7/preempted"), pubsubclient.MsgID("job-7/preempted"))
	if err != nil {
		t.Fatal(err)
	}
	eu := dialPS(t, c, "eu-west-1")
	stored := func() uint64 {
		info, err := eu.GetTopic(ctx, "jobs.events")
		if err != nil {
			t.Fatal(err)
		}
		n := uint64(0)
		for _, o := range info.Origins {
			n += o.Messages
		}
		return n
	}
	until(t, deadline, func() error {
		if stored() == 0 {
			return errors.New("eu-west-1 has not stored the original yet")
		}
		return nil
	})
	c.kill9("us-east-1")
	t0 := time.Now()
	// The client's publish failed over to eu-west-1, which knows the id.
	again, err := cl.Publish(ctx, "jobs.events", []byte("job-7/preempted"), pubsubclient.MsgID("job-7/preempted"))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Origin != first.Origin || again.Seq != first.Seq {
		t.Fatalf("retry after failover: %+v, want the original %s/%d", again, first.Origin, first.Seq)
	}
	t.Logf("retry answered in %v", time.Since(t0))
	if n := stored(); n != 1 {
		t.Fatalf("eu-west-1 stores %d messages after the retry, want 1", n)
	}
	until(t, deadline, func() error {
		if missing, _ := k.missing([]string{"job-7/preempted"}); len(missing) > 0 {
			return errors.New("not delivered at ap-south-1 yet")
		}
		return nil
	})
	if _, dups := k.missing(nil); dups != 0 {
		t.Fatalf("%d duplicates delivered", dups)
	}
}

// describeTopic is a topic's counts at every site named, for failures.
func describeTopic(_ context.Context, c *cluster, topic string, sites ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, s := range sites {
		cl, err := pubsubclient.Dial([]string{c.info(s).Client})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", s, err)
			continue
		}
		info, err := cl.GetTopic(ctx, topic)
		fmt.Fprintf(&b, "%s: %+v %v\n", s, info.Origins, err)
		subs, err := cl.ListSubscriptions(ctx, topic)
		fmt.Fprintf(&b, "%s: %+v %v\n", s, subs, err)
		cl.Close()
	}
	return b.String()
}
