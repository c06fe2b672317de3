package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/workload"
)

// The soak's results as results.json holds them, and the disk targets of
// issues 18 and 26 evaluated on them; pure, so that the report can be
// made again from results.json alone.

const soakBenchName = "soak"

// Issue 18's target: disk use at most this many times the live data.
const soakDiskFactor = 3.0

// Issue 26's target: a site's disk in its first soakFirstWindow, with
// about 10 MiB of data, at most soakFirstBase plus soakDiskFactor times
// the live data at every sample.
const (
	soakFirstBase   = 64 << 20
	soakFirstWindow = 10 * time.Minute
)

// soakFirstLimit is the disk allowed in the first minutes with live bytes
// of live data.
func soakFirstLimit(live int64) int64 { return soakFirstBase + int64(soakDiskFactor*float64(live)) }

// soakPaceShare: the writes held the pace when at least this share of
// --rate was acknowledged (a check of the set-up, not an issue target).
const soakPaceShare = 0.95

// soakResults is everything a soak measured, and how.
type soakResults struct {
	Bench        string    `json:"bench"`
	Topology     string    `json:"topology"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	Host         string    `json:"host"`
	Commit       string    `json:"commit"`
	Sites        []string  `json:"sites"`
	Bandwidth    string    `json:"bandwidth"`
	BandwidthBps float64   `json:"bandwidth_bps"`
	Keys         int       `json:"keys"`
	ValueMin     int       `json:"value_min_bytes"`
	ValueMax     int       `json:"value_max_bytes"`
	Predicate    string    `json:"predicate"`
	RateTarget   float64   `json:"rate_target_per_s"`
	Workers      int       `json:"workers_per_site"`
	DurationS    float64   `json:"duration_s"`
	SettleS      float64   `json:"settle_s"`
	SampleS      float64   `json:"sample_s"`
	Short        bool      `json:"short"`
	// WriteS is how long the writers wrote, from the first slot until
	// the last write in flight was answered.
	WriteS float64    `json:"write_s"`
	Writes soakWrites `json:"writes"`
	// LiveBytes is the live data size at the end: key and value bytes of
	// every key's winning write; WrittenBytes the same over every write
	// made.
	LiveBytes    int64                `json:"live_bytes"`
	LiveKeys     int                  `json:"live_keys"`
	WrittenBytes int64                `json:"written_bytes"`
	Scan         map[string]*soakScan `json:"scan"`
	Samples      []*soakSample        `json:"samples"`
	// Small is the small-site phase before the main load (issue 26);
	// nil when it did not run (--short, and runs before issue 26).
	Small   *soakSmall `json:"small,omitempty"`
	Targets []psTarget `json:"targets"`
	Checks  []psTarget `json:"checks"`
	Notes   []string   `json:"notes"`
}

func (r *soakResults) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// soakWrites counts the writes of all sites.
type soakWrites struct {
	soakSiteWrites
	AchievedPerS float64                    `json:"achieved_per_s"`
	PerSite      map[string]*soakSiteWrites `json:"per_site"`
}

// soakSiteWrites counts one site's writes: Slots the pace offered,
// Missed those no worker was free for, Acked the writes whose majority
// wait held, Failed those made but whose wait failed, Unknown those
// without an answer (made or not).
type soakSiteWrites struct {
	Slots      int64   `json:"slots"`
	Missed     int64   `json:"missed"`
	Acked      int64   `json:"acked"`
	Failed     int64   `json:"failed"`
	Unknown    int64   `json:"unknown"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	FirstError string  `json:"first_error,omitempty"`

	lats []time.Duration
}

func (w *soakSiteWrites) setLatencies(lats []time.Duration) {
	w.lats = lats
	if len(lats) > 0 {
		w.P50ms, w.P99ms = ms(workload.Percentile(lats, .5)), ms(workload.Percentile(lats, .99))
	}
}

// sum adds up the sites' counts over writeS seconds of writing.
func (w *soakWrites) sum(writeS float64) {
	var lats []time.Duration
	w.soakSiteWrites = soakSiteWrites{}
	for _, s := range slices.Sorted(maps.Keys(w.PerSite)) {
		p := w.PerSite[s]
		w.Slots += p.Slots
		w.Missed += p.Missed
		w.Acked += p.Acked
		w.Failed += p.Failed
		w.Unknown += p.Unknown
		if w.FirstError == "" && p.FirstError != "" {
			w.FirstError = s + ": " + p.FirstError
		}
		lats = append(lats, p.lats...)
	}
	w.setLatencies(lats)
	if writeS > 0 {
		w.AchievedPerS = float64(w.Acked) / writeS
	}
}

