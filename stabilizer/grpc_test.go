package stabilizer

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/transport"
)

// grpcCluster runs sites in this process over loopback gRPC, each with its
// own pebble directory.
type grpcCluster struct {
	tb     testing.TB
	schema *frontier.Schema
	addrs  map[string]transport.PeerAddr
	dirs   map[string]string
	nodes  map[string]*Node
	log    func(site string) hclog.Logger
}

func newGRPCCluster(tb testing.TB, sites []string, log func(string) hclog.Logger) *grpcCluster {
	c := &grpcCluster{tb: tb, schema: &frontier.Schema{Sites: sites}, addrs: map[string]transport.PeerAddr{},
		dirs: map[string]string{}, nodes: map[string]*Node{}, log: log}
	for _, s := range sites {
		c.addrs[s] = transport.PeerAddr{Data: freeAddr(tb), Control: freeAddr(tb)}
		c.dirs[s] = tb.TempDir()
	}
	tb.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	for _, s := range sites {
		c.start(s)
	}
	return c
}

func freeAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (c *grpcCluster) start(site string) {
	var ls []net.Listener
	for _, a := range []string{c.addrs[site].Data, c.addrs[site].Control} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			c.tb.Fatal(err)
		}
		ls = append(ls, l)
	}
	tr, err := transport.New(transport.Config{Cluster: "test", Site: site, Peers: c.addrs, Listeners: ls, Insecure: true,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Logger: c.log(site).Named("transport")})
	if err != nil {
		c.tb.Fatal(err)
	}
	n, err := New(Config{Site: site, Schema: c.schema, Dir: c.dirs[site], Transport: GRPCTransport(tr), Logger: c.log(site)})
	if err != nil {
		c.tb.Fatal(err)
	}
	if err := n.Start(); err != nil {
		c.tb.Fatal(err)
	}
	c.nodes[site] = n
}

func (c *grpcCluster) stop(site string) {
	if err := c.nodes[site].Close(); err != nil {
		c.tb.Fatal(err)
	}
	delete(c.nodes, site)
}

func TestGRPCFiveSites(t *testing.T) {
	sites := []string{"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "ap-southeast-2"}
	c := newGRPCCluster(t, sites, func(s string) hclog.Logger { return testLogger(t, s) })
	ctx := ctxT(t)
	last := map[string]Appended{}
	write := func(from, to int) {
		for i := from; i < to; i++ {
			for _, s := range sites {
				if c.nodes[s] == nil {
					continue
				}
				a, err := c.nodes[s].Append(ctx, "log", []byte(fmt.Sprintf("%s-%d", s, i)))
				if err != nil {
					t.Fatal(err)
				}
				last[s] = a
			}
		}
	}
	write(0, 100)
	// Close a site mid-stream: majority still holds, all waits for it.
	c.stop("eu-west-1")
	write(100, 200)
	a := last["us-east-1"]
	if err := c.nodes["us-east-1"].WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatal(err)
	}
	// Change a predicate mid-stream, then reopen the site: everything
	// reaches `all` everywhere.
	if _, err := c.nodes["us-east-1"].SetPredicate(ctx, "eu", `persisted("eu-west-1")`); err != nil {
		t.Fatal(err)
	}
	c.start("eu-west-1")
	write(200, 250)
	for _, s := range sites {
		a := last[s]
		for _, o := range sites {
			if err := c.nodes[o].WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
				t.Fatalf("%s waiting on %s: %v", o, s, err)
			}
		}
	}
	f, err := c.nodes["us-east-1"].Frontier(ctx, last["us-east-1"].Stream, "eu")
	if err != nil || f.Seq != last["us-east-1"].Seq || f.Version != 1 {
		t.Fatalf("frontier of the new predicate: %+v %v", f, err)
	}
}

// BenchmarkReplicate3Sites appends from one site of three, over loopback
// gRPC with real pebble, and waits until every message is persisted at all
// three (the `all` predicate). Run with -benchtime=200000x or more.
func BenchmarkReplicate3Sites(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			c := newGRPCCluster(b, []string{"a", "b", "c"}, func(string) hclog.Logger { return hclog.NewNullLogger() })
			ctx := context.Background()
			n := c.nodes["a"]
			payload := make([]byte, size)
			const writers = 64
			var wg sync.WaitGroup
			per := b.N / writers
			b.ResetTimer()
			var last [writers]Appended
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						a, err := n.Append(ctx, "bench", payload)
						if err != nil {
							b.Error(err)
							return
						}
						last[w] = a
					}
				}()
			}
			wg.Wait()
			var top Appended
			for _, a := range last {
				if a.Seq > top.Seq {
					top = a
				}
			}
			if top.Seq > 0 {
				if err := n.WaitFor(ctx, core.StreamID{Origin: "a", Name: "bench"}, "all", top.Seq); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(per*writers)/secs, "msgs/s")
			b.ReportMetric(float64(per*writers*size)/secs/1e6, "MB/s")
		})
	}
}
