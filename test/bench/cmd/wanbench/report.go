package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Files a bench run writes in its --out folder.
const (
	resultsFile   = "results.json"
	latenciesFile = "latencies.json"
	reportFile    = "report.md"
	barsFile      = "p50-vs-bound.png"
	tputFile      = "throughput.png"
)

func cdfFile(region string) string { return "cdf-" + region + ".png" }

// Targets of issue 7.
const (
	targetBoundFactor = 1.10
	targetBoundSlack  = 3.0 // ms
	targetGain        = 0.35
	targetTput        = 40000.0
)

func rowKey(r *benchRow) string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d", r.Phase, r.System, r.Predicate, r.Region, r.InFlight, r.Conns)
}

// writeBenchOutputs writes results.json, latencies.json, report.md and
// the plots of res into dir.
func writeBenchOutputs(dir string, res *benchResults) error {
	lats := map[string][]float64{}
	for _, r := range res.Rows {
		if len(r.lat) == 0 {
			continue
		}
		v := make([]float64, len(r.lat))
		for i, d := range r.lat {
			v[i] = float64(d.Microseconds()) / 1000
		}
		lats[rowKey(r)] = v
	}
	if err := writeResultFiles(dir, res, lats); err != nil {
		return err
	}
	plots, err := writeBenchPlots(dir, res)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, reportFile), []byte(benchReport(res, plots)), 0o644)
}

// loadBenchResults reads what writeBenchOutputs wrote.
func loadBenchResults(dir string) (*benchResults, error) {
	var res benchResults
	lats, err := readResultFiles(dir, &res)
	if err != nil {
		return nil, err
	}
	for _, r := range res.Rows {
		r.lat = msDurations(lats[rowKey(r)])
	}
	return &res, nil
}

// writeResultFiles writes a bench's results (results.json) and its rows'
// latencies in milliseconds by row key (latencies.json); both benches keep
// their files this way.
func writeResultFiles(dir string, res any, lats map[string][]float64) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, resultsFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if b, err = json.Marshal(lats); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, latenciesFile), b, 0o644)
}

// readResultFiles reads what writeResultFiles wrote into res and returns
// the latencies by row key; a missing latencies.json means none.
func readResultFiles(dir string, res any) (map[string][]float64, error) {
	b, err := os.ReadFile(filepath.Join(dir, resultsFile))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("%s: %w", resultsFile, err)
	}
	lats := map[string][]float64{}
	if b, err := os.ReadFile(filepath.Join(dir, latenciesFile)); err == nil {
		if err := json.Unmarshal(b, &lats); err != nil {
			return nil, fmt.Errorf("%s: %w", latenciesFile, err)
		}
	}
	return lats, nil
}

// msDurations turns latencies in milliseconds back into durations.
func msDurations(vs []float64) []time.Duration {
	var out []time.Duration
	for _, v := range vs {
		out = append(out, time.Duration(v*float64(time.Millisecond)))
	}
	return out
}

func (r *benchRow) label() string {
	switch r.System {
	case sysOurs:
		return r.Predicate
	case sysLin:
		return "our raft"
	case sysOursUnary:
		return r.Predicate + " (unary)"
	default:
		return r.System
	}
}

func (r *benchRow) measured() bool { return r.Skipped == "" && r.Ops > 0 }

func meetsBound(r *benchRow) bool { return r.P50ms <= targetBoundFactor*r.BoundMs+targetBoundSlack }

