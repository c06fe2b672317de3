package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"

	"github.com/stabilizer/stabilizer/test/bench/internal/peerapi"
	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
	"github.com/stabilizer/stabilizer/wan"
)

// NATS JetStream in the pub/sub bench.
//
// On the WAN, one nats-server per region, each in a network namespace of
// its own, like etcd's members (etcd.go): server i listens for clients and
// routes on 10.78.i.2 inside its namespace and advertises its route
// address as 10.78.100.(i+1):6222, where a wan.Demux on the host tells the
// dialling server by its source address and forwards over the emulated
// link. NATS solicits routes to every configured and gossiped route URL,
// and pools three connections per pair (its default); since every URL it
// knows is a Demux, all of them cross the links. The load clients
// (benchpeers nats-ps, on the host) reach their region's server directly,
// as ours reach their own site, and are told of no other server
// (no_advertise).
//
// The servers' configuration (peerapi.NATSServer.Conf) follows the NATS
// maintainers' advice for a stream spanning regions: one cluster of
// routes, each server tagged with its region, unique_tag on it, R3
// streams; with sync_interval: always every replica fsyncs before it acks.

const natsPSStream = "PUBSUB"

// natsJob runs one `benchpeers nats-ps` job, its file named name in dir.
func natsJob(ctx context.Context, o psOptions, peers, dir, name string, job peerapi.PSJob) (*peerapi.PSResult, error) {
	b, err := json.MarshalIndent(job, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	var out peerapi.PSResult
	if err := runPeers(ctx, peers, o.progress, &out, "nats-ps", "--in", path); err != nil {
		return nil, err
	}
	return &out, nil
}

func benchNATSPSWAN(ctx context.Context, o psOptions, topo *wan.Topology, dir string, res *psResults) error {
	skip := func(why string) error {
		skipNATSWAN(res, topo, o.subscribers, "skipped: "+why)
		res.note("NATS JetStream on the WAN skipped: %s.", why)
		fmt.Fprintf(o.progress, "NATS on the WAN skipped: %s\n", why)
		return nil
	}
	peers, err := findBenchPeers()
	if err != nil {
		return skip(err.Error())
	}
	if os.Geteuid() != 0 {
		return skip(fmt.Sprintf("network namespaces need root, and this runs as uid %d", os.Geteuid()))
	}
	if len(topo.Sites) > 99 {
		return skip("more than 99 sites")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bed, err := newNetnsBed("nats", natsOctet, len(topo.Sites), o.progress)
	if err != nil {
		return skip("this machine does not allow network namespaces with veth pairs: " + err.Error())
	}
	defer bed.close()
	n, err := wan.NewNetwork(wan.Config{Topology: topo})
	if err != nil {
		return err
	}
	defer n.Close()
	sources := map[string]string{}
	for i, s := range topo.Sites {
		sources[bed.memberAddr(i)] = s
	}
	for i, s := range topo.Sites {
		others := maps.Clone(sources)
		delete(others, bed.memberAddr(i))
		d, err := n.Demux(wan.DemuxConfig{Listen: bed.advertiseAddr(i) + ":6222", To: s, Target: bed.memberAddr(i) + ":6222", Sources: others})
		if err != nil {
			return skip("cannot listen on the servers' advertised route addresses: " + err.Error())
		}
		defer d.Close()
	}
	servers := map[string]string{}
	var procs []*proc
	defer func() { stopAll(procs, o.progress) }()
	for i, s := range topo.Sites {
		var routes []string
		for j := range topo.Sites {
			if j != i {
				routes = append(routes, bed.advertiseAddr(j)+":6222")
			}
		}
		conf := peerapi.NATSServer{Name: s, Listen: bed.memberAddr(i) + ":4222", Cluster: bed.memberAddr(i) + ":6222",
			Advertise: bed.advertiseAddr(i) + ":6222", Routes: routes, StoreDir: filepath.Join(dir, s)}.Conf()
		path := filepath.Join(dir, s+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return err
		}
		p, err := start("ip", filepath.Join(dir, s+".log"), "netns", "exec", bed.ns[i], peers, "nats-server", "--config", path)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		servers[s] = bed.memberAddr(i) + ":4222"
	}
	fmt.Fprintf(o.progress, "nats: %d servers in namespaces %s; creating the R3 stream\n", len(topo.Sites), strings.Join(bed.ns, ", "))
	if _, err := natsJob(ctx, o, peers, dir, "create", peerapi.PSJob{Servers: servers, Stream: natsPSStream, Create: true}); err != nil {
		return skip(fmt.Sprintf("no JetStream stream on the WAN cluster (%v; server logs in %s)", err, dir))
	}
	var subs []psload.Sub
	for _, s := range topo.Sites {
		subs = append(subs, psload.Sub{Region: s, Topic: topicNATSWAN, Durable: "wan-" + s})
	}
	for _, l := range topo.Sites {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(o.progress, "nats: stream leader to %s, %d publishes per region\n", l, o.publishes)
		out, err := natsJob(ctx, o, peers, dir, "wan-"+l, peerapi.PSJob{Servers: servers, Stream: natsPSStream, Leader: l, ConsumerLeaders: o.natsConsumers,
			Loop: &psload.LoopConfig{Regions: topo.Sites, Topics: []string{topicNATSWAN}, Subscribers: subs, Warmup: o.warmup, Count: o.publishes, Bytes: o.bytes}})
		if err != nil || out.Loop == nil {
			for _, s := range topo.Sites {
				res.add(&psRow{Phase: psPublish, System: sysNATS, Predicate: predNATS, Region: s, Leader: l, BoundMs: ms(natsBound(topo, topo.Sites, l, s)), Skipped: fmt.Sprintf("failed: %v", err)})
			}
			continue
		}
		pub := pubRows(psPublish, sysNATS, l, out.Loop.Pubs, map[string]string{topicNATSWAN: predNATS}, natsPubBound(topo, l))
		del := delRows(sysNATS, l, out.Loop.Dels, map[string]string{topicNATSWAN: predNATS}, noDelBound)
		if out.LeaderBefore != l || out.LeaderAfter != l {
			for _, r := range append(pub, del...) {
				r.Note = fmt.Sprintf("the stream's leader was %s when the load began and %s when it ended", out.LeaderBefore, out.LeaderAfter)
			}
		}
		for d, at := range out.ConsumerLeaders {
			want := strings.TrimPrefix(d, "wan-")
			if o.natsConsumers == "stream" {
				want = l
			}
			if at != want {
				res.note("NATS, leader %s: durable consumer %s was led at %s when the load ended, not %s.", l, d, at, want)
			}
		}
		res.add(pub...)
		res.add(del...)
		printPSRows(o.progress, pub)
		noteLoop(res, sysNATS, l, out.Loop)
	}
	res.note("NATS JetStream %s on the WAN: one server per region (benchpeers nats-server, nats-server embedded, each its own process), each in its own network namespace so that every route crosses the emulated links (wan.Demux by source address; see pubsub_nats.go); "+
		"configured as the NATS maintainers advise for a stream spanning regions (github.com/ripienaar/multi-region-nats): one cluster of routes, server_tags region:<region>, jetstream unique_tag \"region:\", an R3 file-backed stream; "+
		"sync_interval: always, so that every replica fsyncs each Raft entry before it counts (nats-server server/opts.go; the stream's Raft WAL is a filestore with SyncAlways, server/jetstream_cluster.go). "+
		"The stream's leader moved to each region in turn by leader step-down with placement.preferred ($JS.API.STREAM.LEADER.STEPDOWN, server/jetstream_api.go) and checked with the stream's info before and after each load; "+
		"a durable pull consumer per region (explicit acks, deliver new, R3 like the stream, ack wait 30 s and max ack pending 1000 as NATS's defaults), its leader moved the same way %s; "+
		"a replicated consumer with acks sends a delivery only once its delivered state has a quorum (server/consumer.go, replicateDeliveries), a round trip of the consumer's own Raft group on top of the stream's commit. "+
		"A closed-loop publisher per region to its own server (nats.go jetstream Publish, which waits for the stream's ack), %d measured publishes after %d of warm-up, all regions at once.",
		natsServerVersion, map[string]string{"subscriber": "to its subscriber's region", "stream": "to the stream's leader"}[o.natsConsumers], o.publishes, o.warmup)
	if o.skip["degraded"] {
		skipNATSDegraded(res, o.subscribers, "skipped: --skip degraded")
		return nil
	}
	return benchNATSDegraded(ctx, o, topo, n, peers, dir, servers, res)
}

// natsServerVersion is the nats-server benchpeers embeds (test/bench/go.mod).
const natsServerVersion = "v2.15.2"

func skipNATSDegraded(res *psResults, subscribers []string, why string) {
	for _, s := range subscribers {
		for _, c := range []string{condHealthy, condDegraded} {
			res.add(&psRow{Phase: psDegraded, System: sysNATS, Predicate: predNATS, Region: s, Leader: subscribers[0], Condition: c, BoundMs: -1, Skipped: why})
		}
	}
}

// benchNATSDegraded publishes from the subscribers' regions, the stream led
// in the first of them, while the links of the regions without
// subscribers are slowed, midway.
func benchNATSDegraded(ctx context.Context, o psOptions, topo *wan.Topology, n *wan.Network, peers, dir string, servers map[string]string, res *psResults) error {
	leader := o.subscribers[0]
	startAt := time.Now().Add(psSetupAllowance)
	set := func(slow bool) error {
		return forDegradedLinks(topo, res.Degraded, func(from, to string, base wan.LinkConfig) error {
			c := base
			if slow {
				c.Delay, c.Bandwidth = base.Delay+o.degradeAdd, o.degradeBW
			}
			l, err := n.Link(from, to)
			if err != nil {
				return err
			}
			return l.Set(c)
		})
	}
	var out *peerapi.PSResult
	before, after, err := degradeDuring(ctx, startAt.Add(o.degradeWindow), func() error { return set(true) }, func() error { return set(false) },
		func() error {
			return timedBar(ctx, o.progress, "nats, degraded link", psSetupAllowance+2*o.degradeWindow, func() (err error) {
				out, err = natsJob(ctx, o, peers, dir, "degraded", peerapi.PSJob{Servers: servers, Stream: natsPSStream, Leader: leader,
					Loop: &psload.LoopConfig{Regions: o.subscribers, Topics: []string{topicNATSDeg}, Warmup: o.warmup, Duration: 2 * o.degradeWindow, StartAt: startAt, Bytes: o.bytes}})
				return err
			})
		})
	if err != nil {
		skipNATSDegraded(res, o.subscribers, "failed: "+err.Error())
		return nil
	}
	rows := degradedRows(sysNATS, leader, out.Loop.Pubs, map[string]string{topicNATSDeg: predNATS}, before, after)
	if out.LeaderBefore != leader || out.LeaderAfter != leader {
		for _, r := range rows {
			r.Note = fmt.Sprintf("the stream's leader was %s when the load began and %s when it ended", out.LeaderBefore, out.LeaderAfter)
		}
	}
	res.add(rows...)
	res.note("NATS, degraded link: the stream led in %s, publishers in %v, links changed in the emulator (wan.Link.Set) as for ours.", leader, o.subscribers)
	return nil
}

// benchNATSPSLoopback runs three NATS servers on loopback: async
// throughput at each --inflight, then the memory phase.
func benchNATSPSLoopback(ctx context.Context, o psOptions, topo *wan.Topology, dir string, res *psResults) error {
	peers, err := findBenchPeers()
	if err != nil {
		skipLoopback(res, sysNATS, o, topo, "skipped: "+err.Error())
		return nil
	}
	sites := topo.Sites[:3]
	ports, err := local.FreePorts(2 * len(sites))
	if err != nil {
		return err
	}
	clients, routes := ports[:len(sites)], ports[len(sites):]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	servers, pids := map[string]string{}, map[string]int{}
	var procs []*proc
	defer func() { stopAll(procs, o.progress) }()
	for i, s := range sites {
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		conf := peerapi.NATSServer{Name: s, Listen: clients[i], Cluster: routes[i], Routes: others, StoreDir: filepath.Join(dir, s)}.Conf()
		path := filepath.Join(dir, s+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return err
		}
		p, err := start(peers, filepath.Join(dir, s+".log"), "nats-server", "--config", path)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		servers[s], pids[s] = clients[i], p.cmd.Process.Pid
	}
	fmt.Fprintf(o.progress, "nats: %d servers on loopback (%s)\n", len(sites), dir)
	run := func(cfg psload.AsyncConfig) (*psload.AsyncResult, error) {
		stream := strings.ToUpper(strings.ReplaceAll(cfg.Topic, "-", "_"))
		out, err := natsJob(ctx, o, peers, dir, cfg.Topic, peerapi.PSJob{Servers: servers, Stream: stream, Create: true, Delete: true, Async: &cfg})
		if err != nil {
			return nil, err
		}
		return out.Async, nil
	}
	if err := loopbackPhases(ctx, o, sites, sysNATS, predNATS, pids, run, res); err != nil {
		return err
	}
	res.note("NATS on loopback: 3 servers (separate processes) configured as on the WAN, a fresh R3 stream per run; nats.go jetstream PublishAsync from a client per server sharing the window in flight; a durable pull consumer per server acking each delivery.")
	return nil
}

// printPSRows prints rows as they are measured.
func printPSRows(w io.Writer, rows []*psRow) {
	fmt.Fprintf(w, "%-16s %-24s %-15s %-15s %6s %8s %8s %8s %6s\n", "SYSTEM", "PREDICATE", "LEADER", "REGION", "OPS", "P50", "P99", "BOUND", "ERRORS")
	for _, r := range rows {
		fmt.Fprintf(w, "%-16s %-24s %-15s %-15s %6d %8.1f %8.1f %8.1f %6d\n", r.System, r.Predicate, dash(r.Leader), r.where(), r.Ops, r.P50ms, r.P99ms, r.BoundMs, r.Errors)
	}
}
