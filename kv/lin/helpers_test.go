package lin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var siteNames = []string{"us-east-1", "eu-west-1", "ap-south-1", "us-west-2", "sa-east-1"}

// cluster runs one Node per site, each attached to a stabilizer node of
// the library's test cluster (real pebble in a temporary directory, the
// in-memory network), and can stop and restart sites.
type cluster struct {
	*stabilizertest.Cluster
	t     testing.TB
	net   *stabilizertest.Network
	sites []string
	tweak func(*Config)

	began time.Time

	mu    sync.Mutex
	nodes map[string]*Node
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
	c := &cluster{t: t, sites: slices.Clone(siteNames[:n]), tweak: tweak, nodes: map[string]*Node{}}
	c.began = time.Now()
	c.Cluster = stabilizertest.NewCluster(t, stabilizertest.Options{Sites: c.sites, Setup: c.attach, Stopped: c.sites})
	c.net = c.Net
	// Runs before the cluster's own cleanup: raft stops before its sites.
	t.Cleanup(c.close)
	for _, s := range c.sites {
		c.start(s)
	}
	return c
}

// attach puts a raft node on each stabilizer node the cluster starts.
func (c *cluster) attach(site string, node *stabilizer.Node) error {
	cfg := Config{Voters: c.sites, Logger: stabilizertest.Logger(c.t, site+".lin")}
	testConfig(&cfg)
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n, err := Attach(node, cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[site] = n
	c.mu.Unlock()
	return nil
}

func (c *cluster) start(site string) *Node {
	c.t.Helper()
	c.Start(site)
	n := c.node(site)
	if err := n.Start(); err != nil {
		c.t.Fatalf("start %s: %v", site, err)
	}
	return n
}

// stop closes a site: its raft node, then its stabilizer node and store,
// as if the process died between two writes (everything acknowledged was
// fsynced).
func (c *cluster) stop(site string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[site]
	delete(c.nodes, site)
	c.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Close(); err != nil {
		c.t.Errorf("close %s: %v", site, err)
	}
	c.Stop(site)
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
}

// waitLeader polls until every running site in among agrees on one leader
// and returns it.
func (c *cluster) waitLeader(among []string, timeout time.Duration) string {
	c.t.Helper()
	var leader string
	stabilizertest.Eventually(c.t, timeout, func() error {
		l, ok := "", true
		for _, s := range among {
			n := c.node(s)
			if n == nil {
				continue
			}
			st := n.Status()
			if st.Leader == "" || (l != "" && st.Leader != l) {
				ok = false
				break
			}
			l = st.Leader
		}
		if ok && l != "" && slices.Contains(among, l) && c.node(l) != nil && c.node(l).Status().State == "StateLeader" {
			leader = l
			return nil
		}
		var b strings.Builder
		for _, s := range among {
			if n := c.node(s); n != nil {
				fmt.Fprintf(&b, " %+v", n.Status())
			}
		}
		return fmt.Errorf("no agreed leader among %v:%s", among, b.String())
	})
	return leader
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	stabilizertest.Eventually(t, timeout, f)
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
