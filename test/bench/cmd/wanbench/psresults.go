package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
	"github.com/stabilizer/stabilizer/test/workload"
)

// The pub/sub bench's results: rows as results.json holds them, how the
// rows are made from psload's samples, and the targets of issue 16
// evaluated on them. All of it is pure, so that the report can be made
// again from results.json alone.

// Phases of a pub/sub row.
const (
	psPublish  = "publish_ack"
	psDelivery = "delivery"
	psDegraded = "degraded"
	psTput     = "throughput"
	psMemory   = "memory"
)

// Predicates as the rows name them.
const (
	predMajorityName = "majority"
	predAudienceName = "audience"
	predAllName      = "all"
	// predPersistedName is our default delivery predicate: persisted at
	// the subscriber's own site.
	predPersistedName = "persisted_at_subscriber"
	// predNATS is NATS's only one: its R3 stream's quorum.
	predNATS = "R3"
)

// Conditions of a degraded row.
const (
	condHealthy  = "healthy"
	condDegraded = "degraded"
)

// notWired is the Skipped of every row of ours while the SDK is not wired.
const notWired = "not measured: ours not wired yet"

// Targets of issue 16.
const (
	psBoundFactor    = 1.10
	psBoundSlackMs   = 3.0
	psGainShare      = 0.95
	psDeliveryFactor = 1.15
	psDegradeShare   = 0.05
	psTputFactor     = 1.5
	// psKeepUpShare: a subscriber keeps up when it receives at least this
	// share of the publish rate.
	psKeepUpShare = 0.95
	// An RSS is bounded when its peak over the last third of the stall is
	// at most psRSSGrowth times its peak over the first third plus
	// psRSSSlackMiB: it levels off while the unacked backlog keeps growing.
	psRSSGrowth   = 1.25
	psRSSSlackMiB = 32.0
	psMaxRun      = 10 * time.Minute
)

// Target statuses.
const (
	statusMet         = "met"
	statusMissed      = "missed"
	statusNotMeasured = "not measured"
	// statusInfo marks a figure shown beside the targets that is no
	// target itself: nothing to meet or miss.
	statusInfo = "information"
)

// rssPoint is one RSS sample: seconds since the load began, MiB.
type rssPoint struct {
	T   float64 `json:"t_s"`
	MiB float64 `json:"mib"`
}

// psRow is one row of the pub/sub results.json.
type psRow struct {
	Phase     string `json:"phase"`
	System    string `json:"system"`
	Predicate string `json:"predicate"`
	// Region is the publisher's region (the origin of a delivery row; the
	// site of a memory row), To a delivery row's subscriber's region.
	Region string `json:"region,omitempty"`
	To     string `json:"to,omitempty"`
	// Leader is where NATS's stream was led.
	Leader string `json:"leader,omitempty"`
	// Condition is a degraded row's: healthy or degraded.
	Condition string  `json:"condition,omitempty"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	// BoundMs is the row's lower bound; -1 when it has none.
	BoundMs float64 `json:"bound_ms"`
	// Throughput rows: publishes in flight, acks per second, and per
	// subscriber region deliveries per second and what it still lacked.
	InFlight      int                `json:"in_flight,omitempty"`
	OpsPerS       float64            `json:"ops_per_s,omitempty"`
	DeliveredPerS map[string]float64 `json:"delivered_per_s,omitempty"`
	Lag           map[string]int     `json:"lag,omitempty"`
	// Memory rows: the site's RSS over time, and the stall.
	RSS        []rssPoint `json:"rss,omitempty"`
	StallFromS float64    `json:"stall_from_s,omitempty"`
	StallToS   float64    `json:"stall_to_s,omitempty"`
	// Note says what else a reader should know (a leader that moved).
	Note       string `json:"note,omitempty"`
	Skipped    string `json:"skipped,omitempty"`
	FirstError string `json:"first_error,omitempty"`

	lat []time.Duration
}

func (r *psRow) measured() bool { return r.Skipped == "" && r.Ops > 0 }

func (r *psRow) finish() {
	r.P50ms, r.P90ms, r.P99ms = ms(workload.Percentile(r.lat, .5)), ms(workload.Percentile(r.lat, .9)), ms(workload.Percentile(r.lat, .99))
}

// label names the row's system and predicate in tables and plots.
func (r *psRow) label() string {
	if r.System == sysNATS {
		if r.Leader != "" {
			return "NATS, leader " + r.Leader
		}
		return "NATS"
	}
	return r.Predicate
}

func psRowKey(r *psRow) string {
	return strings.Join([]string{r.Phase, r.System, r.Predicate, r.Region, r.To, r.Leader, r.Condition, fmt.Sprint(r.InFlight)}, "|")
}

// psTarget is one target of issue 16 and how the run fared.
type psTarget struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// psResults is everything a pub/sub run measured, and how.
type psResults struct {
	// Bench is "pubsub": `wanbench report` tells the benches apart by it.
	Bench    string    `json:"bench"`
	Topology string    `json:"topology"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     string    `json:"host"`
	Sites    []string  `json:"sites"`
	// RTTms and OWDms are the topology's matrices in ms.
	RTTms map[string]map[string]float64 `json:"rtt_ms"`
	OWDms map[string]map[string]float64 `json:"owd_ms"`
	// Subscribers are the regions with the audience's subscribers;
	// Degraded those without, whose links were slowed.
	Subscribers []string `json:"subscribers"`
	Degraded    []string `json:"degraded"`
	// DegradeAddMs and DegradeBandwidth are what the slowed links got.
	DegradeAddMs     float64    `json:"degrade_add_ms"`
	DegradeBandwidth string     `json:"degrade_bandwidth"`
	Rows             []*psRow   `json:"rows"`
	Targets          []psTarget `json:"targets"`
	Notes            []string   `json:"notes"`
}

