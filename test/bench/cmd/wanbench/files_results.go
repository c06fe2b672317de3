package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// The file-sync bench's results as results.json holds them, the bounds,
// and issue 26's targets (with issue 17's it keeps) evaluated on them.
// All of it is pure, so that the report can be made again from
// results.json alone.

const fsBenchName = "files"

// Systems of the file-sync bench.
const sysSyncthing = "syncthing"

// What a transfer row measures.
const (
	fsStable   = "stable"   // stable under majority, read at the origin
	fsComplete = "complete" // complete and in place at the region
)

// Targets of issue 26, and those of issue 17 it keeps.
const (
	// fsStableFactor and fsCompleteFactor: stable under majority within
	// this many times its single-path bound, complete at every receiver
	// within that many times its own.
	fsStableFactor   = 1.2
	fsCompleteFactor = 1.3
	// fsBytesFactor: checkpoint 2's busiest link from the origin carries
	// at most this many times the changed bytes (issue 17).
	fsBytesFactor = 1.15
	// fsWireFactor: ours puts at most this many times Syncthing's bytes on
	// the wire (Syncthing's + 2 %).
	fsWireFactor = 1.02
	// fsKVP50Factor and fsKVSlackMs: KV puts while a checkpoint streams
	// keep their p50 within this factor of the idle p50 plus the slack;
	// fsKVP99Factor: their p99 within this factor of the idle p99.
	fsKVP50Factor = 1.2
	fsKVSlackMs   = 3.0
	fsKVP99Factor = 2.0
	// fsChunkFactor: one core chunks and hashes at least this many times
	// the link bandwidth, so that the client is not what limits a sync.
	fsChunkFactor  = 4.0
	fsClientMaxMiB = 256.0
	fsSiteMaxMiB   = 512.0
	fsMaxRun       = 10 * time.Minute
)

// fsFactor is the target's factor on the single-path bound for a row of
// kind (fsStable or fsComplete).
func fsFactor(kind string) float64 {
	if kind == fsStable {
		return fsStableFactor
	}
	return fsCompleteFactor
}

// fsBound is the time a receiver needs at least: the bytes it lacks at the
// link's bandwidth, plus the round trip between the origin and it (the
// first byte's way there and the ack's way back).
func fsBound(lack int64, bw wan.Bandwidth, rtt time.Duration) time.Duration {
	if bw <= 0 {
		return rtt
	}
	return time.Duration(float64(lack)/float64(bw)*float64(time.Second)) + rtt
}

// fsCoopBound is the time a receiver needs at least when the receivers
// help each other, as Syncthing's do: the origin and receivers other
// sites, every directed link between any two of them at bw, each receiver
// lacking the same lack bytes D. With k = receivers it is
//
//	D / (k × bw) + rtt
//
// and no schedule does better, over any link use:
//   - into the receiver: k links (from the origin and from the k−1 other
//     receivers), so D bytes take at least D / (k × bw);
//   - out of the origin: every byte leaves it at least once, over its k
//     links: D / (k × bw) again;
//   - all uploads: k × D bytes must arrive in all; the origin sends at
//     k × bw and each receiver at (k−1) × bw that counts (what it sends
//     back to the origin does not), k² × bw in all: D / (k × bw) once more.
//
// The three cuts agree, and one schedule meets them: the origin sends a
// different 1/k of the bytes to each receiver, which passes its part on
// to the k−1 others as it arrives; every link then carries D/k bytes.
// So it is D/(2 × bw) on ec2-3's two receivers, half the single path's
// D/bw. The latency term is the single-path bound's round trip between
// the origin and the receiver (a relayed byte comes later still), so that
// the two bounds differ only in their bandwidth term. receivers < 2 is
// the single path.
func fsCoopBound(lack int64, bw wan.Bandwidth, receivers int, rtt time.Duration) time.Duration {
	if bw <= 0 || receivers < 2 {
		return fsBound(lack, bw, rtt)
	}
	return time.Duration(float64(lack)/(float64(receivers)*float64(bw))*float64(time.Second)) + rtt
}

