package main

import (
	"fmt"
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
)

// The file-sync bench's report.md and plots, made from fsResults alone.

const (
	fsTimesPlot = "files-time-vs-bound.png"
	fsWirePlot  = "files-wire-bytes.png"
	fsLinksPlot = "files-link-throughput.png"
	fsKVPlot    = "files-kv-latency.png"
	fsCPUPlot   = "files-cpu-per-gib.png"
)

// writeFSOutputs evaluates the targets and writes results.json, report.md
// and the plots of res into dir.
func writeFSOutputs(dir string, res *fsResults) error {
	res.Bench = fsBenchName
	res.coopBounds()
	res.Targets = res.evaluate()
	if err := writeResultFiles(dir, res, nil); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, latenciesFile)) // the KV samples are in results.json
	plots, err := writeFSPlots(dir, res)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, reportFile), []byte(fsReport(res, plots)), 0o644)
}

func loadFSResults(dir string) (*fsResults, error) {
	var res fsResults
	_, err := readResultFiles(dir, &res)
	return &res, err
}

func sysLabel(system string) string {
	if system == sysSyncthing {
		return "Syncthing"
	}
	return "ours"
}

func secs(msv float64) string { return fmt.Sprintf("%.2f", msv/1000) }

// fsReport renders report.md.
func fsReport(res *fsResults, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# File-sync benchmark on %s: ours (stabilizerd + stabsync) against Syncthing\n\n", res.Topology)
	w("Run %s (%s), on %s. Rerun with `make bench-files` or `wanbench files --topology %s --out DIR`.\n\n",
		res.Started.UTC().Format("2006-01-02 15:04 MST"), res.Finished.Sub(res.Started).Round(time.Second), res.Host, res.Topology)

	w("## Targets (issue 26, with issue 17's it keeps)\n\n| target | status | detail |\n|---|---|---|\n")
	for _, t := range res.Targets {
		w("| %s | %s | %s |\n", t.Name, mark(t.Status), t.Detail)
	}

	w("\n## Set-up\n\n")
	w("- Sites %s; checkpoints written at **%s**; every emulated link limited to **%s** (a token bucket per directed link, shared by all its connections). Round trips: ",
		strings.Join(res.Sites, ", "), res.Origin, res.Bandwidth)
	var rtts []string
	for i, a := range res.Sites {
		for _, c := range res.Sites[i+1:] {
			rtts = append(rtts, fmt.Sprintf("%s–%s %.1f ms", a, c, res.RTTms[a][c]))
		}
	}
	w("%s.\n", strings.Join(rtts, ", "))
	w("- Checkpoint 1: %d shards of %s random bytes in `ckpt/step-1000/`, then `.metadata` renamed into the directory (the commit, as PyTorch DCP does). "+
		"Checkpoint 2 in `ckpt/step-2000/`: shard 0 unchanged, shard 1 rewritten, shards 2 and 3 with %.0f%% of their bytes changed in contiguous 4 MiB runs at random offsets, shard 4 added.\n",
		res.Shards, mib(res.ShardBytes), fsEditShare*100)
	w("- **Bound** (single path) = bytes the receiver lacks / link bandwidth + round trip(origin, receiver). The bytes it lacks are the checkpoint's changed bytes (what the previous checkpoint does not have, the same for both systems). "+
		"For *stable under majority* the receiver is the origin's nearest other site (%s): majority of three is the origin and one more. "+
		"Targets: stable ≤ %.1f× it, complete at every receiver ≤ %.1f× it.\n", res.Nearest, fsStableFactor, fsCompleteFactor)
	k := len(res.receivers())
	w("- **Cooperative bound** = D / (k × B) + round trip(origin, receiver), for k receivers each lacking the same D bytes and every directed link at B: here k = %d, D / (%d × %s). "+
		"The single path counts one link, origin → receiver; a system that relays between receivers (Syncthing pulls blocks from any peer that has them; see the links between the receivers) fills each receiver over all its links at once. "+
		"Three cuts hold for any schedule: the receiver has k links in (from the origin and from the k−1 others), so D / (k × B); every byte leaves the origin at least once, over its k links, so D / (k × B); "+
		"and the receivers need k × D bytes in all, sent by the origin at k × B and by each receiver at (k−1) × B to the others (what goes back to the origin is of no use), k² × B in all, so k × D / (k² × B) = D / (k × B). "+
		"One schedule meets all three: the origin sends a different 1/k of the bytes to each receiver, which passes its part on to the others as it arrives; every link carries D/k. "+
		"For ec2-3's two receivers that is D / (2B): half the single path's bandwidth term. The latency term is the single path's round trip, so that the two bounds differ only in bandwidth. "+
		"It holds for *stable* too (the nearest receiver filled over its k links while the others relay to it). Ratios to it are information, not targets.\n", k, k, res.Bandwidth)
	w("- Times run from the commit (the return of the marker's rename). Ours: stable = the origin site's `List` (gRPC) polled every 10 ms until every file of the commit is marked stable; complete = the receiving folder polled every 5 ms until the directory is there with every file at its size (the client installs a commit with one rename; contents hashed afterwards). " +
		"Syncthing: complete = the time on the `ItemFinished` event of the last file at the receiver, once the file hashes right.\n")
	w("- Bytes on the wire are the emulated links' own counters (`wan_delivered_bytes_total`), for both systems: framing, TLS (Syncthing) and acks included, from just before the shards were written until the links went quiet after the last region completed.\n")
	w("- **CPU per GiB delivered**: user + system CPU time (/proc/PID/stat) of the system's processes, summed: ours every stabilizerd and stabsync, Syncthing every syncthing process (its monitor and its child per region); "+
		"never the bench's own process, which runs the emulated links and the polling for both. Over the same span as the bytes on the wire, from just before the shards were written until the links went quiet, so that ours' chunking and uploading while the shards are written counts "+
		"(runs before issue 26 measured only from the commit to the last region complete, and say so). GiB delivered = the changed bytes × the %d receivers. During checkpoint 1 ours also serves the KV puts below (one at a time, a few dozen).\n",
		len(res.receivers()))
	w("- stabsync's settle time: **%s** (`stabsync init --settle`; default 2 s): a file is published once its size and mtime stayed the same that long.\n", res.Settle)
	for _, n := range res.Notes {
		w("- %s\n", n)
	}

	w("\n## Time from the commit\n\n")
	w("Target: ours stable ≤ %.1f× the single-path bound, complete ≤ %.1f×; Syncthing has none of its own. The cooperative bound's ratio is information.\n\n", fsStableFactor, fsCompleteFactor)
	w("| system | checkpoint | what | region | lacks | bound (s) | cooperative bound (s) | took (s) | × bound | × cooperative bound | |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, t := range res.Transfers {
		took, ratio, coop, mk := "–", "–", "–", mark(statusNotMeasured)
		switch {
		case t.Skipped != "":
		case t.Error != "":
			took, mk = "failed", mark(statusMissed)
		default:
			took, ratio = secs(t.TookMs), fmt.Sprintf("%.2f", t.TookMs/t.BoundMs)
			if t.CoopBoundMs > 0 {
				coop = fmt.Sprintf("%.2f", t.TookMs/t.CoopBoundMs)
			}
			mk = mark(statusMet)
			if t.TookMs > fsFactor(t.Kind)*t.BoundMs {
				mk = mark(statusMissed)
			}
			if t.System == sysSyncthing {
				mk = "" // no target of its own
			}
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sysLabel(t.System), t.Checkpoint, t.Kind, t.Region, mib(t.LackBytes), secs(t.BoundMs), secs(t.CoopBoundMs), took, ratio, coop, mk)
	}

	w("\n## Bytes on the wire, link use and the host\n\n")
	w("Utilisation is what each link from the origin delivered over the window (commit to last region complete) divided by bandwidth × window; CPU idle is the whole host's (2 cores) over the same window, iowait included.\n\n")
	w("| system | checkpoint | changed | busiest link from %s | × changed | all links | window (s) | utilisation | CPU idle | written in (s) |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n", res.Origin)
	for _, c := range res.Runs {
		if !c.measured() {
			why := c.Skipped
			if c.Error != "" {
				why = "failed: " + c.Error
			}
			w("| %s | %s | %s | | | | | | | |\n", sysLabel(c.System), c.Checkpoint, dash(why))
			continue
		}
		_, most := c.wireFrom(res.Origin)
		var util []string
		for _, k := range slices.Sorted(maps.Keys(c.Util)) {
			util = append(util, fmt.Sprintf("%s %.0f%%", k, c.Util[k]*100))
		}
		w("| %s | %s | %s | %s | %.3f | %s | %s | %s | %.0f%% | %s |\n", sysLabel(c.System), c.Checkpoint, mib(c.ChangedBytes), mib(most),
			float64(most)/float64(c.ChangedBytes), mib(c.wireTotal()), secs(c.WindowMs), strings.Join(util, ", "), c.CPUIdle*100, secs(c.WriteMs))
	}
	chunking := "content-defined"
	if c := res.Chunking; c != nil && c.Chunks > 0 {
		// The run's own chunker: results from before smaller chunks say
		// what they were cut with.
		chunking += fmt.Sprintf(", mean %d KiB on random bytes", c.Bytes/int64(c.Chunks)>>10)
	}
	for _, c := range res.Runs {
		if c.ChunkLackBytes > 0 {
			w("\n%s %s: our chunks (%s) that the previous checkpoint lacks add up to %s for %s changed (%.3f×): the cost of cutting at content boundaries around each edited run.\n",
				sysLabel(c.System), c.Checkpoint, chunking, mib(c.ChunkLackBytes), mib(c.ChangedBytes), float64(c.ChunkLackBytes)/float64(c.ChangedBytes))
		}
	}
	for _, c := range res.Runs {
		if len(c.CPUSeconds) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(c.CPUSeconds)) {
			parts = append(parts, fmt.Sprintf("%s %.1f s", k, c.CPUSeconds[k]))
		}
		w("\nCPU time of the processes over %s %s (window %.1f s, commit to last region complete): %s.\n", sysLabel(c.System), c.Checkpoint, c.WindowMs/1000, strings.Join(parts, ", "))
		if len(c.CPUSpan) > 0 {
			parts = parts[:0]
			for _, k := range slices.Sorted(maps.Keys(c.CPUSpan)) {
				parts = append(parts, fmt.Sprintf("%s %.1f s", k, c.CPUSpan[k]))
			}
			w("\nThe same over the span (%.1f s, the shards' writing to the links quiet): %s.\n", c.SpanMs/1000, strings.Join(parts, ", "))
		}
	}
	fsReportCPU(w, res)

	w("\n## KV writes while a checkpoint streams\n\n")
	if k := res.KV; k == nil || k.Skipped != "" {
		w("Not measured.\n")
	} else {
		w("`majority` puts (64 B values, one at a time) at %s through kvclient: %d idle before checkpoint 1, then %d begun while the link to %s ran at half its bandwidth or more (%.1f s to %.1f s after the commit). Bound: the round trip to %s, %.1f ms.\n\n",
			res.Origin, k.IdleOps, k.BusyOps, res.Nearest, k.BusyFromS, k.BusyToS, res.Nearest, k.BoundMs)
		w("| | p50 (ms) | p99 (ms) |\n|---|---:|---:|\n| idle | %.1f | %.1f |\n| while checkpoint 1 streams | %.1f | %.1f |\n| ratio | %.2f | %.2f |\n",
			k.IdleP50ms, k.IdleP99ms, k.BusyP50ms, k.BusyP99ms, k.BusyP50ms/k.IdleP50ms, k.BusyP99ms/k.IdleP99ms)
		w("| limit (%.1f× idle p50 + %.0f ms; %.0f× idle p99) | %.1f | %.1f |\n", fsKVP50Factor, fsKVSlackMs, fsKVP99Factor,
			fsKVP50Factor*k.IdleP50ms+fsKVSlackMs, fsKVP99Factor*k.IdleP99ms)
		if k.Errors > 0 {
			w("\n%d puts failed; first: %s\n", k.Errors, k.FirstError)
		}
	}

	w("\n## Chunking and hashing on one core\n\n")
	if c := res.Chunking; c == nil || c.Skipped != "" {
		w("Not measured.\n")
	} else {
		w("`fileshare/chunks.Split` (restic's Rabin chunker, SHA-256 per chunk) over %s of random bytes with GOMAXPROCS 1, as `go test -run '^$' -bench Split -cpu 1 ./fileshare/chunks` runs it, best of %d: **%.0f MB/s** (%d chunks); SHA-256 alone %.0f MB/s. A link carries %.0f MB/s.\n",
			mib(c.Bytes), c.Rounds, c.MBps, c.Chunks, c.SumMBps, res.BandwidthBps/1e6)
	}

	w("\n## Memory while a big file syncs\n\n")
	if m := res.Memory; m == nil || m.Skipped != "" {
		w("Not measured.\n")
	} else {
		w("A %s random file written at %s outside any commit directory, every link raised to %s for this phase to keep it short; at every region %.1f s after it was written. Peak RSS (VmHWM of /proc/PID/status), reset (clear_refs) just before the file was written%s:\n\n",
			mib(m.Bytes), res.Origin, m.Bandwidth, m.TookMs/1000, map[bool]string{true: "", false: " (the reset failed: peaks are over the whole run)"}[m.Reset])
		w("| process | peak over the big file (MiB) | limit (MiB) | peak over the run before (MiB) |\n|---|---:|---:|---:|\n")
		for _, k := range slices.Sorted(maps.Keys(m.HWM)) {
			limit := fsSiteMaxMiB
			if isClient(k) {
				limit = fsClientMaxMiB
			}
			w("| %s | %.0f | %.0f | %.0f |\n", k, m.HWM[k], limit, m.HWMRun[k])
		}
		if m.Error != "" {
			w("\nFailed: %s\n", m.Error)
		}
	}

	w("\n## How Syncthing was run\n\n")
	w("Syncthing v1.30.0 (built from test/peers/syncthing with `-tags noassets`), one instance per region, run by test/bench/internal/stpeer as its docs advise: `syncthing serve --no-browser --no-restart` with STNOUPGRADE=1, " +
		"its config written by the bench: listening on tcp://127.0.0.1 only (no QUIC), each other device at one address, the proxy of the emulated link towards it, so every byte between two instances crosses the same emulated links as ours; " +
		"global and local discovery, relays, NAT traversal, usage and crash reporting, upgrades off; low priority off. One folder, sendonly at the origin and receiveonly elsewhere (as its docs describe for a reference copy and mirrors), " +
		"filesystem watcher off and rescans daily: right after each commit the bench calls `POST /rest/db/scan` at the origin (it returns once the scan, hashing included, is done), so detection delay is not compared. Blocks can come from any peer that has them.\n")

	if len(plots) > 0 {
		w("\n## Plots\n\n")
		for _, p := range plots {
			w("![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	return b.String()
}

// fsReportCPU writes the CPU per GiB delivered of each run.
func fsReportCPU(w func(string, ...any), res *fsResults) {
	var rows []string
	for _, c := range res.Runs {
		v, ok := res.cpu(c)
		if !ok {
			continue
		}
		over := fmt.Sprintf("span, %.1f s", c.SpanMs/1000)
		if !v.Span {
			over = fmt.Sprintf("window only, %.1f s", c.WindowMs/1000)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %.1f | %s | %.2f | %.1f |", sysLabel(c.System), c.Checkpoint, v.Procs, v.Seconds, over, v.GiB, v.perGiB()))
	}
	if len(rows) == 0 {
		return
	}
	w("\n## CPU per GiB delivered\n\n")
	w("CPU time of the system's processes (the bench's own left out) over the span from just before the shards were written until the links went quiet, or over the window only for runs before issue 26; GiB delivered = the changed bytes × the %d receivers. Target: ours ≤ Syncthing's.\n\n", len(res.receivers()))
	w("| system | checkpoint | processes | CPU (s) | over | GiB delivered | CPU s per GiB |\n|---|---|---:|---:|---|---:|---:|\n")
	for _, r := range rows {
		w("%s\n", r)
	}
}

// writeFSPlots draws what res measured and returns the files written.
func writeFSPlots(dir string, res *fsResults) ([]string, error) {
	var files []string
	var panels []barPanel
	for _, ck := range res.ckptNames() {
		for _, sys := range []string{sysOurs, sysSyncthing} {
			pn := barPanel{title: fmt.Sprintf("%s, %s: time from the commit", sysLabel(sys), ck), aLab: "took", bLab: "single-path bound",
				cLab: "cooperative bound", yLab: "s"}
			for _, t := range res.Transfers {
				if t.System == sys && t.Checkpoint == ck && t.measured() {
					pn.names = append(pn.names, t.Kind+" "+t.Region)
					pn.a, pn.b, pn.c = append(pn.a, t.TookMs/1000), append(pn.b, t.BoundMs/1000), append(pn.c, t.CoopBoundMs/1000)
				}
			}
			if len(pn.names) > 0 {
				panels = append(panels, pn)
			}
		}
	}
	if len(panels) > 0 {
		if err := drawPanels(filepath.Join(dir, fsTimesPlot), panels); err != nil {
			return nil, err
		}
		files = append(files, fsTimesPlot)
	}
	panels = nil
	for _, ck := range res.ckptNames() {
		o, t := res.run(sysOurs, ck), res.run(sysSyncthing, ck)
		pn := barPanel{title: ck + ": MiB delivered per link", aLab: "ours", bLab: "Syncthing", yLab: "MiB"}
		var links []string
		for _, c := range []*fsCheckpointRun{o, t} {
			if c != nil && c.measured() {
				for k := range c.Wire {
					if !slices.Contains(links, k) {
						links = append(links, k)
					}
				}
			}
		}
		slices.Sort(links)
		get := func(c *fsCheckpointRun, k string) float64 {
			if c == nil || !c.measured() {
				return 0
			}
			return float64(c.Wire[k]) / (1 << 20)
		}
		for _, k := range links {
			pn.names, pn.a, pn.b = append(pn.names, k), append(pn.a, get(o, k)), append(pn.b, get(t, k))
		}
		if len(links) > 0 {
			panels = append(panels, pn)
		}
	}
	if len(panels) > 0 {
		if err := drawPanels(filepath.Join(dir, fsWirePlot), panels); err != nil {
			return nil, err
		}
		files = append(files, fsWirePlot)
	}
	cpu := barPanel{title: "CPU seconds of the system's processes per GiB delivered", aLab: "ours (stabilizerd, stabsync)", bLab: "Syncthing", yLab: "CPU s / GiB"}
	for _, ck := range res.ckptNames() {
		o, okO := res.cpu(res.run(sysOurs, ck))
		t, okT := res.cpu(res.run(sysSyncthing, ck))
		if !okO && !okT {
			continue
		}
		per := func(v fsCPU, ok bool) float64 {
			if !ok {
				return 0
			}
			return v.perGiB()
		}
		cpu.names, cpu.a, cpu.b = append(cpu.names, ck), append(cpu.a, per(o, okO)), append(cpu.b, per(t, okT))
	}
	if len(cpu.names) > 0 {
		if err := drawPanels(filepath.Join(dir, fsCPUPlot), []barPanel{cpu}); err != nil {
			return nil, err
		}
		files = append(files, fsCPUPlot)
	}
	if ok, err := drawLinkSeries(filepath.Join(dir, fsLinksPlot), res); err != nil {
		return nil, err
	} else if ok {
		files = append(files, fsLinksPlot)
	}
	if ok, err := drawKV(filepath.Join(dir, fsKVPlot), res); err != nil {
		return nil, err
	} else if ok {
		files = append(files, fsKVPlot)
	}
	return files, nil
}

// drawLinkSeries draws the throughput of the origin's links over each
// checkpoint, one panel per checkpoint, both systems.
func drawLinkSeries(path string, res *fsResults) (bool, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput of the links from %s after each commit (links at %s)", res.Origin, res.Bandwidth)
	p.X.Label.Text = "seconds since the commit"
	p.Y.Label.Text = "MB/s"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	n := 0
	for _, c := range res.Runs {
		if !c.measured() {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(c.Series)) {
			xy := plotter.XYs{}
			for _, pt := range c.Series[k] {
				xy = append(xy, plotter.XY{X: pt.T, Y: pt.MBps})
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return false, err
			}
			l.Color = palette[n%len(palette)]
			l.Width = vg.Points(1.2)
			if c.System == sysSyncthing {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s %s", sysLabel(c.System), strings.TrimPrefix(c.Checkpoint, "ckpt/"), k), l)
			n++
		}
	}
	if n == 0 {
		return false, nil
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, res.BandwidthBps/1e6*1.6)
	return true, p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// drawKV draws the KV put latencies during checkpoint 1 over time, the
// idle p50 and the busy window marked.
func drawKV(path string, res *fsResults) (bool, error) {
	k := res.KV
	if k == nil || len(k.BusyLat) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("majority KV put latency at %s while checkpoint 1 streams", res.Origin)
	p.X.Label.Text = "seconds since the commit"
	p.Y.Label.Text = "ms"
	p.Add(plotter.NewGrid())
	xy := make(plotter.XYs, len(k.BusyLat))
	top := 0.0
	for i := range k.BusyLat {
		xy[i] = plotter.XY{X: k.BusyAt[i], Y: k.BusyLat[i]}
		top = math.Max(top, k.BusyLat[i])
	}
	sc, err := plotter.NewScatter(xy)
	if err != nil {
		return false, err
	}
	sc.Color = palette[0]
	p.Add(sc)
	p.Legend.Add("put", sc)
	idle, err := plotter.NewLine(plotter.XYs{{X: 0, Y: k.IdleP50ms}, {X: slices.Max(k.BusyAt), Y: k.IdleP50ms}})
	if err != nil {
		return false, err
	}
	idle.Color = palette[1%len(palette)]
	idle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(idle)
	p.Legend.Add(fmt.Sprintf("idle p50 %.1f ms", k.IdleP50ms), idle)
	for _, x := range []float64{k.BusyFromS, k.BusyToS} {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.1}})
		if err != nil {
			return false, err
		}
		l.Color = palette[2%len(palette)]
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, math.Max(top, k.IdleP50ms)*1.2
	return true, p.Save(7*vg.Inch, 4*vg.Inch, path)
}
