package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/test/bench/internal/local"
	"github.com/stabilizer/stabilizer/wan"
)

// `wanbench soak`: issue 18's bounded-disk soak. An overwrite workload
// (--keys job records of 1–4 KB, written at a fixed total rate from every
// site, each under majority) runs for --duration on our sites behind the
// in-process emulated links; every --sample the bench reads the bytes
// under each site's data directories and its status.json, beside the
// live data size, which it knows exactly from the writes' responses.
// After the writers stop it samples for --settle more. Before that main
// load, a small-site phase (issue 26) writes the same way to fewer keys
// (--small-keys, about 10 MiB of live data) for --small-duration: the
// sites' first minutes with a small data set, sampled the same way.
// soak_results.go holds the results and the targets, soak_report.go the
// report.

// soakOptions are the flags of `wanbench soak`.
type soakOptions struct {
	topology, out string
	duration      time.Duration
	settle        time.Duration
	sample        time.Duration
	keys          int
	rate          float64 // writes/s over all sites
	workers       int     // per site
	bandwidth     wan.Bandwidth
	short         bool
	// smallDuration and smallKeys shape the small-site phase before the
	// main load; a zero duration leaves it out.
	smallDuration time.Duration
	smallKeys     int
	keepWork      bool
	progress      io.Writer
}

// Shapes of the soak's workload.
const (
	soakPredicate = "majority"
	soakValueMin  = 1 << 10
	soakValueMax  = 4 << 10
	soakTimeout   = 10 * time.Second
	soakKeyPrefix = "jobs/"
	// soakSmallKeys is the small-site phase's default key count: a key
	// (10 B) and a value (2,560 B on average) are 2,570 B, so 4,080 keys
	// hold about 10 MiB of live data once each was written.
	soakSmallKeys = 4080
)

func newSoakCmd() *cobra.Command {
	o := soakOptions{}
	var bw string
	cmd := &cobra.Command{
		Use:   "soak --topology ec2-3 --out DIR",
		Short: "Bounded disk: an overwrite workload for --duration, disk use per site against the live data size",
		Long: `Issue 18's soak: three stabilizerd sites behind emulated links of --bandwidth; from every site a
paced writer puts job records of 1–4 KB (uniform) to --keys keys jobs/<n> shared by all sites,
under majority, --rate writes/s in all, for --duration (30m; --short: 2m). Every --sample, the
bytes under each site's data directory and its .snapshots sibling (allocated blocks, as du counts,
and apparent sizes), the site's own estimate (status.json DiskTotal) and its kv streams' floors
(status.json Retention), beside the live data size: the sum of key and value bytes of every key's
winning write (highest HLC, then origin name, as the KV decides), known from the writes' answers.
After the writers stop, sampling goes on for --settle (1m; --short: 20s).
Before the main load, on the same fresh sites, a small-site phase writes the same way to the
first --small-keys keys only (4080: about 10 MiB of live data) for --small-duration (10m;
--short: none, the target is then read over what the main load ran): the sites' disk in their
first 10 minutes with 10 MiB of data, sampled the same way.
Writes DIR/results.json, DIR/report.md and PNG plots; targets: disk at most 3 × live after
the main load, and at most 64 MiB + 3 × live over the small-site phase.`,
		Example: `  wanbench soak --topology ec2-3 --out /tmp/soak
  wanbench soak --short --out /tmp/soak-short`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.short {
				if !cmd.Flags().Changed("duration") {
					o.duration = 2 * time.Minute
				}
				if !cmd.Flags().Changed("settle") {
					o.settle = 20 * time.Second
				}
				if !cmd.Flags().Changed("small-duration") {
					o.smallDuration = 0
				}
			}
			var errs []error
			if o.out == "" {
				errs = append(errs, errors.New("--out DIR is required"))
			}
			var err error
			if o.bandwidth, err = wan.ParseBandwidth(bw); err != nil || o.bandwidth <= 0 {
				errs = append(errs, fmt.Errorf("--bandwidth %q: want a rate such as 25MB/s", bw))
			}
			errs = append(errs, o.validate()...)
			if err := errors.Join(errs...); err != nil {
				return err
			}
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err = runSoak(ctx, o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topology, "topology", "ec2-3", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	f.StringVar(&o.out, "out", "", "folder for results.json, report.md and the plot (required)")
	f.DurationVar(&o.duration, "duration", 30*time.Minute, "how long the writers write")
	f.DurationVar(&o.settle, "settle", time.Minute, "how long sampling goes on after the writers stopped")
	f.DurationVar(&o.sample, "sample", 5*time.Second, "time between two samples of disk use")
	f.IntVar(&o.keys, "keys", 10000, "keys overwritten (jobs/<n>, shared by all sites)")
	f.Float64Var(&o.rate, "rate", 150, "writes per second over all sites (each site writes its share)")
	f.IntVar(&o.workers, "workers", 64, "writes in flight at most per site (the pace's slots wait for a free one)")
	f.StringVar(&bw, "bandwidth", "25MB/s", "bandwidth of every emulated link")
	f.DurationVar(&o.smallDuration, "small-duration", soakFirstWindow, "how long the small-site phase writes before the main load (0: none)")
	f.IntVar(&o.smallKeys, "small-keys", soakSmallKeys, "keys the small-site phase writes (jobs/<n> for n below it)")
	f.BoolVar(&o.short, "short", false, "the short setting: --duration 2m --settle 20s --small-duration 0 unless given")
	f.BoolVar(&o.keepWork, "keep-work", false, "keep the sites' data and logs in DIR/work")
	return cmd
}

func (o *soakOptions) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--duration", o.duration}, {"--sample", o.sample}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", d.name, d.v))
		}
	}
	if o.settle < 0 {
		errs = append(errs, fmt.Errorf("--settle %v: must not be negative", o.settle))
	}
	if o.smallDuration < 0 {
		errs = append(errs, fmt.Errorf("--small-duration %v: must not be negative", o.smallDuration))
	}
	if o.smallDuration > 0 && (o.smallKeys < 1 || o.smallKeys > o.keys) {
		errs = append(errs, fmt.Errorf("--small-keys %d: must be between 1 and --keys (%d)", o.smallKeys, o.keys))
	}
	if o.keys < 1 {
		errs = append(errs, fmt.Errorf("--keys %d: must be at least 1", o.keys))
	}
	if o.rate <= 0 {
		errs = append(errs, fmt.Errorf("--rate %v: must be positive", o.rate))
	}
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: must be at least 1", o.workers))
	}
	return errs
}

