package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"

	"github.com/stabilizer/stabilizer/test/bench/internal/peerapi"
	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// A real etcd cluster through the emulated WAN.
//
// Stock etcd cannot be handed per-pair addresses: every member dials the
// same advertised peer URL of a peer, so a proxy on that URL cannot know
// which link (from which region) a connection belongs to. So each member
// runs in its own network namespace (`benchpeers etcd-member`, started with
// `ip netns exec`), joined to the host by a veth pair: member i listens on
// 10.77.i.2 inside its namespace, and advertises the peer URL
// 10.77.100.(i+1):2380, an address of the host. A wan.Demux on the host
// accepts there, tells the dialling member by its source address (10.77.k.2
// is member k), and forwards the connection over the emulated k -> i link
// to member i, charging the TCP handshake's round trip first. The
// addresses exist only inside the namespaces and on their veths, which the
// bench makes and removes.
//
// Clients sit in their member's region: they reach its client URL directly.

// netnsBed is the namespaces, veths and host addresses of a peer's
// members (etcd's, NATS's): member i listens on 10.<octet>.i.2 inside its
// namespace, and the host holds 10.<octet>.100.(i+1), where a wan.Demux
// accepts for it.
type netnsBed struct {
	ns, veth []string
	octet    int
	log      io.Writer
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// memberAddr is member i's address inside its namespace.
func (b *netnsBed) memberAddr(i int) string { return fmt.Sprintf("10.%d.%d.2", b.octet, i) }

// advertiseAddr is the host's address for member i.
func (b *netnsBed) advertiseAddr(i int) string { return fmt.Sprintf("10.%d.100.%d", b.octet, i+1) }

// Address blocks of the peers' namespaces, 10.<octet>.0.0/16, apart so
// that the two benches can run side by side.
const (
	etcdOctet = 77
	natsOctet = 78
)

// newNetnsBed makes one namespace per member of the peer kind ("etcd",
// "nats"), in 10.<octet>.0.0/16; on error it removes what it made and the
// error says what the machine refused.
func newNetnsBed(kind string, octet, n int, log io.Writer) (*netnsBed, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("the ip command (iproute2) is not installed")
	}
	b := &netnsBed{octet: octet, log: log}
	tag := os.Getpid() % 100000
	for i := range n {
		ns := fmt.Sprintf("wanbed-%s-%d-%d", kind, tag, i)
		host, peer := fmt.Sprintf("wb%c%dh%d", kind[0], tag, i), fmt.Sprintf("wb%c%dn%d", kind[0], tag, i)
		if err := ipCmd("netns", "add", ns); err != nil {
			b.close()
			return nil, err
		}
		b.ns = append(b.ns, ns)
		if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", peer); err != nil {
			b.close()
			return nil, err
		}
		b.veth = append(b.veth, host)
		for _, args := range [][]string{
			{"link", "set", peer, "netns", ns},
			{"addr", "add", fmt.Sprintf("10.%d.%d.1/24", octet, i), "dev", host},
			{"addr", "add", b.advertiseAddr(i) + "/32", "dev", host},
			{"link", "set", host, "up"},
			{"-n", ns, "addr", "add", b.memberAddr(i) + "/24", "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "route", "add", "default", "via", fmt.Sprintf("10.%d.%d.1", octet, i)},
		} {
			if err := ipCmd(args...); err != nil {
				b.close()
				return nil, err
			}
		}
	}
	return b, nil
}

func (b *netnsBed) close() {
	for _, v := range b.veth {
		if err := ipCmd("link", "del", v); err != nil {
			fmt.Fprintln(b.log, err)
		}
	}
	for _, ns := range b.ns {
		if err := ipCmd("netns", "del", ns); err != nil {
			fmt.Fprintln(b.log, err)
		}
	}
	b.veth, b.ns = nil, nil
}

// etcdCluster is a running set of members.
type etcdCluster struct {
	names   []string
	clients []string // client address per member
	procs   []*proc
}

// findBenchPeers looks for the benchpeers binary (etcd and NATS) beside
// wanbench, then on PATH.
func findBenchPeers() (string, error) { return findBinary("benchpeers") }