const psBenchName = "pubsub"

func (r *psResults) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *psResults) add(rows ...*psRow) { r.Rows = append(r.Rows, rows...) }

func (r *psResults) find(phase, system, predicate, region, to, leader, condition string, inflight int) *psRow {
	for _, x := range r.Rows {
		if x.Phase == phase && x.System == system && x.Predicate == predicate && x.Region == region && x.To == to &&
			x.Leader == leader && x.Condition == condition && x.InFlight == inflight {
			return x
		}
	}
	return nil
}

func (r *psResults) rows(phase, system string) []*psRow {
	var out []*psRow
	for _, x := range r.Rows {
		if x.Phase == phase && x.System == system {
			out = append(out, x)
		}
	}
	return out
}

// pubRows makes one row per (region, topic) of a closed loop's measured
// publishes. pred names each topic's predicate; bound gives a row's bound
// from its region and predicate.
func pubRows(phase, system, leader string, pubs []psload.PubSample, pred map[string]string, bound func(region, pred string) time.Duration) []*psRow {
	byKey := map[[2]string]*psRow{}
	var out []*psRow
	for _, p := range pubs {
		name, ok := pred[p.Topic]
		if !ok || p.Warmup {
			continue
		}
		k := [2]string{p.Region, p.Topic}
		r := byKey[k]
		if r == nil {
			r = &psRow{Phase: phase, System: system, Predicate: name, Region: p.Region, Leader: leader, BoundMs: -1}
			if b := bound(p.Region, name); b >= 0 {
				r.BoundMs = ms(b)
			}
			byKey[k] = r
			out = append(out, r)
		}
		if p.Err != "" {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = p.Err
			}
			continue
		}
		r.Ops++
		r.lat = append(r.lat, time.Duration(p.Ms*float64(time.Millisecond)))
	}
	for _, r := range out {
		r.finish()
	}
	sortRows(out)
	return out
}

// delRows makes one row per ordered pair of different regions and topic
// of a closed loop's deliveries.
func delRows(system, leader string, dels []psload.DelSample, pred map[string]string, bound func(from, to, pred string) time.Duration) []*psRow {
	byKey := map[[3]string]*psRow{}
	var out []*psRow
	for _, d := range dels {
		name, ok := pred[d.Topic]
		if !ok || d.From == d.To {
			continue
		}
		k := [3]string{d.From, d.To, d.Topic}
		r := byKey[k]
		if r == nil {
			r = &psRow{Phase: psDelivery, System: system, Predicate: name, Region: d.From, To: d.To, Leader: leader, BoundMs: -1}
			if b := bound(d.From, d.To, name); b >= 0 {
				r.BoundMs = ms(b)
			}
			byKey[k] = r
			out = append(out, r)
		}
		r.Ops++
		r.lat = append(r.lat, time.Duration(d.Ms*float64(time.Millisecond)))
	}
	for _, r := range out {
		r.finish()
	}
	sortRows(out)
	return out
}

func sortRows(rows []*psRow) {
	slices.SortStableFunc(rows, func(a, b *psRow) int {
		return cmp.Or(cmp.Compare(a.Predicate, b.Predicate), cmp.Compare(a.Region, b.Region), cmp.Compare(a.To, b.To))
	})
}