// runSoak runs the soak and writes its outputs into o.out; it returns the
// results also after an error, with what was measured until then.
func runSoak(ctx context.Context, o soakOptions) (*soakResults, error) {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	work := filepath.Join(o.out, "work")
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if !o.keepWork {
		defer os.RemoveAll(work)
	}
	res := &soakResults{Bench: soakBenchName, Topology: topo.Name, Sites: topo.Sites, Host: hostDescription(), Commit: gitCommit(),
		Started: time.Now(), Bandwidth: o.bandwidth.String(), BandwidthBps: float64(o.bandwidth), Keys: o.keys,
		ValueMin: soakValueMin, ValueMax: soakValueMax, Predicate: soakPredicate, RateTarget: o.rate, Workers: o.workers,
		DurationS: o.duration.Seconds(), SettleS: o.settle.Seconds(), SampleS: o.sample.Seconds(), Short: o.short,
		Writes: soakWrites{PerSite: map[string]*soakSiteWrites{}}}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "\n[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	save := func() error {
		res.Finished = time.Now()
		return writeSoakOutputs(o.out, res)
	}
	err = soak(ctx, o, topo, work, res, step)
	if err != nil {
		res.note("Failed: %v", err)
	}
	if serr := save(); serr != nil {
		return res, errors.Join(err, serr)
	}
	fmt.Fprintln(o.progress)
	for _, t := range res.Targets {
		fmt.Fprintf(o.progress, "%-14s %s: %s\n", t.Status, t.Name, t.Detail)
	}
	step("done: %s, %s", filepath.Join(o.out, reportFile), filepath.Join(o.out, resultsFile))
	return res, err
}

