package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/wan"
)

func TestFSBound(t *testing.T) {
	for _, c := range []struct {
		name string
		lack int64
		bw   wan.Bandwidth
		rtt  time.Duration
		want time.Duration
	}{
		{"checkpoint 1 to eu-west-1", 512 << 20, 25 * wan.MBPerSecond, 69700 * time.Microsecond, 21474836480*time.Nanosecond + 69700*time.Microsecond},
		{"nothing lacking is one round trip", 0, 25 * wan.MBPerSecond, 150 * time.Millisecond, 150 * time.Millisecond},
		{"unlimited link", 1 << 30, 0, 10 * time.Millisecond, 10 * time.Millisecond},
		{"25 MB at 25 MB/s", 25_000_000, 25 * wan.MBPerSecond, 0, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fsBound(c.lack, c.bw, c.rtt); got != c.want {
				t.Fatalf("fsBound(%d, %s, %v) = %v, want %v", c.lack, c.bw, c.rtt, got, c.want)
			}
		})
	}
}

// TestFSCoopBound: the cooperative bound's bandwidth term is the single
// path's over k, its latency the same round trip; k < 2 is the single
// path.
func TestFSCoopBound(t *testing.T) {
	bw := 25 * wan.MBPerSecond
	for _, c := range []struct {
		name string
		lack int64
		bw   wan.Bandwidth
		k    int
		rtt  time.Duration
		want time.Duration
	}{
		{"ec2-3: two receivers, D/(2B) plus the round trip", 512 << 20, bw, 2, 69700 * time.Microsecond, 10737418240*time.Nanosecond + 69700*time.Microsecond},
		{"50 MB to two receivers at 25 MB/s", 50_000_000, bw, 2, 0, time.Second},
		{"75 MB to three receivers at 25 MB/s", 75_000_000, bw, 3, 10 * time.Millisecond, time.Second + 10*time.Millisecond},
		{"one receiver is the single path", 25_000_000, bw, 1, 5 * time.Millisecond, time.Second + 5*time.Millisecond},
		{"no receiver is the single path", 25_000_000, bw, 0, 0, time.Second},
		{"unlimited links", 1 << 30, 0, 2, 10 * time.Millisecond, 10 * time.Millisecond},
		{"nothing lacking is one round trip", 0, bw, 2, 150 * time.Millisecond, 150 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fsCoopBound(c.lack, c.bw, c.k, c.rtt); got != c.want {
				t.Fatalf("fsCoopBound(%d, %s, %d, %v) = %v, want %v", c.lack, c.bw, c.k, c.rtt, got, c.want)
			}
		})
	}
	// For any k the bandwidth term is the single path's over k.
	for k := 2; k <= 6; k++ {
		single := fsBound(300<<20, bw, 0)
		if got, want := fsCoopBound(300<<20, bw, k, 0), single/time.Duration(k); got < want-time.Microsecond || got > want+time.Microsecond {
			t.Errorf("k=%d: %v, want the single path's %v / %d = %v", k, got, single, k, want)
		}
	}
}

func TestEditRuns(t *testing.T) {
	size := int64(128 << 20)
	runs := editRuns(size, fsEditShare, 3)
	var sum int64
	for i, r := range runs {
		if r[0] < 0 || r[1] > size || r[1]-r[0] > fsRunBytes || r[1] <= r[0] {
			t.Fatalf("run %d %v out of bounds", i, r)
		}
		if i > 0 && r[0] < runs[i-1][1] {
			t.Fatalf("runs %v and %v overlap", runs[i-1], r)
		}
		sum += r[1] - r[0]
	}
	if want := int64(float64(size) * fsEditShare); sum != want {
		t.Fatalf("runs cover %d bytes, want %d", sum, want)
	}
	if len(runs) != 4 { // 12.8 MiB: three runs of 4 MiB and one of 0.8
		t.Fatalf("%d runs, want 4", len(runs))
	}
}