// soakSmall is the small-site phase: the sites' first minutes, writing
// to Keys keys only, before the main load. Its samples' T count from its
// own first write; the main load's samples come after it.
type soakSmall struct {
	DurationS float64       `json:"duration_s"`
	Keys      int           `json:"keys"`
	WriteS    float64       `json:"write_s"`
	Writes    soakWrites    `json:"writes"`
	Samples   []*soakSample `json:"samples"`
}

// soakScan is a scan of the soak's keys at a site after the settle.
type soakScan struct {
	Keys  int   `json:"keys"`
	Bytes int64 `json:"bytes"`
	// Differ counts the keys whose version there is not the winner the
	// bench tracked.
	Differ int    `json:"differ"`
	Error  string `json:"error,omitempty"`
}

// soakSample is one sample: the live data size and each site's disk.
type soakSample struct {
	T     float64                    `json:"t_s"` // since the writes began
	Live  int64                      `json:"live_bytes"`
	Acked int64                      `json:"acked"`
	Sites map[string]*soakSiteSample `json:"sites"`
}

// soakSiteSample is what a site took at a sample: Allocated, Apparent
// and WAL over its data directories (diskUsage), Estimate its own
// (status.json DiskTotal), its kv streams' floors and the kv log entries
// it kept.
type soakSiteSample struct {
	Allocated  int64         `json:"allocated_bytes"`
	Apparent   int64         `json:"apparent_bytes"`
	WAL        int64         `json:"wal_bytes,omitempty"`
	Estimate   int64         `json:"estimate_bytes,omitempty"`
	LogEntries uint64        `json:"kv_log_entries"`
	Floors     []streamFloor `json:"floors,omitempty"`
	Error      string        `json:"error,omitempty"`
}

// streamFloor is a stream's head and truncation point at a site, and the
// entries its log keeps (persisted above the truncation point).
type streamFloor struct {
	Stream    string `json:"stream"`
	Head      uint64 `json:"head"`
	Truncated uint64 `json:"truncated"`
	Retained  uint64 `json:"retained"`
}

func ratioOf(disk, live int64) float64 {
	if live <= 0 {
		return math.Inf(1)
	}
	return float64(disk) / float64(live)
}

// last is the sample after the settle; writesEnd the last sample taken
// while the writers wrote (or as they stopped).
func (r *soakResults) last() *soakSample {
	if len(r.Samples) == 0 {
		return nil
	}
	return r.Samples[len(r.Samples)-1]
}

func (r *soakResults) writesEnd() *soakSample {
	var out *soakSample
	for _, s := range r.Samples {
		if s.T <= r.WriteS+0.5 {
			out = s
		}
	}
	return out
}

// lastThird are the samples of the last third of the writes.
func (r *soakResults) lastThird() []*soakSample {
	var out []*soakSample
	for _, s := range r.Samples {
		if s.T >= r.WriteS*2/3 && s.T <= r.WriteS+0.5 {
			out = append(out, s)
		}
	}
	return out
}

// maxRatio is the largest disk/live of site over samples, and when.
func maxRatio(samples []*soakSample, site string) (ratio, at float64, ok bool) {
	for _, s := range samples {
		ss := s.Sites[site]
		if ss == nil || ss.Allocated == 0 || s.Live == 0 {
			continue
		}
		if v := ratioOf(ss.Allocated, s.Live); !ok || v > ratio {
			ratio, at, ok = v, s.T, true
		}
	}
	return ratio, at, ok
}

// diskRange is the least and the most disk of site over samples.
func diskRange(samples []*soakSample, site string) (lo, hi int64, ok bool) {
	for _, s := range samples {
		ss := s.Sites[site]
		if ss == nil || ss.Allocated == 0 {
			continue
		}
		if !ok || ss.Allocated < lo {
			lo = ss.Allocated
		}
		if !ok || ss.Allocated > hi {
			hi = ss.Allocated
		}
		ok = true
	}
	return lo, hi, ok
}

// floorsRose reports, per site, the kv streams whose truncation point did
// not rise from the first sample to the last, and the streams seen.
func (r *soakResults) floorsRose() (flat map[string][]string, seen int) {
	flat = map[string][]string{}
	if len(r.Samples) < 2 {
		return flat, 0
	}
	first, last := r.Samples[0], r.last()
	for _, site := range r.Sites {
		before := map[string]uint64{}
		if ss := first.Sites[site]; ss != nil {
			for _, f := range ss.Floors {
				before[f.Stream] = f.Truncated
			}
		}
		ss := last.Sites[site]
		if ss == nil || len(ss.Floors) == 0 {
			flat[site] = append(flat[site], "(no kv streams in its status)")
			continue
		}
		for _, f := range ss.Floors {
			seen++
			if f.Truncated <= before[f.Stream] {
				flat[site] = append(flat[site], f.Stream)
			}
		}
	}
	return flat, seen
}