func soak(ctx context.Context, o soakOptions, topo *wan.Topology, dir string, res *soakResults, step func(string, ...any)) error {
	step("ours: %d stabilizerd sites of %s behind emulated links of %s each", len(topo.Sites), topo.Name, o.bandwidth)
	c, err := startSites(topo, dir, o.bandwidth, "")
	if err != nil {
		c.Close(o.progress) // what it started
		return err
	}
	defer c.Close(o.progress)
	clients := map[string]*kvclient.Client{}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for _, s := range c.sites {
		if clients[s.Site], err = kvclient.Dial(s.Client); err != nil {
			return err
		}
	}
	// One live set for both phases: a key the small-site phase wrote
	// and the main load did not is live data still.
	live := newLiveSet()
	if o.smallDuration > 0 {
		so := o
		so.keys, so.duration = o.smallKeys, o.smallDuration
		res.Small = &soakSmall{DurationS: o.smallDuration.Seconds(), Keys: o.smallKeys, Writes: soakWrites{PerSite: map[string]*soakSiteWrites{}}}
		step("small-site phase for %v: %d keys (about %s of live data once each was written), %.0f writes/s over %d sites, values %d–%d B, %s",
			o.smallDuration, o.smallKeys, mib(int64(o.smallKeys)*int64(len(soakKeyPrefix)+5+(soakValueMin+soakValueMax)/2)), o.rate, len(c.sites), soakValueMin, soakValueMax, soakPredicate)
		ws, err := soakPhase(ctx, so, c, clients, live, 100, 0, &res.Small.Samples, &res.Small.Writes, "small", step)
		res.Small.WriteS = ws
		if err != nil {
			return err
		}
		if err := c.exited(); err != nil {
			return err
		}
	}
	step("writing for %v: %d keys, %.0f writes/s over %d sites (%.1f/s each), values %d–%d B, %s, up to %d in flight per site",
		o.duration, o.keys, o.rate, len(c.sites), o.rate/float64(len(c.sites)), soakValueMin, soakValueMax, soakPredicate, o.workers)
	res.WriteS, err = soakPhase(ctx, o, c, clients, live, 0, o.settle, &res.Samples, &res.Writes, "writes", step)
	if err != nil {
		return err
	}
	res.LiveBytes, res.LiveKeys = live.bytes(), live.len()
	res.WrittenBytes = live.written()
	if err := c.exited(); err != nil {
		return err
	}
	step("checking the live size against a scan of %s at every site", soakKeyPrefix)
	res.Scan = scanCheck(ctx, clients, live)
	for _, s := range c.sitesNames() {
		sc := res.Scan[s]
		if sc.Error != "" {
			fmt.Fprintf(o.progress, "  %s: %s\n", s, sc.Error)
			continue
		}
		fmt.Fprintf(o.progress, "  %s: %d keys, %s (bench: %d keys, %s), %d keys whose version differs\n",
			s, sc.Keys, mib(sc.Bytes), res.LiveKeys, mib(res.LiveBytes), sc.Differ)
	}
	return nil
}

// soakPhase writes o.keys keys at o.rate from every site for o.duration,
// each site's writers seeded by seed plus its index, into live; it
// samples every site every o.sample into *samples (the first at the first
// write), goes on sampling for settle after the writers stopped, and
// takes a last sample then. It returns how long the writers wrote.
func soakPhase(ctx context.Context, o soakOptions, c *siteCluster, clients map[string]*kvclient.Client, live *liveSet, seed uint64,
	settle time.Duration, samples *[]*soakSample, writes *soakWrites, label string, step func(string, ...any)) (float64, error) {
	var acked atomic.Int64
	var t0 time.Time
	// The sampler runs from the first write until the end of the settle.
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var samplerWG sync.WaitGroup
	sampleNow := func(ctx context.Context) *soakSample {
		sm := &soakSample{T: time.Since(t0).Seconds(), Live: live.bytes(), Acked: acked.Load(), Sites: map[string]*soakSiteSample{}}
		for _, s := range c.sites {
			sm.Sites[s.Site] = sampleSite(ctx, c, s)
		}
		return sm
	}
	var mu sync.Mutex // guards *samples while the sampler runs
	record := func(sm *soakSample) {
		mu.Lock()
		*samples = append(*samples, sm)
		mu.Unlock()
	}
	lastPrint := time.Now()
	progress := func(sm *soakSample) {
		if time.Since(lastPrint) < 30*time.Second {
			return
		}
		lastPrint = time.Now()
		var parts []string
		for _, s := range c.sitesNames() {
			ss := sm.Sites[s]
			parts = append(parts, fmt.Sprintf("%s %s (%.1f×)", s, mib(ss.Allocated), ratioOf(ss.Allocated, sm.Live)))
		}
		fmt.Fprintf(o.progress, "  %s %5.0fs: %d writes acked, live %s; disk %s\n", label, sm.T, sm.Acked, mib(sm.Live), strings.Join(parts, ", "))
	}

	t0 = time.Now()
	*samples = append(*samples, sampleNow(ctx))
	samplerWG.Go(func() {
		t := time.NewTicker(o.sample)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			sm := sampleNow(sctx)
			if sctx.Err() != nil {
				return
			}
			record(sm)
			progress(sm)
		}
	})
	// Writes run under ctx, not under the writers' deadline: a write in
	// flight when the time is up is waited for, so that its answer counts.
	wctx, stopWriters := context.WithTimeout(ctx, o.duration)
	defer stopWriters()
	var writers sync.WaitGroup
	perSite := o.rate / float64(len(c.sites))
	for i, s := range c.sites {
		w := &soakSiteWrites{}
		writes.PerSite[s.Site] = w
		writers.Go(func() {
			runSiteWriter(ctx, wctx, clients[s.Site], s.Site, seed+uint64(i+1), perSite, o, live, &acked, w)
		})
	}
	writers.Wait()
	writeS := time.Since(t0).Seconds()
	if ctx.Err() != nil {
		stopSampling()
		samplerWG.Wait()
		return writeS, ctx.Err()
	}
	writes.sum(writeS)
	more := ""
	if settle > 0 {
		more = fmt.Sprintf("; sampling for %v more", settle)
	}
	step("%s: writers stopped after %.1f s: %d acked (%.1f/s of %.0f/s), %d pace slots missed, %d failed; live %s%s",
		label, writeS, writes.Acked, writes.AchievedPerS, o.rate, writes.Missed, writes.Failed+writes.Unknown, mib(live.bytes()), more)
	if err := local.Sleep(ctx, settle); err != nil {
		stopSampling()
		samplerWG.Wait()
		return writeS, err
	}
	stopSampling()
	samplerWG.Wait()
	// The last sample, taken after the settle.
	*samples = append(*samples, sampleNow(ctx))
	return writeS, nil
}