func TestBusyWindow(t *testing.T) {
	s := []fsLinkPoint{{0.25, 0}, {0.5, 3}, {0.75, 20}, {1, 24}, {1.25, 2}, {1.5, 22}, {1.75, 0}}
	from, to, ok := busyWindow(s, 12.5)
	if !ok || from != 0.5 || to != 1.5 {
		t.Fatalf("busyWindow = %v, %v, %v; want 0.5, 1.5, true", from, to, ok)
	}
	if _, _, ok := busyWindow(s[:2], 12.5); ok {
		t.Fatal("an idle link has a busy window")
	}
}

// fsSynth is a run's results without a cluster: ours near its bounds but
// checkpoint 1 at ap-northeast-1 (40% over; checkpoint 2 there 25% over,
// within the complete target's 1.3), Syncthing slower but for checkpoint
// 2's bytes (ours 3% more); the KV twice as slow while busy; ours half
// Syncthing's CPU per GiB over the span, the bench's own process far
// above both. The cooperative bounds are left for coopBounds.
func fsSynth(t *testing.T) *fsResults {
	topo := topology(t, "ec2-3")
	bw := 25 * wan.MBPerSecond
	res := &fsResults{Bench: fsBenchName, Topology: topo.Name, Sites: topo.Sites, Origin: us, Nearest: nearestOf(topo, us),
		RTTms: map[string]map[string]float64{}, Bandwidth: bw.String(), BandwidthBps: float64(bw), Shards: 4, ShardBytes: 128 << 20,
		Settle: "100ms", Started: time.Unix(1764400000, 0), Finished: time.Unix(1764400420, 0), Host: "test"}
	for _, a := range topo.Sites {
		res.RTTms[a] = map[string]float64{}
		for _, b := range topo.Sites {
			if a != b {
				res.RTTms[a][b] = ms(rtt(topo, a, b))
			}
		}
	}
	changed := map[string]int64{"ckpt/step-1000": 512 << 20, "ckpt/step-2000": 2*(128<<20) + 2*int64(float64(res.ShardBytes)*fsEditShare)}
	for _, ck := range []string{"ckpt/step-1000", "ckpt/step-2000"} {
		res.Checkpoints = append(res.Checkpoints, &ckpt{Dir: ck})
		lack := changed[ck]
		for _, sys := range []string{sysOurs, sysSyncthing} {
			over := map[string]float64{eu: 1.1, ap: 1.1}
			if sys == sysSyncthing {
				over = map[string]float64{eu: 1.6, ap: 1.8}
			} else if ck == "ckpt/step-1000" {
				over[ap] = 1.4
			} else {
				over[ap] = 1.25
			}
			if sys == sysOurs {
				b := ms(fsBound(lack, bw, rtt(topo, us, eu)))
				res.Transfers = append(res.Transfers, &fsTransfer{System: sys, Checkpoint: ck, Kind: fsStable, Region: eu, LackBytes: lack, BoundMs: b, TookMs: b * 1.05})
			}
			for _, s := range []string{eu, ap} {
				b := ms(fsBound(lack, bw, rtt(topo, us, s)))
				res.Transfers = append(res.Transfers, &fsTransfer{System: sys, Checkpoint: ck, Kind: fsComplete, Region: s, LackBytes: lack, BoundMs: b, TookMs: b * over[s]})
			}
			wire := int64(float64(lack) * 1.04)
			if sys == sysSyncthing && ck == "ckpt/step-2000" {
				wire = int64(float64(lack) * 1.01)
			} else if sys == sysSyncthing {
				wire = int64(float64(lack) * 1.06)
			}
			// CPU seconds per process: 2 at each of ours' six (12 in all),
			// 4 at each of Syncthing's three children (12 in all) over the
			// span; less over the window.
			cpu := map[string]float64{"wanbench (links, polling)": 100}
			for _, s := range []string{us, eu, ap} {
				if sys == sysOurs {
					cpu["stabilizerd@"+s], cpu["stabsync@"+s] = 1, 1
				} else {
					cpu["syncthing@"+s+" pid 1"], cpu["syncthing@"+s+" pid 2"] = 0, 4
				}
			}
			window := map[string]float64{}
			for k, v := range cpu {
				window[k] = v / 2
			}
			res.Runs = append(res.Runs, &fsCheckpointRun{System: sys, Checkpoint: ck, Files: 5, Bytes: lack, ChangedBytes: lack,
				Wire:     map[string]int64{us + "->" + eu: wire, us + "->" + ap: wire, eu + "->" + us: 1 << 20, ap + "->" + us: 1 << 20},
				WindowMs: 25000, Util: map[string]float64{us + "->" + eu: 0.9, us + "->" + ap: 0.88}, CPUIdle: 0.4,
				CPUSeconds: window, CPUSpan: cpu, SpanMs: 30000,
				Series: map[string][]fsLinkPoint{us + "->" + eu: {{0.25, 10}, {0.5, 24}, {0.75, 25}}}})
		}
	}
	res.KV = &fsKV{Predicate: "majority", IdleOps: 40, BusyOps: 200, IdleP50ms: 70, IdleP99ms: 75, BusyP50ms: 140, BusyP99ms: 300,
		BoundMs: 69.7, BusyFromS: 0.5, BusyToS: 20, BusyAt: []float64{1, 2, 3}, BusyLat: []float64{130, 140, 150}}
	res.Chunking = &fsChunking{Bytes: 64 << 20, Rounds: 3, MBps: 450, SumMBps: 1500, Chunks: 60}
	res.Memory = &fsMemory{Bytes: 2 << 30, Bandwidth: "100MB/s", TookMs: 30000, Reset: true,
		HWM: map[string]float64{"stabsync@" + us: 40, "stabsync@" + eu: 60, "stabilizerd@" + us: 600, "stabilizerd@" + eu: 300}}
	return res
}

