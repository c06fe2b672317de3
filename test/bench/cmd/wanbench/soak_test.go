package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
	"github.com/stabilizer/stabilizer/wan"
)

// TestLiveSet: a key's live size is its winner's, the write with the
// highest HLC, between equal HLCs the greater origin, whatever order the
// answers come in.
func TestLiveSet(t *testing.T) {
	type w struct {
		key     string
		size    int
		wall    int64
		logical uint32
		origin  string
	}
	for _, c := range []struct {
		name   string
		writes []w
		want   int64
	}{
		{"one write", []w{{"a", 10, 1, 0, "x"}}, 10},
		{"later wins", []w{{"a", 10, 1, 0, "x"}, {"a", 30, 2, 0, "x"}}, 30},
		{"an older answer after a newer one loses", []w{{"a", 30, 2, 0, "x"}, {"a", 10, 1, 0, "y"}}, 30},
		{"logical breaks a wall tie", []w{{"a", 10, 5, 2, "x"}, {"a", 20, 5, 1, "y"}}, 10},
		{"origin breaks an HLC tie", []w{{"a", 10, 5, 1, "b"}, {"a", 20, 5, 1, "a"}}, 10},
		{"keys add up", []w{{"a", 10, 1, 0, "x"}, {"b", 20, 1, 0, "x"}, {"a", 5, 3, 0, "y"}}, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLiveSet()
			var written int64
			for _, x := range c.writes {
				l.observe(x.key, x.size, x.wall, x.logical, x.origin)
				written += int64(x.size)
			}
			if got := l.bytes(); got != c.want {
				t.Fatalf("live bytes %d, want %d", got, c.want)
			}
			if l.written() != written {
				t.Fatalf("written %d, want %d", l.written(), written)
			}
		})
	}
}