// runSiteWriter paces site's writes at rate per second until wctx ends:
// slot i is due at t0 + i/rate and goes to a free worker, or counts as
// missed when all o.workers are busy. Writes are made under ctx.
func runSiteWriter(ctx, wctx context.Context, cl *kvclient.Client, site string, seed uint64, rate float64, o soakOptions,
	live *liveSet, acked *atomic.Int64, w *soakSiteWrites) {
	type job struct {
		key   string
		value []byte
	}
	jobs := make(chan job)
	var workers sync.WaitGroup
	var lats []time.Duration
	var mu sync.Mutex
	for range o.workers {
		workers.Go(func() {
			for j := range jobs {
				t := time.Now()
				resp, err := cl.Put(ctx, j.key, j.value, soakPredicate, soakTimeout)
				lat := time.Since(t)
				size := len(j.key) + len(j.value)
				if resp != nil && resp.Hlc != nil {
					// Made, whether or not its wait held: it is a version of
					// the key at every site, and may win.
					live.observe(j.key, size, resp.Hlc.Wall, resp.Hlc.Logical, resp.Origin)
				}
				mu.Lock()
				switch {
				case err == nil:
					w.Acked++
					acked.Add(1)
					lats = append(lats, lat)
				case resp != nil:
					w.Failed++
				default:
					w.Unknown++
				}
				if err != nil && w.FirstError == "" {
					w.FirstError = err.Error()
				}
				mu.Unlock()
			}
		})
	}
	gen := newJobGen(site, seed, o.keys)
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
pace:
	for {
		timer.Reset(time.Until(next))
		select {
		case <-wctx.Done():
			break pace
		case <-timer.C:
		}
		// Every slot due by now, late ones included, is offered once.
		for !next.After(time.Now()) {
			key, value := gen.next()
			mu.Lock()
			w.Slots++
			mu.Unlock()
			select {
			case jobs <- job{key, value}:
			default:
				mu.Lock()
				w.Missed++
				mu.Unlock()
			}
			next = next.Add(interval)
		}
	}
	close(jobs)
	workers.Wait()
	w.setLatencies(lats)
}

// jobGen makes one site's writes: a uniformly chosen key of the soak's
// keys and a job record for it of a uniformly chosen size in
// [soakValueMin, soakValueMax], its notes padding it to that size.
type jobGen struct {
	r    *rand.Rand
	site string
	keys int
	n    uint64
}

func newJobGen(site string, seed uint64, keys int) *jobGen {
	return &jobGen{r: rand.New(rand.NewPCG(seed, 18)), site: site, keys: keys}
}

// soakJob is a job record as the scheduler of its owner region writes it.
type soakJob struct {
	ID           string `json:"id"`
	OwnerRegion  string `json:"owner_region"`
	State        string `json:"state"`
	GPUs         int    `json:"gpus"`
	GPUType      string `json:"gpu_type"`
	Workers      int    `json:"elastic_workers"`
	Checkpoint   string `json:"current_checkpoint"`
	LeaseHolder  string `json:"lease_holder"`
	FencingToken uint64 `json:"fencing_token"`
	Notes        string `json:"notes"`
}

var soakStates = []string{"queued", "running", "checkpointing", "preempted", "migrating", "running", "done", "failed"}