// Names of issue 26's targets as the report prints them.
const (
	fsCPUName  = "CPU seconds of our processes (stabilizerd, stabsync) per GiB delivered ≤ Syncthing's, both checkpoints"
	fsWireName = "ours bytes on the wire ≤ 1.02× Syncthing's, both checkpoints"
	fsP50Name  = "KV majority put p50 while checkpoint 1 streams ≤ 1.2× idle p50 + 3 ms"
	fsP99Name  = "KV majority put p99 while checkpoint 1 streams ≤ 2× idle p99"
)

func fsTargets(res *fsResults) map[string]psTarget {
	res.coopBounds()
	got := map[string]psTarget{}
	for _, tg := range res.evaluate() {
		got[tg.Name] = tg
	}
	return got
}

func TestFSTargets(t *testing.T) {
	res := fsSynth(t)
	got := fsTargets(res)
	want := map[string]string{
		"checkpoint 1 (ckpt/step-1000) stable under majority ≤ 1.2× bound":                                  statusMet,
		"checkpoint 1 (ckpt/step-1000) complete at eu-west-1 ≤ 1.3× bound":                                  statusMet,
		"checkpoint 1 (ckpt/step-1000) complete at ap-northeast-1 ≤ 1.3× bound":                             statusMissed,
		"checkpoint 2 (ckpt/step-2000) stable under majority ≤ 1.2× bound":                                  statusMet,
		"checkpoint 2 (ckpt/step-2000) complete at eu-west-1 ≤ 1.3× bound":                                  statusMet,
		"checkpoint 2 (ckpt/step-2000) complete at ap-northeast-1 ≤ 1.3× bound":                             statusMet,
		"checkpoint 2 (ckpt/step-2000) bytes sent per link from us-east-1 ≤ 1.15× changed bytes":            statusMet,
		"ours faster than Syncthing to complete at every region, both checkpoints":                          statusMet,
		"checkpoint 1 (ckpt/step-1000): took × single-path bound / × cooperative bound, ours and Syncthing": statusInfo,
		"checkpoint 2 (ckpt/step-2000): took × single-path bound / × cooperative bound, ours and Syncthing": statusInfo,
		fsCPUName:  statusMet,
		fsWireName: statusMissed,
		fsP50Name:  statusMissed,
		fsP99Name:  statusMissed,
		"chunking and hashing on one core ≥ 4× link bandwidth":                   statusMet,
		"memory: stabsync < 256 MiB, each site < 512 MiB while a big file syncs": statusMissed,
		"the whole bench within 10m0s":                                           statusMet,
	}
	for name, st := range want {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q", name)
			continue
		}
		if tg.Status != st {
			t.Errorf("%s: %s (%s), want %s", name, tg.Status, tg.Detail, st)
		}
	}
	if len(got) != len(want) {
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("unexpected target %q", name)
			}
		}
	}
	if d := got[fsWireName].Detail; !strings.Contains(d, "over 1.02× at ckpt/step-2000.") {
		t.Errorf("the bytes target does not say where: %s", d)
	}
	if d := got["checkpoint 2 (ckpt/step-2000) complete at ap-northeast-1 ≤ 1.3× bound"].Detail; !strings.Contains(d, "1.25× (target ≤ 1.30×)") {
		t.Errorf("the complete target's detail: %s", d)
	}
	// Syncthing at eu-west-1 took 1.6× the single path: 3.2× the
	// cooperative bound, whose bandwidth term is half (less the round
	// trip's share).
	if d := got["checkpoint 1 (ckpt/step-1000): took × single-path bound / × cooperative bound, ours and Syncthing"].Detail; !strings.Contains(d, "complete at eu-west-1: ours 1.10× / 2.19×, Syncthing 1.60× / 3.19×") {
		t.Errorf("the cooperative bound's information: %s", d)
	}
	if d := got[fsCPUName].Detail; !strings.Contains(d, "ckpt/step-1000: 6.0 vs 12.0 s/GiB, 0.50×") || !strings.Contains(d, "until the links went quiet") {
		t.Errorf("the CPU target's detail: %s", d)
	}
	if d := got["memory: stabsync < 256 MiB, each site < 512 MiB while a big file syncs"].Detail; !strings.Contains(d, "over the limit: stabilizerd@us-east-1;") {
		t.Errorf("the memory target does not say who: %s", d)
	}
}

