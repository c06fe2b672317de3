package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
	"github.com/stabilizer/stabilizer/wan"
)

// `wanbench pubsub`: our pub/sub against NATS JetStream, issue 16. This
// file runs the phases and holds what both systems share; pubsub_ours.go
// drives ours (and is where our SDK plugs in), pubsub_nats.go NATS,
// psresults.go makes rows and evaluates the targets, psreport.go and
// psplots.go write the report.

// psOptions are the flags of `wanbench pubsub`.
type psOptions struct {
	topology string
	out      string
	// publishes and warmup per (system, predicate or leader, region) in
	// the closed loops on the WAN.
	publishes, warmup int
	// subscribers are the audience's subscriber regions.
	subscribers []string
	// degradeWindow is how long the degraded phase publishes on healthy
	// links, and again on degraded ones; degradeAdd and degradeBW what the
	// slowed links get.
	degradeWindow time.Duration
	degradeAdd    time.Duration
	degradeBW     wan.Bandwidth
	// Loopback throughput: each run's warm-up and measured window, the
	// publishes in flight, the message size.
	tputWarm, tputWindow time.Duration
	inflight             []int
	bytes                int
	// The memory phase: publishing before, during and after a subscriber's
	// stall; RSS sampled every rssEvery.
	stallBefore, stall, stallAfter time.Duration
	rssEvery                       time.Duration
	// natsConsumers is where NATS's durable consumers are led on the
	// WAN: "subscriber" or "stream" (peerapi.PSJob.ConsumerLeaders).
	natsConsumers string
	skip          map[string]bool
	keepWork      bool
	progress      io.Writer
}

// Parts of the run --skip names.
var psParts = []string{"ours", "nats", "wan", "degraded", "throughput", "memory"}

// Topics of our system, and NATS's subjects.
const (
	topicMajority  = "pa-majority"
	topicAudience  = "pa-audience"
	topicAll       = "pa-all"
	topicPersisted = "dl-persisted"
	topicDelMaj    = "dl-majority"
	topicNATSWAN   = "wan"
	topicNATSDeg   = "degraded"
	topicTput      = "tput"
	topicMemory    = "memory"
)

// degradeSettle is how long after the links change a publish must begin
// to count as degraded: what was inside the links by then is through.
const degradeSettle = time.Second

// psSetupAllowance is how long a degraded phase's load has to subscribe
// before it starts publishing at the time the links are scheduled around.
const psSetupAllowance = 8 * time.Second

func newPubSubCmdOptions() psOptions {
	return psOptions{degradeAdd: 500 * time.Millisecond, degradeBW: wan.MBPerSecond, natsConsumers: "subscriber"}
}

func runPubSub(ctx context.Context, o psOptions) error {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return err
	}
	if len(topo.Sites) < 3 {
		return fmt.Errorf("--topology %s: %d sites; the pub/sub bench needs 3 or more", topo.Name, len(topo.Sites))
	}
	if len(o.subscribers) == 0 {
		o.subscribers = closestPair(topo)
	}
	var degraded []string
	for _, s := range o.subscribers {
		if !topo.HasSite(s) {
			return fmt.Errorf("--subscribers: %q is not a site of %s (%s)", s, topo.Name, strings.Join(topo.Sites, ", "))
		}
	}
	for _, s := range topo.Sites {
		if !slices.Contains(o.subscribers, s) {
			degraded = append(degraded, s)
		}
	}
	if len(degraded) == 0 {
		return errors.New("--subscribers: every site has subscribers; the degraded link needs a region without")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	work := filepath.Join(o.out, "work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if !o.keepWork {
		defer os.RemoveAll(work)
	}
	res := newPSResults(topo, o, degraded)
	res.Started, res.Host = time.Now(), hostDescription()
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "\n[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	save := func() error {
		res.Finished = time.Now()
		return writePSOutputs(o.out, res)
	}
	phases := []struct {
		part, system, what string
		run                func() error
		skipRows           func(why string)
	}{
		{"wan", sysOurs, "our pub/sub on the WAN: publish-ack, delivery, a degraded link",
			func() error { return benchOursPSWAN(ctx, o, topo, filepath.Join(work, "ours-wan"), res) },
			func(why string) { skipOursWAN(res, topo, o.subscribers, why) }},
		{"wan", sysNATS, "NATS JetStream on the WAN: an R3 stream across the regions, its leader in each in turn",
			func() error { return benchNATSPSWAN(ctx, o, topo, filepath.Join(work, "nats-wan"), res) },
			func(why string) { skipNATSWAN(res, topo, o.subscribers, why) }},
		{"loopback", sysOurs, "loopback: our pub/sub, throughput and memory",
			func() error { return benchOursPSLoopback(ctx, o, topo, filepath.Join(work, "ours-loopback"), res) },
			func(why string) { skipLoopback(res, sysOurs, o, topo, why) }},
		{"loopback", sysNATS, "loopback: NATS JetStream, throughput and memory",
			func() error { return benchNATSPSLoopback(ctx, o, topo, filepath.Join(work, "nats-loopback"), res) },
			func(why string) { skipLoopback(res, sysNATS, o, topo, why) }},
	}
	for _, ph := range phases {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sysPart := "ours"
		if ph.system == sysNATS {
			sysPart = "nats"
		}
		if o.skip[sysPart] {
			ph.skipRows("skipped: --skip " + sysPart)
			continue
		}
		if o.skip[ph.part] {
			ph.skipRows("skipped: --skip " + ph.part)
			continue
		}
		if ph.part == "loopback" && o.skip["throughput"] && o.skip["memory"] {
			ph.skipRows("skipped: --skip throughput,memory")
			continue
		}
		step("%s", ph.what)
		if err := ph.run(); err != nil {
			_ = save()
			return fmt.Errorf("%s: %w", ph.what, err)
		}
		if err := save(); err != nil {
			return err
		}
	}
	if err := save(); err != nil {
		return err
	}
	for _, t := range res.Targets {
		fmt.Fprintf(o.progress, "%-14s %s\n", t.Status, t.Name)
	}
	step("done: %s, %s", filepath.Join(o.out, reportFile), filepath.Join(o.out, resultsFile))
	return nil
}

