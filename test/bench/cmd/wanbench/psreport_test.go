package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/psload"
	"github.com/stabilizer/stabilizer/wan"
)

// psSynth makes a run's results without a cluster, as the phases would:
// samples drawn just above each row's bound, made into rows by the same
// functions. With ours false, our rows are the stub's: not measured.
type psSynth struct {
	t    *testing.T
	topo *wan.Topology
	o    psOptions
	res  *psResults
	rng  *rand.Rand
	at   time.Time // the clock of the samples
}

func newPSSynth(t *testing.T) *psSynth {
	topo := topology(t, "ec2-3")
	o := newPubSubCmdOptions()
	o.subscribers, o.inflight = []string{us, eu}, []int{64, 256}
	res := newPSResults(topo, o, []string{ap})
	res.Started, res.Finished, res.Host = time.Unix(1764400000, 0), time.Unix(1764400300, 0), "test"
	return &psSynth{t: t, topo: topo, o: o, res: res, rng: rand.New(rand.NewPCG(1, 2)), at: time.Unix(1764400010, 0)}
}

// lat is a latency just above bound, stretched by over.
func (s *psSynth) lat(boundMs, over float64) float64 { return boundMs*over + 0.5 + s.rng.Float64() }

func (s *psSynth) pubs(region, topic string, n int, ms func() float64) []psload.PubSample {
	var out []psload.PubSample
	for range n {
		d := ms()
		out = append(out, psload.PubSample{Region: region, Topic: topic, At: s.at.UnixNano(), Ms: d})
		s.at = s.at.Add(time.Duration(d*float64(time.Millisecond)) + time.Millisecond)
	}
	return out
}

// ours adds our rows: every one near its bound but audience from
// ap-northeast-1 (30% over: a miss); the degraded link hurting all but not
// audience; throughput 2.4× NATS at 64 in flight and 1.36× at 256, where
// ap-northeast-1's subscriber falls behind; us-east-1's RSS growing.
func (s *psSynth) ours() {
	topo, res := s.topo, s.res
	pb, db := oursPubBound(topo, s.o.subscribers), oursDelBound(topo)
	var pubs []psload.PubSample
	var dels []psload.DelSample
	for _, r := range topo.Sites {
		for topic, pred := range map[string]string{topicMajority: predMajorityName, topicAudience: predAudienceName} {
			over := 1.0
			if pred == predAudienceName && r == ap {
				over = 1.3
			}
			b := ms(pb(r, pred))
			pubs = append(pubs, s.pubs(r, topic, 20, func() float64 { return s.lat(b, over) })...)
		}
		for _, to := range topo.Sites {
			for topic, pred := range map[string]string{topicPersisted: predPersistedName, topicDelMaj: predMajorityName} {
				for range 20 {
					dels = append(dels, psload.DelSample{From: r, To: to, Topic: topic, Ms: s.lat(ms(db(r, to, pred)), 1.05)})
				}
			}
		}
	}
	res.add(pubRows(psPublish, sysOurs, "", pubs, map[string]string{topicMajority: predMajorityName, topicAudience: predAudienceName}, pb)...)
	res.add(delRows(sysOurs, "", dels, map[string]string{topicPersisted: predPersistedName, topicDelMaj: predMajorityName}, db)...)

	before, after, deg := s.degraded(func(region, topic string, degraded bool) float64 {
		b := ms(pb(region, map[string]string{topicAudience: predAudienceName, topicAll: predAllName}[topic]))
		switch {
		case !degraded:
			return s.lat(b, 1)
		case topic == topicAll:
			return s.lat(b+1000, 1)
		default:
			return s.lat(b, 1.02)
		}
	}, []string{topicAudience, topicAll})
	res.add(degradedRows(sysOurs, "", deg, map[string]string{topicAudience: predAudienceName, topicAll: predAllName}, before, after)...)

	for _, x := range []struct {
		n    int
		rate float64
		apAt float64
	}{{64, 12000, 1}, {256, 15000, 0.8}} {
		res.add(tputRow(sysOurs, predMajorityName, x.n, s.async(x.rate, x.apAt)))
	}
	res.add(memoryRows(sysOurs, predMajorityName, topo.Sites, s.rss(map[string]float64{us: 4, eu: 0.1, ap: 0}), s.stalled())...)
}

