package lin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/stabilizer/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var siteNames = []string{"us-east-1", "eu-west-1", "ap-south-1", "us-west-2", "sa-east-1"}

// cluster runs one Node per site over a memNet, each with a real pebble
// store in a temporary directory, and can stop and restart sites.
type cluster struct {
	t     testing.TB
	net   *memNet
	sites []string
	dirs  map[string]string
	tweak func(*Config)

	began time.Time

	mu     sync.Mutex
	nodes  map[string]*Node
	stores map[string]*storage.Store
}

// testConfig uses short ticks: 10 ms, heartbeats every tick, elections
// after 10–20 ticks.
func testConfig(c *Config) {
	c.TickInterval = 10 * time.Millisecond
	c.HeartbeatTicks = 1
	c.ElectionTicks = 10
}

func newCluster(t testing.TB, n int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: newMemNet(), sites: slices.Clone(siteNames[:n]), dirs: map[string]string{}, tweak: tweak,
		nodes: map[string]*Node{}, stores: map[string]*storage.Store{}}
	c.began = time.Now()
	for _, s := range c.sites {
		c.dirs[s] = t.TempDir()
	}
	t.Cleanup(c.close)
	for _, s := range c.sites {
		c.start(s)
	}
	return c
}

func (c *cluster) logger(site string) hclog.Logger {
	var out io.Writer = io.Discard
	if os.Getenv("LIN_TEST_LOG") != "" {
		out = os.Stderr
	}
	return hclog.New(&hclog.LoggerOptions{Name: site, Output: out, Level: hclog.Info})
}

func (c *cluster) start(site string) *Node {
	c.t.Helper()
	st, err := storage.Open(storage.Config{Dir: c.dirs[site], CacheSize: 1 << 20, MemTableSize: 4 << 20})
	if err != nil {
		c.t.Fatalf("open store %s: %v", site, err)
	}
	cfg := Config{Site: site, Voters: c.sites, Store: st, Transport: c.net.transport(site), Logger: c.logger(site)}
	testConfig(&cfg)
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("new node %s: %v", site, err)
	}
	if err := n.Start(); err != nil {
		c.t.Fatalf("start %s: %v", site, err)
	}
	c.mu.Lock()
	c.nodes[site], c.stores[site] = n, st
	c.mu.Unlock()
	c.net.register(site, n)
	return n
}

// stop kills a site: its node and store close, as if the process died
// between two writes (everything acknowledged was fsynced).
func (c *cluster) stop(site string) {
	c.t.Helper()
	c.mu.Lock()
	n, st := c.nodes[site], c.stores[site]
	delete(c.nodes, site)
	delete(c.stores, site)
	c.mu.Unlock()
	c.net.register(site, nil)
	if n == nil {
		return
	}
	if err := n.Close(); err != nil {
		c.t.Errorf("close %s: %v", site, err)
	}
	if err := st.Close(); err != nil {
		c.t.Errorf("close store %s: %v", site, err)
	}
}

// t0 is when the cluster was made, for printing times.
func (c *cluster) t0() time.Time { return c.began }

func (c *cluster) node(site string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[site]
}

func (c *cluster) close() {
	for _, s := range c.sites {
		c.stop(s)
	}
	c.net.close()
}

// waitLeader polls until every running site in among agrees on one leader
// and returns it.
func (c *cluster) waitLeader(among []string, timeout time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		leader, ok := "", true
		for _, s := range among {
			n := c.node(s)
			if n == nil {
				continue
			}
			st := n.Status()
			if st.Leader == "" || (leader != "" && st.Leader != leader) {
				ok = false
				break
			}
			leader = st.Leader
		}
		if ok && leader != "" && slices.Contains(among, leader) && c.node(leader) != nil && c.node(leader).Status().State == "StateLeader" {
			return leader
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, s := range among {
				if n := c.node(s); n != nil {
					fmt.Fprintf(&b, " %+v", n.Status())
				}
			}
			c.t.Fatalf("no agreed leader among %v after %v:%s", among, timeout, b.String())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, not synchronising
	}
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// retry runs op until it succeeds or fails for a reason other than a
// missing leader or an unknown outcome, within timeout.
func retry(t testing.TB, timeout time.Duration, op func(ctx context.Context) error) error {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := op(ctx)
		cancel()
		if err == nil || !(errors.Is(err, ErrNoLeader) || errors.Is(err, ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoQuorum)) {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}
