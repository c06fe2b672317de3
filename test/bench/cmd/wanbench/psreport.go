package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The pub/sub bench's output files in --out, beside results.json and
// report.md (which it shares with the KV bench's names).
const (
	psPublishPlot  = "publish-ack.png"
	psDeliveryPlot = "delivery.png"
	psDegradedPlot = "degraded.png"
	psTputPlot     = "pubsub-throughput.png"
	psMemoryPlot   = "memory.png"
)

func psCDFFile(region string) string { return "publish-ack-cdf-" + region + ".png" }

// writePSOutputs evaluates the targets and writes results.json,
// latencies.json, report.md and the plots of res into dir.
func writePSOutputs(dir string, res *psResults) error {
	res.Bench = psBenchName
	res.Targets = res.evaluate()
	lats := map[string][]float64{}
	for _, r := range res.Rows {
		for _, d := range r.lat {
			lats[psRowKey(r)] = append(lats[psRowKey(r)], ms(d))
		}
	}
	if err := writeResultFiles(dir, res, lats); err != nil {
		return err
	}
	plots, err := writePSPlots(dir, res)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, reportFile), []byte(psReport(res, plots)), 0o644)
}

// benchKind reads which bench wrote dir's results.json: "pubsub", or ""
// for the KV bench, whose files predate the field.
func benchKind(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, resultsFile))
	if err != nil {
		return "", err
	}
	var head struct {
		Bench string `json:"bench"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return "", fmt.Errorf("%s: %w", resultsFile, err)
	}
	return head.Bench, nil
}

// loadPSResults reads what writePSOutputs wrote.
func loadPSResults(dir string) (*psResults, error) {
	var res psResults
	lats, err := readResultFiles(dir, &res)
	if err != nil {
		return nil, err
	}
	for _, r := range res.Rows {
		r.lat = msDurations(lats[psRowKey(r)])
	}
	return &res, nil
}

func mark(status string) string {
	switch status {
	case statusMet:
		return "met"
	case statusMissed:
		return "**missed**"
	case statusInfo:
		return "information"
	default:
		return "_not measured_"
	}
}

func rowMark(r *psRow, factor float64) string {
	switch {
	case !r.measured():
		return mark(statusNotMeasured)
	case within(r, factor):
		return mark(statusMet)
	default:
		return mark(statusMissed)
	}
}

// cell is a row's p50, or why it has none.
func cell(r *psRow) string {
	switch {
	case r == nil:
		return "–"
	case r.Skipped != "":
		return "_not measured_"
	case r.Ops == 0:
		return "_no samples_"
	}
	return fmt.Sprintf("%.1f", r.P50ms)
}

func boundCell(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

// psReport renders report.md.
func psReport(res *psResults, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Pub/sub benchmark on %s: ours against NATS JetStream\n\n", res.Topology)
	w("Run %s (%s), on %s. Rerun with `make bench-pubsub` or `wanbench pubsub --topology %s --out DIR`.\n\n",
		res.Started.UTC().Format("2006-01-02 15:04 MST"), res.Finished.Sub(res.Started).Round(time.Second), res.Host, res.Topology)

	w("## Targets\n\n| target | status | detail |\n|---|---|---|\n")
	for _, t := range res.Targets {
		w("| %s | %s | %s |\n", t.Name, mark(t.Status), t.Detail)
	}
	w("\n")

	if len(res.Sites) > 0 {
		w("## The emulated WAN\n\nRound trips in ms; one-way delays are half.\n\n|  |")
		for _, s := range res.Sites {
			w(" %s |", s)
		}
		w("\n|---|%s\n", strings.Repeat("---:|", len(res.Sites)))
		for _, a := range res.Sites {
			w("| %s |", a)
			for _, c := range res.Sites {
				if a == c {
					w(" 0 |")
				} else {
					w(" %.1f |", res.RTTms[a][c])
				}
			}
			w("\n")
		}
		w("\nThe audience's subscribers are in %s; %s has none.\n\n", strings.Join(res.Subscribers, " and "), strings.Join(res.Degraded, " and "))
	}

	psReportPublish(w, res)
	psReportDelivery(w, res)
	psReportDegraded(w, res)
	psReportTput(w, res)
	psReportMemory(w, res)

	var skipped, failed []*psRow
	for _, r := range res.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, r)
		} else if r.Errors > 0 || r.Note != "" {
			failed = append(failed, r)
		}
	}
	if len(skipped)+len(failed) > 0 {
		w("## Not measured, errors and notes on rows\n\n")
		seen := map[string]bool{}
		for _, r := range skipped {
			k := r.System + r.Phase + r.Skipped
			if seen[k] {
				continue
			}
			seen[k] = true
			w("- %s, %s: %s\n", r.System, r.Phase, r.Skipped)
		}
		for _, r := range failed {
			if r.Errors > 0 {
				w("- %s %s %s (%s): %d errors, first: %s\n", r.label(), r.Predicate, r.where(), r.Phase, r.Errors, r.FirstError)
			}
			if r.Note != "" {
				w("- %s %s %s (%s): %s\n", r.label(), r.Predicate, r.where(), r.Phase, r.Note)
			}
		}
		w("\n")
	}
	if len(res.Notes) > 0 {
		w("## How each system was run\n\n")
		for _, n := range res.Notes {
			w("- %s\n", n)
		}
		w("\n")
	}
	if len(plots) > 0 {
		w("## Plots\n\n")
		for _, p := range plots {
			w("![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	return b.String()
}

type writef func(format string, args ...any)

func psReportPublish(w writef, res *psResults) {
	ours, nats := res.rows(psPublish, sysOurs), res.rows(psPublish, sysNATS)
	if len(ours)+len(nats) == 0 {
		return
	}
	w("## Publish-ack latency per region\n\n")
	w("A closed-loop publisher per region and topic, each to its own region's site (ours) or server (NATS). ")
	w("Our bound: the smallest round trip within which the sites the predicate needs are reached, the publisher's own at 0 ")
	w("(audience: the origin and the subscribers' sites). NATS's: the round trip to its stream's leader plus the leader's round trip to its nearest other replica. ")
	w("Target for ours: p50 ≤ %.2f × bound + %.0f ms.\n\n", psBoundFactor, psBoundSlackMs)
	w("| system | predicate | leader | region | publishes | p50 ms | p90 ms | p99 ms | bound ms | p50 / bound | target |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range inSiteOrder(res.Sites, append(slices.Clone(ours), nats...)) {
		target := "–"
		if r.System == sysOurs && (r.Predicate == predMajorityName || r.Predicate == predAudienceName) {
			target = rowMark(r, psBoundFactor)
		}
		if !r.measured() {
			w("| %s | %s | %s | %s | – | %s | | | %s | | %s |\n", r.System, r.Predicate, dash(r.Leader), r.Region, cell(r), boundCell(r.BoundMs), target)
			continue
		}
		w("| %s | %s | %s | %s | %d | %.1f | %.1f | %.1f | %s | %s | %s |\n", r.System, r.Predicate, dash(r.Leader), r.Region, r.Ops,
			r.P50ms, r.P90ms, r.P99ms, boundCell(r.BoundMs), ratio(r.P50ms, r.BoundMs), target)
	}
	pairs := res.gainPairs()
	w("\n### majority against NATS at each leader placement\n\n")
	w("Gain = 1 − ours/NATS at p50; the ceiling is the same ratio of the two bounds, what the round trips allow. ")
	w("Target: a mean gain over every (region, leader) pair of at least %.0f%% of the mean ceiling.\n\n", psGainShare*100)
	w("| region | NATS leader | ours p50 | NATS p50 | ours bound | NATS bound | gain | ceiling |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range pairs {
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Region, p.Leader, fmtMs(p.Ours), fmtMs(p.NATS), boundCell(p.OursBound), boundCell(p.NATSBound),
			pct(gain(p.Ours, p.NATS)), pct(gainOfBounds(p.OursBound, p.NATSBound)))
	}
	g, _, n := meanGain(pairs)
	c := gainCeiling(pairs)
	w("| **mean** | | | | | | **%s** | **%s** |\n\n", pct(g), pct(c))
	w("The ceiling the bounds allow: **%s** mean gain; the target is %s. Measured over %d of %d pairs.\n\n", pct(c), pct(psGainShare*c), n, len(pairs))
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func psReportDelivery(w writef, res *psResults) {
	ours, nats := res.rows(psDelivery, sysOurs), res.rows(psDelivery, sysNATS)
	if len(ours)+len(nats) == 0 {
		return
	}
	w("## Cross-region delivery\n\n")
	w("Published at the origin, delivered to a durable subscriber at the destination: from the publish's start to the delivery, both clocks the host's. ")
	w("Bound: site s's ack can reach the destination after OWD(origin, s) + OWD(s, destination); the bound is the first time at which the arrived acks satisfy the delivery predicate, ")
	w("and never less than OWD(origin, destination). Target for ours: p50 ≤ %.2f × bound + %.0f ms.\n\n", psDeliveryFactor, psBoundSlackMs)
	var leaders []string
	for _, r := range nats {
		if !slices.Contains(leaders, r.Leader) {
			leaders = append(leaders, r.Leader)
		}
	}
	w("| origin → destination | persisted at destination p50 | bound | target | majority p50 | bound | target |")
	for _, l := range leaders {
		w(" NATS (leader %s) p50 |", l)
	}
	w("\n|---|---:|---:|---|---:|---:|---|%s\n", strings.Repeat("---:|", len(leaders)))
	for _, a := range res.Sites {
		for _, c := range res.Sites {
			if a == c {
				continue
			}
			p := res.find(psDelivery, sysOurs, predPersistedName, a, c, "", "", 0)
			m := res.find(psDelivery, sysOurs, predMajorityName, a, c, "", "", 0)
			w("| %s → %s | %s | %s | %s | %s | %s | %s |", a, c, cell(p), boundOf(p), markOf(p), cell(m), boundOf(m), markOf(m))
			for _, l := range leaders {
				w(" %s |", cell(res.find(psDelivery, sysNATS, predNATS, a, c, l, "", 0)))
			}
			w("\n")
		}
	}
	w("\n")
}

func boundOf(r *psRow) string {
	if r == nil {
		return "–"
	}
	return boundCell(r.BoundMs)
}

func markOf(r *psRow) string {
	if r == nil {
		return mark(statusNotMeasured)
	}
	return rowMark(r, psDeliveryFactor)
}

func psReportDegraded(w writef, res *psResults) {
	rows := inSiteOrder(res.Sites, append(slices.Clone(res.rows(psDegraded, sysOurs)), res.rows(psDegraded, sysNATS)...))
	if len(rows) == 0 {
		return
	}
	w("## A degraded link\n\n")
	w("Publishers in the subscribers' regions (%s) publish in closed loops; midway, every link to and from %s is slowed to %s and %.0f ms more one way while they go on. ",
		strings.Join(res.Subscribers, ", "), strings.Join(res.Degraded, ", "), res.DegradeBandwidth, res.DegradeAddMs)
	w("Healthy: publishes answered before the change; degraded: those begun a second after it. ")
	w("Targets: under audience, p50 within %.0f%% of healthy; under all, it degrades (grows by at least the added delay), which shows the fault happened.\n\n", psDegradeShare*100)
	w("| system | predicate | leader | region | healthy publishes | healthy p50 ms | degraded publishes | degraded p50 ms | change | target |\n|---|---|---|---|---:|---:|---:|---:|---:|---|\n")
	type key struct{ sys, pred, region, leader string }
	var order []key
	for _, r := range rows {
		k := key{r.System, r.Predicate, r.Region, r.Leader}
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		var h, d *psRow
		for _, r := range rows {
			if (key{r.System, r.Predicate, r.Region, r.Leader}) == k {
				if r.Condition == condHealthy {
					h = r
				} else {
					d = r
				}
			}
		}
		change, target := "–", "–"
		if h != nil && d != nil && h.measured() && d.measured() {
			change = fmt.Sprintf("%+.1f%%", 100*(d.P50ms/h.P50ms-1))
			if k.sys == sysOurs {
				ok := d.P50ms <= (1+psDegradeShare)*h.P50ms
				if k.pred == predAllName {
					ok = d.P50ms >= h.P50ms+res.DegradeAddMs
				}
				target = mark(statusMissed)
				if ok {
					target = mark(statusMet)
				}
			}
		} else if k.sys == sysOurs {
			target = mark(statusNotMeasured)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k.sys, k.pred, dash(k.leader), k.region, opsCell(h), cell(h), opsCell(d), cell(d), change, target)
	}
	w("\n")
}

func opsCell(r *psRow) string {
	if r == nil || !r.measured() {
		return "–"
	}
	return fmt.Sprint(r.Ops)
}

func psReportTput(w writef, res *psResults) {
	rows := append(slices.Clone(res.rows(psTput, sysOurs)), res.rows(psTput, sysNATS)...)
	if len(rows) == 0 {
		return
	}
	w("## Throughput on loopback, 3 sites, equal durability\n\n")
	w("Asynchronous publishing of 256-byte messages, every one fsynced at a majority before its ack (ours: majority; NATS: R3 with sync_interval: always), ")
	w("a publisher per site sharing the window of publishes in flight, and one durable subscriber per site acking all it receives. ")
	w("Targets: ours at least %.1f× NATS's publish rate; each of our subscribers receives at least %.0f%% of the publish rate.\n\n", psTputFactor, psKeepUpShare*100)
	var sites []string
	for _, r := range rows {
		for s := range r.DeliveredPerS {
			if !slices.Contains(sites, s) {
				sites = append(sites, s)
			}
		}
	}
	slices.Sort(sites)
	w("| system | in flight | acked | publishes/s | p50 ms | p99 ms |")
	for _, s := range sites {
		w(" delivered/s at %s |", s)
	}
	w(" ours / NATS |\n|---|---:|---:|---:|---:|---:|%s---:|\n", strings.Repeat("---:|", len(sites)))
	for _, r := range rows {
		if !r.measured() {
			w("| %s | %d | %s | | | |%s |\n", r.System, r.InFlight, cell(r), strings.Repeat(" |", len(sites)))
			continue
		}
		rat := "–"
		if o, p := res.find(psTput, sysOurs, predMajorityName, "loopback", "", "", "", r.InFlight), res.find(psTput, sysNATS, predNATS, "loopback", "", "", "", r.InFlight); r == o && p != nil && p.measured() {
			rat = fmt.Sprintf("%.2f", o.OpsPerS/p.OpsPerS)
		}
		w("| %s | %d | %d | %.0f | %.1f | %.1f |", r.System, r.InFlight, r.Ops, r.OpsPerS, r.P50ms, r.P99ms)
		for _, s := range sites {
			v, ok := r.DeliveredPerS[s]
			if !ok {
				w(" – |")
				continue
			}
			lag := ""
			if n := r.Lag[s]; n > 0 {
				lag = fmt.Sprintf(" (%d behind)", n)
			}
			w(" %.0f%s |", v, lag)
		}
		w(" %s |\n", rat)
	}
	w("\n")
}

func psReportMemory(w writef, res *psResults) {
	rows := inSiteOrder(res.Sites, append(slices.Clone(res.rows(psMemory, sysOurs)), res.rows(psMemory, sysNATS)...))
	if len(rows) == 0 {
		return
	}
	w("## Memory while a durable subscriber stops acking\n\n")
	w("On loopback, publishing at full rate (asynchronous, the larger window in flight) with one durable subscriber per site; the one at the first site stops acking for the stall while the others go on. ")
	w("Each site's RSS is sampled from /proc. Bounded: the peak over the stall's last third is at most %.2f × the peak over its first third + %.0f MiB (it levels off while the unacked backlog grows).\n\n", psRSSGrowth, psRSSSlackMiB)
	w("| system | site | samples | stall (s) | before the stall MiB | peak, first third MiB | peak, last third MiB | bounded |\n|---|---|---:|---|---:|---:|---:|---|\n")
	for _, r := range rows {
		if !r.measured() {
			w("| %s | %s | – | | | | | %s |\n", r.System, dash(r.Region), mark(statusNotMeasured))
			continue
		}
		before := 0.0
		for _, p := range r.RSS {
			if p.T < r.StallFromS {
				before = p.MiB
			}
		}
		first, last, bounded, ok := rssVerdict(r)
		verdict := mark(statusNotMeasured)
		if ok && bounded {
			verdict = mark(statusMet)
		} else if ok {
			verdict = mark(statusMissed)
		}
		if r.System != sysOurs {
			verdict = strings.TrimSuffix(strings.TrimPrefix(verdict, "**"), "**") + " (contrast)"
		}
		w("| %s | %s | %d | %.0f–%.0f | %.0f | %.0f | %.0f | %s |\n", r.System, r.Region, len(r.RSS), r.StallFromS, r.StallToS, before, first, last, verdict)
	}
	w("\n")
}