// nats adds NATS's rows, each 5 ms over its bound.
func (s *psSynth) nats() {
	topo, res := s.topo, s.res
	for _, l := range topo.Sites {
		var pubs []psload.PubSample
		var dels []psload.DelSample
		for _, r := range topo.Sites {
			b := ms(natsBound(topo, topo.Sites, l, r))
			pubs = append(pubs, s.pubs(r, topicNATSWAN, 20, func() float64 { return s.lat(b+5, 1) })...)
			for _, to := range topo.Sites {
				for range 20 {
					dels = append(dels, psload.DelSample{From: r, To: to, Topic: topicNATSWAN, Ms: s.lat(b+ms(owd(topo, l, to)), 1)})
				}
			}
		}
		res.add(pubRows(psPublish, sysNATS, l, pubs, map[string]string{topicNATSWAN: predNATS}, natsPubBound(topo, l))...)
		res.add(delRows(sysNATS, l, dels, map[string]string{topicNATSWAN: predNATS}, noDelBound)...)
	}
	before, after, deg := s.degraded(func(region, _ string, _ bool) float64 {
		return s.lat(ms(natsBound(topo, topo.Sites, us, region)), 1)
	}, []string{topicNATSDeg})
	res.add(degradedRows(sysNATS, us, deg, map[string]string{topicNATSDeg: predNATS}, before, after)...)
	res.add(tputRow(sysNATS, predNATS, 64, s.async(5000, 1)), tputRow(sysNATS, predNATS, 256, s.async(11000, 1)))
	res.add(memoryRows(sysNATS, predNATS, topo.Sites, s.rss(map[string]float64{us: 0.2, eu: 0.2, ap: 0.2}), s.stalled())...)
}

// degraded makes a degraded phase's publishes from the subscribers'
// regions, lat giving each its latency, the links changing midway.
func (s *psSynth) degraded(lat func(region, topic string, degraded bool) float64, topics []string) (before, after time.Time, pubs []psload.PubSample) {
	start, end := s.at, s.at
	for _, r := range s.o.subscribers {
		for _, tp := range topics {
			s.at = start
			pubs = append(pubs, s.pubs(r, tp, 10, func() float64 { return lat(r, tp, false) })...)
			if s.at.After(end) {
				end = s.at
			}
		}
	}
	before = end.Add(time.Second)
	after = before.Add(10 * time.Millisecond)
	start = after.Add(degradeSettle)
	for _, r := range s.o.subscribers {
		for _, tp := range topics {
			s.at = start
			pubs = append(pubs, s.pubs(r, tp, 10, func() float64 { return lat(r, tp, true) })...)
		}
	}
	return before, after, pubs
}

func (s *psSynth) async(rate, apAt float64) *psload.AsyncResult {
	a := &psload.AsyncResult{Published: int(rate * 8), PerS: rate, Total: int(rate * 10), P50Ms: 8, P99Ms: 30}
	for _, site := range s.topo.Sites {
		per := rate
		if site == ap {
			per *= apAt
		}
		a.Subs = append(a.Subs, psload.SubStats{Sub: psload.Sub{Region: site}, PerS: per, InWindow: int(per * 8), Distinct: a.Total})
	}
	return a
}

// stalled is a memory phase's timeline: 10 s, a 60 s stall, 10 s.
func (s *psSynth) stalled() *psload.AsyncResult {
	t0 := time.Unix(1764400100, 0)
	return &psload.AsyncResult{Start: t0.UnixNano(), StallFrom: t0.Add(10 * time.Second).UnixNano(), StallTo: t0.Add(70 * time.Second).UnixNano(),
		Subs: []psload.SubStats{{Sub: psload.Sub{Region: us}, MaxHeld: 1000, Redelivered: 2000}}}
}

// rss samples each site every half second for 80 s, growing by its MiB/s.
func (s *psSynth) rss(growth map[string]float64) map[string][]rssSample {
	t0 := time.Unix(1764400100, 0)
	out := map[string][]rssSample{}
	for site, g := range growth {
		for i := range 161 {
			t := float64(i) / 2
			out[site] = append(out[site], rssSample{at: t0.Add(time.Duration(t * float64(time.Second))), mib: 100 + g*t + s.rng.Float64()})
		}
	}
	return out
}

func statuses(ts []psTarget) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		out[t.Name] = t.Status
	}
	return out
}