// TestFSReport renders the synthetic run, reads it back as `wanbench
// report` would and checks the report and plots.
func TestFSReport(t *testing.T) {
	dir := t.TempDir()
	if err := writeFSOutputs(dir, fsSynth(t)); err != nil {
		t.Fatal(err)
	}
	kind, err := benchKind(dir)
	if err != nil || kind != fsBenchName {
		t.Fatalf("benchKind = %q, %v", kind, err)
	}
	res, err := loadFSResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFSOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, s := range []string{
		"| checkpoint 1 (ckpt/step-1000) complete at ap-northeast-1 ≤ 1.3× bound | **missed** |",
		"| checkpoint 2 (ckpt/step-2000) complete at ap-northeast-1 ≤ 1.3× bound | met |",
		"| checkpoint 1 (ckpt/step-1000): took × single-path bound / × cooperative bound, ours and Syncthing | information |",
		"| " + fsCPUName + " | met |",
		"| " + fsWireName + " | **missed** |",
		"| " + fsP50Name + " | **missed** | p50 140.0 ms busy vs 70.0 ms idle (2.00×), limit 87.0 ms; 200 and 40 puts |",
		"| " + fsP99Name + " | **missed** | p99 300.0 ms busy vs 75.0 ms idle (4.00×), limit 150.0 ms; 200 and 40 puts |",
		"**Bound** (single path) = bytes the receiver lacks / link bandwidth + round trip(origin, receiver)",
		"**Cooperative bound** = D / (k × B) + round trip(origin, receiver)",
		"here k = 2, D / (2 × 25MB/s)",
		"| ours | ckpt/step-1000 | complete | eu-west-1 | 512.0 MiB | 21.54 | 10.81 | 23.70 | 1.10 | 2.19 | met |",
		"| ours | ckpt/step-2000 | complete | ap-northeast-1 | 281.6 MiB | 11.96 | 6.06 | 14.95 | 1.25 | 2.47 | met |",
		"| Syncthing | ckpt/step-1000 | complete | eu-west-1 | 512.0 MiB | 21.54 | 10.81 | 34.47 | 1.60 | 3.19 |  |",
		"| ours | ckpt/step-1000 | 6 | 6.0 | span, 30.0 s | 1.00 | 6.0 |",
		"| Syncthing | ckpt/step-1000 | 6 | 12.0 | span, 30.0 s | 1.00 | 12.0 |",
		"| idle | 70.0 | 75.0 |",
		"| limit (1.2× idle p50 + 3 ms; 2× idle p99) | 87.0 | 150.0 |",
		"POST /rest/db/scan",
		"![files-time-vs-bound](files-time-vs-bound.png)",
	} {
		if !strings.Contains(report, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	for _, p := range []string{fsTimesPlot, fsWirePlot, fsCPUPlot, fsLinksPlot, fsKVPlot} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
	if t.Failed() {
		t.Log(report)
	}
}

// TestFSWireTarget: ours may put up to 2 % more bytes on the wire than
// Syncthing, at each checkpoint.
func TestFSWireTarget(t *testing.T) {
	for _, c := range []struct {
		name        string
		ours, their float64 // × the changed bytes on each origin link, checkpoint 2
		want        string
	}{
		{"fewer", 1.00, 1.01, statusMet},
		{"1.5 % more is within 2 %", 1.04, 1.025, statusMet},
		{"3 % more", 1.04, 1.01, statusMissed},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := fsSynth(t)
			for _, r := range res.Runs {
				if r.Checkpoint != "ckpt/step-2000" {
					continue
				}
				f := c.ours
				if r.System == sysSyncthing {
					f = c.their
				}
				for k := range r.Wire {
					if from, _, _ := cutLink(k); from == us {
						r.Wire[k] = int64(f * float64(r.ChangedBytes))
					}
				}
			}
			if tg := fsTargets(res)[fsWireName]; tg.Status != c.want {
				t.Fatalf("%s (%s), want %s", tg.Status, tg.Detail, c.want)
			}
		})
	}
}

