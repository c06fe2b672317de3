package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/frontier"
	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// syntheticResults makes a run's results without a cluster: latencies
// drawn around each row's bound.
func syntheticResults(t *testing.T) *benchResults {
	topo, err := wan.OpenTopology("ec2-5")
	if err != nil {
		t.Fatal(err)
	}
	schema := &frontier.Schema{Sites: topo.Sites, Groups: topo.Groups}
	rng := rand.New(rand.NewPCG(1, 2))
	lat := func(boundMs float64, n int, over float64) []time.Duration {
		var out []time.Duration
		for range n {
			v := boundMs*over + 0.5 + rng.Float64()*1.5
			out = append(out, time.Duration(v*float64(time.Millisecond)))
		}
		return out
	}
	res := &benchResults{Topology: topo.Name, Started: time.Unix(1764400000, 0), Finished: time.Unix(1764400300, 0),
		Host: "test", Sites: topo.Sites, Groups: topo.Groups, Leader: topo.Sites[0], RTTms: map[string]map[string]float64{}}
	for _, a := range topo.Sites {
		res.RTTms[a] = map[string]float64{}
		for _, b := range topo.Sites {
			if a != b {
				d, _ := topo.RTT(a, b)
				res.RTTms[a][b] = ms(d)
			}
		}
	}
	oc := otherContinent(topo)
	for _, p := range []string{"local", "one_remote", "majority", "all", otherContinentName} {
		src := p
		if p == otherContinentName {
			src = oc
		}
		cp, err := frontier.Compile(src, schema)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range topo.Sites {
			b := ms(workload.Bound(topo, cp, schema, s))
			over := 1.0
			if p == "all" && s == "eu-west-1" {
				over = 1.3 // a miss, to be reported
			}
			r := &benchRow{Phase: phaseWAN, System: sysOurs, Predicate: p, Region: s, BoundMs: b, lat: lat(b, 50, over)}
			if p == otherContinentName {
				r.Source = oc
			}
			r.Ops = len(r.lat)
			r.finish()
			res.Rows = append(res.Rows, r)
		}
	}
	for _, sys := range []string{sysLin, sysEtcd} {
		for _, s := range topo.Sites {
			b := ms(workload.RaftBound(topo, topo.Sites[0], s))
			r := &benchRow{Phase: phaseWAN, System: sys, Predicate: "linearizable", Region: s, BoundMs: b, lat: lat(b, 50, 1.05)}
			r.Ops = len(r.lat)
			r.finish()
			res.Rows = append(res.Rows, r)
		}
	}
	for _, x := range []struct {
		sys, pred string
		rate      float64
		// at4 is the rate with 4 connections per site over that with 1.
		at4 float64
	}{{sysOurs, "majority", 45000, 0.8}, {sysLin, "linearizable", 20000, 1}, {sysEtcd, "linearizable", 9500, 1.1}} {
		for _, c := range []int{1, 4} {
			for _, n := range []int{64, 256} {
				rate := x.rate
				if c == 4 {
					rate *= x.at4
				}
				r := &benchRow{Phase: phaseTput, System: x.sys, Predicate: x.pred, Region: "loopback", InFlight: n, Conns: c, lat: lat(2, 100, 1)}
				r.Ops, r.OpsPerS = int(rate*8), rate*float64(n)/256
				r.finish()
				res.Rows = append(res.Rows, r)
			}
		}
	}
	res.skipRow(phaseTput, sysNATS, "R3", "loopback", "skipped: synthetic")
	res.note("synthetic results for a test")
	return res
}

// TestBenchReport writes the report and plots of synthetic results and
// reads them back.
func TestBenchReport(t *testing.T) {
	dir := t.TempDir()
	res := syntheticResults(t)
	if err := writeBenchOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{resultsFile, latenciesFile, reportFile, barsFile, tputFile, cdfFile("us-east-1"), cdfFile("ap-southeast-2")} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{
		"| majority | us-west-2 |",
		"24 of 25 predicate rows meet the target. Missed: all from eu-west-1",
		"### majority against consensus",
		"mean, non-leader regions",
		"nats-jetstream R3 (throughput, loopback): skipped: synthetic",
		"![p50-vs-bound](p50-vs-bound.png)",
		"`other_continent` = `kth_max(2, [max(persisted(group(\"ap\"))), max(persisted(group(\"eu\"))), max(persisted(group(\"us\")))])`",
		// Each system at its best connection count: ours with 1, etcd with 4.
		"| stabilizer | majority | 256 | 1 | 360000 | **45000** |",
		"| stabilizer | majority | 256 | 4 | 288000 | 36000 |",
		"| etcd | linearizable | 256 | 4 | 83600 | **10450** |",
		"- 256 in flight: 45000 writes/s (target 40000: met), ahead of etcd (4.31×)",
		"- 64 in flight: 11250 writes/s (target 40000: **missed**), ahead of etcd (4.31×)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// results.json has the fields of issue 7 on every row.
	b, err = os.ReadFile(filepath.Join(dir, resultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, r := range raw.Rows {
		for _, k := range []string{"system", "predicate", "region", "ops", "p50_ms", "p90_ms", "p99_ms", "bound_ms"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %s", r, k)
			}
		}
		if r["phase"] == phaseTput && r["skipped"] == nil {
			if _, ok := r["ops_per_s"]; !ok {
				t.Fatalf("throughput row %v lacks ops_per_s", r)
			}
		}
	}
	// The report can be made again from the files alone.
	back, err := loadBenchResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != len(res.Rows) || len(back.Rows[0].lat) != len(res.Rows[0].lat) {
		t.Fatalf("read back %d rows (%d latencies), wrote %d (%d)", len(back.Rows), len(back.Rows[0].lat), len(res.Rows), len(res.Rows[0].lat))
	}
	if got := benchReport(back, nil); !strings.Contains(got, "24 of 25 predicate rows") {
		t.Fatalf("report from the files differs:\n%s", got)
	}
}

// TestBounds checks the bounds of the report against the ec2-5 matrix by
// hand: other_continent from us-east-1 is eu-west-1's 69.7 ms, and a Raft
// write from eu-west-1 with the leader in us-east-1 is 69.7 + 69.7.
func TestBounds(t *testing.T) {
	topo, err := wan.OpenTopology("ec2-5")
	if err != nil {
		t.Fatal(err)
	}
	schema := &frontier.Schema{Sites: topo.Sites, Groups: topo.Groups}
	cp, err := frontier.Compile(otherContinent(topo), schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		site string
		want float64
	}{{"us-east-1", 69.7}, {"us-west-2", 98.4}, {"eu-west-1", 69.7}, {"ap-northeast-1", 98.4}, {"ap-southeast-2", 141.1}} {
		if got := ms(workload.Bound(topo, cp, schema, c.site)); got != c.want {
			t.Errorf("other_continent from %s: bound %.1f, want %.1f", c.site, got, c.want)
		}
	}
	if got := ms(workload.RaftBound(topo, "us-east-1", "eu-west-1")); got != 139.4 {
		t.Errorf("raft bound from eu-west-1: %.1f, want 139.4", got)
	}
	if got := ms(workload.RaftBound(topo, "us-east-1", "us-east-1")); got != 69.7 {
		t.Errorf("raft bound at the leader: %.1f, want 69.7", got)
	}
}
