package main

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/stabilizer/stabilizer/test/workload"
)

// The wipe bench's results as results.json holds them, its target, the
// site log's transfer lines it reads, and its report and plot; all but
// the log reading is pure, so that the report can be made again from
// results.json alone.

const (
	wipeBenchName = "wipe"
	// wipeBoundFactor: issue 18's target, time to stable reads at most
	// this many times the bound.
	wipeBoundFactor = 1.5
	wipePlot        = "wipe-transfer.png"
)

// wipeResults is everything a wipe run measured, and how.
type wipeResults struct {
	Bench        string    `json:"bench"`
	Topology     string    `json:"topology"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	Host         string    `json:"host"`
	Commit       string    `json:"commit"`
	Sites        []string  `json:"sites"`
	Site         string    `json:"wiped_site"`
	Bandwidth    string    `json:"bandwidth"`
	BandwidthBps float64   `json:"bandwidth_bps"`
	// StateBytes is --state; LoadedBytes the keys and values written.
	StateBytes  int64                  `json:"state_bytes"`
	LoadedBytes int64                  `json:"loaded_bytes"`
	LoadedKeys  int                    `json:"loaded_keys"`
	ValueBytes  int                    `json:"value_bytes"`
	Load        map[string]*wipeOrigin `json:"load"`
	LoadS       float64                `json:"load_s"`
	// AppliedS: from the end of the load until every site applied it;
	// TruncatedS from then until every kv log was truncated past it
	// (Truncated), or the wait gave up.
	AppliedS     float64                  `json:"applied_s"`
	TruncatedS   float64                  `json:"truncated_s"`
	Truncated    bool                     `json:"truncated"`
	FloorsBefore map[string][]streamFloor `json:"floors_before"`
	DiskBefore   map[string]int64         `json:"disk_before_bytes"`
	// KillToRestartS is the time the site was down (kill, deletion).
	KillToRestartS float64 `json:"kill_to_restart_s"`
	// BoundS = LoadedBytes / bandwidth.
	BoundS float64 `json:"bound_s"`
	// ReadsS: from the restart until stable reads of every sampled key
	// were right; TransfersS until its transfers were done.
	ReadsS        float64 `json:"reads_s"`
	TransfersS    float64 `json:"transfers_s"`
	ReadAttempts  int     `json:"read_attempts"`
	LastReadError string  `json:"last_read_error,omitempty"`
	SampleKeys    int     `json:"sample_keys_per_origin"`
	// Phases are the transfers as the wiped site's log tells them.
	Phases   []wipePhase    `json:"phases"`
	Progress []wipeProgress `json:"progress"`
	// Wire is what each directed link delivered from the restart until
	// the transfers were done.
	Wire      map[string]int64 `json:"wire"`
	LiveRate  float64          `json:"live_rate_per_s"`
	LiveBytes int              `json:"live_value_bytes"`
	Live      wipeLive         `json:"live"`
	Targets   []psTarget       `json:"targets"`
	Notes     []string         `json:"notes"`

	liveSamples []liveSample
	killAt      time.Time
	restartAt   time.Time
}

func (r *wipeResults) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// wipeOrigin is what one site loaded.
type wipeOrigin struct {
	Keys    int    `json:"keys"`
	Bytes   int64  `json:"bytes"`
	LastSeq uint64 `json:"last_seq"`
}

// wipePhase is one line of the wiped site's log about a transfer: when
// (seconds since the restart, by the log's clock), which stream, from
// where, and for "done" what it carried and how long it took.
type wipePhase struct {
	Event  string  `json:"event"` // receiving, done
	AtS    float64 `json:"at_s"`
	Stream string  `json:"stream"`
	From   string  `json:"from"`
	Keys   int64   `json:"keys,omitempty"`
	Bytes  int64   `json:"bytes,omitempty"`
	TookS  float64 `json:"took_s,omitempty"`
	Resume bool    `json:"resume,omitempty"`
}

// wipeProgress is the wiped site's transfers at one poll.
type wipeProgress struct {
	T       float64                       `json:"t_s"` // since the restart
	Streams map[string]wipeStreamProgress `json:"streams"`
}

type wipeStreamProgress struct {
	Bytes   uint64 `json:"bytes"`
	Total   uint64 `json:"total"`
	Source  string `json:"source,omitempty"`
	Waiting string `json:"waiting,omitempty"`
}

func (p wipeProgress) String() string {
	if len(p.Streams) == 0 {
		return "no transfer listed"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p.Streams)) {
		s := p.Streams[k]
		part := fmt.Sprintf("%s %s of %s", k, mib(int64(s.Bytes)), mib(int64(s.Total)))
		if s.Source != "" {
			part += " from " + s.Source
		}
		if s.Waiting != "" {
			part += " (waiting: " + s.Waiting + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// wipeLive is the live writes at the other sites, before the kill and
// while the site restored.
type wipeLive struct {
	BeforeN     int     `json:"before_n"`
	BeforeP50ms float64 `json:"before_p50_ms"`
	BeforeP99ms float64 `json:"before_p99_ms"`
	DuringN     int     `json:"during_n"`
	DuringP50ms float64 `json:"during_p50_ms"`
	DuringP99ms float64 `json:"during_p99_ms"`
	// DuringSlots the pace offered during the restore; Errors failed
	// writes and Missed slots no worker was free for, over the whole run.
	DuringSlots int     `json:"during_slots"`
	Errors      int     `json:"errors"`
	Missed      int     `json:"missed"`
	FirstError  string  `json:"first_error,omitempty"`
	MaxGapS     float64 `json:"max_gap_s"` // between two acked writes during the restore
	// At and Lat are every acked write, seconds since the restart (negative
	// before it) and its latency, for the plot.
	At  []float64 `json:"at_s,omitempty"`
	Lat []float64 `json:"lat_ms,omitempty"`
}

// summarizeLive splits the live writes into before the kill and during
// the restore (from the restart until the transfers were done, or the
// reads served if later).
func (r *wipeResults) summarizeLive() {
	end := time.Now() // the restore did not end
	if r.ReadsS > 0 && r.TransfersS > 0 {
		end = r.restartAt.Add(time.Duration(max(r.ReadsS, r.TransfersS) * float64(time.Second)))
	}
	var before, during []time.Duration
	var acks []time.Time
	l := &r.Live
	for _, s := range r.liveSamples {
		if s.err == errMissedSlot {
			l.Missed++
			if !s.at.Before(r.restartAt) && s.at.Before(end) {
				l.DuringSlots++
			}
			continue
		}
		if s.err != nil {
			l.Errors++
			if l.FirstError == "" {
				l.FirstError = s.site + ": " + firstLine(s.err.Error())
			}
		}
		inBefore := s.at.Before(r.killAt)
		inDuring := !s.at.Before(r.restartAt) && s.at.Before(end)
		if inDuring {
			l.DuringSlots++
		}
		if s.err != nil {
			continue
		}
		l.At = append(l.At, s.at.Sub(r.restartAt).Seconds())
		l.Lat = append(l.Lat, ms(s.lat))
		switch {
		case inBefore:
			before = append(before, s.lat)
		case inDuring:
			during = append(during, s.lat)
			acks = append(acks, s.at.Add(s.lat))
		}
	}
	l.BeforeN, l.DuringN = len(before), len(during)
	if len(before) > 0 {
		l.BeforeP50ms, l.BeforeP99ms = ms(workload.Percentile(before, .5)), ms(workload.Percentile(before, .99))
	}
	if len(during) > 0 {
		l.DuringP50ms, l.DuringP99ms = ms(workload.Percentile(during, .5)), ms(workload.Percentile(during, .99))
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	prev := r.restartAt
	for _, a := range append(acks, end) {
		l.MaxGapS = max(l.MaxGapS, a.Sub(prev).Seconds())
		prev = a
	}
}

// transferLine is a "state transfer: ..." line of a site's log.
type transferLine struct {
	at     time.Time
	event  string
	fields map[string]string
}

var (
	transferLineRE = regexp.MustCompile(`^(\S+) \[\w+\]\s+\S+: state transfer: (receiving|done): (.*)$`)
	logFieldRE     = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// readTransferLines reads the transfer lines of the log at path from
// offset off (where the restarted process began writing).
func readTransferLines(path string, off int64) []transferLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	return parseTransferLines(f)
}

func parseTransferLines(r io.Reader) []transferLine {
	var out []transferLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := transferLineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
		if err != nil {
			continue
		}
		l := transferLine{at: at, event: m[2], fields: map[string]string{}}
		for _, f := range logFieldRE.FindAllStringSubmatch(m[3], -1) {
			l.fields[f[1]] = strings.Trim(f[2], `"`)
		}
		out = append(out, l)
	}
	return out
}