// newPSResults starts the results of a run: the topology's matrices and
// what the run is to do.
func newPSResults(topo *wan.Topology, o psOptions, degraded []string) *psResults {
	res := &psResults{Bench: psBenchName, Topology: topo.Name, Sites: topo.Sites,
		RTTms: map[string]map[string]float64{}, OWDms: map[string]map[string]float64{},
		Subscribers: o.subscribers, Degraded: degraded, DegradeAddMs: ms(o.degradeAdd), DegradeBandwidth: o.degradeBW.String()}
	for _, a := range topo.Sites {
		res.RTTms[a], res.OWDms[a] = map[string]float64{}, map[string]float64{}
		for _, b := range topo.Sites {
			if a != b {
				res.RTTms[a][b], res.OWDms[a][b] = ms(rtt(topo, a, b)), ms(owd(topo, a, b))
			}
		}
	}
	return res
}

// oursPubBound is the bound of our publish-ack rows.
func oursPubBound(topo *wan.Topology, subscribers []string) func(region, pred string) time.Duration {
	return func(region, pred string) time.Duration {
		switch pred {
		case predMajorityName:
			return publishBound(topo, region, predMajority(topo.Sites))
		case predAudienceName:
			return publishBound(topo, region, predAudience(region, subscribers))
		case predAllName:
			return publishBound(topo, region, predAll(topo.Sites))
		}
		return -1
	}
}

// oursDelBound is the bound of our delivery rows.
func oursDelBound(topo *wan.Topology) func(from, to, pred string) time.Duration {
	return func(from, to, pred string) time.Duration {
		switch pred {
		case predPersistedName:
			return deliveryBound(topo, from, to, predPersistedAt(to))
		case predMajorityName:
			return deliveryBound(topo, from, to, predMajority(topo.Sites))
		}
		return -1
	}
}

// natsPubBound is the bound of NATS's publish-ack rows with its leader at
// leader.
func natsPubBound(topo *wan.Topology, leader string) func(region, pred string) time.Duration {
	return func(region, _ string) time.Duration { return natsBound(topo, topo.Sites, leader, region) }
}

func noDelBound(_, _, _ string) time.Duration { return -1 }