// firstSamples are the samples of the sites' first minutes: the
// small-site phase's if it ran, else the main load's first
// soakFirstWindow (all of it in a shorter run). small says which.
func (r *soakResults) firstSamples() (samples []*soakSample, small bool) {
	if r.Small != nil && len(r.Small.Samples) > 0 {
		return r.Small.Samples, true
	}
	for _, s := range r.Samples {
		if s.T <= soakFirstWindow.Seconds()+0.5 {
			samples = append(samples, s)
		}
	}
	return samples, false
}

// soakFirst is a site's disk over its first minutes: its peak and the
// limit at that sample, and the sample closest to or furthest over its
// limit (the highest disk / limit), which decides the target.
type soakFirst struct {
	Peak, PeakLive, PeakLimit    int64
	PeakAt                       float64
	Worst, WorstLive, WorstLimit int64
	WorstAt                      float64
}

func (f soakFirst) ratio() float64 { return float64(f.Worst) / float64(f.WorstLimit) }

// firstOf is site's soakFirst over samples.
func firstOf(samples []*soakSample, site string) (soakFirst, bool) {
	var f soakFirst
	ok := false
	for _, s := range samples {
		ss := s.Sites[site]
		if ss == nil || ss.Allocated == 0 {
			continue
		}
		limit := soakFirstLimit(s.Live)
		if !ok || ss.Allocated > f.Peak {
			f.Peak, f.PeakLive, f.PeakLimit, f.PeakAt = ss.Allocated, s.Live, limit, s.T
		}
		if !ok || float64(ss.Allocated)/float64(limit) > f.ratio() {
			f.Worst, f.WorstLive, f.WorstLimit, f.WorstAt = ss.Allocated, s.Live, limit, s.T
		}
		ok = true
	}
	return f, ok
}

// firstTarget is issue 26's first-minutes target.
func (r *soakResults) firstTarget() (string, string) {
	samples, small := r.firstSamples()
	var where string
	var top int64
	for _, s := range samples {
		top = max(top, s.Live)
	}
	switch {
	case len(samples) == 0:
		return statusNotMeasured, "not measured: no samples"
	case small:
		where = fmt.Sprintf("small-site phase of %.0f s, %d keys, live up to %s", r.Small.WriteS, r.Small.Keys, mib(top))
	default:
		span := samples[len(samples)-1].T
		what := "no small-site phase in this run"
		if r.Short {
			what = "the short run has no small-site phase"
		}
		ran := fmt.Sprintf("first %.0f s", span)
		if span < soakFirstWindow.Seconds()-r.SampleS {
			ran = fmt.Sprintf("%.0f s, all that ran", span)
		}
		where = fmt.Sprintf("%s: over the main load's %s, %d keys, live up to %s", what, ran, r.Keys, mib(top))
		if top > 11<<20 {
			where += ", more than the target's 10 MiB"
		}
	}
	status := statusMet
	parts := []string{where}
	n := 0
	for _, site := range r.Sites {
		f, ok := firstOf(samples, site)
		if !ok {
			parts = append(parts, site+" not measured")
			status = statusNotMeasured
			continue
		}
		n++
		d := fmt.Sprintf("%s peak %s at %.0f s against %s (64 MiB + 3 × %s): %.2f×", site, mib(f.Peak), f.PeakAt, mib(f.PeakLimit), mib(f.PeakLive), float64(f.Peak)/float64(f.PeakLimit))
		if f.WorstAt != f.PeakAt {
			d += fmt.Sprintf(", furthest over at %.0f s: %s against %s, %.2f×", f.WorstAt, mib(f.Worst), mib(f.WorstLimit), f.ratio())
		}
		parts = append(parts, d)
		if f.ratio() > 1 && status != statusNotMeasured {
			status = statusMissed
		}
	}
	if n == 0 {
		status = statusNotMeasured
	}
	return status, joinStrings(parts)
}

