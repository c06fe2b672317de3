package stabilizer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestRoundTrips: with a 20 ms one-way delay on the link, each site
// measures a round trip of at least 40 ms to the other, as soon as they
// connect; while the link is cut it shows none, and once restored it
// measures again.
func TestRoundTrips(t *testing.T) {
	const oneWay = 20 * time.Millisecond
	regs := map[string]*prometheus.Registry{"a": prometheus.NewRegistry(), "b": prometheus.NewRegistry()}
	c := stabilizertest.NewCluster(t, stabilizertest.Options{Sites: []string{"a", "b"}, Stopped: []string{"a", "b"},
		Configure: func(site string, cfg *stabilizer.Config) { cfg.Registerer = regs[site] },
		Setup: func(_ string, n *stabilizer.Node) error {
			if err := n.HandleChannel(0xfd, nil); err == nil {
				return fmt.Errorf("the round-trip channel's tag was accepted")
			}
			return nil
		}})
	c.Net.SetDelay("a", "b", oneWay)
	c.Start("a")
	c.Start("b")
	measured := func(site, peer string) func() error {
		return func() error {
			rtt, ok := c.Node(site).RoundTrips()[peer]
			if !ok {
				return fmt.Errorf("%s has measured no round trip to %s", site, peer)
			}
			if rtt < 2*oneWay || rtt > 2*oneWay+2*time.Second {
				t.Fatalf("%s measured %v to %s over a link of %v each way", site, rtt, peer, oneWay)
			}
			return nil
		}
	}
	stabilizertest.Eventually(t, 0, measured("a", "b"))
	stabilizertest.Eventually(t, 0, measured("b", "a"))

	ps := c.Node("a").Peers()
	if len(ps) != 1 || ps[0].Site != "b" || !ps[0].Connected || ps[0].RTT < 2*oneWay || ps[0].LastRTT < 2*oneWay || ps[0].Measured.IsZero() {
		t.Fatalf("a's peers: %+v", ps)
	}
	if got := gauge(t, regs["a"], "stabilizer_peer_rtt_seconds", "b"); got < (2 * oneWay).Seconds() {
		t.Fatalf("stabilizer_peer_rtt_seconds{peer=b} at a = %v", got)
	}

	c.Net.Cut("a", "b")
	if ps := c.Node("a").Peers(); ps[0].Connected || ps[0].RTT != 0 {
		t.Fatalf("a's peers with the link cut: %+v", ps)
	}
	if got := gauge(t, regs["a"], "stabilizer_peer_rtt_seconds", "b"); got != -1 {
		t.Fatalf("stabilizer_peer_rtt_seconds{peer=b} at a with the link cut = %v, want no series", got)
	}
	c.Net.Restore("a", "b")
	stabilizertest.Eventually(t, 0, measured("a", "b"))
}

// gauge returns the value of the series of name with peer=peer, -1 when
// there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name, peer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