// startEtcd writes each member's config and starts it, inside its
// namespace when ns is given.
func startEtcd(peers, dir string, names, listenPeer, advertisePeer, listenClient []string, ns []string, tickMs, electionMs uint) (*etcdCluster, error) {
	var ic []string
	for i, n := range names {
		ic = append(ic, n+"=http://"+advertisePeer[i])
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &etcdCluster{names: names}
	for i, n := range names {
		mc := peerapi.EtcdMember{Name: n, Dir: filepath.Join(dir, n), ListenPeer: "http://" + listenPeer[i], AdvertisePeer: "http://" + advertisePeer[i],
			ListenClient: "http://" + listenClient[i], AdvertiseClient: "http://" + listenClient[i], InitialCluster: strings.Join(ic, ","),
			TickMs: tickMs, ElectionMs: electionMs}
		b, _ := json.MarshalIndent(mc, "", "  ")
		path := filepath.Join(dir, n+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return c, err
		}
		bin, args := peers, []string{"etcd-member", "--config", path}
		if ns != nil {
			bin, args = "ip", append([]string{"netns", "exec", ns[i], peers}, args...)
		}
		p, err := start(bin, filepath.Join(dir, n+".log"), args...)
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, p)
		c.clients = append(c.clients, listenClient[i])
	}
	return c, nil
}

func (c *etcdCluster) endpoints(named bool) string {
	var eps []string
	for i, a := range c.clients {
		if named {
			a = c.names[i] + "=" + a
		}
		eps = append(eps, a)
	}
	return strings.Join(eps, ",")
}

// runPeers runs benchpeers with args, its stderr going to progress, and
// decodes its stdout into out.
func runPeers(ctx context.Context, peers string, progress io.Writer, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, peers, args...)
	cmd.Stderr = progress
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("benchpeers %s: %w", args[0], err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("benchpeers %s: %w: %q", args[0], err, b)
	}
	return nil
}

func fill(r *benchRow, p peerapi.Result) {
	r.Ops, r.Errors, r.FirstError, r.OpsPerS = p.Ops, p.Errors, p.FirstError, p.OpsPerS
	for _, v := range p.LatMs {
		r.lat = append(r.lat, time.Duration(v*float64(time.Millisecond)))
	}
	r.finish()
}

// etcdWANTick and etcdWANElection follow etcd's tuning guide: the heartbeat
// interval around the largest round trip between members (255.7 ms on
// ec2-5), the election timeout ten times that.
const (
	etcdWANTickMs     = 250
	etcdWANElectionMs = 2500
)

const etcdVersion = "v3.7.3"

