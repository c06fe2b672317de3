package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The soak's report.md and plots, made from soakResults alone.

const (
	soakDiskPlot  = "soak-disk.png"
	soakLogPlot   = "soak-kv-log.png"
	soakFirstPlot = "soak-first-minutes.png"
)

// writeSoakOutputs evaluates the targets and writes results.json,
// report.md and the plots of res into dir.
func writeSoakOutputs(dir string, res *soakResults) error {
	res.Bench = soakBenchName
	res.Targets, res.Checks = res.evaluate()
	if err := writeResultFiles(dir, res, nil); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, latenciesFile)) // none
	plots, err := writeSoakPlots(dir, res)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, reportFile), []byte(soakReport(res, plots)), 0o644)
}

func loadSoakResults(dir string) (*soakResults, error) {
	var res soakResults
	_, err := readResultFiles(dir, &res)
	return &res, err
}

// runHeader is the line under a retention report's title: when, how long,
// which commit, which host.
func runHeader(started, finished time.Time, commit, host string) string {
	c := commit
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("Run %s (%s), commit %s, on %s.", started.UTC().Format("2006-01-02 15:04 MST"),
		finished.Sub(started).Round(time.Second), c, host)
}

func soakReport(res *soakResults, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Bounded disk: overwrite soak on %s\n\n", res.Topology)
	rerun := "make soak"
	if res.Short {
		rerun = "make soak-short"
	}
	small := " --small-duration 0"
	if res.Small != nil {
		small = fmt.Sprintf(" --small-duration %s --small-keys %d", time.Duration(res.Small.DurationS*float64(time.Second)), res.Small.Keys)
	}
	w("%s Rerun with `%s` or `wanbench soak --duration %s --keys %d --rate %.0f --bandwidth %s%s --out DIR`.\n\n",
		runHeader(res.Started, res.Finished, res.Commit, res.Host), rerun, time.Duration(res.DurationS*float64(time.Second)), res.Keys, res.RateTarget, res.Bandwidth, small)

	w("## Targets (issues 18 and 26)\n\n| target | status | detail |\n|---|---|---|\n")
	for _, t := range res.Targets {
		w("| %s | %s | %s |\n", t.Name, mark(t.Status), t.Detail)
	}
	w("\n## Checks of the run\n\n| check | status | detail |\n|---|---|---|\n")
	for _, t := range res.Checks {
		w("| %s | %s | %s |\n", t.Name, mark(t.Status), t.Detail)
	}

	w("\n## Set-up\n\n")
	w("- Sites %s, one stabilizerd each, every peer connection through an in-process emulated link of **%s** (both directions of every pair), the topology's delays kept.\n",
		strings.Join(res.Sites, ", "), res.Bandwidth)
	w("- Workload: %d keys `jobs/<n>` shared by all sites; values are job records (JSON: id, owner region, state, GPUs, elastic workers, checkpoint id, lease holder, fencing token, notes) of a size uniform in %d–%d B, their notes random letters (which snappy does not shrink). "+
		"Each write picks its key uniformly, so every site overwrites every key.\n", res.Keys, res.ValueMin, res.ValueMax)
	w("- Pace: **%.0f writes/s** in all, %.1f/s from each site, each `kvclient.Put` under `%s` (timeout %v); a site's slots are offered to a pool of %d workers (writes in flight); a slot no worker is free for is counted as missed, not made up later. "+
		"Written for %.0f s (asked %.0f s), then sampled for %.0f s more (settle), every %.0f s.\n",
		res.RateTarget, res.RateTarget/float64(max(1, len(res.Sites))), res.Predicate, soakTimeout, res.Workers, res.WriteS, res.DurationS, res.SettleS, res.SampleS)
	w("- **Live data** = the sum of key and value bytes of every key's winning write: the one with the highest HLC in its write's answer, between equal HLCs the greater origin name (last writer wins, as the KV decides). Writes whose wait failed but which were made count; a write without an answer cannot (the checks say how many). " +
		"After the settle every site's `Scan` of `jobs/` is compared with it.\n")
	w("- **Disk** = the blocks allocated to the files under the site's data directory and its `.snapshots` sibling (`st_blocks` × 512, as `du` counts; hard links once), walked at every sample. Beside it: the part of it in pebble's write-ahead logs (`*.log` files, which pebble preallocates to 110%% of its memtable size and keeps for reuse), the apparent size (the files' lengths), and the site's own estimate (status.json `DiskTotal`: pebble's count of its tables, blob files and logs).\n")
	w("- kv log floors: status.json `Retention`, per kv stream (one per origin) at every site: its head and the seq its log was truncated up to.\n")
	w("- **First minutes** (issue 26: a site's disk in its first %.0f minutes with 10 MiB of data ≤ 64 MiB + %.0f × live): with %d keys at %.0f writes/s the main load's live data passes 10 MiB about 40 s after its first write and nears its full size within 4 minutes, so its first %.0f minutes are not a site with 10 MiB. "+
		"A small-site phase runs first instead, on the same fresh sites: the same writers, pace and records, but to the first %d keys only (`jobs/00000` to `jobs/%05d`: %d × 2,570 B on average, about 10 MiB once each was written: 95 %% of them are within 90 s at this pace), for `--small-duration` (10 minutes), sampled the same way; the main load follows at once. "+
		"Every sample's disk is held against 64 MiB + %.0f × the live data at that moment (at the first sample, before any write, that is 64 MiB); the report shows each site's peak and, where another sample came closer to its limit or further over it, that one too. %s\n",
		soakFirstWindow.Minutes(), soakDiskFactor, res.Keys, res.RateTarget, soakFirstWindow.Minutes(), soakSmallKeys, soakSmallKeys-1, soakSmallKeys, soakDiskFactor, firstNote(res))
	for _, n := range res.Notes {
		w("- %s\n", n)
	}

	wr := res.Writes
	w("\n## Writes\n\n| site | slots | acked | missed slots | made, wait failed | unanswered | p50 (ms) | p99 (ms) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range res.Sites {
		p := wr.PerSite[s]
		if p == nil {
			continue
		}
		w("| %s | %d | %d | %d | %d | %d | %.1f | %.1f |\n", s, p.Slots, p.Acked, p.Missed, p.Failed, p.Unknown, p.P50ms, p.P99ms)
	}
	w("| all | %d | %d | %d | %d | %d | %.1f | %.1f |\n", wr.Slots, wr.Acked, wr.Missed, wr.Failed, wr.Unknown, wr.P50ms, wr.P99ms)
	w("\nAchieved: **%.1f acknowledged writes/s** of %.0f/s asked. ", wr.AchievedPerS, res.RateTarget)
	if wr.FirstError != "" {
		w("First error: `%s`.", strings.ReplaceAll(wr.FirstError, "|", `\|`))
	}
	w("\n\nLive data at the end: **%s** in %d keys; bytes written in all (key and value of every write made): %s, %.1f× the live data.\n",
		mib(res.LiveBytes), res.LiveKeys, mib(res.WrittenBytes), ratioOf(res.WrittenBytes, res.LiveBytes))

	w("\n## Disk per site\n\n")
	end, we := res.last(), res.writesEnd()
	third := res.lastThird()
	if end == nil || we == nil {
		w("Not measured.\n")
	} else {
		w("At the end of the writes (%.0f s; live %s) and of the settle (%.0f s; live %s; the columns from *of which WAL* on are at the settle's end). The range is the least and the most disk over the last third of the writes (%.0f s to %.0f s); live data over that span: %s.\n\n",
			we.T, mib(we.Live), end.T, mib(end.Live), res.WriteS*2/3, res.WriteS, liveRange(third))
		w("| site | disk, writes' end | disk, settle's end | of which WAL (`*.log`) | apparent | site's estimate | disk / live | disk without the WAL / live | max disk / live, last third | disk range, last third |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range res.Sites {
			a, z := we.Sites[s], end.Sites[s]
			if a == nil || z == nil {
				continue
			}
			mx, at, ok := maxRatio(third, s)
			mxs := "–"
			if ok {
				mxs = fmt.Sprintf("%.2f× (at %.0f s)", mx, at)
			}
			gs := "–"
			if lo, hi, ok := diskRange(third, s); ok {
				gs = fmt.Sprintf("%s – %s", mib(lo), mib(hi))
			}
			// Runs before the WAL was counted have none: not measured.
			wal, noWAL := "–", "–"
			if z.WAL > 0 {
				wal, noWAL = mib(z.WAL), fmt.Sprintf("%.2f×", ratioOf(z.Allocated-z.WAL, end.Live))
			}
			w("| %s | %s | %s | %s | %s | %s | **%.2f×** | %s | %s | %s |\n", s, mib(a.Allocated), mib(z.Allocated), wal, mib(z.Apparent), mib(z.Estimate),
				ratioOf(z.Allocated, end.Live), noWAL, mxs, gs)
		}
		var errs []string
		for _, sm := range res.Samples {
			for _, s := range res.Sites {
				if ss := sm.Sites[s]; ss != nil && ss.Error != "" {
					errs = append(errs, fmt.Sprintf("%s at %.0f s: %s", s, sm.T, ss.Error))
				}
			}
		}
		if len(errs) > 0 {
			w("\n%d sample errors; first: %s\n", len(errs), errs[0])
		}
	}

	soakReportFirst(w, res)

	w("\n## kv log truncation\n\n")
	if end == nil || len(res.Samples) < 2 {
		w("Not measured.\n")
	} else {
		first := res.Samples[0]
		w("Per site and kv stream (one per origin): the floor (the seq its log was dropped up to) at the first sample (%.0f s) and after the settle (%.0f s), the head then, and the entries its log kept (persisted above the floor).\n\n", first.T, end.T)
		w("| site | stream | floor, first sample | floor, end | head, end | entries kept, end |\n|---|---|---:|---:|---:|---:|\n")
		for _, s := range res.Sites {
			z := end.Sites[s]
			if z == nil {
				continue
			}
			before := map[string]uint64{}
			if a := first.Sites[s]; a != nil {
				for _, f := range a.Floors {
					before[f.Stream] = f.Truncated
				}
			}
			for _, f := range z.Floors {
				w("| %s | %s | %d | %d | %d | %d |\n", s, f.Stream, before[f.Stream], f.Truncated, f.Head, f.Retained)
			}
		}
	}

	if len(plots) > 0 {
		w("\n## Plots\n\n")
		for _, p := range plots {
			w("![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	return b.String()
}

// firstNote says how this run read the first-minutes target.
func firstNote(res *soakResults) string {
	switch {
	case res.Small != nil:
		return fmt.Sprintf("This run's phase: %d keys for %.0f s.", res.Small.Keys, res.Small.WriteS)
	case res.Short:
		return "`--short` runs no such phase: the target is read over what the main load ran, and says so."
	}
	return "This run had no such phase (`--small-duration 0`, or a run before issue 26): the target is read over the main load's first 10 minutes, and says so."
}

// soakReportFirst writes the section of the sites' first minutes.
func soakReportFirst(w func(string, ...any), res *soakResults) {
	samples, small := res.firstSamples()
	w("\n## Disk in the first %.0f minutes\n\n", soakFirstWindow.Minutes())
	if len(samples) == 0 {
		w("Not measured.\n")
		return
	}
	if small {
		sw := res.Small.Writes
		w("The small-site phase: %d keys for %.0f s (asked %.0f s) before the main load; %d of %d paced writes acknowledged under %s (%.1f/s; p50 %.1f ms, p99 %.1f ms), %d slots missed, %d made but their wait failed, %d unanswered. Live data at its end: %s.\n\n",
			res.Small.Keys, res.Small.WriteS, res.Small.DurationS, sw.Acked, sw.Slots, res.Predicate, sw.AchievedPerS, sw.P50ms, sw.P99ms, sw.Missed, sw.Failed, sw.Unknown, mib(samples[len(samples)-1].Live))
	} else {
		w("No small-site phase in this run: the main load's first %.0f s, settle included (%d keys; live %s then), as it ran.\n\n", samples[len(samples)-1].T, res.Keys, mib(samples[len(samples)-1].Live))
	}
	w("| site | peak disk | at (s) | live then | limit then (64 MiB + %.0f × live) | peak / limit | of which WAL at the peak | furthest over its limit |\n|---|---:|---:|---:|---:|---:|---:|---|\n", soakDiskFactor)
	for _, s := range res.Sites {
		f, ok := firstOf(samples, s)
		if !ok {
			continue
		}
		wal := "–"
		for _, sm := range samples {
			if ss := sm.Sites[s]; sm.T == f.PeakAt && ss != nil && ss.WAL > 0 {
				wal = mib(ss.WAL)
			}
		}
		worst := "the peak"
		if f.WorstAt != f.PeakAt {
			worst = fmt.Sprintf("%s at %.0f s against %s: %.2f×", mib(f.Worst), f.WorstAt, mib(f.WorstLimit), f.ratio())
		}
		w("| %s | %s | %.0f | %s | %s | **%.2f×** | %s | %s |\n", s, mib(f.Peak), f.PeakAt, mib(f.PeakLive), mib(f.PeakLimit), float64(f.Peak)/float64(f.PeakLimit), wal, worst)
	}
}

func liveRange(samples []*soakSample) string {
	if len(samples) == 0 {
		return "–"
	}
	lo, hi := samples[0].Live, samples[0].Live
	for _, s := range samples {
		lo, hi = min(lo, s.Live), max(hi, s.Live)
	}
	return fmt.Sprintf("%s – %s", mib(lo), mib(hi))
}

// writeSoakPlots draws disk per site and the live size over time, and
// the kv log entries each site kept.
func writeSoakPlots(dir string, res *soakResults) ([]string, error) {
	if len(res.Samples) < 2 {
		return nil, nil
	}
	var files []string
	if err := drawSoakDisk(filepath.Join(dir, soakDiskPlot), res); err != nil {
		return nil, err
	}
	files = append(files, soakDiskPlot)
	if err := drawSoakLog(filepath.Join(dir, soakLogPlot), res); err != nil {
		return nil, err
	}
	files = append(files, soakLogPlot)
	if samples, small := res.firstSamples(); len(samples) >= 2 {
		if err := drawSoakFirst(filepath.Join(dir, soakFirstPlot), res, samples, small); err != nil {
			return nil, err
		}
		files = append(files, soakFirstPlot)
	}
	return files, nil
}

// drawSoakFirst draws disk per site over the first minutes against the
// limit 64 MiB + 3 × live at each sample.
func drawSoakFirst(path string, res *soakResults, samples []*soakSample, small bool) error {
	p := plot.New()
	if small {
		p.Title.Text = fmt.Sprintf("Disk per site in the small-site phase (%d keys, %.0f writes/s) against 64 MiB + %.0f × live", res.Small.Keys, res.RateTarget, soakDiskFactor)
	} else {
		p.Title.Text = fmt.Sprintf("Disk per site in the main load's first minutes (%d keys, %.0f writes/s) against 64 MiB + %.0f × live", res.Keys, res.RateTarget, soakDiskFactor)
	}
	p.X.Label.Text = "seconds since the first write"
	p.Y.Label.Text = "MiB"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	top := 0.0
	add := func(label string, c color.Color, dashes []vg.Length, width float64, y func(*soakSample) (float64, bool)) error {
		var xy plotter.XYs
		for _, s := range samples {
			if v, ok := y(s); ok {
				xy = append(xy, plotter.XY{X: s.T, Y: v})
				top = math.Max(top, v)
			}
		}
		if len(xy) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = c, dashes, vg.Points(width)
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	dashes := [][]vg.Length{nil, {vg.Points(8), vg.Points(4)}, {vg.Points(3), vg.Points(3)}}
	for i, s := range res.Sites {
		if err := add("disk "+s, palette[i%len(palette)], dashes[i%len(dashes)], 1.8, func(sm *soakSample) (float64, bool) {
			ss := sm.Sites[s]
			if ss == nil || ss.Allocated == 0 {
				return 0, false
			}
			return float64(ss.Allocated) / (1 << 20), true
		}); err != nil {
			return err
		}
	}
	black, grey := color.RGBA{0, 0, 0, 255}, color.RGBA{150, 150, 150, 255}
	if err := add("live data", black, []vg.Length{vg.Points(5), vg.Points(3)}, 1.6, func(sm *soakSample) (float64, bool) {
		return float64(sm.Live) / (1 << 20), true
	}); err != nil {
		return err
	}
	if err := add(fmt.Sprintf("64 MiB + %.0f × live (target)", soakDiskFactor), grey, []vg.Length{vg.Points(2), vg.Points(2)}, 1.4, func(sm *soakSample) (float64, bool) {
		return float64(soakFirstLimit(sm.Live)) / (1 << 20), true
	}); err != nil {
		return err
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, top*1.5)
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

func drawSoakDisk(path string, res *soakResults) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Disk per site under an overwrite workload (%d keys, %.0f writes/s, %s)", res.Keys, res.RateTarget, res.Topology)
	p.X.Label.Text = "minutes since the writes began"
	p.Y.Label.Text = "MiB"
	p.Add(plotter.NewGrid())
	// The legend sits above the lines: the y axis runs to 1.6 × the top.
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	top := 0.0
	add := func(label string, c color.Color, dashes []vg.Length, width float64, y func(*soakSample) (float64, bool)) error {
		var xy plotter.XYs
		for _, s := range res.Samples {
			if v, ok := y(s); ok {
				xy = append(xy, plotter.XY{X: s.T / 60, Y: v})
				top = math.Max(top, v)
			}
		}
		if len(xy) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = c, dashes, vg.Points(width)
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	// Sites' lines often coincide: each has a dash pattern of its own.
	dashes := [][]vg.Length{nil, {vg.Points(8), vg.Points(4)}, {vg.Points(3), vg.Points(3)}}
	for i, s := range res.Sites {
		if err := add("disk "+s, palette[i%len(palette)], dashes[i%len(dashes)], 1.8, func(sm *soakSample) (float64, bool) {
			ss := sm.Sites[s]
			if ss == nil || ss.Allocated == 0 {
				return 0, false
			}
			return float64(ss.Allocated) / (1 << 20), true
		}); err != nil {
			return err
		}
	}
	for i, s := range res.Sites {
		if err := add("site's estimate "+s, palette[i%len(palette)], []vg.Length{vg.Points(1), vg.Points(2)}, 0.8, func(sm *soakSample) (float64, bool) {
			ss := sm.Sites[s]
			if ss == nil || ss.Estimate == 0 {
				return 0, false
			}
			return float64(ss.Estimate) / (1 << 20), true
		}); err != nil {
			return err
		}
	}
	black, grey := color.RGBA{0, 0, 0, 255}, color.RGBA{150, 150, 150, 255}
	if err := add("live data", black, []vg.Length{vg.Points(5), vg.Points(3)}, 1.6, func(sm *soakSample) (float64, bool) {
		return float64(sm.Live) / (1 << 20), true
	}); err != nil {
		return err
	}
	if err := add(fmt.Sprintf("%.0f × live (target)", soakDiskFactor), grey, []vg.Length{vg.Points(2), vg.Points(2)}, 1.2, func(sm *soakSample) (float64, bool) {
		return soakDiskFactor * float64(sm.Live) / (1 << 20), true
	}); err != nil {
		return err
	}
	if res.WriteS > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: res.WriteS / 60, Y: 0}, {X: res.WriteS / 60, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = color.RGBA{200, 60, 60, 255}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add("writers stop", l)
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, top*1.6)
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

func drawSoakLog(path string, res *soakResults) error {
	p := plot.New()
	p.Title.Text = "kv log entries kept per site (all origins' kv streams)"
	p.X.Label.Text = "minutes since the writes began"
	p.Y.Label.Text = "entries"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	top := 0.0
	for i, s := range res.Sites {
		var xy plotter.XYs
		for _, sm := range res.Samples {
			if ss := sm.Sites[s]; ss != nil && ss.Error == "" {
				xy = append(xy, plotter.XY{X: sm.T / 60, Y: float64(ss.LogEntries)})
				top = math.Max(top, float64(ss.LogEntries))
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s, l)
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, top*1.15)
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