// evaluate marks the disk targets of issues 18 and 26, and the run's
// checks, met, missed or not measured.
func (r *soakResults) evaluate() (targets, checks []psTarget) {
	add := func(to *[]psTarget, name, status, detail string) {
		*to = append(*to, psTarget{Name: name, Status: status, Detail: detail})
	}
	ratios := func(name string, get func(site string) (float64, string, bool)) {
		var parts []string
		status := statusMet
		n := 0
		for _, s := range r.Sites {
			v, where, ok := get(s)
			if !ok {
				parts = append(parts, s+" not measured")
				status = statusNotMeasured
				continue
			}
			n++
			parts = append(parts, fmt.Sprintf("%s %.2f×%s", s, v, where))
			if v > soakDiskFactor && status != statusNotMeasured {
				status = statusMissed
			}
		}
		if n == 0 {
			status = statusNotMeasured
		}
		add(&targets, name, status, joinStrings(parts))
	}
	end := r.last()
	ratios(fmt.Sprintf("disk ≤ %.0f× live at every site at the end of the settle", soakDiskFactor), func(site string) (float64, string, bool) {
		if end == nil || end.Sites[site] == nil || end.Live == 0 || end.Sites[site].Allocated == 0 {
			return 0, "", false
		}
		ss := end.Sites[site]
		return ratioOf(ss.Allocated, end.Live), fmt.Sprintf(" (%s of %s live)", mib(ss.Allocated), mib(end.Live)), true
	})
	third := r.lastThird()
	ratios(fmt.Sprintf("disk ≤ %.0f× live at every site over the last third of the writes (its max)", soakDiskFactor), func(site string) (float64, string, bool) {
		v, at, ok := maxRatio(third, site)
		return v, fmt.Sprintf(" at %.0f s", at), ok
	})
	st, d := r.firstTarget()
	add(&targets, fmt.Sprintf("disk ≤ 64 MiB + %.0f× live at every site over its first %.0f minutes with about 10 MiB of data (every sample; its peak shown)", soakDiskFactor, soakFirstWindow.Minutes()), st, d)

	pace := func(what string, w soakWrites, writeS float64) {
		switch {
		case w.Slots == 0:
			add(&checks, what+" acknowledged and the pace held", statusNotMeasured, "no writes")
		default:
			d := fmt.Sprintf("%d of %d paced writes acknowledged under %s in %.0f s: %.1f/s of %.0f/s (%.0f%%); %d slots missed (no worker free), %d made but their wait failed, %d unanswered",
				w.Acked, w.Slots, r.Predicate, writeS, w.AchievedPerS, r.RateTarget, 100*w.AchievedPerS/r.RateTarget, w.Missed, w.Failed, w.Unknown)
			st := statusMet
			if w.Acked == 0 || w.AchievedPerS < soakPaceShare*r.RateTarget {
				st = statusMissed
			}
			add(&checks, fmt.Sprintf("%s acknowledged and the pace held (≥ %.0f%% of --rate)", what, soakPaceShare*100), st, d)
		}
	}
	if r.Small != nil {
		pace("small-site phase: writes", r.Small.Writes, r.Small.WriteS)
	}
	pace("writes", r.Writes, r.WriteS)
	flat, seen := r.floorsRose()
	switch {
	case seen == 0:
		add(&checks, "kv log truncated: every kv stream's floor rose at every site", statusNotMeasured, "no kv streams in the sites' status")
	case len(flat) > 0:
		var parts []string
		for _, s := range slices.Sorted(maps.Keys(flat)) {
			parts = append(parts, s+": "+strings.Join(flat[s], ", "))
		}
		add(&checks, "kv log truncated: every kv stream's floor rose at every site", statusMissed, "floor did not rise: "+joinStrings(parts))
	default:
		add(&checks, "kv log truncated: every kv stream's floor rose at every site", statusMet, fmt.Sprintf("all %d kv streams (site × origin)", seen))
	}
	if len(r.Scan) == 0 {
		add(&checks, "live size as a scan of every site finds it", statusNotMeasured, "no scan")
	} else {
		st := statusMet
		var parts []string
		for _, s := range r.Sites {
			sc := r.Scan[s]
			switch {
			case sc == nil:
				st = statusNotMeasured
				parts = append(parts, s+" not scanned")
			case sc.Error != "":
				st = statusMissed
				parts = append(parts, s+": "+sc.Error)
			default:
				parts = append(parts, fmt.Sprintf("%s %d keys, %d B, %d differ", s, sc.Keys, sc.Bytes, sc.Differ))
				if sc.Bytes != r.LiveBytes || sc.Keys != r.LiveKeys || sc.Differ > 0 {
					st = statusMissed
				}
			}
		}
		add(&checks, "live size as a scan of every site finds it", st, fmt.Sprintf("bench: %d keys, %d B; %s", r.LiveKeys, r.LiveBytes, joinStrings(parts)))
	}
	return targets, checks
}
