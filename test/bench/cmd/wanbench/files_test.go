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
// checkpoint 1 at ap-northeast-1 (40% over), Syncthing slower but for
// checkpoint 2's bytes; the KV twice as slow while busy.
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
			res.Runs = append(res.Runs, &fsCheckpointRun{System: sys, Checkpoint: ck, Files: 5, Bytes: lack, ChangedBytes: lack,
				Wire:     map[string]int64{us + "->" + eu: wire, us + "->" + ap: wire, eu + "->" + us: 1 << 20, ap + "->" + us: 1 << 20},
				WindowMs: 25000, Util: map[string]float64{us + "->" + eu: 0.9, us + "->" + ap: 0.88}, CPUIdle: 0.4,
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

func TestFSTargets(t *testing.T) {
	res := fsSynth(t)
	got := map[string]psTarget{}
	for _, tg := range res.evaluate() {
		got[tg.Name] = tg
	}
	want := map[string]string{
		"checkpoint 1 (ckpt/step-1000) stable under majority ≤ 1.2× bound":                       statusMet,
		"checkpoint 1 (ckpt/step-1000) complete at eu-west-1 ≤ 1.2× bound":                       statusMet,
		"checkpoint 1 (ckpt/step-1000) complete at ap-northeast-1 ≤ 1.2× bound":                  statusMissed,
		"checkpoint 2 (ckpt/step-2000) complete at ap-northeast-1 ≤ 1.2× bound":                  statusMet,
		"checkpoint 2 (ckpt/step-2000) bytes sent per link from us-east-1 ≤ 1.15× changed bytes": statusMet,
		"ours faster than Syncthing to complete at every region, both checkpoints":               statusMet,
		"ours fewer bytes on the wire than Syncthing, both checkpoints":                          statusMissed,
		"KV majority put p50 while checkpoint 1 streams ≤ 1.10× idle + 3 ms":                     statusMissed,
		"chunking and hashing on one core ≥ 4× link bandwidth":                                   statusMet,
		"memory: stabsync < 256 MiB, each site < 512 MiB while a big file syncs":                 statusMissed,
		"the whole bench within 10m0s":                                                           statusMet,
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
	if d := got["ours fewer bytes on the wire than Syncthing, both checkpoints"].Detail; !strings.Contains(d, "more bytes: ckpt/step-2000") {
		t.Errorf("the bytes target does not say where: %s", d)
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
		"| checkpoint 1 (ckpt/step-1000) complete at ap-northeast-1 ≤ 1.2× bound | **missed** |",
		"**Bound** = bytes the receiver lacks / link bandwidth + round trip(origin, receiver)",
		"| ours | ckpt/step-1000 | complete | eu-west-1 | 512.0 MiB | 21.54 | 23.70 | 1.10 | met |",
		"| idle | 70.0 | 75.0 |",
		"POST /rest/db/scan",
		"![files-time-vs-bound](files-time-vs-bound.png)",
	} {
		if !strings.Contains(report, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	for _, p := range []string{fsTimesPlot, fsWirePlot, fsLinksPlot, fsKVPlot} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
	if t.Failed() {
		t.Log(report)
	}
}
