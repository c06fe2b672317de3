package stabilizer_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/stabilizer"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
	"github.com/stabilizer/stabilizer/stabilizer/transport"
	"github.com/stabilizer/stabilizer/stabilizer/wire"
)

// grpcOptions tune newGRPCCluster.
type grpcOptions struct {
	// quiet drops every log (benchmarks); otherwise logs go to t.Log.
	quiet bool
	// configure, when set, adjusts each node's configuration (Core).
	configure func(cfg *stabilizer.Config)
	// wrap, when set, wraps each site's transport (to observe frames).
	wrap func(site string, t stabilizer.Transport) stabilizer.Transport
}

// newGRPCCluster runs sites in this process over loopback gRPC on the
// library's test cluster, each with its own pebble directory. Each start
// of a site listens on new 127.0.0.1 ports; its peers find them under the
// site's name.
func newGRPCCluster(tb testing.TB, sites []string, o grpcOptions) *stabilizertest.Cluster {
	d := &testhelp.Directory{}
	peers := map[string]transport.PeerAddr{}
	for _, s := range sites {
		peers[s] = transport.PeerAddr{Data: s + "/data", Control: s + "/control"}
	}
	logger := func(site string) hclog.Logger {
		if o.quiet {
			return hclog.NewNullLogger()
		}
		return stabilizertest.Logger(tb, site)
	}
	return stabilizertest.NewCluster(tb, stabilizertest.Options{Sites: sites,
		Transport: func(site string) stabilizer.Transport {
			var ls []net.Listener
			for _, a := range []string{peers[site].Data, peers[site].Control} {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					tb.Fatal(err)
				}
				d.Set(a, l.Addr().String())
				ls = append(ls, l)
			}
			tr, err := transport.New(transport.Config{Cluster: "test", Site: site, Peers: peers, Listeners: ls,
				Dialer: d.Dial, Insecure: true, BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
				Logger: logger(site).Named("transport")})
			if err != nil {
				tb.Fatal(err)
			}
			t := stabilizer.GRPCTransport(tr)
			if o.wrap != nil {
				t = o.wrap(site, t)
			}
			return t
		},
		Configure: func(site string, cfg *stabilizer.Config) {
			cfg.Logger = logger(site)
			if o.configure != nil {
				o.configure(cfg)
			}
		}})
}

func TestGRPCFiveSites(t *testing.T) {
	sites := []string{"us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "ap-southeast-2"}
	c := newGRPCCluster(t, sites, grpcOptions{})
	ctx := stabilizertest.Context(t, 20*time.Second)
	last := map[string]stabilizer.Appended{}
	write := func(from, to int) {
		for i := from; i < to; i++ {
			for _, s := range sites {
				if c.Node(s) == nil {
					continue
				}
				a, err := c.Node(s).Append(ctx, "log", []byte(fmt.Sprintf("%s-%d", s, i)))
				if err != nil {
					t.Fatal(err)
				}
				last[s] = a
			}
		}
	}
	write(0, 100)
	// Close a site mid-stream: majority still holds, all waits for it.
	c.Stop("eu-west-1")
	write(100, 200)
	a := last["us-east-1"]
	if err := c.Node("us-east-1").WaitFor(ctx, a.Stream, "majority", a.Seq); err != nil {
		t.Fatal(err)
	}
	// Change a predicate mid-stream, then reopen the site: everything
	// reaches `all` everywhere.
	if _, err := c.Node("us-east-1").SetPredicate(ctx, "eu", `persisted("eu-west-1")`); err != nil {
		t.Fatal(err)
	}
	c.Start("eu-west-1")
	write(200, 250)
	for _, s := range sites {
		a := last[s]
		for _, o := range sites {
			if err := c.Node(o).WaitFor(ctx, a.Stream, "all", a.Seq); err != nil {
				t.Fatalf("%s waiting on %s: %v", o, s, err)
			}
		}
	}
	f, err := c.Node("us-east-1").Frontier(ctx, last["us-east-1"].Stream, "eu")
	if err != nil || f.Seq != last["us-east-1"].Seq || f.Version != 1 {
		t.Fatalf("frontier of the new predicate: %+v %v", f, err)
	}
}

// BenchmarkReplicate3Sites appends from one site of three, over loopback
// gRPC with real pebble, and waits until every message is persisted at all
// three (the `all` predicate). api=append: 64 writers calling Append;
// api=batch: 8 writers calling AppendBatch with 64 messages at a time. Run
// with -benchtime=200000x or more for 256 bytes, 5000x or more for 64 KiB.
func BenchmarkReplicate3Sites(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		for _, api := range []string{"append", "batch"} {
			b.Run(fmt.Sprintf("size=%d/api=%s", size, api), func(b *testing.B) {
				benchReplicate(b, size, api == "batch")
			})
		}
	}
}