// fsTransfer is one time measured from a checkpoint's commit.
type fsTransfer struct {
	System     string `json:"system"`
	Checkpoint string `json:"checkpoint"`
	Kind       string `json:"kind"` // fsStable or fsComplete
	// Region is where the checkpoint was to be complete; for a stable row
	// the nearest other site, whose copy majority waits for.
	Region    string  `json:"region"`
	LackBytes int64   `json:"lack_bytes"`
	BoundMs   float64 `json:"bound_ms"`
	// CoopBoundMs is fsCoopBound's: every link into the region carrying
	// bytes. Runs before issue 26 lack it; coopBounds fills it in.
	CoopBoundMs float64 `json:"coop_bound_ms,omitempty"`
	TookMs      float64 `json:"took_ms"`
	Error       string  `json:"error,omitempty"`
	Skipped     string  `json:"skipped,omitempty"`
}

func (t *fsTransfer) measured() bool { return t.Skipped == "" && t.Error == "" && t.TookMs > 0 }

// fsLinkPoint is one sample of a link's throughput.
type fsLinkPoint struct {
	T    float64 `json:"t_s"` // since the commit
	MBps float64 `json:"mb_per_s"`
}

// fsCheckpointRun is one checkpoint synced by one system: its sizes, the
// bytes its links carried, and what the host was doing meanwhile.
type fsCheckpointRun struct {
	System     string `json:"system"`
	Checkpoint string `json:"checkpoint"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	// ChangedBytes are the bytes the previous checkpoint lacks: what
	// every receiver lacks, whatever the system.
	ChangedBytes int64 `json:"changed_bytes"`
	// ChunkLackBytes (ours) are the bytes of the chunks the previous
	// checkpoint lacks, as our chunker cuts them.
	ChunkLackBytes int64 `json:"chunk_lack_bytes,omitempty"`
	// WriteMs is how long writing the shards took, before the commit.
	WriteMs float64 `json:"write_ms"`
	// Wire is the bytes each directed link delivered, "a->b", from just
	// before the shards were written until the links went quiet after
	// the last region completed.
	Wire map[string]int64 `json:"wire"`
	// WindowMs is from the commit to the last region complete; Util the
	// share of each origin link's bandwidth used over it.
	WindowMs float64            `json:"window_ms"`
	Util     map[string]float64 `json:"util"`
	// CPUIdle is the host's idle share (iowait included) over the window;
	// CPUSeconds the CPU time of the system's processes and of the bench's
	// own over it, by name.
	CPUIdle    float64            `json:"cpu_idle"`
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
	// CPUSpan is the same over the span Wire counts (from just before the
	// shards were written until the links went quiet), SpanMs its length:
	// what a system does before the commit (ours chunks and uploads
	// while the shards are written) or after the last region completed
	// counts too. Runs before issue 26 lack them.
	CPUSpan map[string]float64       `json:"cpu_seconds_span,omitempty"`
	SpanMs  float64                  `json:"span_ms,omitempty"`
	Series  map[string][]fsLinkPoint `json:"series,omitempty"`
	Error   string                   `json:"error,omitempty"`
	Skipped string                   `json:"skipped,omitempty"`

	commitAt time.Time // when the marker's rename returned
}

func (c *fsCheckpointRun) measured() bool { return c.Skipped == "" && c.Error == "" && c.Wire != nil }

// wireFrom sums the bytes of the links from site; wireMaxFrom is the most
// one of them carried.
func (c *fsCheckpointRun) wireFrom(site string) (sum, most int64) {
	for k, v := range c.Wire {
		if from, _, ok := cutLink(k); ok && from == site {
			sum += v
			most = max(most, v)
		}
	}
	return sum, most
}

func (c *fsCheckpointRun) wireTotal() int64 {
	var sum int64
	for _, v := range c.Wire {
		sum += v
	}
	return sum
}

func cutLink(k string) (from, to string, ok bool) { return strings.Cut(k, "->") }

// fsKV is the KV put latency at the origin, idle and while checkpoint 1
// streamed.
type fsKV struct {
	Predicate  string    `json:"predicate"`
	IdleOps    int       `json:"idle_ops"`
	BusyOps    int       `json:"busy_ops"`
	Errors     int       `json:"errors"`
	IdleP50ms  float64   `json:"idle_p50_ms"`
	IdleP99ms  float64   `json:"idle_p99_ms"`
	BusyP50ms  float64   `json:"busy_p50_ms"`
	BusyP99ms  float64   `json:"busy_p99_ms"`
	BoundMs    float64   `json:"bound_ms"`
	BusyFromS  float64   `json:"busy_from_s"` // the window, since the commit
	BusyToS    float64   `json:"busy_to_s"`
	BusyLat    []float64 `json:"busy_lat_ms,omitempty"`
	BusyAt     []float64 `json:"busy_at_s,omitempty"`
	Skipped    string    `json:"skipped,omitempty"`
	FirstError string    `json:"first_error,omitempty"`

	t0 time.Time // checkpoint 1's commit, which BusyFromS and BusyToS count from
}

func (k *fsKV) setLatencies(idle, busy []time.Duration) {
	k.IdleOps, k.BusyOps = len(idle), len(busy)
	k.IdleP50ms, k.IdleP99ms = ms(workload.Percentile(idle, .5)), ms(workload.Percentile(idle, .99))
	k.BusyP50ms, k.BusyP99ms = ms(workload.Percentile(busy, .5)), ms(workload.Percentile(busy, .99))
}

// fsChunking is the chunker's throughput on one core.
type fsChunking struct {
	Bytes   int64   `json:"bytes"`
	Rounds  int     `json:"rounds"`
	MBps    float64 `json:"mb_per_s"` // best round, chunking and SHA-256
	SumMBps float64 `json:"sum_mb_per_s"`
	Chunks  int     `json:"chunks"`
	Skipped string  `json:"skipped,omitempty"`
}

// fsMemory is the memory phase: a big file from the origin to the
// others, peak RSS of each process over it.
type fsMemory struct {
	Bytes     int64   `json:"bytes"`
	Bandwidth string  `json:"bandwidth"`
	TookMs    float64 `json:"took_ms"`
	// VmHWM in MiB by process ("stabsync@site", "stabilizerd@site"),
	// reset (clear_refs) just before the file was written; HWMRun the
	// peaks over the whole run until then.
	HWM     map[string]float64 `json:"hwm_mib"`
	HWMRun  map[string]float64 `json:"hwm_run_mib,omitempty"`
	Reset   bool               `json:"reset"`
	Error   string             `json:"error,omitempty"`
	Skipped string             `json:"skipped,omitempty"`
}

// fsResults is everything a file-sync run measured, and how.
type fsResults struct {
	Bench    string    `json:"bench"`
	Topology string    `json:"topology"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Host     string    `json:"host"`
	Sites    []string  `json:"sites"`
	Origin   string    `json:"origin"`
	// Nearest is the origin's nearest other site.
	Nearest string                        `json:"nearest"`
	RTTms   map[string]map[string]float64 `json:"rtt_ms"`
	// Bandwidth of every link, as text and bytes per second.
	Bandwidth    string  `json:"bandwidth"`
	BandwidthBps float64 `json:"bandwidth_bps"`
	Shards       int     `json:"shards"`
	ShardBytes   int64   `json:"shard_bytes"`
	Settle       string  `json:"settle"`
	// Checkpoints are the files as written (ckpt 1, ckpt 2).
	Checkpoints []*ckpt            `json:"checkpoints"`
	Runs        []*fsCheckpointRun `json:"runs"`
	Transfers   []*fsTransfer      `json:"transfers"`
	KV          *fsKV              `json:"kv"`
	Chunking    *fsChunking        `json:"chunking"`
	Memory      *fsMemory          `json:"memory"`
	Targets     []psTarget         `json:"targets"`
	Notes       []string           `json:"notes"`
}