func benchEtcdWAN(ctx context.Context, o benchOptions, topo *wan.Topology, dir string, res *benchResults) error {
	skip := func(why string) error {
		res.skipRow(phaseWAN, sysEtcd, "linearizable", "", "skipped: "+why)
		res.note("etcd on the WAN skipped: %s.", why)
		fmt.Fprintf(o.progress, "etcd on the WAN skipped: %s\n", why)
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
	bed, err := newNetnsBed("etcd", etcdOctet, len(topo.Sites), o.progress)
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
	var listenPeer, advertise, listenClient []string
	for i, s := range topo.Sites {
		listenPeer = append(listenPeer, bed.memberAddr(i)+":2380")
		advertise = append(advertise, bed.advertiseAddr(i)+":2380")
		listenClient = append(listenClient, bed.memberAddr(i)+":2379")
		others := maps.Clone(sources)
		delete(others, bed.memberAddr(i))
		d, err := n.Demux(wan.DemuxConfig{Listen: advertise[i], To: s, Target: listenPeer[i], Sources: others})
		if err != nil {
			return skip("cannot listen on the members' advertised addresses: " + err.Error())
		}
		defer d.Close()
	}
	c, err := startEtcd(peers, dir, topo.Sites, listenPeer, advertise, listenClient, bed.ns, etcdWANTickMs, etcdWANElectionMs)
	if c != nil {
		defer stopAll(c.procs, o.progress)
	}
	if err != nil {
		return err
	}
	leader := topo.Sites[0]
	fmt.Fprintf(o.progress, "etcd: %d members in namespaces %s; waiting for a leader in %s\n", len(topo.Sites), strings.Join(bed.ns, ", "), leader)

	if err := runPeers(ctx, peers, o.progress, nil, "etcd-leader", "--endpoints", c.endpoints(true), "--want", leader); err != nil {
		return skip(fmt.Sprintf("the cluster had no leader in %s within 90s (%v; member logs in %s)", leader, err, dir))
	}

	fmt.Fprintf(o.progress, "etcd: leader %s\n", leader)
	load := peerapi.WANLoad{Warmup: o.warmup, Regions: topo.Sites, Timeout: 10 * time.Second,
		Members: map[string]string{}, Records: map[string][]peerapi.KeyValue{}}
	for i, s := range topo.Sites {
		load.Members[s] = c.clients[i]
		g := workload.NewGen(s, uint64(1000+i))
		for range o.warmup + o.writes {
			rec := g.Next()
			load.Records[s] = append(load.Records[s], peerapi.KeyValue{Key: rec.Key, Value: rec.Value})
		}
	}
	b, _ := json.Marshal(load)
	in := filepath.Join(dir, "load.json")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	var out []peerapi.Result
	if err := runPeers(lctx, peers, o.progress, &out, "etcd-wan-load", "--in", in); err != nil {
		return err
	}
	var rows []*benchRow
	for _, p := range out {
		r := &benchRow{Phase: phaseWAN, System: sysEtcd, Predicate: "linearizable", Region: p.Region, BoundMs: ms(workload.RaftBound(topo, leader, p.Region))}
		fill(r, p)
		rows = append(rows, r)
	}
	res.Rows = append(res.Rows, rows...)
	printBenchRows(o.progress, rows)
	res.note("etcd %s on the WAN: embedded go.etcd.io/etcd/server/v3, one member per region, each in its own network namespace; "+
		"peer traffic crosses the same emulated links, told apart by source address (wan.Demux; see test/bench/cmd/wanbench/etcd.go); leader moved to %s; "+
		"heartbeat %d ms, election timeout %d ms (etcd's tuning guide: heartbeat about the largest round trip, election timeout ten times it); "+
		"each region's client writes the same records as ours, to its own member, which forwards to the leader.", etcdVersion, leader, etcdWANTickMs, etcdWANElectionMs)
	return nil
}

// peerTput measures a peer system's throughput at each --inflight and
// --conns.
func peerTput(ctx context.Context, o benchOptions, peers, cmd, system, predicate, endpoints string, res *benchResults) error {
	for _, c := range o.conns {
		for _, n := range o.inflight {
			if err := peerTputRow(ctx, o, peers, cmd, system, predicate, endpoints, n, c, res); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

func peerTputRow(ctx context.Context, o benchOptions, peers, cmd, system, predicate, endpoints string, n, conns int, res *benchResults) error {
	warm := o.tputDuration / 5
	var p peerapi.Result
	err := runPeers(ctx, peers, o.progress, &p, cmd, "--endpoints", endpoints, "--inflight", fmt.Sprint(n), "--conns", fmt.Sprint(conns),
		"--value-bytes", fmt.Sprint(o.valueBytes), "--warm", warm.String(), "--duration", o.tputDuration.String())
	if err != nil {
		res.skipRow(phaseTput, system, predicate, "loopback", "failed: "+err.Error())
		return nil
	}
	row := &benchRow{Phase: phaseTput, System: system, Predicate: predicate, Region: "loopback", InFlight: n, Conns: conns}
	fill(row, p)
	res.Rows = append(res.Rows, row)
	printTputRow(o.progress, row)
	return nil
}

// benchEtcdTput runs a 3-member etcd on loopback and measures writes/s.
func benchEtcdTput(ctx context.Context, o benchOptions, dir string, res *benchResults) error {
	peers, err := findBenchPeers()
	if err != nil {
		res.skipRow(phaseTput, sysEtcd, "linearizable", "loopback", "skipped: "+err.Error())
		return nil
	}
	names := []string{"us-east-1", "eu-west-1", "ap-northeast-1"}
	ports, err := local.FreePorts(2 * len(names))
	if err != nil {
		return err
	}
	peerAddrs, clientsAt := ports[:len(names)], ports[len(names):]
	c, err := startEtcd(peers, dir, names, peerAddrs, peerAddrs, clientsAt, nil, 100, 1000)
	if c != nil {
		defer stopAll(c.procs, o.progress)
	}
	if err != nil {
		return err
	}
	if err := runPeers(ctx, peers, o.progress, nil, "etcd-leader", "--endpoints", c.endpoints(true), "--timeout", "60s"); err != nil {
		res.skipRow(phaseTput, sysEtcd, "linearizable", "loopback", fmt.Sprintf("skipped: no leader within 60s: %v", err))
		return nil
	}
	if err := peerTput(ctx, o, peers, "etcd-tput", sysEtcd, "linearizable", c.endpoints(false), res); err != nil {
		return err
	}
	res.note("Throughput, etcd %s: 3 embedded members (separate processes) on loopback, default heartbeat 100 ms and election 1000 ms; etcd fsyncs its WAL at the leader and at each follower before a write commits. Writers spread evenly over the members (followers forward to the leader) and over %s client connections per member (each count in turn), clients in their own process (benchpeers).", etcdVersion, joinInts(o.conns))
	return nil
}