func ratio(a, b float64) string {
	if b <= 0 || a <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func wanRows(res *benchResults, system string) []*benchRow {
	var out []*benchRow
	for _, r := range res.Rows {
		if r.Phase == phaseWAN && r.System == system && r.measured() {
			out = append(out, r)
		}
	}
	return out
}

func findRow(res *benchResults, phase, system, predicate, region string, inflight int) *benchRow {
	for _, r := range res.Rows {
		if r.Phase == phase && r.System == system && r.Predicate == predicate && r.Region == region && r.InFlight == inflight && r.measured() {
			return r
		}
	}
	return nil
}

// bestTput returns system's fastest throughput row at inflight, over the
// connection counts it ran at.
func bestTput(rows []*benchRow, system string, inflight int) *benchRow {
	var best *benchRow
	for _, r := range rows {
		if r.System == system && r.InFlight == inflight && (best == nil || r.OpsPerS > best.OpsPerS) {
			best = r
		}
	}
	return best
}

func p50(r *benchRow) float64 {
	if r == nil {
		return 0
	}
	return r.P50ms
}

func fmtMs(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

// benchReport renders report.md.
func benchReport(res *benchResults, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Stabilizer benchmark on %s\n\n", res.Topology)
	w("Run %s (%s), on %s. Rerun with `make bench` or `wanbench kv --topology %s --out DIR`.\n\n",
		res.Started.UTC().Format("2006-01-02 15:04 MST"), res.Finished.Sub(res.Started).Round(time.Second), res.Host, res.Topology)

	if len(res.Sites) > 0 {
		w("## The emulated WAN\n\nRound trips in ms (one-way delay is half; jitter and bandwidth as in the topology file).\n\n|  |")
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
		var gs []string
		for _, g := range slices.Sorted(maps.Keys(res.Groups)) {
			gs = append(gs, fmt.Sprintf("%s = %s", g, strings.Join(res.Groups[g], ", ")))
		}
		w("\nGroups (continents): %s.\n\n", strings.Join(gs, "; "))
	}

	ours := wanRows(res, sysOurs)
	if len(ours) > 0 {
		w("## Write latency per predicate and region\n\n")
		w("A client in each region writes the training platform's records (job records, checkpoint manifests, lineage edges; WORKLOAD.md) ")
		w("to its own region's site in a closed loop, cycling through the predicates. The bound is what the RTT matrix allows: the smallest ")
		w("round trip within which enough sites are reached to satisfy the predicate (the writer's own site at 0). Target: p50 ≤ %.2f × bound + %.0f ms.\n\n",
			targetBoundFactor, targetBoundSlack)
		w("| predicate | region | writes | p50 ms | p90 ms | p99 ms | bound ms | p50 / bound | p50 − bound | target |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		met := 0
		var misses []string
		for _, r := range ours {
			ok := meetsBound(r)
			mark := "met"
			if ok {
				met++
			} else {
				mark = "**missed**"
				misses = append(misses, fmt.Sprintf("%s from %s (p50 %.1f ms, bound %.1f ms)", r.Predicate, r.Region, r.P50ms, r.BoundMs))
			}
			w("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %+.1f | %s |\n", r.Predicate, r.Region, r.Ops, r.P50ms, r.P90ms, r.P99ms, r.BoundMs, ratio(r.P50ms, r.BoundMs), r.P50ms-r.BoundMs, mark)
		}
		w("\n%d of %d predicate rows meet the target.", met, len(ours))
		if len(misses) > 0 {
			w(" Missed: %s.", strings.Join(misses, "; "))
		}
		w("\n\n")
		for _, r := range ours {
			if r.Source != "" {
				w("`%s` = `%s`\n\n", r.Predicate, r.Source)
				break
			}
		}
	}

	lin, etcd := wanRows(res, sysLin), wanRows(res, sysEtcd)
	if len(lin)+len(etcd) > 0 {
		w("## Consensus on the same WAN (leader in %s)\n\n", res.Leader)
		w("Bound for a leader-based protocol: the client's region to the leader and back, plus the leader's round trip to its nearest majority.\n\n")
		w("| system | region | writes | p50 ms | p90 ms | p99 ms | bound ms | p50 / bound |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range append(slices.Clone(lin), etcd...) {
			w("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %s |\n", r.label(), r.Region, r.Ops, r.P50ms, r.P90ms, r.P99ms, r.BoundMs, ratio(r.P50ms, r.BoundMs))
		}
		w("\n### majority against consensus\n\n")
		w("Gain = 1 − ours/theirs at p50. The ceiling is the same ratio of the bounds: what the speed of light allows. ")
		w("Target: a mean gain of at least %.0f%% over the regions that do not hold the leader.\n\n", targetGain*100)
		w("| region | majority p50 | our raft p50 | etcd p50 | ours / etcd | gain vs etcd | gain vs our raft | ceiling |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		var gE, gL, ceil []float64
		for _, s := range res.Sites {
			m := findRow(res, phaseWAN, sysOurs, "majority", s, 0)
			l := findRow(res, phaseWAN, sysLin, "linearizable", s, 0)
			e := findRow(res, phaseWAN, sysEtcd, "linearizable", s, 0)
			if m == nil {
				continue
			}
			ge, gl, c := gain(p50(m), p50(e)), gain(p50(m), p50(l)), math.NaN()
			if e != nil {
				c = gain(m.BoundMs, e.BoundMs)
			} else if l != nil {
				c = gain(m.BoundMs, l.BoundMs)
			}
			if s != res.Leader {
				gE, gL, ceil = appendNum(gE, ge), appendNum(gL, gl), appendNum(ceil, c)
			}
			w("| %s%s | %.1f | %s | %s | %s | %s | %s | %s |\n", s, leaderMark(s, res.Leader), m.P50ms, fmtMs(p50(l)), fmtMs(p50(e)), ratio(p50(m), p50(e)), pct(ge), pct(gl), pct(c))
		}
		w("| **mean, non-leader regions** | | | | | **%s** | **%s** | %s |\n\n", pct(mean(gE)), pct(mean(gL)), pct(mean(ceil)))
		for _, x := range []struct {
			name string
			g    []float64
		}{{"etcd", gE}, {"our raft", gL}} {
			if len(x.g) == 0 {
				continue
			}
			verdict := "met"
			if mean(x.g) < targetGain {
				verdict = "**missed**"
			}
			w("- against %s: mean gain %s (target %.0f%%, ceiling %s): %s\n", x.name, pct(mean(x.g)), targetGain*100, pct(mean(ceil)), verdict)
		}
		w("\n")
	}

	var tput []*benchRow
	for _, r := range res.Rows {
		if r.Phase == phaseTput && r.measured() {
			tput = append(tput, r)
		}
	}
	if len(tput) > 0 {
		w("## Throughput on loopback, 3 sites, equal durability\n\n")
		w("Every write is fsynced at a majority before it is acknowledged; no emulated delay. Target: our KV with majority ≥ %.0f writes/s and ahead of both peers.\n\n", targetTput)
		w("Every system ran at each number of client connections per site (%s); the comparisons take each system's best at each number in flight (**bold**).\n\n", joinInts(connsOf(tput)))
		w("| system | durability | in flight | conns/site | writes | writes/s | p50 ms | p99 ms | errors | ours (best) / this |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range tput {
			o := bestTput(tput, sysOurs, r.InFlight)
			rat := "–"
			if o != nil && r.OpsPerS > 0 {
				rat = fmt.Sprintf("%.2f", o.OpsPerS/r.OpsPerS)
			}
			ops := fmt.Sprintf("%.0f", r.OpsPerS)
			if bestTput(tput, r.System, r.InFlight) == r {
				ops = "**" + ops + "**"
			}
			w("| %s | %s | %d | %d | %d | %s | %.1f | %.1f | %d | %s |\n", r.System, r.Predicate, r.InFlight, r.Conns, r.Ops, ops, r.P50ms, r.P99ms, r.Errors, rat)
		}
		w("\n")
		for _, n := range inflightOf(tput) {
			r := bestTput(tput, sysOurs, n)
			if r == nil {
				continue
			}
			verdict := "met"
			if r.OpsPerS < targetTput {
				verdict = "**missed**"
			}
			var behind, ahead []string
			for _, peer := range []string{sysEtcd, sysNATS} {
				p := bestTput(tput, peer, n)
				switch {
				case p == nil:
				case p.OpsPerS >= r.OpsPerS:
					behind = append(behind, fmt.Sprintf("%s (%.2f×)", peer, r.OpsPerS/p.OpsPerS))
				default:
					ahead = append(ahead, fmt.Sprintf("%s (%.2f×)", peer, r.OpsPerS/p.OpsPerS))
				}
			}
			where := ""
			if len(ahead) > 0 {
				where += ", ahead of " + strings.Join(ahead, " and ")
			}
			if len(behind) > 0 {
				where += ", **behind " + strings.Join(behind, " and ") + "**"
			}
			w("- %d in flight: %.0f writes/s (target %.0f: %s)%s\n", n, r.OpsPerS, targetTput, verdict, where)
		}
		w("\n")
	}

	var skipped []*benchRow
	var failed []*benchRow
	for _, r := range res.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, r)
		} else if r.Errors > 0 {
			failed = append(failed, r)
		}
	}
	if len(skipped)+len(failed) > 0 {
		w("## Skipped rows and errors\n\n")
		for _, r := range skipped {
			where := r.Region
			if where == "" {
				where = "every region"
			}
			w("- %s %s (%s, %s): %s\n", r.System, r.Predicate, r.Phase, where, r.Skipped)
		}
		for _, r := range failed {
			w("- %s %s from %s (%s): %d failed writes, first: %s\n", r.System, r.Predicate, r.Region, r.Phase, r.Errors, r.FirstError)
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

func leaderMark(s, leader string) string {
	if s == leader {
		return " (leader)"
	}
	return ""
}

func gain(ours, theirs float64) float64 {
	if ours <= 0 || theirs <= 0 {
		return math.NaN()
	}
	return 1 - ours/theirs
}

func appendNum(xs []float64, x float64) []float64 {
	if math.IsNaN(x) {
		return xs
	}
	return append(xs, x)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", x*100)
}

// palette gives each label a fixed colour across plots.
var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
}

// writeBenchPlots draws a latency CDF per region, p50 against the bound per
// region, and throughput; it returns the files written.
func writeBenchPlots(dir string, res *benchResults) ([]string, error) {
	var files []string
	var regions []string
	var labels []string
	for _, r := range res.Rows {
		if r.Phase != phaseWAN || !r.measured() {
			continue
		}
		if !slices.Contains(regions, r.Region) {
			regions = append(regions, r.Region)
		}
		if !slices.Contains(labels, r.label()) {
			labels = append(labels, r.label())
		}
	}
	colour := func(label string) color.Color { return palette[slices.Index(labels, label)%len(palette)] }
	for _, region := range regions {
		p := plot.New()
		p.Title.Text = "Write latency from " + region + " (" + res.Topology + ")"
		p.X.Label.Text = "latency (ms)"
		p.Y.Label.Text = "fraction of writes"
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		// The legend sits top right, in room made beyond the slowest write.
		p.Legend.Top, p.Legend.Left = true, false
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		maxMs := 0.0
		for _, r := range res.Rows {
			if r.Phase == phaseWAN && r.Region == region && len(r.lat) > 0 {
				maxMs = math.Max(maxMs, ms(slices.Max(r.lat)))
			}
		}
		p.X.Min, p.X.Max = 0, maxMs*1.6
		for _, r := range res.Rows {
			if r.Phase != phaseWAN || r.Region != region || len(r.lat) == 0 {
				continue
			}
			s := slices.Clone(r.lat)
			slices.Sort(s)
			xy := make(plotter.XYs, 0, len(s)+1)
			xy = append(xy, plotter.XY{X: ms(s[0]), Y: 0})
			for i, d := range s {
				xy = append(xy, plotter.XY{X: ms(d), Y: float64(i+1) / float64(len(s))})
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color = colour(r.label())
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s (p50 %.0f ms)", r.label(), r.P50ms), l)
		}
		name := cdfFile(region)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	if len(regions) > 0 {
		if err := drawBars(filepath.Join(dir, barsFile), res, regions, labels); err != nil {
			return nil, err
		}
		files = append(files, barsFile)
	}
	var tput []*benchRow
	for _, r := range res.Rows {
		if r.Phase == phaseTput && r.measured() {
			tput = append(tput, r)
		}
	}
	if len(tput) > 0 {
		if err := drawTput(filepath.Join(dir, tputFile), tput); err != nil {
			return nil, err
		}
		files = append(files, tputFile)
	}
	return files, nil
}

// drawBars draws one panel per region: each row's p50 beside its bound.
func drawBars(path string, res *benchResults, regions, labels []string) error {
	cols := 2
	rows := (len(regions) + cols - 1) / cols
	const pw, ph = 6 * vg.Inch, 3.6 * vg.Inch
	img := vgimg.New(pw*vg.Length(cols), ph*vg.Length(rows))
	dc := draw.New(img)
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, region := range regions {
		p := plot.New()
		p.Title.Text = "p50 vs bound, writer in " + region
		p.Y.Label.Text = "ms"
		p.Add(plotter.NewGrid())
		var p50s, bounds plotter.Values
		var names []string
		for _, l := range labels {
			for _, r := range res.Rows {
				if r.Phase == phaseWAN && r.Region == region && r.measured() && r.label() == l {
					p50s = append(p50s, r.P50ms)
					bounds = append(bounds, math.Max(r.BoundMs, 0))
					names = append(names, l)
				}
			}
		}
		if len(names) == 0 {
			grid[i/cols][i%cols] = p
			continue
		}
		w := vg.Points(12)
		a, err := plotter.NewBarChart(p50s, w)
		if err != nil {
			return err
		}
		a.Color, a.Offset = palette[0], -w/2
		a.LineStyle.Width = 0
		bb, err := plotter.NewBarChart(bounds, w)
		if err != nil {
			return err
		}
		bb.Color, bb.Offset = color.RGBA{170, 170, 170, 255}, w/2
		bb.LineStyle.Width = 0
		p.Add(a, bb)
		p.Y.Min, p.Y.Max = 0, math.Max(slices.Max(p50s), slices.Max(bounds))*1.25
		p.Legend.Add("p50", a)
		p.Legend.Add("bound", bb)
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(names...)
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
		grid[i/cols][i%cols] = p
	}
	for i := len(regions); i < rows*cols; i++ {
		grid[i/cols][i%cols] = plot.New()
		grid[i/cols][i%cols].HideAxes()
	}
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	return savePNG(path, img)
}

// drawTput draws writes/s per system, one bar per in-flight count.
func drawTput(path string, rows []*benchRow) error {
	var systems []string
	for _, r := range rows {
		if !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
	}
	inflight := inflightOf(rows)
	p := plot.New()
	p.Title.Text = "Writes/s, 3 sites on loopback, fsynced at a majority before the ack"
	p.Y.Label.Text = "writes/s (each system's best over connection counts)"
	p.Add(plotter.NewGrid())
	w := vg.Points(22)
	top := targetTput
	for k, n := range inflight {
		vals := make(plotter.Values, len(systems))
		for i, s := range systems {
			if r := bestTput(rows, s, n); r != nil {
				vals[i] = r.OpsPerS
				top = math.Max(top, r.OpsPerS)
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = palette[k%len(palette)]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(k)-float64(len(inflight)-1)/2)
		p.Add(b)
		p.Legend.Add(fmt.Sprintf("%d in flight", n), b)
	}
	target, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: targetTput}, {X: float64(len(systems)) - 0.5, Y: targetTput}})
	if err != nil {
		return err
	}
	target.Color = color.RGBA{200, 60, 60, 255}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(target)
	p.Legend.Add(fmt.Sprintf("target %.0f", targetTput), target)
	p.Y.Min, p.Y.Max = 0, top*1.15
	p.Legend.Top = true
	p.NominalX(systems...)
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func connsOf(rows []*benchRow) []int { return distinct(rows, func(r *benchRow) int { return r.Conns }) }
func inflightOf(rows []*benchRow) []int {
	return distinct(rows, func(r *benchRow) int { return r.InFlight })
}

// distinct returns the values of field over rows, each once, sorted.
func distinct(rows []*benchRow, field func(*benchRow) int) []int {
	var out []int
	for _, r := range rows {
		if v := field(r); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