func TestParseBytesText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"512 B", 512, false},
		{"1.0 KiB", 1024, false},
		{"41.5 MiB", 41.5 * (1 << 20), false},
		{"2.0 GiB", 2 << 30, false},
		{"12", 0, true},
		{"1.0 XB", 0, true},
	} {
		got, err := parseBytesText(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseBytesText(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestDiskUsage: files of every directory count, a hard link once, a
// missing directory nothing.
func TestDiskUsage(t *testing.T) {
	d := t.TempDir()
	a, b := filepath.Join(d, "a"), filepath.Join(d, "a.snapshots", "s1")
	for _, dir := range []string{a, b} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a, "000001.sst"), make([]byte, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "MANIFEST"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(a, "000001.sst"), filepath.Join(b, "000001.sst")); err != nil {
		t.Fatal(err)
	}
	u, err := diskUsage(a, filepath.Join(d, "a.snapshots"), filepath.Join(d, "missing"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Apparent != 10100 || u.Files != 2 || u.Allocated < 10100 {
		t.Fatalf("diskUsage = %+v, want 10100 apparent bytes in 2 files, at least as many allocated", u)
	}
}

// soakSynth is a soak's results without a cluster: disk at 2.5× live at
// the end of the settle at two sites, 3.5× at the third; a peak of 3.2×
// in the last third at the first.
func soakSynth() *soakResults {
	sites := []string{"us-east-1", "eu-west-1", "ap-northeast-1"}
	res := &soakResults{Bench: soakBenchName, Topology: "ec2-3", Sites: sites, Host: "test", Commit: "abc",
		Started: time.Unix(1764400000, 0), Finished: time.Unix(1764400200, 0), Bandwidth: "25MB/s", Keys: 100,
		ValueMin: soakValueMin, ValueMax: soakValueMax, Predicate: soakPredicate, RateTarget: 150, Workers: 64,
		DurationS: 120, SettleS: 20, SampleS: 10, WriteS: 120, Short: true,
		Writes: soakWrites{PerSite: map[string]*soakSiteWrites{}}, LiveBytes: 1000, LiveKeys: 100}
	for _, s := range sites {
		res.Writes.PerSite[s] = &soakSiteWrites{Slots: 6000, Acked: 5990, Missed: 10, lats: []time.Duration{80 * time.Millisecond}}
	}
	res.Writes.sum(res.WriteS)
	for i, t := range []float64{0, 40, 80, 90, 100, 120, 140} {
		sm := &soakSample{T: t, Live: 1000, Sites: map[string]*soakSiteSample{}}
		for j, s := range sites {
			disk := int64(2500)
			if j == 2 && t == 140 {
				disk = 3500
			}
			if j == 0 && t == 90 {
				disk = 3200
			}
			sm.Sites[s] = &soakSiteSample{Allocated: disk, Apparent: disk, Estimate: disk / 2, LogEntries: 10,
				Floors: []streamFloor{{Stream: s + "/kv", Head: uint64(100 * (i + 1)), Truncated: uint64(90 * i)}}}
		}
		res.Samples = append(res.Samples, sm)
	}
	res.Scan = map[string]*soakScan{}
	for _, s := range sites {
		res.Scan[s] = &soakScan{Keys: 100, Bytes: 1000}
	}
	return res
}

func TestSoakTargets(t *testing.T) {
	res := soakSynth()
	targets, checks := res.evaluate()
	want := map[string]string{
		"disk ≤ 3× live at every site at the end of the settle":                    statusMissed,
		"disk ≤ 3× live at every site over the last third of the writes (its max)": statusMissed,
		soakFirstName: statusMet,
		"writes acknowledged and the pace held (≥ 95% of --rate)":      statusMet,
		"kv log truncated: every kv stream's floor rose at every site": statusMet,
		"live size as a scan of every site finds it":                   statusMet,
	}
	for _, tg := range append(targets, checks...) {
		if w, ok := want[tg.Name]; !ok || w != tg.Status {
			t.Errorf("%s: %s (%s), want %q", tg.Name, tg.Status, tg.Detail, w)
		}
		delete(want, tg.Name)
	}
	for name := range want {
		t.Errorf("no %q", name)
	}
	if !strings.Contains(targets[0].Detail, "ap-northeast-1 3.50×") || !strings.Contains(targets[1].Detail, "us-east-1 3.20× at 90 s") {
		t.Errorf("details: %q; %q", targets[0].Detail, targets[1].Detail)
	}

	// Floors that stay put, a scan that differs.
	last := res.last()
	last.Sites["eu-west-1"].Floors[0].Truncated = 0
	res.Scan["us-east-1"].Differ = 1
	_, checks = res.evaluate()
	for _, c := range checks {
		if strings.HasPrefix(c.Name, "kv log") && (c.Status != statusMissed || !strings.Contains(c.Detail, "eu-west-1: eu-west-1/kv")) {
			t.Errorf("flat floor: %s: %s", c.Status, c.Detail)
		}
		if strings.HasPrefix(c.Name, "live size") && c.Status != statusMissed {
			t.Errorf("differing scan: %s: %s", c.Status, c.Detail)
		}
	}
}

const soakFirstName = "disk ≤ 64 MiB + 3× live at every site over its first 10 minutes with about 10 MiB of data (every sample; its peak shown)"

// withSmall adds a small-site phase to a synthetic soak: 10 MiB of live
// data from 30 s on, disk at 80 MiB but for a peak of peak MiB at 300 s.
func withSmall(res *soakResults, peak int64) *soakResults {
	res.Small = &soakSmall{DurationS: 600, WriteS: 600, Keys: soakSmallKeys, Writes: soakWrites{PerSite: map[string]*soakSiteWrites{}}}
	for _, s := range res.Sites {
		res.Small.Writes.PerSite[s] = &soakSiteWrites{Slots: 30000, Acked: 30000, lats: []time.Duration{80 * time.Millisecond}}
	}
	res.Small.Writes.sum(600)
	for _, t := range []float64{0, 30, 150, 300, 450, 600} {
		live := int64(10 << 20)
		if t == 0 {
			live = 0
		}
		sm := &soakSample{T: t, Live: live, Sites: map[string]*soakSiteSample{}}
		for _, s := range res.Sites {
			disk := int64(80 << 20)
			if t == 0 {
				disk = 60 << 20
			}
			if t == 300 {
				disk = peak << 20
			}
			sm.Sites[s] = &soakSiteSample{Allocated: disk, Apparent: disk, WAL: disk / 2}
		}
		res.Small.Samples = append(res.Small.Samples, sm)
	}
	return res
}

// TestSoakFirstTarget: every sample of the first minutes against 64 MiB
// + 3 × its live data, the small-site phase's where it ran, else the
// main load's first 10 minutes.
func TestSoakFirstTarget(t *testing.T) {
	for _, c := range []struct {
		name   string
		res    func() *soakResults
		want   string
		detail []string
	}{
		{"small phase within its limit", func() *soakResults { return withSmall(soakSynth(), 94) }, statusMet,
			[]string{"small-site phase of 600 s, 4080 keys, live up to 10.0 MiB", "us-east-1 peak 94.0 MiB at 300 s against 94.0 MiB (64 MiB + 3 × 10.0 MiB): 1.00×"}},
		{"small phase's peak over", func() *soakResults { return withSmall(soakSynth(), 95) }, statusMissed,
			[]string{"us-east-1 peak 95.0 MiB at 300 s against 94.0 MiB (64 MiB + 3 × 10.0 MiB): 1.01×"}},
		{"the peak within, an earlier sample over", func() *soakResults {
			res := withSmall(soakSynth(), 94)
			res.Small.Samples[0].Sites["eu-west-1"].Allocated = 65 << 20 // before any write: limit 64 MiB
			return res
		}, statusMissed, []string{"eu-west-1 peak 94.0 MiB at 300 s against 94.0 MiB (64 MiB + 3 × 10.0 MiB): 1.00×, furthest over at 0 s: 65.0 MiB against 64.0 MiB, 1.02×"}},
		{"no small phase, a short run: what ran", func() *soakResults { return soakSynth() }, statusMet,
			[]string{"the short run has no small-site phase: over the main load's 140 s, all that ran, 100 keys", "us-east-1 peak 0.0 MiB at 90 s against 64.0 MiB"}},
		{"no small phase, a long run: its first 10 minutes only", func() *soakResults {
			res := soakSynth()
			res.Short = false
			for _, tm := range []float64{300, 600, 900} {
				sm := &soakSample{T: tm, Live: 10 << 20, Sites: map[string]*soakSiteSample{}}
				for _, s := range res.Sites {
					disk := int64(90 << 20)
					if tm == 900 {
						disk = 500 << 20 // after the first 10 minutes: not counted
					}
					sm.Sites[s] = &soakSiteSample{Allocated: disk}
				}
				res.Samples = append(res.Samples, sm)
			}
			return res
		}, statusMet, []string{"no small-site phase in this run: over the main load's first 600 s", "us-east-1 peak 90.0 MiB at 300 s"}},
		{"no samples", func() *soakResults {
			res := soakSynth()
			res.Samples = nil
			return res
		}, statusNotMeasured, []string{"no samples"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			targets, _ := c.res().evaluate()
			var tg psTarget
			for _, x := range targets {
				if x.Name == soakFirstName {
					tg = x
				}
			}
			if tg.Status != c.want {
				t.Fatalf("%q: %s (%s), want %s", tg.Name, tg.Status, tg.Detail, c.want)
			}
			for _, d := range c.detail {
				if !strings.Contains(tg.Detail, d) {
					t.Errorf("detail %q lacks %q", tg.Detail, d)
				}
			}
		})
	}
}

func TestSoakLimit(t *testing.T) {
	for _, c := range []struct{ live, want int64 }{{0, 64 << 20}, {10 << 20, 94 << 20}, {1000, 64<<20 + 3000}} {
		if got := soakFirstLimit(c.live); got != c.want {
			t.Errorf("soakFirstLimit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestSoakReportSmall renders a soak with a small-site phase: its own
// check, section and plot.
func TestSoakReportSmall(t *testing.T) {
	dir := t.TempDir()
	if err := writeSoakOutputs(dir, withSmall(soakSynth(), 95)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| " + soakFirstName + " | **missed** | small-site phase of 600 s",
		"| small-site phase: writes acknowledged and the pace held (≥ 95% of --rate) | met | 90000 of 90000 paced writes",
		"The small-site phase: 4080 keys for 600 s (asked 600 s) before the main load; 90000 of 90000 paced writes acknowledged",
		"| us-east-1 | 95.0 MiB | 300 | 10.0 MiB | 94.0 MiB | **1.01×** | 47.5 MiB | the peak |",
		"This run's phase: 4080 keys for 600 s.",
		"![soak-first-minutes](soak-first-minutes.png)",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, soakFirstPlot)); err != nil {
		t.Error(err)
	}
}

// TestSoakOldResults renders the kept 30-minute soak, from before issue
// 26: no small-site phase, so the first-minutes target is read over the
// main load's first 10 minutes and says so.
func TestSoakOldResults(t *testing.T) {
	// The results of a soak before issue 26's small-site phase
	// (deploy/bench/retention/soak-30min as of 2f8c309).
	b, err := os.ReadFile(filepath.Join("testdata", "pre26", "soak-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, resultsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := loadSoakResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSoakOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, tg := range res.Targets {
		if tg.Name == soakFirstName {
			if tg.Status != statusMissed || !strings.Contains(tg.Detail, "no small-site phase in this run: over the main load's first 600 s") {
				t.Errorf("%s: %s", tg.Status, tg.Detail)
			}
			return
		}
	}
	t.Errorf("no target %q", soakFirstName)
}

func TestSoakReport(t *testing.T) {
	dir := t.TempDir()
	if err := writeSoakOutputs(dir, soakSynth()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| disk ≤ 3× live at every site at the end of the settle | **missed** |",
		"| ap-northeast-1 | 0.0 MiB | 0.0 MiB |", "**3.50×**",
		"| eu-west-1 | eu-west-1/kv | 0 | 540 | 700 | 0 |",
		"![soak-disk](soak-disk.png)",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q:\n%s", want, b)
		}
	}
	for _, f := range []string{soakDiskPlot, soakLogPlot, resultsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// report rewrites it from results.json alone.
	res, err := loadSoakResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSoakOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	if c, err := os.ReadFile(filepath.Join(dir, reportFile)); err != nil || string(c) != string(b) {
		t.Errorf("report from results.json differs (%v)", err)
	}
}

// TestSoakShort runs the short soak end to end through stabilizerd: 2
// minutes of writes at the default rate to 10,000 keys, then 15 s of
// settle (the command's --short: 20 s), so that building stabilizerd
// included the test stays within 3 minutes.
// Writes are acknowledged and every site's kv streams were truncated.
// The disk/live target is reported, not asserted: it is not met (pebble's
// write-ahead logs alone take more than 3 × the live data; see the
// Retention section of deploy/bench/RESULTS.md).
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sites for two and a half minutes")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/stabilizerd")
	build.Dir = filepath.Join("..", "..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := soakOptions{topology: "ec2-3", out: t.TempDir(), duration: 2 * time.Minute, settle: 15 * time.Second, sample: 5 * time.Second,
		keys: 10000, rate: 150, workers: 64, bandwidth: 25 * wan.MBPerSecond, short: true,
		progress: testhelp.Logger(t, "soak").StandardWriter(&hclog.StandardLoggerOptions{})}
	res, err := runSoak(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes.Acked == 0 {
		t.Fatalf("no write acknowledged: %+v", res.Writes)
	}
	if flat, seen := res.floorsRose(); seen == 0 || len(flat) > 0 {
		t.Errorf("kv log floors did not rise (%d streams seen): %v", seen, flat)
	}
	for _, tg := range append(res.Targets, res.Checks...) {
		t.Logf("%s: %s: %s", tg.Status, tg.Name, tg.Detail)
	}
}