func (r *fsResults) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *fsResults) transfer(system, ck, kind, region string) *fsTransfer {
	for _, t := range r.Transfers {
		if t.System == system && t.Checkpoint == ck && t.Kind == kind && t.Region == region {
			return t
		}
	}
	return nil
}

func (r *fsResults) run(system, ck string) *fsCheckpointRun {
	for _, c := range r.Runs {
		if c.System == system && c.Checkpoint == ck {
			return c
		}
	}
	return nil
}

// receivers are the sites other than the origin.
func (r *fsResults) receivers() []string { return without(r.Sites, r.Origin) }

func (r *fsResults) ckptNames() []string {
	var out []string
	for _, c := range r.Checkpoints {
		out = append(out, c.Dir)
	}
	return out
}

// coopBounds fills in the cooperative bound of every transfer that lacks
// one (runs before issue 26), from the run's set-up.
func (r *fsResults) coopBounds() {
	k := len(r.receivers())
	for _, t := range r.Transfers {
		if t.CoopBoundMs > 0 {
			continue
		}
		rttv := time.Duration(r.RTTms[r.Origin][t.Region] * float64(time.Millisecond))
		t.CoopBoundMs = ms(fsCoopBound(t.LackBytes, wan.Bandwidth(r.BandwidthBps), k, rttv))
	}
}

