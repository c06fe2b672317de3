package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
	"github.com/stabilizer/stabilizer/wan"
)

// Our pub/sub in the bench. Everything below drives ours through
// psload.System, the interface NATS implements in package natsps; the one
// place ours plugs in is dialOurs.

// errOursNotWired is kept for the report's wording of a system that could
// not be reached; dialOurs no longer returns it.
var errOursNotWired = errors.New("ours not wired yet")

// dialOurs connects a client to each of our sites (its client address
// serves the pub/sub API beside the KV) and returns them as one
// psload.System.
func dialOurs(ctx context.Context, sites []siteInfo) (psload.System, error) {
	o := &oursSystem{clients: map[string]*pubsubclient.Client{}}
	for _, s := range sites {
		c, err := pubsubclient.Dial([]string{s.Client})
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("dial %s: %w", s.Site, err)
		}
		o.clients[s.Site] = c
		o.order = append(o.order, s.Site)
	}
	return o, nil
}

// oursWired says whether dialOurs can work.
func oursWired() error { return nil }

// oursSystem is our pub/sub as psload drives it: one client per site.
type oursSystem struct {
	clients map[string]*pubsubclient.Client
	order   []string
}

func (o *oursSystem) client(region string) (*pubsubclient.Client, error) {
	c, ok := o.clients[region]
	if !ok {
		return nil, fmt.Errorf("no site in region %q", region)
	}
	return c, nil
}

