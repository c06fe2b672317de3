package natsps

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/stabilizer/stabilizer/test/bench/internal/peerapi"
	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
)

var regions = []string{"us-east-1", "eu-west-1", "ap-northeast-1"}

func freeAddrs(t *testing.T, n int) []string {
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// startCluster runs three servers in this process from the configuration
// files wanbench writes, and returns their client addresses by region.
func startCluster(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	addrs := freeAddrs(t, 2*len(regions))
	clients, routes := addrs[:len(regions)], addrs[len(regions):]
	out := map[string]string{}
	for i, r := range regions {
		var others []string
		for j, a := range routes {
			if j != i {
				others = append(others, a)
			}
		}
		conf := peerapi.NATSServer{Name: r, Listen: clients[i], Cluster: routes[i], Routes: others, StoreDir: filepath.Join(dir, r)}.Conf()
		path := filepath.Join(dir, r+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s:\n%s\n%v", path, conf, err)
		}
		if !opts.SyncAlways || opts.JetStreamUniqueTag != peerapi.NATSRegionTag || !opts.Cluster.NoAdvertise ||
			len(opts.Routes) != 2 || !opts.Tags.Contains(peerapi.NATSRegionTag+r) {
			t.Fatalf("config of %s: sync always %v, unique tag %q, no_advertise %v, %d routes, tags %v",
				r, opts.SyncAlways, opts.JetStreamUniqueTag, opts.Cluster.NoAdvertise, len(opts.Routes), opts.Tags)
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(20 * time.Second) {
			t.Fatalf("%s not ready", r)
		}
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		out[r] = clients[i]
	}
	return out
}

// TestNATS runs the bench's loads against a real three-server JetStream
// cluster on loopback: the stream's leader placed in each region in turn,
// a closed loop with subscribers whose consumers lead in their regions,
// and an asynchronous window with a subscriber that stalls.
func TestNATS(t *testing.T) {
	servers := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sys, err := Dial(ctx, Config{Servers: servers, ConsumerLeaders: ConsumersAtSubscriber, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := sys.CreateStream(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{regions[2], regions[0]} {
		if err := sys.PlaceLeader(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, err := sys.StreamLeader(ctx); err != nil || got != r {
			t.Fatalf("leader %q, %v; want %s", got, err, r)
		}
	}
	if err := sys.CreateTopic(ctx, psload.Topic{Name: "wan"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []psload.Topic{{Name: "a.b"}, {Name: "x", PublishAck: "audience"}, {Name: "x", Delivery: "majority"}} {
		if err := sys.CreateTopic(ctx, bad); err == nil {
			t.Errorf("CreateTopic(%+v) accepted", bad)
		}
	}

	subs := []psload.Sub{{Region: regions[1], Topic: "wan", Durable: "loop-eu"}, {Region: regions[2], Topic: "wan", Durable: "loop-ap"}}
	res, err := psload.Loop(ctx, sys, psload.LoopConfig{Regions: regions, Topics: []string{"wan"}, Subscribers: subs, Warmup: 1, Count: 3, Bytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Pubs {
		if p.Err != "" {
			t.Errorf("publish from %s: %s", p.Region, p.Err)
		}
	}
	if len(res.Pubs) != 12 || len(res.Dels) != 18 || len(res.Missing)+len(res.SubErrors) != 0 {
		t.Fatalf("%d publishes, %d deliveries, missing %v, errors %v; want 12, 18", len(res.Pubs), len(res.Dels), res.Missing, res.SubErrors)
	}
	for _, s := range subs {
		if got, err := sys.ConsumerLeader(ctx, s.Durable); err != nil || got != s.Region {
			t.Errorf("consumer %s: leader %q, %v; want %s", s.Durable, got, err, s.Region)
		}
	}

	asubs := []psload.Sub{{Region: regions[0], Topic: "tput", Durable: "tput-us"}, {Region: regions[1], Topic: "tput", Durable: "tput-eu"}}
	ares, err := psload.Async(ctx, sys, psload.AsyncConfig{Regions: regions, Topic: "tput", InFlight: 16, Bytes: 256, Window: 400 * time.Millisecond,
		Subscribers: asubs, Stall: &psload.Stall{Subscriber: 1, After: 100 * time.Millisecond, For: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if ares.Total == 0 || ares.Errors != 0 || len(ares.SubErrors) != 0 {
		t.Fatalf("async: %d acked, %d errors (%s), subscriber errors %v", ares.Total, ares.Errors, ares.FirstError, ares.SubErrors)
	}
	for _, s := range ares.Subs {
		if s.Lag != 0 {
			t.Errorf("%s: lag %d of %d", s.Sub, s.Lag, ares.Total)
		}
	}
	t.Logf("async: %d acked, %.0f/s in the window, p50 %.1f ms; subscribers %+v", ares.Total, ares.PerS, ares.P50Ms, ares.Subs)
	if err := sys.DeleteStream(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.StreamLeader(ctx); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("stream info after delete: %v", err)
	}
}