// parseTransferLog turns the restarted site's transfer lines into phases.
func parseTransferLog(path string, off int64, restart time.Time) []wipePhase {
	return transferPhases(readTransferLines(path, off), restart)
}

func transferPhases(lines []transferLine, restart time.Time) []wipePhase {
	var out []wipePhase
	for _, l := range lines {
		p := wipePhase{Event: l.event, AtS: l.at.Sub(restart).Seconds(), Stream: l.fields["stream"], From: l.fields["from"],
			Resume: l.fields["resume"] == "true"}
		fmt.Sscan(l.fields["keys"], &p.Keys)
		fmt.Sscan(l.fields["bytes"], &p.Bytes)
		if d, err := time.ParseDuration(l.fields["took"]); err == nil {
			p.TookS = d.Seconds()
		}
		out = append(out, p)
	}
	return out
}

// evaluate marks issue 18's target met, missed or not measured.
func (r *wipeResults) evaluate() []psTarget {
	var ts []psTarget
	add := func(name, status, detail string) {
		ts = append(ts, psTarget{Name: name, Status: status, Detail: detail})
	}
	name := fmt.Sprintf("a wiped site serves stable reads again within %.1f × (state / bandwidth)", wipeBoundFactor)
	switch {
	case r.BoundS == 0:
		add(name, statusNotMeasured, "the site was not wiped")
	case r.ReadsS == 0:
		add(name, statusMissed, fmt.Sprintf("no stable read of every sampled key right by the end of the watch; last error: %s", dash(r.LastReadError)))
	default:
		ratio := r.ReadsS / r.BoundS
		d := fmt.Sprintf("%.1f s against a bound of %.1f s (%s / %s): %.2f× (target ≤ %.1f×)", r.ReadsS, r.BoundS, mib(r.LoadedBytes), r.Bandwidth, ratio, wipeBoundFactor)
		if ratio <= wipeBoundFactor {
			add(name, statusMet, d)
		} else {
			add(name, statusMissed, d)
		}
	}
	lname := "live writes continue at the other sites during the transfer"
	l := r.Live
	switch {
	case r.BoundS == 0 || l.DuringSlots == 0:
		add(lname, statusNotMeasured, "no live writes during a restore")
	case l.DuringN == 0:
		add(lname, statusMissed, fmt.Sprintf("none of %d paced writes acknowledged during the restore", l.DuringSlots))
	default:
		d := fmt.Sprintf("%d of %d paced writes acknowledged under %s during the restore, longest gap between two acks %.1f s; p50 %.1f ms (before the kill %.1f ms), p99 %.1f ms (%.1f ms)",
			l.DuringN, l.DuringSlots, wipeLiveWait, l.MaxGapS, l.DuringP50ms, l.BeforeP50ms, l.DuringP99ms, l.BeforeP99ms)
		add(lname, statusMet, d)
	}
	return ts
}