// evaluate marks every target of issue 26 (and issue 17's it keeps) met,
// missed or not measured, and adds the cooperative bound's ratios as
// information.
func (r *fsResults) evaluate() []psTarget {
	var ts []psTarget
	add := func(name, status, detail string) {
		ts = append(ts, psTarget{Name: name, Status: status, Detail: detail})
	}
	add2 := func(name string, f func() (string, string)) { st, d := f(); add(name, st, d) }
	within := func(t *fsTransfer, factor float64) (string, string) {
		switch {
		case t == nil || t.Skipped != "":
			why := "not run"
			if t != nil {
				why = t.Skipped
			}
			return statusNotMeasured, why
		case !t.measured():
			return statusMissed, "failed: " + t.Error
		}
		ratio := t.TookMs / t.BoundMs
		d := fmt.Sprintf("%.0f ms against a bound of %.0f ms: %.2f× (target ≤ %.2f×)", t.TookMs, t.BoundMs, ratio, factor)
		if ratio <= factor {
			return statusMet, d
		}
		return statusMissed, d
	}
	for i, ck := range r.ckptNames() {
		label := fmt.Sprintf("checkpoint %d (%s)", i+1, ck)
		st, d := within(r.transfer(sysOurs, ck, fsStable, r.Nearest), fsStableFactor)
		add(fmt.Sprintf("%s stable under majority ≤ %.1f× bound", label, fsStableFactor), st, d)
		for _, s := range r.receivers() {
			st, d := within(r.transfer(sysOurs, ck, fsComplete, s), fsCompleteFactor)
			add(fmt.Sprintf("%s complete at %s ≤ %.1f× bound", label, s, fsCompleteFactor), st, d)
		}
		if i == 1 {
			add2(fmt.Sprintf("%s bytes sent per link from %s ≤ %.2f× changed bytes", label, r.Origin, fsBytesFactor), func() (string, string) { return r.bytesTarget(ck) })
		}
	}
	add2("ours faster than Syncthing to complete at every region, both checkpoints", func() (string, string) { return r.fasterTarget() })
	for i, ck := range r.ckptNames() {
		add2(fmt.Sprintf("checkpoint %d (%s): took × single-path bound / × cooperative bound, ours and Syncthing", i+1, ck),
			func() (string, string) { return r.coopInfo(ck) })
	}
	add2("CPU seconds of our processes (stabilizerd, stabsync) per GiB delivered ≤ Syncthing's, both checkpoints", func() (string, string) { return r.cpuTarget() })
	add2(fmt.Sprintf("ours bytes on the wire ≤ %.2f× Syncthing's, both checkpoints", fsWireFactor), func() (string, string) { return r.wireTarget() })
	add2(fmt.Sprintf("KV majority put p50 while checkpoint 1 streams ≤ %.1f× idle p50 + %.0f ms", fsKVP50Factor, fsKVSlackMs), func() (string, string) { return r.kvTarget(false) })
	add2(fmt.Sprintf("KV majority put p99 while checkpoint 1 streams ≤ %.0f× idle p99", fsKVP99Factor), func() (string, string) { return r.kvTarget(true) })
	add2(fmt.Sprintf("chunking and hashing on one core ≥ %.0f× link bandwidth", fsChunkFactor), func() (string, string) { return r.chunkTarget() })
	add2(fmt.Sprintf("memory: stabsync < %.0f MiB, each site < %.0f MiB while a big file syncs", fsClientMaxMiB, fsSiteMaxMiB), func() (string, string) { return r.memoryTarget() })
	if !r.Finished.IsZero() && !r.Started.IsZero() {
		took := r.Finished.Sub(r.Started)
		st := statusMet
		if took > fsMaxRun {
			st = statusMissed
		}
		add(fmt.Sprintf("the whole bench within %v", fsMaxRun), st, fmt.Sprintf("%.0f s", took.Seconds()))
	}
	return ts
}