// skipOursWAN adds our WAN rows, with their bounds, as not measured.
func skipOursWAN(res *psResults, topo *wan.Topology, subscribers []string, why string) {
	pb, db := oursPubBound(topo, subscribers), oursDelBound(topo)
	for _, p := range []string{predMajorityName, predAudienceName} {
		for _, s := range topo.Sites {
			res.add(&psRow{Phase: psPublish, System: sysOurs, Predicate: p, Region: s, BoundMs: ms(pb(s, p)), Skipped: why})
		}
	}
	for _, p := range []string{predPersistedName, predMajorityName} {
		for _, a := range topo.Sites {
			for _, b := range topo.Sites {
				if a != b {
					res.add(&psRow{Phase: psDelivery, System: sysOurs, Predicate: p, Region: a, To: b, BoundMs: ms(db(a, b, p)), Skipped: why})
				}
			}
		}
	}
	for _, p := range []string{predAudienceName, predAllName} {
		for _, s := range subscribers {
			for _, c := range []string{condHealthy, condDegraded} {
				res.add(&psRow{Phase: psDegraded, System: sysOurs, Predicate: p, Region: s, Condition: c, BoundMs: -1, Skipped: why})
			}
		}
	}
}

// skipNATSWAN adds NATS's WAN rows as not measured.
func skipNATSWAN(res *psResults, topo *wan.Topology, subscribers []string, why string) {
	for _, l := range topo.Sites {
		for _, s := range topo.Sites {
			res.add(&psRow{Phase: psPublish, System: sysNATS, Predicate: predNATS, Region: s, Leader: l, BoundMs: ms(natsBound(topo, topo.Sites, l, s)), Skipped: why})
		}
	}
	for _, s := range subscribers {
		for _, c := range []string{condHealthy, condDegraded} {
			res.add(&psRow{Phase: psDegraded, System: sysNATS, Predicate: predNATS, Region: s, Leader: subscribers[0], Condition: c, BoundMs: -1, Skipped: why})
		}
	}
}

// skipLoopback adds a system's throughput and memory rows as not measured.
func skipLoopback(res *psResults, system string, o psOptions, topo *wan.Topology, why string) {
	pred := predMajorityName
	if system == sysNATS {
		pred = predNATS
	}
	for _, n := range o.inflight {
		res.add(&psRow{Phase: psTput, System: system, Predicate: pred, Region: "loopback", InFlight: n, BoundMs: -1, Skipped: why})
	}
	for _, s := range topo.Sites[:3] {
		res.add(&psRow{Phase: psMemory, System: system, Predicate: pred, Region: s, BoundMs: -1, Skipped: why})
	}
}

// loopBar is a progress bar for a closed loop of total measured publishes.
func loopBar(progress io.Writer, label string, total int) (func(done, total int), func()) {
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(progress), progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish())
	return func(done, _ int) { _ = bar.Set(done) }, func() { _ = bar.Finish(); fmt.Fprintln(progress) }
}

// timedBar shows a progress bar filling over d while run runs, and returns
// run's error.
func timedBar(ctx context.Context, progress io.Writer, label string, d time.Duration, run func() error) error {
	secs := max(1, int(d.Seconds()))
	bar := progressbar.NewOptions(secs, progressbar.OptionSetWriter(progress), progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30), progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionSetPredictTime(false))
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for i := 0; i < secs; i++ {
			select {
			case <-t.C:
				_ = bar.Add(1)
			case <-ctx.Done():
				return
			}
		}
	}()
	err := run()
	cancel()
	wg.Wait()
	_ = bar.Finish()
	fmt.Fprintln(progress)
	return err
}

// degradeDuring runs load while, at flipAt, degrade changes the links; it
// restores them after the load. It returns when the links changed (just
// before degrade and just after), for splitAt.
func degradeDuring(ctx context.Context, flipAt time.Time, degrade, restore func() error, load func() error) (before, after time.Time, err error) {
	var wg sync.WaitGroup
	var derr error
	flipCtx, cancel := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(time.Until(flipAt))
		defer t.Stop()
		select {
		case <-t.C:
		case <-flipCtx.Done():
			derr = errors.New("the load ended before the links were to change")
			return
		}
		before = time.Now()
		derr = degrade()
		after = time.Now()
	}()
	lerr := load()
	cancel()
	wg.Wait()
	rerr := restore()
	return before, after, errors.Join(lerr, derr, rerr)
}

// degradedRows makes a degraded phase's healthy and degraded rows.
func degradedRows(system, leader string, pubs []psload.PubSample, pred map[string]string, before, after time.Time) []*psRow {
	h, d := splitAt(pubs, before, after.Add(degradeSettle))
	none := func(string, string) time.Duration { return -1 }
	var out []*psRow
	for _, x := range []struct {
		cond string
		ps   []psload.PubSample
	}{{condHealthy, h}, {condDegraded, d}} {
		for _, r := range pubRows(psDegraded, system, leader, x.ps, pred, none) {
			r.Condition = x.cond
			out = append(out, r)
		}
	}
	return out
}