// TestPSReport writes the report of synthetic results where ours was
// measured, checks every target's verdict, and reads the files back.
func TestPSReport(t *testing.T) {
	s := newPSSynth(t)
	s.ours()
	s.nats()
	dir := t.TempDir()
	if err := writePSOutputs(dir, s.res); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"publish-ack p50 ≤ 1.10 × bound + 3 ms (ours, majority and audience)":    statusMissed,
		"mean publish-ack gain over NATS ≥ 95% of the ceiling (ours majority)":   statusMet,
		"cross-region delivery p50 ≤ 1.15 × bound + 3 ms (ours)":                 statusMet,
		"degraded link: audience publish-ack p50 within 5% of healthy":           statusMet,
		"degraded link: all publish-ack p50 degrades (the fault happened)":       statusMet,
		"loopback async publish rate ≥ 1.5 × NATS JetStream's":                   statusMissed,
		"delivery to one durable subscriber per site keeps up (ours)":            statusMissed,
		"RSS bounded while a durable subscriber stops acking (ours, every site)": statusMissed,
		"the whole run under 10 minutes":                                         statusMet,
	}
	got := statuses(s.res.Targets)
	if len(got) != len(want) {
		t.Errorf("targets %v", got)
	}
	for name, st := range want {
		if got[name] != st {
			t.Errorf("%s: %s, want %s", name, got[name], st)
		}
	}
	for _, f := range []string{resultsFile, latenciesFile, reportFile, psPublishPlot, psDeliveryPlot, psDegradedPlot, psTputPlot, psMemoryPlot, psCDFFile(us)} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, w := range []string{
		"| publish-ack p50 ≤ 1.10 × bound + 3 ms (ours, majority and audience) | **missed** | 1 of 6 publish-ack rows over 1.10 × bound + 3 ms: audience from ap-northeast-1",
		"| stabilizer | audience | – | ap-northeast-1 | 20 |",
		"| nats-jetstream | R3 | eu-west-1 | ap-northeast-1 | 20 |",
		"The ceiling the bounds allow: **37.1%** mean gain; the target is 35.2%. Measured over 9 of 9 pairs.",
		"| us-east-1 → ap-northeast-1 |",
		"| stabilizer | all | – | us-east-1 | 10 |",
		"| met |\n| stabilizer | all | – | eu-west-1 |",
		"64 in flight: ours 12000/s, NATS 5000/s (2.40×); 256 in flight: ours 15000/s, NATS 11000/s (1.36×)",
		"256 in flight: behind at ap-northeast-1 12000/s of 15000/s published",
		"us-east-1 grew",
		"| nats-jetstream | us-east-1 | 161 | 10–70 |",
		"![memory](memory.png)",
	} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	if t.Failed() {
		t.Log(report)
	}
	// results.json carries the targets, and the report can be made again
	// from the files alone.
	var raw struct {
		Bench   string     `json:"bench"`
		Targets []psTarget `json:"targets"`
	}
	b, err = os.ReadFile(filepath.Join(dir, resultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil || raw.Bench != psBenchName || len(raw.Targets) != len(want) {
		t.Fatalf("results.json: bench %q, %d targets, %v", raw.Bench, len(raw.Targets), err)
	}
	if kind, err := benchKind(dir); err != nil || kind != psBenchName {
		t.Fatalf("benchKind = %q, %v", kind, err)
	}
	back, err := loadPSResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	plots := []string{psPublishPlot}
	if again, first := psReport(back, plots), psReport(s.res, plots); again != first {
		t.Errorf("the report from the files differs from the first:\n%s\n----\n%s", again, first)
	}
	if len(back.Rows[0].lat) == 0 || len(back.Rows[0].lat) != len(s.res.Rows[0].lat) {
		t.Errorf("latencies of the first row: %d read back, %d written", len(back.Rows[0].lat), len(s.res.Rows[0].lat))
	}
}

// TestPSReportNotWired: with the stub in place every target that needs
// ours is not measured, no number is shown for ours, and NATS's rows are.
func TestPSReportNotWired(t *testing.T) {
	s := newPSSynth(t)
	skipOursWAN(s.res, s.topo, s.o.subscribers, notWired)
	skipLoopback(s.res, sysOurs, s.o, s.topo, notWired)
	s.nats()
	dir := t.TempDir()
	if err := writePSOutputs(dir, s.res); err != nil {
		t.Fatal(err)
	}
	for _, tg := range s.res.Targets {
		want := statusNotMeasured
		if strings.HasPrefix(tg.Name, "the whole run") {
			want = statusMet
		}
		if tg.Status != want {
			t.Errorf("%s: %s (%s), want %s", tg.Name, tg.Status, tg.Detail, want)
		}
	}
	for _, r := range s.res.Rows {
		if r.System == sysOurs && (r.measured() || r.Skipped != notWired || r.P50ms != 0) {
			t.Errorf("a row of ours with numbers: %+v", r)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, w := range []string{
		"| stabilizer | majority | – | us-east-1 | – | _not measured_ | | | 69.7 | | _not measured_ |",
		"0 of 9 (region, leader) pairs measured; ceiling 37.1%",
		"- stabilizer, publish_ack: not measured: ours not wired yet",
		"| nats-jetstream | R3 | us-east-1 | us-east-1 | 20 |",
		"| stabilizer | 64 | _not measured_ |",
	} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	if t.Failed() {
		t.Log(report)
	}
}

func TestSplitAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := func(at time.Duration, ms float64) psload.PubSample {
		return psload.PubSample{At: t0.Add(at).UnixNano(), Ms: ms}
	}
	pubs := []psload.PubSample{p(0, 50), p(900*time.Millisecond, 99), p(900*time.Millisecond, 101), p(1500*time.Millisecond, 10), p(2100*time.Millisecond, 10)}
	h, d := splitAt(pubs, t0.Add(time.Second), t0.Add(2*time.Second))
	if len(h) != 2 || len(d) != 1 || h[1].Ms != 99 || d[0].Ms != 10 {
		t.Fatalf("healthy %v, degraded %v", h, d)
	}
}

func TestRSSVerdict(t *testing.T) {
	series := func(f func(t float64) float64) []rssPoint {
		var out []rssPoint
		for i := range 80 {
			out = append(out, rssPoint{T: float64(i), MiB: f(float64(i))})
		}
		return out
	}
	for _, c := range []struct {
		name              string
		rss               []rssPoint
		bounded, complete bool
	}{
		{"flat", series(func(float64) float64 { return 200 }), true, true},
		{"levels off", series(func(t float64) float64 { return 100 + 60*min(t, 20)/20 }), true, true},
		{"grows", series(func(t float64) float64 { return 100 + 3*t }), false, true},
		{"no samples in the stall", series(func(float64) float64 { return 1 })[:5], false, false},
	} {
		r := &psRow{RSS: c.rss, StallFromS: 10, StallToS: 70}
		_, _, bounded, ok := rssVerdict(r)
		if bounded != c.bounded || ok != c.complete {
			t.Errorf("%s: bounded %v, complete %v; want %v, %v", c.name, bounded, ok, c.bounded, c.complete)
		}
	}
}

// TestDegradeDuring: the links change at the time given while the load
// runs, are restored after it, and the load's error comes back.
func TestDegradeDuring(t *testing.T) {
	var order []string
	changed := make(chan struct{})
	before, after, err := degradeDuring(context.Background(), time.Now(),
		func() error { order = append(order, "degrade"); close(changed); return nil },
		func() error { order = append(order, "restore"); return nil },
		func() error { <-changed; return errors.New("load failed") })
	if err == nil || err.Error() != "load failed" || strings.Join(order, ",") != "degrade,restore" || after.Before(before) {
		t.Fatalf("err %v, order %v, before %v, after %v", err, order, before, after)
	}
	// A load that ends before the change is an error, and still restores.
	order = nil
	_, _, err = degradeDuring(context.Background(), time.Now().Add(time.Hour),
		func() error { order = append(order, "degrade"); return nil },
		func() error { order = append(order, "restore"); return nil },
		func() error { return nil })
	if err == nil || strings.Join(order, ",") != "restore" {
		t.Fatalf("err %v, order %v", err, order)
	}
}

func TestInSiteOrder(t *testing.T) {
	rows := []*psRow{
		{System: sysNATS, Predicate: predNATS, Leader: ap, Region: us},
		{System: sysOurs, Predicate: predMajorityName, Region: ap},
		{System: sysNATS, Predicate: predNATS, Leader: us, Region: ap},
		{System: sysOurs, Predicate: predMajorityName, Region: us},
		{System: sysNATS, Predicate: predNATS, Leader: us, Region: us},
	}
	var got []string
	for _, r := range inSiteOrder([]string{us, eu, ap}, rows) {
		got = append(got, r.System[:4]+"/"+r.Leader+"/"+r.Region)
	}
	want := "nats/ap-northeast-1/us-east-1"
	if strings.Join(got, " ") != "nats/us-east-1/us-east-1 nats/us-east-1/ap-northeast-1 "+want+" stab//us-east-1 stab//ap-northeast-1" {
		t.Errorf("order %v", got)
	}
}