// coopInfo lists, for checkpoint ck, each measured row's time over its
// single-path bound and over its cooperative bound, both systems.
func (r *fsResults) coopInfo(ck string) (string, string) {
	var parts []string
	for _, kind := range []string{fsStable, fsComplete} {
		regions := r.receivers()
		if kind == fsStable {
			regions = []string{r.Nearest}
		}
		for _, s := range regions {
			var sys []string
			for _, system := range []string{sysOurs, sysSyncthing} {
				t := r.transfer(system, ck, kind, s)
				if t == nil || !t.measured() || t.BoundMs <= 0 || t.CoopBoundMs <= 0 {
					continue
				}
				sys = append(sys, fmt.Sprintf("%s %.2f× / %.2f×", sysLabel(system), t.TookMs/t.BoundMs, t.TookMs/t.CoopBoundMs))
			}
			if len(sys) > 0 {
				parts = append(parts, fmt.Sprintf("%s at %s: %s", kind, s, strings.Join(sys, ", ")))
			}
		}
	}
	if len(parts) == 0 {
		return statusNotMeasured, "no time measured"
	}
	return statusInfo, joinStrings(parts)
}

// fsCPU is a checkpoint run's CPU time per GiB delivered.
type fsCPU struct {
	Seconds float64 // of the system's processes, the bench's own left out
	Procs   int
	GiB     float64 // delivered: the changed bytes, at every receiver
	Span    bool    // over CPUSpan; false: over the window (older runs)
}

func (c fsCPU) perGiB() float64 { return c.Seconds / c.GiB }

// systemProc reports whether the process named so (as CPUSeconds names
// them) is one of system's: stabilizerd and stabsync for ours, every
// syncthing process for Syncthing; never the bench's own (the emulated
// links and the polling).
func systemProc(system, name string) bool {
	if system == sysSyncthing {
		return strings.HasPrefix(name, "syncthing@")
	}
	return strings.HasPrefix(name, "stabilizerd@") || strings.HasPrefix(name, "stabsync@")
}