func benchReplicate(b *testing.B, size int, batch bool) {
	c := newGRPCCluster(b, []string{"a", "b", "c"}, grpcOptions{quiet: true})
	ctx := context.Background()
	n := c.Node("a")
	payload := make([]byte, size)
	writers, per := 64, 1
	if batch {
		writers, per = 8, 64
	}
	rounds := b.N / (writers * per)
	payloads := make([][]byte, per)
	for i := range payloads {
		payloads[i] = payload
	}
	var wg sync.WaitGroup
	last := make([]stabilizer.Appended, writers)
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				var as []stabilizer.Appended
				var err error
				if batch {
					as, err = n.AppendBatch(ctx, "bench", payloads)
				} else {
					var a stabilizer.Appended
					a, err = n.Append(ctx, "bench", payload)
					as = []stabilizer.Appended{a}
				}
				if err != nil {
					b.Error(err)
					return
				}
				last[w] = as[len(as)-1]
			}
		}()
	}
	wg.Wait()
	var top stabilizer.Appended
	for _, a := range last {
		if a.Seq > top.Seq {
			top = a
		}
	}
	if top.Seq > 0 {
		if err := n.WaitFor(ctx, stabilizer.StreamID{Origin: "a", Name: "bench"}, "all", top.Seq); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	msgs := rounds * writers * per
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(msgs)/secs, "msgs/s")
	b.ReportMetric(float64(msgs*size)/secs/1e6, "MB/s")
}

// ackClock wraps a site's transport and notes, per peer, when the first
// control frame arrived that acks a stream `persisted` up to a seq: the
// arrival of the acks a waiter on `all` needs.
type ackClock struct {
	stabilizer.Transport
	mu     sync.Mutex
	stream stabilizer.StreamID
	seq    uint64
	at     map[string]time.Time
}

func (a *ackClock) Start(h stabilizer.Handler) error { return a.Transport.Start(ackHandler{h, a}) }

// expect starts watching for acks of stream up to seq.
func (a *ackClock) expect(stream stabilizer.StreamID, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stream, a.seq, a.at = stream, seq, map[string]time.Time{}
}

// last returns the arrival of the last of the peers' acks.
func (a *ackClock) last(peers int) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t time.Time
	for _, at := range a.at {
		if at.After(t) {
			t = at
		}
	}
	return t, len(a.at) == peers
}

type ackHandler struct {
	stabilizer.Handler
	a *ackClock
}

func (h ackHandler) Frame(from string, plane stabilizer.Plane, frame []byte) {
	if plane == stabilizer.PlaneControl {
		now := time.Now()
		if m, err := wire.Decode(frame); err == nil {
			h.a.mu.Lock()
			for _, c := range m.Cells {
				if _, seen := h.a.at[from]; !seen && c.Stream == h.a.stream && c.Level == frontier.Persisted && c.Seq >= h.a.seq {
					h.a.at[from] = now
				}
			}
			h.a.mu.Unlock()
		}
	}
	h.Handler.Frame(from, plane, frame)
}

// BenchmarkWaitOverhead measures the time from the arrival of the last ack
// a WaitFor on `all` needs to WaitFor returning, one message at a time over
// loopback gRPC between three sites with real pebble. lazy=true runs the
// core with LazyFrontiers (no fsync between that ack and the waiter).
func BenchmarkWaitOverhead(b *testing.B) {
	for _, lazy := range []bool{false, true} {
		b.Run(fmt.Sprintf("lazy=%v", lazy), func(b *testing.B) {
			clock := &ackClock{}
			c := newGRPCCluster(b, []string{"a", "b", "c"}, grpcOptions{quiet: true,
				configure: func(cfg *stabilizer.Config) { cfg.Core.LazyFrontiers = lazy },
				wrap: func(site string, t stabilizer.Transport) stabilizer.Transport {
					if site != "a" {
						return t
					}
					clock.Transport = t
					return clock
				}})
			ctx := context.Background()
			n := c.Node("a")
			id := stabilizer.StreamID{Origin: "a", Name: "bench"}
			// Let the connections come up.
			a, err := n.Append(ctx, "bench", []byte("warm-up"))
			if err != nil {
				b.Fatal(err)
			}
			if err := n.WaitFor(ctx, id, "all", a.Seq); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				clock.expect(id, a.Seq+1)
				a, err = n.Append(ctx, "bench", []byte("x"))
				if err != nil {
					b.Fatal(err)
				}
				if err := n.WaitFor(ctx, id, "all", a.Seq); err != nil {
					b.Fatal(err)
				}
				done := time.Now()
				if t, ok := clock.last(2); ok {
					lat = append(lat, done.Sub(t))
				}
			}
			b.StopTimer()
			if len(lat) == 0 {
				b.Fatal("no ack arrivals observed")
			}
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(float64(len(lat))/float64(b.N), "observed")
		})
	}
}