// CreateTopic creates the topic at the first site and waits until every
// site knows it (definitions replicate through the KV).
func (o *oursSystem) CreateTopic(ctx context.Context, t psload.Topic) error {
	pub := t.PublishAck
	del := t.Delivery
	if del == predPersistedName {
		del = ""
	}
	first := o.clients[o.order[0]]
	if _, err := first.CreateTopic(ctx, pubsubclient.Topic{Name: t.Name, PublishAck: pub, Delivery: del}); err != nil {
		return err
	}
	for _, s := range o.order {
		for {
			_, err := o.clients[s].GetTopic(ctx, t.Name)
			if err == nil {
				break
			}
			if !errors.Is(err, pubsubclient.ErrUnknownTopic) {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

func (o *oursSystem) Publish(ctx context.Context, region, topic string, data []byte) error {
	c, err := o.client(region)
	if err != nil {
		return err
	}
	_, err = c.Publish(ctx, topic, data)
	return err
}

type oursFuture struct{ f *pubsubclient.Future }

func (f oursFuture) Wait(ctx context.Context) error {
	select {
	case <-f.f.Done():
		_, err := f.f.Result()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *oursSystem) PublishAsync(ctx context.Context, region, topic string, data []byte) (psload.Future, error) {
	c, err := o.client(region)
	if err != nil {
		return nil, err
	}
	f, err := c.PublishAsync(ctx, topic, data)
	if err != nil {
		return nil, err
	}
	return oursFuture{f}, nil
}

type oursSub struct{ s *pubsubclient.Subscription }

func (s oursSub) Next(ctx context.Context) (psload.Msg, error) {
	m, err := s.s.Next(ctx)
	if err != nil {
		return psload.Msg{}, err
	}
	return psload.Msg{Data: m.Data, Ack: m.Ack}, nil
}

func (s oursSub) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.s.Close(ctx)
}

func (o *oursSystem) Subscribe(ctx context.Context, region, topic, durable string) (psload.Subscription, error) {
	c, err := o.client(region)
	if err != nil {
		return nil, err
	}
	sub, err := c.Subscribe(ctx, topic, pubsubclient.Durable(durable), pubsubclient.StartNew())
	if err != nil {
		return nil, err
	}
	return oursSub{sub}, nil
}

func (o *oursSystem) Close() error {
	var errs []error
	for _, c := range o.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// noteNotWired says once in the report why ours has no numbers.
func noteNotWired(res *psResults) {
	n := "Ours: not measured, ours not wired yet. The bench drives our pub/sub through psload.System, as it drives NATS; " +
		"dialOurs (test/bench/cmd/wanbench/pubsub_ours.go) returns errOursNotWired until the pubsubclient SDK is wired in there."
	if !slices.Contains(res.Notes, n) {
		res.Notes = append(res.Notes, n)
	}
}

func notMeasured(err error) string {
	if errors.Is(err, errOursNotWired) {
		return notWired
	}
	return "not measured: " + err.Error()
}

func createTopics(ctx context.Context, sys psload.System, topics ...psload.Topic) error {
	for _, t := range topics {
		if err := sys.CreateTopic(ctx, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t.Name, err)
		}
	}
	return nil
}

// benchOursPSWAN runs our sites behind the emulated WAN (wanbed up): the
// publish-ack and delivery closed loop, then the degraded link.
func benchOursPSWAN(ctx context.Context, o psOptions, topo *wan.Topology, dir string, res *psResults) error {
	if err := oursWired(); err != nil {
		skipOursWAN(res, topo, o.subscribers, notMeasured(err))
		noteNotWired(res)
		fmt.Fprintf(o.progress, "ours: %s\n", notWired)
		return nil
	}
	var bed *testbed
	var err error
	for attempt := 1; ; attempt++ {
		bed, err = wanbedUp(o.topology, fmt.Sprintf("%s-%d", dir, attempt), nil, o.progress)
		if err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(o.progress, "starting the sites failed (%v); again\n", firstLine(err.Error()))
	}
	defer bed.down(o.progress)
	sys, err := dialOurs(ctx, bed.sites)
	if err != nil {
		skipOursWAN(res, topo, o.subscribers, notMeasured(err))
		return nil
	}
	defer sys.Close()
	if err := createTopics(ctx, sys, psload.Topic{Name: topicMajority, PublishAck: predMajorityName}, psload.Topic{Name: topicAudience, PublishAck: predAudienceName},
		psload.Topic{Name: topicAll, PublishAck: predAllName}, psload.Topic{Name: topicPersisted}, psload.Topic{Name: topicDelMaj, Delivery: predMajorityName}); err != nil {
		return err
	}
	var subs []psload.Sub
	for _, s := range o.subscribers {
		subs = append(subs, psload.Sub{Region: s, Topic: topicAudience, Durable: "audience-" + s})
	}
	for _, s := range topo.Sites {
		subs = append(subs, psload.Sub{Region: s, Topic: topicPersisted, Durable: "persisted-" + s}, psload.Sub{Region: s, Topic: topicDelMaj, Durable: "majority-" + s})
	}
	topics := []string{topicMajority, topicAudience, topicPersisted, topicDelMaj}
	progress, done := loopBar(o.progress, "stabilizer", o.publishes*len(topics)*len(topo.Sites))
	lres, err := psload.Loop(ctx, sys, psload.LoopConfig{Regions: topo.Sites, Topics: topics, Subscribers: subs,
		Warmup: o.warmup, Count: o.publishes, Bytes: o.bytes, Progress: progress})
	done()
	if err != nil {
		return err
	}
	res.add(pubRows(psPublish, sysOurs, "", lres.Pubs, map[string]string{topicMajority: predMajorityName, topicAudience: predAudienceName}, oursPubBound(topo, o.subscribers))...)
	res.add(delRows(sysOurs, "", lres.Dels, map[string]string{topicPersisted: predPersistedName, topicDelMaj: predMajorityName}, oursDelBound(topo))...)
	noteLoop(res, sysOurs, "", lres)
	res.note("Ours on the WAN: one stabilizerd per region behind the emulated links (`wanbed up`), a client per region to its own site; topics %s (publish-ack majority), %s (audience, durable subscribers in %v), %s and %s (delivery persisted at the subscriber's site, and majority; a durable subscriber in every region); a closed-loop publisher per region and topic, %d measured publishes each after %d of warm-up.",
		topicMajority, topicAudience, o.subscribers, topicPersisted, topicDelMaj, o.publishes, o.warmup)
	if o.skip["degraded"] {
		skipOursDegraded(res, o.subscribers, "skipped: --skip degraded")
		return nil
	}
	return benchOursDegraded(ctx, o, topo, bed, sys, res)
}

func skipOursDegraded(res *psResults, subscribers []string, why string) {
	for _, p := range []string{predAudienceName, predAllName} {
		for _, s := range subscribers {
			for _, c := range []string{condHealthy, condDegraded} {
				res.add(&psRow{Phase: psDegraded, System: sysOurs, Predicate: p, Region: s, Condition: c, BoundMs: -1, Skipped: why})
			}
		}
	}
}

// benchOursDegraded publishes from the subscribers' regions under audience
// and all while the links of the regions without subscribers are slowed
// (wanbed link set), midway.
func benchOursDegraded(ctx context.Context, o psOptions, topo *wan.Topology, bed *testbed, sys psload.System, res *psResults) error {
	var subs []psload.Sub
	for _, s := range o.subscribers {
		subs = append(subs, psload.Sub{Region: s, Topic: topicAudience, Durable: "audience-" + s})
	}
	startAt := time.Now().Add(psSetupAllowance)
	cfg := psload.LoopConfig{Regions: o.subscribers, Topics: []string{topicAudience, topicAll}, Subscribers: subs,
		Warmup: o.warmup, Duration: 2 * o.degradeWindow, StartAt: startAt, Bytes: o.bytes}
	set := func(slow bool) error {
		return forDegradedLinks(topo, res.Degraded, func(from, to string, base wan.LinkConfig) error {
			c := base
			if slow {
				c.Delay, c.Bandwidth = base.Delay+o.degradeAdd, o.degradeBW
			}
			_, err := command(o.progress, bed.wanbed, "link", "set", "--dir", bed.dir, from, to, "--one-way",
				"--delay", c.Delay.String(), "--bw", bandwidthFlag(c.Bandwidth))
			return err
		})
	}
	var lres *psload.LoopResult
	before, after, err := degradeDuring(ctx, startAt.Add(o.degradeWindow), func() error { return set(true) }, func() error { return set(false) },
		func() error {
			return timedBar(ctx, o.progress, "stabilizer, degraded link", psSetupAllowance+2*o.degradeWindow, func() (err error) {
				lres, err = psload.Loop(ctx, sys, cfg)
				return err
			})
		})
	if err != nil {
		return err
	}
	res.add(degradedRows(sysOurs, "", lres.Pubs, map[string]string{topicAudience: predAudienceName, topicAll: predAllName}, before, after)...)
	res.note("Ours, degraded link: publishers in %v under audience and all for %s on healthy links, then every link to and from %v set to %s and %s more one way (`wanbed link set --one-way`, each direction) for %s; restored after.",
		o.subscribers, o.degradeWindow, res.Degraded, o.degradeBW, o.degradeAdd, o.degradeWindow)
	return nil
}

// forDegradedLinks calls f for both directions of every link between a
// degraded region and another site, with the topology's shaping.
func forDegradedLinks(topo *wan.Topology, degraded []string, f func(from, to string, base wan.LinkConfig) error) error {
	var errs []error
	for _, x := range degraded {
		for _, s := range topo.Sites {
			if s == x {
				continue
			}
			for _, p := range [][2]string{{x, s}, {s, x}} {
				base, err := topo.LinkConfig(p[0], p[1])
				if err == nil {
					err = f(p[0], p[1], base)
				}
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// bandwidthFlag is a bandwidth as `wanbed link set --bw` takes it.
func bandwidthFlag(b wan.Bandwidth) string {
	if b == 0 {
		return "0"
	}
	return b.String()
}

// noteLoop notes what a closed loop lost on the way.
func noteLoop(res *psResults, system, leader string, l *psload.LoopResult) {
	where := system
	if leader != "" {
		where += " (leader " + leader + ")"
	}
	for k, n := range l.Missing {
		res.note("%s: subscriber %s never received %d acknowledged messages.", where, k, n)
	}
	for k, n := range l.Duplicates {
		res.note("%s: subscriber %s received %d messages twice.", where, k, n)
	}
	for _, e := range l.SubErrors {
		res.note("%s: a subscriber failed: %s.", where, e)
	}
}

// benchOursPSLoopback runs three of our sites on loopback: async
// throughput at each --inflight, then the memory phase.
func benchOursPSLoopback(ctx context.Context, o psOptions, topo *wan.Topology, dir string, res *psResults) error {
	if err := oursWired(); err != nil {
		skipLoopback(res, sysOurs, o, topo, notMeasured(err))
		noteNotWired(res)
		fmt.Fprintf(o.progress, "ours: %s\n", notWired)
		return nil
	}
	sites := topo.Sites[:3]
	ss, ps, err := loopbackSites(dir, sites, o.progress)
	defer stopAll(ps, o.progress)
	if err != nil {
		return err
	}
	sys, err := dialOurs(ctx, ss)
	if err != nil {
		skipLoopback(res, sysOurs, o, topo, notMeasured(err))
		return nil
	}
	defer sys.Close()
	pids := map[string]int{}
	for i, s := range ss {
		pids[s.Site] = ps[i].cmd.Process.Pid
	}
	run := func(cfg psload.AsyncConfig) (*psload.AsyncResult, error) {
		if err := createTopics(ctx, sys, psload.Topic{Name: cfg.Topic, PublishAck: predMajorityName}); err != nil {
			return nil, err
		}
		return psload.Async(ctx, sys, cfg)
	}
	if err := loopbackPhases(ctx, o, sites, sysOurs, predMajorityName, pids, run, res); err != nil {
		return err
	}
	res.note("Ours on loopback: %d stabilizerd (`stabilizerd genconfig`, then one process per site) without the WAN emulator; topics with publish-ack majority: every message fsynced at a majority of sites before its ack.", len(sites))
	return nil
}

// loopbackPhases runs the throughput rows and the memory phase of a system
// on loopback through run, which runs one asynchronous load; pids are the
// system's processes by site, for RSS.
func loopbackPhases(ctx context.Context, o psOptions, sites []string, system, pred string, pids map[string]int,
	run func(psload.AsyncConfig) (*psload.AsyncResult, error), res *psResults) error {
	subs := func(topic string) []psload.Sub {
		var out []psload.Sub
		for _, s := range sites {
			out = append(out, psload.Sub{Region: s, Topic: topic, Durable: topic + "-" + s})
		}
		return out
	}
	for _, n := range o.inflight {
		if o.skip["throughput"] {
			res.add(&psRow{Phase: psTput, System: system, Predicate: pred, Region: "loopback", InFlight: n, BoundMs: -1, Skipped: "skipped: --skip throughput"})
			continue
		}
		topic := fmt.Sprintf("%s-%d", topicTput, n)
		var a *psload.AsyncResult
		err := timedBar(ctx, o.progress, fmt.Sprintf("%s, %d in flight", system, n), o.tputWarm+o.tputWindow, func() (err error) {
			a, err = run(psload.AsyncConfig{Regions: sites, Topic: topic, InFlight: n, Bytes: o.bytes, Warm: o.tputWarm, Window: o.tputWindow, Subscribers: subs(topic)})
			return err
		})
		if err != nil {
			res.add(&psRow{Phase: psTput, System: system, Predicate: pred, Region: "loopback", InFlight: n, BoundMs: -1, Skipped: "failed: " + err.Error()})
			continue
		}
		row := tputRow(system, pred, n, a)
		res.add(row)
		fmt.Fprintf(o.progress, "%s %d in flight: %.0f publishes/s, p50 %.1f ms, delivered/s %v\n", system, n, row.OpsPerS, row.P50ms, row.DeliveredPerS)
	}
	if o.skip["memory"] {
		for _, s := range sites {
			res.add(&psRow{Phase: psMemory, System: system, Predicate: pred, Region: s, BoundMs: -1, Skipped: "skipped: --skip memory"})
		}
		return nil
	}
	n := slices.Max(o.inflight)
	total := o.stallBefore + o.stall + o.stallAfter
	sampler := startRSS(ctx, pids, o.rssEvery)
	var a *psload.AsyncResult
	err := timedBar(ctx, o.progress, fmt.Sprintf("%s, a subscriber stops acking for %s", system, o.stall), total, func() (err error) {
		a, err = run(psload.AsyncConfig{Regions: sites, Topic: topicMemory, InFlight: n, Bytes: o.bytes, Window: total, Subscribers: subs(topicMemory),
			Stall: &psload.Stall{Subscriber: 0, After: o.stallBefore, For: o.stall}})
		return err
	})
	samples, serr := sampler.finish()
	if err == nil && serr != nil {
		err = fmt.Errorf("RSS: %w", serr)
	}
	if err != nil {
		for _, s := range sites {
			res.add(&psRow{Phase: psMemory, System: system, Predicate: pred, Region: s, BoundMs: -1, Skipped: "failed: " + err.Error()})
		}
		return nil
	}
	res.add(memoryRows(system, pred, sites, samples, a)...)
	return nil
}

// tputRow makes a throughput row of an asynchronous load.
func tputRow(system, pred string, inflight int, a *psload.AsyncResult) *psRow {
	r := &psRow{Phase: psTput, System: system, Predicate: pred, Region: "loopback", InFlight: inflight, BoundMs: -1,
		Ops: a.Published, Errors: a.Errors, FirstError: a.FirstError, OpsPerS: a.PerS, P50ms: a.P50Ms, P99ms: a.P99Ms,
		DeliveredPerS: map[string]float64{}}
	for _, s := range a.Subs {
		r.DeliveredPerS[s.Region] = s.PerS
		if s.Lag > 0 {
			if r.Lag == nil {
				r.Lag = map[string]int{}
			}
			r.Lag[s.Region] = s.Lag
		}
	}
	if len(a.SubErrors) > 0 {
		r.Note = "subscriber errors: " + fmt.Sprint(a.SubErrors)
	}
	return r
}

// memoryRows makes a memory row per site from its RSS samples and the
// load's timeline.
func memoryRows(system, pred string, sites []string, samples map[string][]rssSample, a *psload.AsyncResult) []*psRow {
	start := time.Unix(0, a.Start)
	var out []*psRow
	for _, s := range sites {
		r := &psRow{Phase: psMemory, System: system, Predicate: pred, Region: s, BoundMs: -1, RSS: rssPoints(samples[s], start),
			StallFromS: time.Unix(0, a.StallFrom).Sub(start).Seconds(), StallToS: time.Unix(0, a.StallTo).Sub(start).Seconds()}
		r.Ops = len(r.RSS)
		for _, x := range a.Subs {
			if x.Region == s && x.MaxHeld > 0 {
				r.Note = fmt.Sprintf("its subscriber stalled, holding up to %d deliveries unacked (%d redelivered); %d behind at the end", x.MaxHeld, x.Redelivered, x.Lag)
			}
		}
		out = append(out, r)
	}
	return out
}