// cpu is c's CPU time per GiB delivered, over the span where measured,
// else over the window.
func (r *fsResults) cpu(c *fsCheckpointRun) (fsCPU, bool) {
	if c == nil || !c.measured() || c.ChangedBytes <= 0 {
		return fsCPU{}, false
	}
	out := fsCPU{GiB: float64(c.ChangedBytes) * float64(len(r.receivers())) / (1 << 30), Span: len(c.CPUSpan) > 0}
	by := c.CPUSeconds
	if out.Span {
		by = c.CPUSpan
	}
	for name, v := range by {
		if systemProc(c.System, name) {
			out.Seconds += v
			out.Procs++
		}
	}
	return out, out.Procs > 0 && out.GiB > 0
}

func (r *fsResults) cpuTarget() (string, string) {
	var worse, cmp []string
	n, span := 0, true
	for _, ck := range r.ckptNames() {
		o, okO := r.cpu(r.run(sysOurs, ck))
		t, okT := r.cpu(r.run(sysSyncthing, ck))
		if !okO || !okT {
			continue
		}
		n++
		span = span && o.Span && t.Span
		cmp = append(cmp, fmt.Sprintf("%s: %.1f vs %.1f s/GiB, %.2f× (%.1f and %.1f CPU s for %.2f GiB)",
			ck, o.perGiB(), t.perGiB(), o.perGiB()/t.perGiB(), o.Seconds, t.Seconds, o.GiB))
		if o.perGiB() > t.perGiB() {
			worse = append(worse, ck)
		}
	}
	if n == 0 {
		return statusNotMeasured, "not measured: no checkpoint with both systems' CPU time"
	}
	over := "CPU from just before the shards were written until the links went quiet"
	if !span {
		over = "CPU from the commit to the last region complete only: the run predates the longer span, so ours' chunking and uploading while the shards were written is not counted"
	}
	d := joinStrings(cmp) + "; " + over
	if len(worse) > 0 {
		return statusMissed, "more than Syncthing's at " + strings.Join(worse, " and ") + ". " + d
	}
	return statusMet, d
}

func (r *fsResults) bytesTarget(ck string) (string, string) {
	c := r.run(sysOurs, ck)
	if c == nil || !c.measured() {
		return statusNotMeasured, "not measured"
	}
	_, most := c.wireFrom(r.Origin)
	ratio := float64(most) / float64(c.ChangedBytes)
	d := fmt.Sprintf("the busiest link from %s carried %s for %s changed: %.3f×", r.Origin, mib(most), mib(c.ChangedBytes), ratio)
	if ratio <= fsBytesFactor {
		return statusMet, d
	}
	return statusMissed, d
}

// fasterTarget compares time to complete at each receiver and checkpoint.
func (r *fsResults) fasterTarget() (string, string) {
	var slower, cmp []string
	n := 0
	for _, ck := range r.ckptNames() {
		for _, s := range r.receivers() {
			o, t := r.transfer(sysOurs, ck, fsComplete, s), r.transfer(sysSyncthing, ck, fsComplete, s)
			if o == nil || t == nil || !o.measured() || !t.measured() {
				continue
			}
			n++
			cmp = append(cmp, fmt.Sprintf("%s at %s: %.1f s vs %.1f s", ck, s, o.TookMs/1000, t.TookMs/1000))
			if o.TookMs >= t.TookMs {
				slower = append(slower, ck+" at "+s)
			}
		}
	}
	switch {
	case n == 0:
		return statusNotMeasured, "no pair measured"
	case len(slower) > 0:
		return statusMissed, "slower: " + joinStrings(slower) + " (" + joinStrings(cmp) + ")"
	}
	return statusMet, joinStrings(cmp)
}