func (g *jobGen) next() (string, []byte) {
	g.n++
	k := g.r.IntN(g.keys)
	size := soakValueMin + g.r.IntN(soakValueMax-soakValueMin+1)
	j := soakJob{ID: fmt.Sprintf("job-%05d", k), OwnerRegion: g.site, State: soakStates[g.r.IntN(len(soakStates))],
		GPUs: 8 << g.r.IntN(3), GPUType: "H100", Workers: 1 + g.r.IntN(16),
		Checkpoint: fmt.Sprintf("ckpt/job-%05d/step-%07d", k, g.n*100), LeaseHolder: "scheduler-" + g.site, FencingToken: g.n}
	b, _ := json.Marshal(j)
	// Random letters, which snappy does not shrink: the bytes on disk
	// are the bytes written.
	pad := make([]byte, max(0, size-len(b)))
	for i := range pad {
		pad[i] = 'a' + byte(g.r.IntN(26))
	}
	j.Notes = string(pad)
	b, _ = json.Marshal(j)
	return fmt.Sprintf("%s%05d", soakKeyPrefix, k), b
}

// sampleSite reads a site's disk use and its status.json.
func sampleSite(ctx context.Context, c *siteCluster, s fsSite) *soakSiteSample {
	out := &soakSiteSample{}
	u, err := diskUsage(c.dataDirs(s.Site)...)
	out.Allocated, out.Apparent, out.WAL = u.Allocated, u.Apparent, u.WAL
	if err != nil {
		out.Error = err.Error()
	}
	st, err := readStatus(ctx, s.HTTP)
	if err != nil {
		if out.Error == "" {
			out.Error = err.Error()
		}
		return out
	}
	if v, err := parseBytesText(st.DiskTotal); err == nil {
		out.Estimate = v
	}
	for _, r := range st.kvStreams() {
		out.Floors = append(out.Floors, streamFloor{Stream: r.Stream, Head: r.Head, Truncated: r.Truncated, Retained: r.Retained})
		out.LogEntries += r.Retained
	}
	return out
}

// scanCheck scans the soak's keys at every site and compares them with
// what the bench tracked.
func scanCheck(ctx context.Context, clients map[string]*kvclient.Client, live *liveSet) map[string]*soakScan {
	out := map[string]*soakScan{}
	for site, cl := range clients {
		sc := &soakScan{}
		out[site] = sc
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := cl.KV.Scan(sctx, &kvpb.ScanRequest{Prefix: soakKeyPrefix, TimeoutMs: 30000})
		cancel()
		if err != nil {
			sc.Error = err.Error()
			continue
		}
		for _, v := range resp.Versions {
			sc.Keys++
			sc.Bytes += int64(len(v.Key) + len(v.Value))
			if !live.is(v.Key, len(v.Key)+len(v.Value), v.GetHlc().GetWall(), v.GetHlc().GetLogical(), v.Origin) {
				sc.Differ++
			}
		}
	}
	return out
}

// liveSet is every key's winning write as the writers saw them answered:
// the highest HLC, between equal HLCs the greater origin name (kv.Version
// Newer). Its byte count is the live data size: key and value bytes of
// every key's winner.
type liveSet struct {
	mu struct {
		sync.Mutex
		keys    map[string]liveVersion
		bytes   int64
		written int64
	}
}

type liveVersion struct {
	wall    int64
	logical uint32
	origin  string
	size    int
}

func newLiveSet() *liveSet {
	l := &liveSet{}
	l.mu.keys = map[string]liveVersion{}
	return l
}

func (v liveVersion) newer(o liveVersion) bool {
	if v.wall != o.wall {
		return v.wall > o.wall
	}
	if v.logical != o.logical {
		return v.logical > o.logical
	}
	return v.origin > o.origin
}

// observe records a write of key (size bytes of key and value) made at
// the HLC (wall, logical) by origin.
func (l *liveSet) observe(key string, size int, wall int64, logical uint32, origin string) {
	v := liveVersion{wall: wall, logical: logical, origin: origin, size: size}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.written += int64(size)
	cur, ok := l.mu.keys[key]
	if ok && !v.newer(cur) {
		return
	}
	l.mu.bytes += int64(size) - int64(cur.size)
	l.mu.keys[key] = v
}

// is reports whether key's winner is the version described.
func (l *liveSet) is(key string, size int, wall int64, logical uint32, origin string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.keys[key] == liveVersion{wall: wall, logical: logical, origin: origin, size: size}
}

func (l *liveSet) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.bytes
}

func (l *liveSet) written() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.written
}

func (l *liveSet) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.keys)
}

// gitCommit names the commit of the repository in the working directory,
// "(modified)" after it when the tree has changes; "" outside one.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " (modified)"
	}
	return c
}