// inSiteOrder sorts rows for a table: by system and predicate in the order
// they first appear, then by leader, region and destination in the
// topology's order of sites.
func inSiteOrder(sites []string, rows []*psRow) []*psRow {
	out := slices.Clone(rows)
	first := map[string]int{}
	for i, r := range rows {
		if _, ok := first[r.System+"|"+r.Predicate]; !ok {
			first[r.System+"|"+r.Predicate] = i
		}
	}
	at := func(s string) int { return slices.Index(sites, s) }
	slices.SortStableFunc(out, func(a, b *psRow) int {
		return cmp.Or(cmp.Compare(first[a.System+"|"+a.Predicate], first[b.System+"|"+b.Predicate]),
			cmp.Compare(at(a.Leader), at(b.Leader)), cmp.Compare(at(a.Region), at(b.Region)), cmp.Compare(at(a.To), at(b.To)))
	})
	return out
}

// splitAt splits a closed loop's publishes at a change of the links:
// healthy are those answered before healthyBefore (when the change began),
// degraded those begun at degradedFrom or later (once the change is done
// and what was inside the links by then is through).
func splitAt(pubs []psload.PubSample, healthyBefore, degradedFrom time.Time) (healthy, degraded []psload.PubSample) {
	for _, p := range pubs {
		begun := time.Unix(0, p.At)
		answered := begun.Add(time.Duration(p.Ms * float64(time.Millisecond)))
		switch {
		case answered.Before(healthyBefore):
			healthy = append(healthy, p)
		case !begun.Before(degradedFrom):
			degraded = append(degraded, p)
		}
	}
	return healthy, degraded
}

// rssVerdict is how a memory row's RSS fared over the stall: the peak over
// its first and last thirds, and whether it levelled off.
func rssVerdict(r *psRow) (first, last float64, bounded, ok bool) {
	third := (r.StallToS - r.StallFromS) / 3
	if third <= 0 {
		return 0, 0, false, false
	}
	n1, n2 := 0, 0
	for _, p := range r.RSS {
		switch {
		case p.T >= r.StallFromS && p.T < r.StallFromS+third:
			first, n1 = math.Max(first, p.MiB), n1+1
		case p.T >= r.StallToS-third && p.T <= r.StallToS:
			last, n2 = math.Max(last, p.MiB), n2+1
		}
	}
	if n1 == 0 || n2 == 0 {
		return first, last, false, false
	}
	return first, last, last <= psRSSGrowth*first+psRSSSlackMiB, true
}

// within says whether p50 meets factor × bound + slack.
func within(r *psRow, factor float64) bool { return r.P50ms <= factor*r.BoundMs+psBoundSlackMs }

// skipReason is why rows of a system were not measured: the first
// skipped row's reason, or "no rows".
func skipReason(rows []*psRow) string {
	for _, r := range rows {
		if r.Skipped != "" {
			return r.Skipped
		}
	}
	return "no rows"
}

// measuredOf keeps the measured rows.
func measuredOf(rows []*psRow) []*psRow {
	var out []*psRow
	for _, r := range rows {
		if r.measured() {
			out = append(out, r)
		}
	}
	return out
}