func (r *fsResults) wireTarget() (string, string) {
	var more, cmp []string
	n := 0
	for _, ck := range r.ckptNames() {
		o, t := r.run(sysOurs, ck), r.run(sysSyncthing, ck)
		if o == nil || t == nil || !o.measured() || !t.measured() || t.wireTotal() == 0 {
			continue
		}
		n++
		ratio := float64(o.wireTotal()) / float64(t.wireTotal())
		cmp = append(cmp, fmt.Sprintf("%s: %s vs %s, %.3f×", ck, mib(o.wireTotal()), mib(t.wireTotal()), ratio))
		if ratio > fsWireFactor {
			more = append(more, ck)
		}
	}
	switch {
	case n == 0:
		return statusNotMeasured, "no checkpoint measured for both"
	case len(more) > 0:
		return statusMissed, fmt.Sprintf("over %.2f× at %s. %s", fsWireFactor, strings.Join(more, " and "), joinStrings(cmp))
	}
	return statusMet, joinStrings(cmp)
}

// kvTarget is the p50 target, or with p99 the p99 one.
func (r *fsResults) kvTarget(p99 bool) (string, string) {
	k := r.KV
	if k == nil || k.Skipped != "" || k.IdleOps == 0 || k.BusyOps == 0 {
		why := "not measured"
		if k != nil && k.Skipped != "" {
			why = k.Skipped
		}
		return statusNotMeasured, why
	}
	name, busy, idle, limit := "p50", k.BusyP50ms, k.IdleP50ms, fsKVP50Factor*k.IdleP50ms+fsKVSlackMs
	if p99 {
		name, busy, idle, limit = "p99", k.BusyP99ms, k.IdleP99ms, fsKVP99Factor*k.IdleP99ms
	}
	d := fmt.Sprintf("%s %.1f ms busy vs %.1f ms idle (%.2f×), limit %.1f ms; %d and %d puts", name, busy, idle, busy/idle, limit, k.BusyOps, k.IdleOps)
	if busy <= limit {
		return statusMet, d
	}
	return statusMissed, d
}

func (r *fsResults) chunkTarget() (string, string) {
	c := r.Chunking
	if c == nil || c.Skipped != "" || c.MBps == 0 {
		return statusNotMeasured, "not measured"
	}
	link := r.BandwidthBps / 1e6
	d := fmt.Sprintf("%.0f MB/s (SHA-256 alone %.0f MB/s) against links of %.0f MB/s: %.1f×", c.MBps, c.SumMBps, link, c.MBps/link)
	if c.MBps >= fsChunkFactor*link {
		return statusMet, d
	}
	return statusMissed, d
}

func (r *fsResults) memoryTarget() (string, string) {
	m := r.Memory
	if m == nil || m.Skipped != "" || len(m.HWM) == 0 {
		return statusNotMeasured, "not measured"
	}
	var parts, over []string
	names := slices.Sorted(maps.Keys(m.HWM))
	for _, name := range names {
		v := m.HWM[name]
		limit := fsSiteMaxMiB
		if isClient(name) {
			limit = fsClientMaxMiB
		}
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", name, v))
		if v >= limit {
			over = append(over, name)
		}
	}
	d := fmt.Sprintf("%s file at %s: %s", mib(m.Bytes), m.Bandwidth, joinStrings(parts))
	if m.Error != "" {
		d = "the file did not get through (" + m.Error + "), peaks until then: " + d
	}
	if len(over) > 0 {
		return statusMissed, "over the limit: " + joinStrings(over) + "; " + d
	}
	if m.Error != "" {
		return statusMissed, d
	}
	return statusMet, d
}

func isClient(name string) bool { return strings.HasPrefix(name, "stabsync@") }

func joinStrings(xs []string) string { return strings.Join(xs, "; ") }

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// nearestOf is the site closest to origin by round trip.
func nearestOf(topo *wan.Topology, origin string) string {
	best, bestRTT := "", time.Duration(-1)
	for _, s := range topo.Sites {
		if s == origin {
			continue
		}
		if d := rtt(topo, origin, s); bestRTT < 0 || d < bestRTT {
			best, bestRTT = s, d
		}
	}
	return best
}