// writeWipeOutputs evaluates the target and writes results.json,
// report.md and the plot of res into dir.
func writeWipeOutputs(dir string, res *wipeResults) error {
	res.Bench = wipeBenchName
	res.Targets = res.evaluate()
	if err := writeResultFiles(dir, res, nil); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, latenciesFile))
	var plots []string
	if ok, err := drawWipe(filepath.Join(dir, wipePlot), res); err != nil {
		return fmt.Errorf("plots: %w", err)
	} else if ok {
		plots = append(plots, wipePlot)
	}
	return os.WriteFile(filepath.Join(dir, reportFile), []byte(wipeReport(res, plots)), 0o644)
}

func loadWipeResults(dir string) (*wipeResults, error) {
	var res wipeResults
	_, err := readResultFiles(dir, &res)
	return &res, err
}

func wipeReport(res *wipeResults, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Bounded disk: a wiped site restores its KV state on %s\n\n", res.Topology)
	w("%s Rerun with `make bench-wipe` or `wanbench wipe --state %s --bandwidth %s --site %s --out DIR`.\n\n",
		runHeader(res.Started, res.Finished, res.Commit, res.Host), sizeText(res.StateBytes), res.Bandwidth, res.Site)
	w("## Targets (issue 18)\n\n| target | status | detail |\n|---|---|---|\n")
	for _, t := range res.Targets {
		w("| %s | %s | %s |\n", t.Name, mark(t.Status), t.Detail)
	}

	w("\n## Set-up\n\n")
	w("- Sites %s, one stabilizerd each, every peer connection through an in-process emulated link of **%s** (both directions of every pair), the topology's delays kept. The wiped site: **%s**.\n",
		strings.Join(res.Sites, ", "), res.Bandwidth, res.Site)
	w("- State: every site wrote its third of %s as checkpoint manifests of %d KiB (JSON: job, step, 16 shards with path, size and SHA-256, parent, and the data loader's and RNG states as a base64 blob of random bytes, which snappy does not shrink), keys `ckpt/<site>/<n>`, under `%s`: %d keys, %s of keys and values in all, in %.1f s. ",
		sizeText(res.StateBytes), res.ValueBytes>>10, wipeLoadWait, res.LoadedKeys, mib(res.LoadedBytes), res.LoadS)
	w("Every site had applied it all %.1f s after the load (status.json's ack tables); ", res.AppliedS)
	if res.Truncated {
		w("every site had truncated every origin's kv log past it %.1f s later (status.json `Retention`), so the wiped site cannot catch up from a peer's log: it must copy each origin's state (state transfer).\n", res.TruncatedS)
	} else {
		w("the kv logs were **not** all truncated past it when the bench gave up waiting (%.1f s later; floors below), so the wiped site may catch up on some origins from a peer's log.\n", res.TruncatedS)
	}
	w("- Then a paced writer at %s: %.0f writes/s in all, job records of %d B to %d keys per site, under `%s`, 32 in flight at most per site. After its first stretch, %s was killed with SIGKILL, its data directory and its `.snapshots` sibling deleted (down %.1f s in all) and it was started again with the same config.\n",
		strings.Join(without(res.Sites, res.Site), " and "), res.LiveRate, res.LiveBytes, wipeLiveKeys, wipeLiveWait, res.Site, res.KillToRestartS)
	w("- **Serves again**: the first moment, polling every 100 ms from the restart, that `Get(stable=majority)` at %s of %d keys of every origin (the first and last each wrote, and evenly between) all answered with the right value (SHA-256 of what was written); until then they fail (`Unavailable` while it restores). "+
		"**Transfers done**: status.json lists no transfer and the site's log has a `state transfer: done` line for every origin's kv stream.\n", res.Site, res.SampleKeys)
	w("- **Bound** = the state's bytes / one link's bandwidth = %s / %s = **%.1f s**: the keys and values the site lacks must cross the links into it; at one link's rate that takes this long (it has two links in, so copying from both peers at once could beat it).\n",
		mib(res.LoadedBytes), res.Bandwidth, res.BoundS)
	for _, n := range res.Notes {
		w("- %s\n", n)
	}

	w("\n## Restore\n\n")
	if res.BoundS == 0 {
		w("Not measured.\n")
	} else {
		reads, xfer := "not reached", "not reached"
		if res.ReadsS > 0 {
			reads = fmt.Sprintf("**%.1f s** (%.2f× bound)", res.ReadsS, res.ReadsS/res.BoundS)
		}
		if res.TransfersS > 0 {
			xfer = fmt.Sprintf("%.1f s (%.2f× bound)", res.TransfersS, res.TransfersS/res.BoundS)
		}
		w("| from the restart | seconds |\n|---|---:|\n| stable reads of every origin right | %s |\n| transfers done | %s |\n| bound | %.1f |\n\n", reads, xfer, res.BoundS)
		w("%d rounds of sample reads; the last refusal: `%s`.\n\n", res.ReadAttempts, dash(res.LastReadError))
		w("Phases, from the site's log (times since the restart by the log's clock; `took` is the transfer's own, from its start); *first byte* is the first poll of status.json that showed the stream's transfer with bytes received:\n\n")
		w("| event | at (s) | stream | from | first byte (s) | keys | bytes | took (s) | rate (MB/s) |\n|---|---:|---|---|---:|---:|---:|---:|---:|\n")
		for _, p := range res.Phases {
			if p.Event == "done" {
				rate := "–"
				if p.TookS > 0 {
					rate = fmt.Sprintf("%.1f", float64(p.Bytes)/p.TookS/1e6)
				}
				w("| done | %.1f | %s | %s | | %d | %s | %.1f | %s |\n", p.AtS, p.Stream, p.From, p.Keys, mib(p.Bytes), p.TookS, rate)
			} else {
				what := "receiving"
				if p.Resume {
					what += " (resumed)"
				}
				first := "–"
				if t, ok := res.firstByte(p.Stream); ok {
					first = fmt.Sprintf("%.1f", t)
				}
				w("| %s | %.1f | %s | %s | %s | | | | |\n", what, p.AtS, p.Stream, p.From, first)
			}
		}
		if len(res.Phases) > 0 {
			w("\nJoin (restart to the first transfer's start): %.1f s.\n", res.Phases[0].AtS)
		}
		var into int64
		links := slices.Sorted(maps.Keys(res.Wire))
		var parts []string
		for _, k := range links {
			parts = append(parts, fmt.Sprintf("%s %s", k, mib(res.Wire[k])))
		}
		into = wireInto(res.Wire, res.Site)
		w("\nBytes the links delivered from the restart until the transfers were done (their own counters, `wan_delivered_bytes_total`: framing, acks and the live writes included): into %s **%s** (%.2f× the state); per link: %s.\n",
			res.Site, mib(into), float64(into)/math.Max(1, float64(res.LoadedBytes)), strings.Join(parts, ", "))
	}

	w("\n## Live writes meanwhile\n\n")
	l := res.Live
	w("| window | acked | p50 (ms) | p99 (ms) |\n|---|---:|---:|---:|\n| before the kill | %d | %.1f | %.1f |\n| during the restore | %d | %.1f | %.1f |\n\n",
		l.BeforeN, l.BeforeP50ms, l.BeforeP99ms, l.DuringN, l.DuringP50ms, l.DuringP99ms)
	w("During the restore the pace offered %d slots; over the whole run %d writes failed and %d slots found no free worker. Longest gap between two acknowledged writes during the restore: %.1f s.", l.DuringSlots, l.Errors, l.Missed, l.MaxGapS)
	if l.FirstError != "" {
		w(" First error: `%s`.", l.FirstError)
	}
	w("\n\n## Before the wipe\n\n| site | disk (allocated) | kv stream | head | floor |\n|---|---:|---|---:|---:|\n")
	for _, s := range res.Sites {
		for i, f := range res.FloorsBefore[s] {
			d := ""
			if i == 0 {
				d = mib(res.DiskBefore[s])
			}
			w("| %s | %s | %s | %d | %d |\n", s, d, f.Stream, f.Head, f.Truncated)
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

// firstByte is the first time since the restart that a poll saw bytes of
// stream's transfer received.
func (r *wipeResults) firstByte(stream string) (float64, bool) {
	for _, p := range r.Progress {
		if s, ok := p.Streams[stream]; ok && s.Bytes > 0 {
			return p.T, true
		}
	}
	return 0, false
}

// sizeText prints a --state size back.
func sizeText(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprintf("%dB", b)
}

// drawWipe draws the bytes received per stream over time since the
// restart, the bound's line (one link's bandwidth from the restart) and
// when reads were served; false if there is no progress to draw.
func drawWipe(path string, res *wipeResults) (bool, error) {
	streams := map[string]bool{}
	for _, p := range res.Progress {
		for k := range p.Streams {
			streams[k] = true
		}
	}
	if len(streams) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("State transfer into %s after its wipe (links at %s)", res.Site, res.Bandwidth)
	p.X.Label.Text = "seconds since the restart"
	p.Y.Label.Text = "MiB received"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	top, right := 0.0, 0.0
	for i, name := range slices.Sorted(maps.Keys(streams)) {
		var xy plotter.XYs
		for _, pt := range res.Progress {
			if s, ok := pt.Streams[name]; ok {
				xy = append(xy, plotter.XY{X: pt.T, Y: float64(s.Bytes) / (1 << 20)})
				top = math.Max(top, float64(s.Total)/(1<<20))
			}
			right = math.Max(right, pt.T)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return false, err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(1.6)
		p.Add(l)
		p.Legend.Add(name, l)
	}
	// All streams together: those listed now, and the totals of those
	// listed before and gone since (done).
	var all plotter.XYs
	last := map[string]uint64{}
	var done uint64
	for _, pt := range res.Progress {
		for name, total := range last {
			if _, ok := pt.Streams[name]; !ok {
				done += total
				delete(last, name)
			}
		}
		sum := done
		for name, s := range pt.Streams {
			sum += s.Bytes
			last[name] = s.Total
		}
		all = append(all, plotter.XY{X: pt.T, Y: float64(sum) / (1 << 20)})
	}
	if l, err := plotter.NewLine(all); err == nil {
		l.Color, l.Width = color.RGBA{0, 0, 0, 255}, vg.Points(1.8)
		p.Add(l)
		p.Legend.Add("all streams", l)
	}
	state := float64(res.LoadedBytes) / (1 << 20)
	ideal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: res.BoundS, Y: state}})
	if err != nil {
		return false, err
	}
	ideal.Color = color.RGBA{150, 150, 150, 255}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add(fmt.Sprintf("all state at one link's %s", res.Bandwidth), ideal)
	top = math.Max(top, state)
	right = math.Max(right, wipeBoundFactor*res.BoundS)
	vline := func(x float64, label string, c int) error {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = palette[c%len(palette)]
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	if err := vline(wipeBoundFactor*res.BoundS, fmt.Sprintf("%.1f × bound (%.0f s)", wipeBoundFactor, wipeBoundFactor*res.BoundS), 3); err != nil {
		return false, err
	}
	if res.ReadsS > 0 {
		if err := vline(res.ReadsS, fmt.Sprintf("stable reads right (%.1f s)", res.ReadsS), 2); err != nil {
			return false, err
		}
		right = math.Max(right, res.ReadsS)
	}
	p.X.Min, p.X.Max = 0, right*1.05
	p.Y.Min, p.Y.Max = 0, top*1.15
	return true, p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