// TestFSKVTargets: p50 within 1.2 × idle + 3 ms, p99 within 2 × idle,
// each a target of its own.
func TestFSKVTargets(t *testing.T) {
	for _, c := range []struct {
		name             string
		busyP50, busyP99 float64 // idle: 70 and 75 ms
		wantP50, wantP99 string
	}{
		{"both within", 87, 150, statusMet, statusMet},
		{"p50 over", 87.1, 150, statusMissed, statusMet},
		{"p99 over", 80, 150.1, statusMet, statusMissed},
		{"both over", 545, 1951, statusMissed, statusMissed},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := fsSynth(t)
			res.KV.BusyP50ms, res.KV.BusyP99ms = c.busyP50, c.busyP99
			got := fsTargets(res)
			if tg := got[fsP50Name]; tg.Status != c.wantP50 {
				t.Errorf("p50: %s (%s), want %s", tg.Status, tg.Detail, c.wantP50)
			}
			if tg := got[fsP99Name]; tg.Status != c.wantP99 {
				t.Errorf("p99: %s (%s), want %s", tg.Status, tg.Detail, c.wantP99)
			}
		})
	}
	res := fsSynth(t)
	res.KV = &fsKV{Skipped: "skipped: --skip kv"}
	got := fsTargets(res)
	for _, n := range []string{fsP50Name, fsP99Name} {
		if tg := got[n]; tg.Status != statusNotMeasured || tg.Detail != "skipped: --skip kv" {
			t.Errorf("%s: %s (%s), want not measured", n, tg.Status, tg.Detail)
		}
	}
}