// gainPairs pairs our majority row of each region with NATS's row of that
// region at each leader placement.
func (r *psResults) gainPairs() []gainPair {
	var out []gainPair
	for _, l := range r.Sites {
		for _, s := range r.Sites {
			p := gainPair{Region: s, Leader: l, OursBound: -1, NATSBound: -1}
			if o := r.find(psPublish, sysOurs, predMajorityName, s, "", "", "", 0); o != nil {
				p.OursBound = o.BoundMs
				if o.measured() {
					p.Ours = o.P50ms
				}
			}
			if n := r.find(psPublish, sysNATS, predNATS, s, "", l, "", 0); n != nil {
				p.NATSBound = n.BoundMs
				if n.measured() {
					p.NATS = n.P50ms
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// gainCeiling is the mean gain the bounds allow over every (region, leader)
// pair that has both bounds, measured or not.
func gainCeiling(pairs []gainPair) float64 {
	var cs []float64
	for _, p := range pairs {
		if c := gainOfBounds(p.OursBound, p.NATSBound); !math.IsNaN(c) {
			cs = append(cs, c)
		}
	}
	return mean(cs)
}

// evaluate marks every target of issue 16 met, missed or not measured.
func (r *psResults) evaluate() []psTarget {
	var ts []psTarget
	add := func(name, status, format string, args ...any) {
		ts = append(ts, psTarget{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	rowsCheck := func(name string, rows []*psRow, factor float64, what string) {
		got := measuredOf(rows)
		if len(got) == 0 || len(got) < len(rows) {
			add(name, statusNotMeasured, "%d of %d rows measured (%s)", len(got), len(rows), skipReason(rows))
			return
		}
		var misses []string
		for _, x := range got {
			if !within(x, factor) {
				misses = append(misses, fmt.Sprintf("%s %s (p50 %.1f ms, bound %.1f ms)", x.Predicate, x.where(), x.P50ms, x.BoundMs))
			}
		}
		if len(misses) > 0 {
			add(name, statusMissed, "%d of %d %s rows over %.2f × bound + %.0f ms: %s", len(misses), len(got), what, factor, psBoundSlackMs, strings.Join(misses, "; "))
			return
		}
		add(name, statusMet, "all %d %s rows within %.2f × bound + %.0f ms", len(got), what, factor, psBoundSlackMs)
	}

	var pub []*psRow
	for _, x := range r.rows(psPublish, sysOurs) {
		if x.Predicate == predMajorityName || x.Predicate == predAudienceName {
			pub = append(pub, x)
		}
	}
	rowsCheck("publish-ack p50 ≤ 1.10 × bound + 3 ms (ours, majority and audience)", pub, psBoundFactor, "publish-ack")

	pairs := r.gainPairs()
	ceiling := gainCeiling(pairs)
	g, c, n := meanGain(pairs)
	gainName := "mean publish-ack gain over NATS ≥ 95% of the ceiling (ours majority)"
	switch {
	case n < len(pairs) || n == 0:
		add(gainName, statusNotMeasured, "%d of %d (region, leader) pairs measured; ceiling %s", n, len(pairs), pct(ceiling))
	case g >= psGainShare*c:
		add(gainName, statusMet, "mean gain %s, ceiling %s, target %s", pct(g), pct(c), pct(psGainShare*c))
	default:
		add(gainName, statusMissed, "mean gain %s, ceiling %s, target %s", pct(g), pct(c), pct(psGainShare*c))
	}

	rowsCheck("cross-region delivery p50 ≤ 1.15 × bound + 3 ms (ours)", r.rows(psDelivery, sysOurs), psDeliveryFactor, "delivery")

	r.evaluateDegraded(add)
	r.evaluateTput(add)
	r.evaluateMemory(add)

	took := r.Finished.Sub(r.Started)
	if took <= psMaxRun {
		add("the whole run under 10 minutes", statusMet, "%s", took.Round(time.Second))
	} else {
		add("the whole run under 10 minutes", statusMissed, "%s", took.Round(time.Second))
	}
	return ts
}

func (r *psRow) where() string {
	if r.To != "" {
		return r.Region + " → " + r.To
	}
	return "from " + r.Region
}

type addTarget func(name, status, format string, args ...any)

func (r *psResults) degradedPair(system, pred, region string) (h, d *psRow) {
	for _, x := range r.rows(psDegraded, system) {
		if x.Predicate == pred && x.Region == region {
			if x.Condition == condHealthy {
				h = x
			} else {
				d = x
			}
		}
	}
	return h, d
}

func (r *psResults) evaluateDegraded(add addTarget) {
	check := func(name, pred string, ok func(h, d *psRow) bool, says string) {
		var details []string
		status := statusMet
		for _, s := range r.Subscribers {
			h, d := r.degradedPair(sysOurs, pred, s)
			if h == nil || d == nil || !h.measured() || !d.measured() {
				why := "no rows"
				if h != nil && h.Skipped != "" {
					why = h.Skipped
				}
				add(name, statusNotMeasured, "from %s: %s", s, why)
				return
			}
			if !ok(h, d) {
				status = statusMissed
			}
			details = append(details, fmt.Sprintf("from %s %.1f → %.1f ms (%+.1f%%)", s, h.P50ms, d.P50ms, 100*(d.P50ms/h.P50ms-1)))
		}
		if len(details) == 0 {
			add(name, statusNotMeasured, "no subscriber regions")
			return
		}
		add(name, status, "%s; %s", says, strings.Join(details, ", "))
	}
	check("degraded link: audience publish-ack p50 within 5% of healthy", predAudienceName,
		func(h, d *psRow) bool { return d.P50ms <= (1+psDegradeShare)*h.P50ms },
		"p50 healthy → degraded")
	check("degraded link: all publish-ack p50 degrades (the fault happened)", predAllName,
		func(h, d *psRow) bool { return d.P50ms >= h.P50ms+r.DegradeAddMs },
		fmt.Sprintf("degrades when p50 grows by at least the added %.0f ms", r.DegradeAddMs))
}

func (r *psResults) evaluateTput(add addTarget) {
	var ours, nats []*psRow
	ours, nats = r.rows(psTput, sysOurs), r.rows(psTput, sysNATS)
	inflights := map[int]bool{}
	for _, x := range append(slices.Clone(ours), nats...) {
		inflights[x.InFlight] = true
	}
	rateName := "loopback async publish rate ≥ 1.5 × NATS JetStream's"
	keepName := "delivery to one durable subscriber per site keeps up (ours)"
	if len(inflights) == 0 {
		add(rateName, statusNotMeasured, "no rows")
		add(keepName, statusNotMeasured, "no rows")
		return
	}
	var rateD, keepD []string
	rate, keep := statusMet, statusMet
	worse := func(cur, s string) string {
		if cur == statusNotMeasured || s == statusNotMeasured {
			return statusNotMeasured
		}
		if cur == statusMissed || s == statusMissed {
			return statusMissed
		}
		return statusMet
	}
	for _, n := range slices.Sorted(maps.Keys(inflights)) {
		o := r.find(psTput, sysOurs, predMajorityName, "loopback", "", "", "", n)
		p := r.find(psTput, sysNATS, predNATS, "loopback", "", "", "", n)
		switch {
		case o == nil || !o.measured():
			rate = worse(rate, statusNotMeasured)
			keep = worse(keep, statusNotMeasured)
			why := "no row"
			if o != nil {
				why = o.Skipped
			}
			rateD = append(rateD, fmt.Sprintf("%d in flight: ours %s", n, why))
			keepD = append(keepD, fmt.Sprintf("%d in flight: ours %s", n, why))
			continue
		case p == nil || !p.measured():
			rate = worse(rate, statusNotMeasured)
			rateD = append(rateD, fmt.Sprintf("%d in flight: ours %.0f/s, NATS not measured", n, o.OpsPerS))
		default:
			s := statusMet
			if o.OpsPerS < psTputFactor*p.OpsPerS {
				s = statusMissed
			}
			rate = worse(rate, s)
			rateD = append(rateD, fmt.Sprintf("%d in flight: ours %.0f/s, NATS %.0f/s (%.2f×)", n, o.OpsPerS, p.OpsPerS, o.OpsPerS/p.OpsPerS))
		}
		ks := statusMet
		var slow []string
		for _, site := range slices.Sorted(maps.Keys(o.DeliveredPerS)) {
			if v := o.DeliveredPerS[site]; v < psKeepUpShare*o.OpsPerS {
				ks = statusMissed
				slow = append(slow, fmt.Sprintf("%s %.0f/s", site, v))
			}
		}
		if len(o.DeliveredPerS) == 0 {
			ks = statusNotMeasured
		}
		keep = worse(keep, ks)
		if len(slow) > 0 {
			keepD = append(keepD, fmt.Sprintf("%d in flight: behind at %s of %.0f/s published", n, strings.Join(slow, ", "), o.OpsPerS))
		} else {
			keepD = append(keepD, fmt.Sprintf("%d in flight: every subscriber ≥ %.0f%% of %.0f/s", n, psKeepUpShare*100, o.OpsPerS))
		}
	}
	add(rateName, rate, "%s", strings.Join(rateD, "; "))
	add(keepName, keep, "%s", strings.Join(keepD, "; "))
}

func (r *psResults) evaluateMemory(add addTarget) {
	name := "RSS bounded while a durable subscriber stops acking (ours, every site)"
	rows := r.rows(psMemory, sysOurs)
	got := measuredOf(rows)
	if len(got) == 0 {
		add(name, statusNotMeasured, "%s", skipReason(rows))
		return
	}
	status := statusMet
	var details []string
	for _, x := range got {
		first, last, bounded, ok := rssVerdict(x)
		switch {
		case !ok:
			status = statusNotMeasured
			details = append(details, x.Region+": too few samples")
		case !bounded:
			status = statusMissed
			details = append(details, fmt.Sprintf("%s grew %.0f → %.0f MiB", x.Region, first, last))
		default:
			details = append(details, fmt.Sprintf("%s %.0f → %.0f MiB", x.Region, first, last))
		}
	}
	add(name, status, "peak RSS over the first → last third of the stall: %s", strings.Join(details, ", "))
}
