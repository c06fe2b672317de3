package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/kv"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var sites3 = []string{"us-east-1", "eu-west-1", "ap-south-1"}

const (
	us = "us-east-1"
	eu = "eu-west-1"
	ap = "ap-south-1"
)

// cluster runs a broker (and the kv store it keeps its definitions in) on
// every site of a test cluster.
type cluster struct {
	*stabilizertest.Cluster
	t       testing.TB
	mu      sync.Mutex
	stores  map[string]*kv.Store
	brokers map[string]*Broker
	cfg     func(site string, c *Config)
}

func newCluster(t testing.TB, cfg func(site string, c *Config), sites ...string) *cluster {
	c := &cluster{t: t, stores: map[string]*kv.Store{}, brokers: map[string]*Broker{}, cfg: cfg}
	c.Cluster = stabilizertest.NewCluster(t, stabilizertest.Options{Sites: sites, Setup: c.setup,
		Started: func(site string, _ *stabilizer.Node) error { return c.broker(site).Start() },
		Stopping: func(site string, _ *stabilizer.Node) {
			c.mu.Lock()
			b := c.brokers[site]
			delete(c.brokers, site)
			delete(c.stores, site)
			c.mu.Unlock()
			_ = b.Close()
		}})
	return c
}

type peerReader struct {
	c    *cluster
	site string
}

func (p peerReader) LocalGet(ctx context.Context, key string) (kv.Version, bool, error) {
	p.c.mu.Lock()
	s := p.c.stores[p.site]
	p.c.mu.Unlock()
	if s == nil {
		return kv.Version{}, false, errors.New("site down")
	}
	return s.LocalGet(ctx, key)
}

func (c *cluster) setup(site string, n *stabilizer.Node) error {
	peers := map[string]kv.Reader{}
	for _, o := range n.Schema().Sites {
		if o != site {
			peers[o] = peerReader{c, o}
		}
	}
	s, err := kv.New(kv.Config{Node: n, Peers: peers, DefaultTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	cfg := Config{Node: n, KV: s, Logger: stabilizertest.Logger(c.t, site+"/pubsub"), AudienceEvery: 50 * time.Millisecond}
	if c.cfg != nil {
		c.cfg(site, &cfg)
	}
	b, err := New(cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.stores[site] = s
	c.brokers[site] = b
	c.mu.Unlock()
	return nil
}

func (c *cluster) broker(site string) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[site]
}

func ctxT(t testing.TB) context.Context { return stabilizertest.Context(t, 60*time.Second) }

// createTopic creates a topic at one site and waits until every running
// site knows it.
func (c *cluster) createTopic(t *testing.T, at string, tp Topic) {
	t.Helper()
	if _, err := c.broker(at).CreateTopic(ctxT(t), tp); err != nil {
		t.Fatalf("create %q at %s: %v", tp.Name, at, err)
	}
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range c.Sites() {
			if b := c.broker(s); b != nil {
				if _, ok := b.topic(tp.Name); !ok {
					return fmt.Errorf("%s does not know %q yet", s, tp.Name)
				}
			}
		}
		return nil
	})
}

// receive takes n deliveries from a consumer, acking each when ack is set.
func receive(t *testing.T, ctx context.Context, c *Consumer, n int, ack bool) []Delivery {
	t.Helper()
	var out []Delivery
	for len(out) < n {
		ds, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v", len(out), n, err)
		}
		for _, d := range ds {
			if ack {
				if err := c.Ack(AckRequest{Origin: d.Msg.Origin, Seq: d.Msg.Seq, Attempt: d.Attempt}); err != nil {
					t.Fatal(err)
				}
			}
		}
		out = append(out, ds...)
	}
	return out
}

// none checks that a consumer gets nothing within d: the negative half of
// a gating test, after the positive half proved the messages were there.
func none(t *testing.T, c *Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if ds, err := c.Next(ctx); err == nil {
		t.Fatalf("got %d deliveries, want none; first %s/%d", len(ds), ds[0].Msg.Origin, ds[0].Msg.Seq)
	}
}

func publishN(t *testing.T, b *Broker, topic string, n int, prefix string) []PubAck {
	t.Helper()
	var out []PubAck
	for i := range n {
		a, err := b.Publish(ctxT(t), Message{Topic: topic, Data: fmt.Appendf(nil, "%s-%d", prefix, i)}, 0)
		if err != nil {
			t.Fatalf("publish %d at %s: %v", i, b.node.Site(), err)
		}
		out = append(out, a)
	}
	return out
}

// data returns the deliveries' payloads.
func data(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Msg.Data)
	}
	return out
}