// TestFSCPUTarget: our stabilizerd and stabsync against every syncthing
// process, per GiB delivered, the bench's own process never counted;
// over the span where measured, else over the window, saying so.
func TestFSCPUTarget(t *testing.T) {
	set := func(res *fsResults, system, ck string, f func(c *fsCheckpointRun)) {
		f(res.run(system, ck))
	}
	for _, c := range []struct {
		name   string
		change func(res *fsResults)
		want   string
		detail []string
	}{
		{"ours half Syncthing's", func(*fsResults) {}, statusMet,
			[]string{"ckpt/step-1000: 6.0 vs 12.0 s/GiB, 0.50× (6.0 and 12.0 CPU s for 1.00 GiB)", "from just before the shards were written"}},
		{"ours over at checkpoint 2", func(res *fsResults) {
			set(res, sysOurs, "ckpt/step-2000", func(c *fsCheckpointRun) { c.CPUSpan["stabilizerd@"+us] = 10 })
		}, statusMissed, []string{"more than Syncthing's at ckpt/step-2000. "}},
		{"the bench's own process counts for neither", func(res *fsResults) {
			set(res, sysSyncthing, "ckpt/step-1000", func(c *fsCheckpointRun) { c.CPUSpan["wanbench (links, polling)"] = 0 })
			set(res, sysOurs, "ckpt/step-1000", func(c *fsCheckpointRun) { c.CPUSpan["wanbench (links, polling)"] = 1000 })
		}, statusMet, []string{"ckpt/step-1000: 6.0 vs 12.0 s/GiB"}},
		{"a run before the span was measured", func(res *fsResults) {
			for _, r := range res.Runs {
				r.CPUSpan, r.SpanMs = nil, 0
			}
		}, statusMet, []string{"ckpt/step-1000: 3.0 vs 6.0 s/GiB", "the run predates the longer span"}},
		{"no CPU time", func(res *fsResults) {
			for _, r := range res.Runs {
				r.CPUSpan, r.CPUSeconds = nil, nil
			}
		}, statusNotMeasured, []string{"not measured"}},
		{"Syncthing not run", func(res *fsResults) {
			for _, r := range res.Runs {
				if r.System == sysSyncthing {
					r.Skipped = "skipped: --skip syncthing"
				}
			}
		}, statusNotMeasured, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := fsSynth(t)
			c.change(res)
			tg := fsTargets(res)[fsCPUName]
			if tg.Status != c.want {
				t.Fatalf("%s (%s), want %s", tg.Status, tg.Detail, c.want)
			}
			for _, d := range c.detail {
				if !strings.Contains(tg.Detail, d) {
					t.Errorf("detail %q lacks %q", tg.Detail, d)
				}
			}
		})
	}
}

// TestFSOldResults renders the kept run of deploy/bench/files, from
// before issue 26: its transfers get their cooperative bounds, every
// target of issue 26 is marked, the CPU one over the window it has.
func TestFSOldResults(t *testing.T) {
	// The results of a run before issue 26 (deploy/bench/files as of
	// 2f8c309), kept so that old runs stay readable.
	b, err := os.ReadFile(filepath.Join("testdata", "pre26", "files-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, resultsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := loadFSResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFSOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Transfers {
		if want := tr.BoundMs/2 + res.RTTms[res.Origin][tr.Region]/2; tr.CoopBoundMs < want-1 || tr.CoopBoundMs > want+1 {
			t.Errorf("%s %s at %s: cooperative bound %.1f ms, want %.1f", tr.Checkpoint, tr.Kind, tr.Region, tr.CoopBoundMs, want)
		}
	}
	got := map[string]psTarget{}
	for _, tg := range res.Targets {
		got[tg.Name] = tg
		if tg.Status == statusNotMeasured {
			t.Errorf("%s: not measured (%s)", tg.Name, tg.Detail)
		}
	}
	if d := got[fsCPUName].Detail; !strings.Contains(d, "predates the longer span") {
		t.Errorf("the CPU target does not say it is over the window only: %s", d)
	}
	for _, n := range []string{fsWireName, fsP50Name, fsP99Name, "checkpoint 1 (ckpt/step-1000) complete at eu-west-1 ≤ 1.3× bound"} {
		if _, ok := got[n]; !ok {
			t.Errorf("no target %q", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, fsCPUPlot)); err != nil {
		t.Error(err)
	}
}
