package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"google.golang.org/grpc/status"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/test/bench/internal/loadgen"
	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// otherContinentName is the named predicate "persisted on at least one site
// of another continent than the writer's".
const otherContinentName = "other_continent"

// otherContinent writes "one site on another continent" with group(): the
// second largest of the per-continent maxima of persisted. The writer's own
// continent is always the largest (an origin persists its messages before
// it sends them), so the second largest is the best any other continent
// reached. "" when the topology has fewer than two groups.
func otherContinent(topo *wan.Topology) string {
	var gs []string
	for _, g := range slices.Sorted(maps.Keys(topo.Groups)) {
		gs = append(gs, fmt.Sprintf("max(persisted(group(%q)))", g))
	}
	if len(gs) < 2 {
		return ""
	}
	return "kth_max(2, [" + strings.Join(gs, ", ") + "])"
}

// loopKind is one kind of write in a closed loop: a system and predicate,
// with its bound per region and how a region's client writes a record.
type loopKind struct {
	system, predicate, source string
	bound                     map[string]time.Duration
	put                       func(ctx context.Context, region string, rec workload.Record) error
}

// maxRowErrors ends a (kind, region) after this many failed writes, so that
// a stalled system costs a few timeouts, not the whole run.
const maxRowErrors = 5

// closedLoop runs one client per region; each writes the platform's records
// (workload.go) one at a time, cycling through the kinds, warmup unmeasured
// writes per kind first, then perKind measured ones.
func closedLoop(ctx context.Context, regions []string, kinds []loopKind, perKind, warmup int, progress io.Writer, label string) []*benchRow {
	rows := map[[2]int]*benchRow{}
	var order []*benchRow
	for k, kd := range kinds {
		for i, r := range regions {
			b, ok := kd.bound[r]
			row := &benchRow{Phase: phaseWAN, System: kd.system, Predicate: kd.predicate, Region: r, Source: kd.source, BoundMs: -1}
			if ok {
				row.BoundMs = ms(b)
			}
			rows[[2]int{k, i}] = row
			order = append(order, row)
		}
	}
	bar := progressbar.NewOptions(perKind*len(kinds)*len(regions), progressbar.OptionSetWriter(progress),
		progressbar.OptionSetDescription(label), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionShowElapsedTimeOnFinish())
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := workload.NewGen(region, uint64(1000+i))
			for n := 0; n < (warmup+perKind)*len(kinds); n++ {
				k := n % len(kinds)
				row := rows[[2]int{k, i}]
				mu.Lock()
				dead := row.Errors >= maxRowErrors
				mu.Unlock()
				if dead {
					if n/len(kinds) >= warmup {
						_ = bar.Add(1)
					}
					continue
				}
				rec := g.Next()
				start := time.Now()
				err := kinds[k].put(ctx, region, rec)
				d := time.Since(start)
				if ctx.Err() != nil {
					return
				}
				if n/len(kinds) < warmup && err == nil {
					continue
				}
				mu.Lock()
				if err != nil {
					row.Errors++
					if row.FirstError == "" {
						row.FirstError = status.Convert(err).Message()
					}
				} else {
					row.Ops++
					row.lat = append(row.lat, d)
				}
				mu.Unlock()
				if n/len(kinds) >= warmup {
					_ = bar.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	_ = bar.Finish()
	fmt.Fprintln(progress)
	for _, r := range order {
		r.finish()
	}
	return order
}

func boundsFor(topo *wan.Topology, f func(region string) time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range topo.Sites {
		out[s] = f(s)
	}
	return out
}

// benchOursWAN starts our sites on the WAN and runs the predicate rows and
// the linearizable row.
func benchOursWAN(ctx context.Context, o benchOptions, topo *wan.Topology, dir string, res *benchResults) (err error) {
	oc := otherContinent(topo)
	preds := map[string]string{}
	if oc != "" {
		preds[otherContinentName] = oc
	}
	// wanbed up reserves the sites' ports before the WAN process starts
	// its proxies on ports of the kernel's choosing, which now and then
	// take one of them; a fresh start then usually works.
	var bed *testbed
	for attempt := 1; ; attempt++ {
		bed, err = wanbedUp(o.topology, fmt.Sprintf("%s-%d", dir, attempt), preds, o.progress)
		if err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(o.progress, "starting the sites failed (%v); again\n", firstLine(err.Error()))
	}
	defer bed.down(o.progress)
	clients := map[string]*kvclient.Client{}
	for _, s := range bed.sites {
		c, err := kvclient.Dial(s.Client)
		if err != nil {
			return err
		}
		defer c.Close()
		clients[s.Site] = c
	}
	schema := &frontier.Schema{Sites: topo.Sites, Groups: topo.Groups}
	var kinds []loopKind
	for _, p := range []string{"local", "one_remote", "majority", "all", otherContinentName} {
		src := frontier.Builtins[p]
		if p == otherContinentName {
			if oc == "" {
				res.skipRow(phaseWAN, sysOurs, p, "", "skipped: the topology has fewer than two groups (continents)")
				continue
			}
			src = oc
		}
		cp, err := frontier.Compile(src, schema)
		if err != nil {
			return fmt.Errorf("predicate %s: %w", p, err)
		}
		k := loopKind{system: sysOurs, predicate: p, bound: boundsFor(topo, func(r string) time.Duration { return workload.Bound(topo, cp, schema, r) }),
			put: func(ctx context.Context, region string, rec workload.Record) error {
				_, err := clients[region].Put(ctx, rec.Key, rec.Value, p, 10*time.Second)
				return err
			}}
		if p == otherContinentName {
			k.source = oc
		}
		kinds = append(kinds, k)
	}
	res.note("Our KV: one stabilizerd per region behind the emulated links (`wanbed up`), each client writing to its own region's site; %s = `%s`.", otherContinentName, oc)
	leader := topo.Sites[0]
	if o.skip["lin"] {
		res.skipRow(phaseWAN, sysLin, "linearizable", "", "skipped: --skip lin")
	} else if why := waitLinLeader(ctx, clients[leader], leader, o.progress); why != "" {
		res.skipRow(phaseWAN, sysLin, "linearizable", "", "skipped: "+why)
		res.note("Our linearizable mode skipped on the WAN: %s.", why)
	} else {
		kinds = append(kinds, loopKind{system: sysLin, predicate: "linearizable",
			bound: boundsFor(topo, func(r string) time.Duration { return workload.RaftBound(topo, leader, r) }),
			put: func(ctx context.Context, region string, rec workload.Record) error {
				_, err := clients[region].Put(ctx, "/lin/"+rec.Key, rec.Value, "", 10*time.Second)
				return err
			}})
		res.note("Our linearizable mode: keys under /lin/ in one Raft group of all %d sites (go.etcd.io/raft/v3, log in pebble), preferred leader %s, writes from a non-leader site forwarded to the leader.", len(topo.Sites), leader)
	}
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	rows := closedLoop(ctx, topo.Sites, kinds, o.writes, o.warmup, o.progress, "stabilizer")
	res.Rows = append(res.Rows, rows...)
	printBenchRows(o.progress, rows)
	return nil
}

// waitLinLeader waits until the linearizable mode answers a write and its
// Raft group is led by leader; it returns why not, or "".
func waitLinLeader(ctx context.Context, c *kvclient.Client, leader string, progress io.Writer) string {
	deadline := time.Now().Add(45 * time.Second)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := c.Admin.Status(ctx, &kvpb.StatusRequest{})
		switch {
		case err != nil:
			last = status.Convert(err).Message()
		case st.Lin == nil:
			return "not wired: the sites serve no linearizable mode"
		case st.Lin.Leader != leader:
			last = fmt.Sprintf("Raft leader is %q, waiting for %s", st.Lin.Leader, leader)
		default:
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := c.Put(pctx, "/lin/bench/probe", []byte("probe"), "", 10*time.Second)
			cancel()
			if err == nil {
				fmt.Fprintf(progress, "linearizable mode: leader %s (term %d)\n", st.Lin.Leader, st.Lin.Term)
				return ""
			}
			last = status.Convert(err).Message()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "no write through the linearizable mode with leader " + leader + " within 45s: " + last
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func printBenchRows(w io.Writer, rows []*benchRow) {
	fmt.Fprintf(w, "%-16s %-16s %-15s %6s %8s %8s %8s %8s\n", "SYSTEM", "PREDICATE", "REGION", "OPS", "P50", "P99", "BOUND", "ERRORS")
	for _, r := range rows {
		fmt.Fprintf(w, "%-16s %-16s %-15s %6d %8.1f %8.1f %8.1f %8d\n", r.System, r.Predicate, r.Region, r.Ops, r.P50ms, r.P99ms, r.BoundMs, r.Errors)
	}
}

// tputRun runs inflight closed-loop writers against put for warm plus dur
// and counts the writes that completed within the measured window.
func tputRun(ctx context.Context, system, predicate string, inflight int, warm, dur time.Duration, valueBytes int,
	put loadgen.Put) *benchRow {
	row := &benchRow{Phase: phaseTput, System: system, Predicate: predicate, Region: "loopback", InFlight: inflight}
	res := loadgen.ClosedLoop(ctx, inflight, valueBytes, warm, dur, put)
	row.lat = res.Lat
	if res.FirstError != nil {
		row.FirstError = status.Convert(res.FirstError).Message()
	}
	row.Ops = len(row.lat)
	row.Errors = res.Errors
	row.OpsPerS = float64(row.Ops) / dur.Seconds()
	row.finish()
	return row
}

// benchThroughput runs the loopback throughput rows of every system.
func benchThroughput(ctx context.Context, o benchOptions, dir string, res *benchResults, step func(string, ...any)) error {
	sites := []string{"us-east-1", "eu-west-1", "ap-northeast-1"}
	step("throughput: our KV (majority) and linearizable mode, %d sites on loopback", len(sites))
	if err := benchOursTput(ctx, o, filepath.Join(dir, "stabilizer"), sites, res); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if o.skip["etcd"] {
		res.skipRow(phaseTput, sysEtcd, "linearizable", "loopback", "skipped: --skip etcd")
	} else {
		step("throughput: etcd, 3 members on loopback")
		if err := benchEtcdTput(ctx, o, filepath.Join(dir, "etcd"), res); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if o.skip["nats"] {
		res.skipRow(phaseTput, sysNATS, "R3", "loopback", "skipped: --skip nats")
	} else {
		step("throughput: NATS JetStream KV, 3 servers on loopback, R3, sync_interval: always")
		if err := benchNATSTput(ctx, o, filepath.Join(dir, "nats"), res); err != nil {
			return err
		}
	}
	return nil
}

func benchOursTput(ctx context.Context, o benchOptions, dir string, sites []string, res *benchResults) error {
	ss, ps, err := loopbackSites(dir, sites, o.progress)
	defer stopAll(ps, o.progress)
	if err != nil {
		return err
	}
	if err := waitJoined(ctx, ss); err != nil {
		return err
	}
	for _, c := range o.conns {
		if err := benchOursConns(ctx, o, c, ss, res); err != nil {
			return err
		}
	}
	res.note("Throughput, our KV: %d stabilizerd on loopback without the WAN emulator; `majority` = majority(persisted(sites)): the write is fsynced at a majority of sites before its ack. Writers spread evenly over the sites and over %s gRPC connections per site (each count in turn, as for every system); %d-byte values; %s measured after %s of warm-up. `stabilizer`: kvclient.Client as shipped, each client's writes pipelined on one Writes stream (the site appends what has arrived together; each write still gets its own seq and answer); `stabilizer-unary`: kvclient.Client with Unary, one unary request per write, as the peers' clients send.",
		len(sites), joinInts(o.conns), o.valueBytes, o.tputDuration, o.tputDuration/5)
	return nil
}

// benchOursConns runs our throughput rows with conns client connections
// per site.
func benchOursConns(ctx context.Context, o benchOptions, conns int, ss []siteInfo, res *benchResults) error {
	dial := func(unary bool) ([]*kvclient.Client, error) {
		var cls []*kvclient.Client
		for range conns {
			for _, s := range ss {
				cl, err := kvclient.Dial(s.Client)
				if err != nil {
					return cls, err
				}
				cl.Unary = unary
				cls = append(cls, cl)
			}
		}
		return cls, nil
	}
	clients, err := dial(false)
	unary, err2 := dial(true)
	defer func() {
		for _, cl := range append(clients, unary...) {
			_ = cl.Close()
		}
	}()
	if err := errors.Join(err, err2); err != nil {
		return err
	}
	warm := o.tputDuration / 5
	type variant struct {
		system, predicate, prefix, wait string
		clients                         []*kvclient.Client
	}
	vs := []variant{{sysOurs, "majority", "", "majority", clients}, {sysOursUnary, "majority", "", "majority", unary}}
	if o.skip["lin"] {
		res.skipRow(phaseTput, sysLin, "linearizable", "loopback", "skipped: --skip lin")
	} else if why := waitLinLeader(ctx, clients[0], ss[0].Site, o.progress); why != "" {
		res.skipRow(phaseTput, sysLin, "linearizable", "loopback", "skipped: "+why)
	} else {
		vs = append(vs, variant{sysLin, "linearizable", "/lin/", "", clients})
	}
	for _, v := range vs {
		for _, n := range o.inflight {
			row := tputRun(ctx, v.system, v.predicate, n, warm, o.tputDuration, o.valueBytes, func(ctx context.Context, w int, key string, value []byte) error {
				_, err := v.clients[w%len(v.clients)].Put(ctx, v.prefix+key, value, v.wait, 10*time.Second)
				return err
			})
			row.Conns = conns
			res.Rows = append(res.Rows, row)
			printTputRow(o.progress, row)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// waitJoined returns once every site took a write: a fresh site holds its
// first appends until it heard from every peer (stabilizer's
// JoinTimeout), which a throughput window must not measure.
func waitJoined(ctx context.Context, ss []siteInfo) error {
	for _, s := range ss {
		cl, err := kvclient.Dial(s.Client)
		if err != nil {
			return err
		}
		err = retry(ctx, time.Minute, func() error {
			_, err := cl.Put(ctx, "bench/joined/"+s.Site, []byte("1"), "local", 5*time.Second)
			return err
		})
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s took no write within a minute of starting: %w", s.Site, err)
		}
	}
	return nil
}

func printTputRow(w io.Writer, r *benchRow) {
	fmt.Fprintf(w, "%-18s %-12s %4d in flight, %d conns/site: %8.0f writes/s  p50 %.1f ms  p99 %.1f ms  errors %d\n",
		r.System, r.Predicate, r.InFlight, r.Conns, r.OpsPerS, r.P50ms, r.P99ms, r.Errors)
}
