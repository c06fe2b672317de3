package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/kv/kvpb"
	"github.com/stabilizer/stabilizer/test/bench/internal/local"
	"github.com/stabilizer/stabilizer/wan"
)

// `wanbench wipe`: issue 18's restore of a wiped site. --state bytes of
// KV state are loaded from every site; once every site applied them and
// truncated its kv logs, one site is killed (SIGKILL), its data
// directories deleted and it is started again, while a paced writer goes
// on at the other sites. The bench measures the time from the restart
// until the site answers stable reads of every origin's keys with the
// right values, and until its state transfers are done, against the
// bound of the state over one link's bandwidth. wipe_results.go holds the
// results, the target and the report.

// wipeOptions are the flags of `wanbench wipe`.
type wipeOptions struct {
	topology, out string
	site          string // the wiped one; default the topology's last
	bandwidth     wan.Bandwidth
	state         int64
	valueBytes    int
	loadWorkers   int // per site
	liveRate      float64
	liveBytes     int
	sampleKeys    int // per origin
	before        time.Duration
	truncWait     time.Duration
	keepWork      bool
	progress      io.Writer
}

const (
	wipeKeyPrefix = "ckpt/"
	wipeLoadWait  = "majority"
	wipeLiveWait  = "majority"
	wipeLiveKeys  = 1000 // per live site, overwritten
)

func newWipeCmd() *cobra.Command {
	o := wipeOptions{}
	var bw, state string
	var valueKiB int
	cmd := &cobra.Command{
		Use:   "wipe --topology ec2-3 --out DIR",
		Short: "A wiped site restores its KV state from its peers: time to stable reads against state / bandwidth",
		Long: `Issue 18's restore: three stabilizerd sites behind emulated links of --bandwidth. Every site writes
its third of --state bytes of checkpoint manifests (keys ckpt/<site>/<n>, --value-kib each, under
majority); once every site applied all of them and truncated its kv logs past them (status.json),
a paced writer starts at the other sites (--rate writes/s of 4 KiB job records under majority) and,
after --before, --site is killed with SIGKILL, its data directory and its .snapshots sibling deleted,
and it is started again. Measured from the restart: when it first answers stable=majority reads of
a sample of every origin's keys with the right values, and when its state transfers are done
(status.json Transfers empty, a "state transfer: done" line for every origin's kv stream in its log).
Bound: the state's bytes over one link's bandwidth; target: at most 1.5 × bound.
Writes DIR/results.json, DIR/report.md and DIR/wipe-transfer.png.`,
		Example: `  wanbench wipe --topology ec2-3 --out /tmp/wipe
  wanbench wipe --state 256MiB --out /tmp/wipe-small`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if o.out == "" {
				errs = append(errs, errors.New("--out DIR is required"))
			}
			var err error
			if o.bandwidth, err = wan.ParseBandwidth(bw); err != nil || o.bandwidth <= 0 {
				errs = append(errs, fmt.Errorf("--bandwidth %q: want a rate such as 25MB/s", bw))
			}
			if o.state, err = parseSize(state); err != nil || o.state <= 0 {
				errs = append(errs, fmt.Errorf("--state %q: want a size such as 1GiB or 256MiB", state))
			}
			o.valueBytes = valueKiB << 10
			if valueKiB < 1 || valueKiB > 512 {
				errs = append(errs, fmt.Errorf("--value-kib %d: want 1 to 512", valueKiB))
			}
			if o.loadWorkers < 1 {
				errs = append(errs, fmt.Errorf("--load-workers %d: must be at least 1", o.loadWorkers))
			}
			if o.liveRate <= 0 {
				errs = append(errs, fmt.Errorf("--rate %v: must be positive", o.liveRate))
			}
			if o.sampleKeys < 1 {
				errs = append(errs, fmt.Errorf("--sample-keys %d: must be at least 1", o.sampleKeys))
			}
			if o.before <= 0 || o.truncWait <= 0 {
				errs = append(errs, fmt.Errorf("--before %v and --trunc-wait %v: must be positive", o.before, o.truncWait))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err = runWipe(ctx, o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topology, "topology", "ec2-3", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	f.StringVar(&o.out, "out", "", "folder for results.json, report.md and the plot (required)")
	f.StringVar(&o.site, "site", "", "the site to wipe (default: the topology's last)")
	f.StringVar(&bw, "bandwidth", "25MB/s", "bandwidth of every emulated link")
	f.StringVar(&state, "state", "1GiB", "KV state loaded before the wipe, keys and values, over all origins")
	f.IntVar(&valueKiB, "value-kib", 48, "size of a loaded value (a checkpoint manifest)")
	f.IntVar(&o.loadWorkers, "load-workers", 16, "loading writes in flight per site")
	f.Float64Var(&o.liveRate, "rate", 50, "live writes per second over the sites not wiped, during the restore")
	f.IntVar(&o.liveBytes, "live-bytes", 4096, "size of a live write's value (a job record)")
	f.IntVar(&o.sampleKeys, "sample-keys", 16, "keys of every origin read at the wiped site to decide it serves again")
	f.DurationVar(&o.before, "before", 20*time.Second, "live writes measured before the kill")
	f.DurationVar(&o.truncWait, "trunc-wait", 3*time.Minute, "how long to wait for every site to truncate its kv logs after the load")
	f.BoolVar(&o.keepWork, "keep-work", false, "keep the sites' data and logs in DIR/work")
	return cmd
}

// parseSize reads "1GiB", "256MiB", "64KiB", "1GB", "500MB" or a number
// of bytes.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		scale  float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	scale := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			scale, t = u.scale, strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q: want a number with a unit such as 1GiB", s)
	}
	return int64(v * scale), nil
}

func runWipe(ctx context.Context, o wipeOptions) (*wipeResults, error) {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return nil, err
	}
	if len(topo.Sites) < 3 {
		return nil, fmt.Errorf("--topology %s: %d sites; the wipe bench needs 3 or more", topo.Name, len(topo.Sites))
	}
	if o.site == "" {
		o.site = topo.Sites[len(topo.Sites)-1]
	}
	if !topo.HasSite(o.site) {
		return nil, fmt.Errorf("--site %q is not a site of %s (%s)", o.site, topo.Name, strings.Join(topo.Sites, ", "))
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
	if err := checkWipeDisk(work, o, len(topo.Sites)); err != nil {
		return nil, err
	}
	res := &wipeResults{Bench: wipeBenchName, Topology: topo.Name, Sites: topo.Sites, Site: o.site, Host: hostDescription(),
		Commit: gitCommit(), Started: time.Now(), Bandwidth: o.bandwidth.String(), BandwidthBps: float64(o.bandwidth),
		StateBytes: o.state, ValueBytes: o.valueBytes, LiveRate: o.liveRate, LiveBytes: o.liveBytes, SampleKeys: o.sampleKeys,
		Load: map[string]*wipeOrigin{}}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "\n[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	err = wipe(ctx, o, topo, work, res, step)
	if err != nil {
		res.note("Failed: %v", err)
	}
	res.Finished = time.Now()
	if serr := writeWipeOutputs(o.out, res); serr != nil {
		return res, errors.Join(err, serr)
	}
	fmt.Fprintln(o.progress)
	for _, t := range res.Targets {
		fmt.Fprintf(o.progress, "%-14s %s: %s\n", t.Status, t.Name, t.Detail)
	}
	step("done: %s, %s", filepath.Join(o.out, reportFile), filepath.Join(o.out, resultsFile))
	return res, err
}

// checkWipeDisk refuses to start without room for every site's copy of
// the state, its log until truncated, and pebble's files, with a margin.
func checkWipeDisk(dir string, o wipeOptions, sites int) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	need := 3*o.state*int64(sites) + (4 << 30)
	fmt.Fprintf(o.progress, "disk: %s free under %s, the run may need %s\n", mib(free), dir, mib(need))
	if free < need {
		return fmt.Errorf("%s: %s free, the run may need %s (lower --state)", dir, mib(free), mib(need))
	}
	return nil
}

// wipeSampleKey is one key read at the wiped site, and its value's hash.
type wipeSampleKey struct {
	key string
	sum [32]byte
}

func wipe(ctx context.Context, o wipeOptions, topo *wan.Topology, dir string, res *wipeResults, step func(string, ...any)) error {
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

	// Load: every site its share of the state.
	perOrigin := o.state / int64(len(c.sites))
	step("loading %s: %s from each site, checkpoint manifests of %d KiB under %s, %d in flight per site",
		mib(o.state), mib(perOrigin), o.valueBytes>>10, wipeLoadWait, o.loadWorkers)
	t0 := time.Now()
	samples, err := loadState(ctx, c, clients, perOrigin, o, res)
	res.LoadS = time.Since(t0).Seconds()
	if err != nil {
		return err
	}
	var loaded int64
	for _, l := range res.Load {
		loaded += l.Bytes
		res.LoadedKeys += l.Keys
	}
	res.LoadedBytes = loaded
	fmt.Fprintf(o.progress, "  loaded %d keys, %s in %.1f s (%.1f MB/s)\n", res.LoadedKeys, mib(loaded), res.LoadS, float64(loaded)/res.LoadS/1e6)

	step("waiting until every site applied every origin's writes")
	t1 := time.Now()
	if err := waitApplied(ctx, c, res.Load, 10*time.Minute); err != nil {
		return err
	}
	res.AppliedS = time.Since(t1).Seconds()
	fmt.Fprintf(o.progress, "  applied everywhere %.1f s after the load\n", res.AppliedS)
	step("waiting up to %v until every site truncated every kv log past the load", o.truncWait)
	floors, ok, err := waitTruncated(ctx, c, res.Load, o.truncWait)
	res.TruncatedS = time.Since(t1).Seconds() - res.AppliedS
	res.FloorsBefore = floors
	if err != nil {
		return err
	}
	res.Truncated = ok
	if ok {
		fmt.Fprintf(o.progress, "  truncated everywhere %.1f s after being applied\n", res.TruncatedS)
	} else {
		res.note("The kv logs were not truncated past the load at every site within %v (floors in the table below): the wiped site can catch up on those origins from the log rather than by state transfer.", o.truncWait)
		fmt.Fprintf(o.progress, "  NOT truncated everywhere within %v; going on\n", o.truncWait)
	}
	res.DiskBefore = map[string]int64{}
	for _, s := range c.sites {
		u, _ := diskUsage(c.dataDirs(s.Site)...)
		res.DiskBefore[s.Site] = u.Allocated
	}

	// Live writes at the other sites from now until the restore is over.
	live := without(c.sitesNames(), o.site)
	step("live writes: %.0f/s of %d B job records under %s at %s; %v of them before the kill", o.liveRate, o.liveBytes, wipeLiveWait, strings.Join(live, ", "), o.before)
	lctx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	var lw sync.WaitGroup
	liveOut := make([][]liveSample, len(live))
	for i, s := range live {
		lw.Go(func() {
			liveOut[i] = liveWriter(ctx, lctx, clients[s], s, uint64(i+100), o.liveRate/float64(len(live)), o.liveBytes)
		})
	}
	stopLiveNow := func() {
		stopLive()
		lw.Wait()
		res.liveSamples = slices.Concat(liveOut...)
	}
	if err := local.Sleep(ctx, o.before); err != nil {
		stopLiveNow()
		return err
	}

	step("SIGKILL %s, delete %s, start it again", o.site, strings.Join(c.dataDirs(o.site), " and "))
	i := slices.Index(c.sitesNames(), o.site)
	p := c.sites[i].proc
	res.killAt = time.Now()
	_ = p.cmd.Process.Kill()
	<-p.done
	for _, d := range c.dataDirs(o.site) {
		if err := os.RemoveAll(d); err != nil {
			stopLiveNow()
			return err
		}
	}
	logOff := fileSize(c.logPath(o.site))
	wire0, err := c.wireBytes()
	if err != nil {
		stopLiveNow()
		return err
	}
	restart := time.Now()
	res.restartAt = restart
	res.KillToRestartS = restart.Sub(res.killAt).Seconds()
	if err := c.startSite(i); err != nil {
		stopLiveNow()
		return err
	}
	bound := time.Duration(float64(res.LoadedBytes) / float64(o.bandwidth) * float64(time.Second))
	res.BoundS = bound.Seconds()
	limit := max(5*time.Minute, 10*bound)
	fmt.Fprintf(o.progress, "  bound %s / %s = %.1f s; watching for up to %v\n", mib(res.LoadedBytes), o.bandwidth, res.BoundS, limit)
	err = watchRestore(ctx, c, clients[o.site], o, samples, logOff, restart, limit, res)
	wire1, werr := c.wireBytes()
	// A few seconds of live writes after the restore, then stop them.
	_ = local.Sleep(ctx, 2*time.Second)
	stopLiveNow()
	if werr == nil {
		res.Wire = wireDelta(wire0, wire1)
	}
	res.Phases = parseTransferLog(c.logPath(o.site), logOff, restart)
	res.summarizeLive()
	if err != nil {
		return err
	}
	return errors.Join(werr, c.exited())
}

// loadState writes perOrigin bytes of manifests from every site and
// returns the sample of keys to read back, a few of every origin.
func loadState(ctx context.Context, c *siteCluster, clients map[string]*kvclient.Client, perOrigin int64, o wipeOptions, res *wipeResults) ([]wipeSampleKey, error) {
	var mu sync.Mutex
	var samples []wipeSampleKey
	var wg sync.WaitGroup
	errs := make([]error, len(c.sites))
	var done int64
	stopProgress := make(chan struct{})
	var pw sync.WaitGroup
	pw.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				mu.Lock()
				d := done
				mu.Unlock()
				fmt.Fprintf(o.progress, "  %s of %s loaded\n", mib(d), mib(perOrigin*int64(len(c.sites))))
			}
		}
	})
	for si, s := range c.sites {
		keyLen := len(wipeKey(s.Site, 0))
		n := int(max(1, perOrigin/int64(o.valueBytes+keyLen)))
		want := map[int]bool{n - 1: true}
		for k := range o.sampleKeys - 1 {
			want[k*n/o.sampleKeys] = true
		}
		org := &wipeOrigin{}
		res.Load[s.Site] = org
		wg.Go(func() {
			next := make(chan int)
			var workers sync.WaitGroup
			var failed error
			var fmu sync.Mutex
			for range o.loadWorkers {
				workers.Go(func() {
					for k := range next {
						key, value := wipeKey(s.Site, k), wipeManifest(s.Site, k, o.valueBytes)
						var resp *kvpb.WriteResponse
						var err error
						for attempt := 0; attempt < 5; attempt++ {
							if resp, err = clients[s.Site].Put(ctx, key, value, wipeLoadWait, 30*time.Second); err == nil || ctx.Err() != nil {
								break
							}
						}
						fmu.Lock()
						if err != nil {
							if failed == nil {
								failed = fmt.Errorf("%s: put %s: %w", s.Site, key, err)
							}
						} else {
							org.Keys++
							org.Bytes += int64(len(key) + len(value))
							org.LastSeq = max(org.LastSeq, resp.Seq)
						}
						fmu.Unlock()
						mu.Lock()
						done += int64(len(key) + len(value))
						if want[k] {
							samples = append(samples, wipeSampleKey{key: key, sum: sha256.Sum256(value)})
						}
						mu.Unlock()
					}
				})
			}
			for k := range n {
				fmu.Lock()
				stop := failed != nil
				fmu.Unlock()
				if stop || ctx.Err() != nil {
					break
				}
				next <- k
			}
			close(next)
			workers.Wait()
			errs[si] = failed
			if failed == nil && ctx.Err() != nil {
				errs[si] = ctx.Err()
			}
		})
	}
	wg.Wait()
	close(stopProgress)
	pw.Wait()
	slices.SortFunc(samples, func(a, b wipeSampleKey) int { return strings.Compare(a.key, b.key) })
	return samples, errors.Join(errs...)
}

func wipeKey(site string, n int) string { return fmt.Sprintf("%s%s/%06d", wipeKeyPrefix, site, n) }

// wipeManifest is checkpoint n's manifest of a job of site, size bytes:
// its shards (path, size, SHA-256) and the data loader's and RNG states
// that elastic training resumes from, a base64 blob padding it to size
// (random bytes, which snappy does not shrink).
func wipeManifest(site string, n, size int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), uint64(len(site))*7919+uint64(site[0])))
	type shard struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
		Hash string `json:"sha256"`
	}
	m := struct {
		Job        string  `json:"job"`
		Step       int     `json:"step"`
		WallTime   string  `json:"wall_time"`
		Shards     []shard `json:"shards"`
		Parent     string  `json:"parent"`
		DataLoader string  `json:"data_loader_and_rng_state"`
	}{Job: fmt.Sprintf("job-%s-%02d", site, n%16), Step: n * 1000, WallTime: time.Unix(1764400000+int64(n)*60, 0).UTC().Format(time.RFC3339),
		Parent: fmt.Sprintf("ckpt/%s/%06d", site, max(0, n-1))}
	for i := range 16 {
		m.Shards = append(m.Shards, shard{Path: fmt.Sprintf("s3://ckpt/%s/step-%d/model-%03d.pt", m.Job, m.Step, i), Size: 1 << 27,
			Hash: fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())})
	}
	b, _ := json.Marshal(m)
	if pad := size - len(b); pad > 0 {
		raw := make([]byte, base64.StdEncoding.DecodedLen(pad))
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		m.DataLoader = base64.StdEncoding.EncodeToString(raw)
		if len(m.DataLoader) > pad {
			m.DataLoader = m.DataLoader[:pad]
		}
		b, _ = json.Marshal(m)
	}
	return b
}

// siteStreams is the part of status.json that says, per stream, what
// every site applied.
type siteStreams struct {
	Sites   []string
	Streams []struct {
		Origin, Stream string
		Levels         []struct {
			Level string
			Seqs  []uint64
		}
	}
}

// waitApplied polls every site's status until each says every site
// applied every origin's kv stream up to its last loaded write.
func waitApplied(ctx context.Context, c *siteCluster, load map[string]*wipeOrigin, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := pollUntil(ctx, 500*time.Millisecond, func() (bool, error) {
		for _, s := range c.sites {
			var st siteStreams
			if err := getJSON(ctx, s.HTTP, &st); err != nil {
				return false, err
			}
			for origin, l := range load {
				if !appliedEverywhere(&st, origin, l.LastSeq) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	return err
}

func appliedEverywhere(st *siteStreams, origin string, seq uint64) bool {
	for _, s := range st.Streams {
		if s.Origin != origin || s.Stream != "kv" {
			continue
		}
		for _, l := range s.Levels {
			if l.Level != "applied" {
				continue
			}
			if len(l.Seqs) != len(st.Sites) {
				return false
			}
			for _, v := range l.Seqs {
				if v < seq {
					return false
				}
			}
			return true
		}
	}
	return false
}

// waitTruncated polls until every site's kv log of every origin is
// truncated up to its last loaded write, or within passes; it returns the
// floors it saw last and whether they got there.
func waitTruncated(ctx context.Context, c *siteCluster, load map[string]*wipeOrigin, within time.Duration) (map[string][]streamFloor, bool, error) {
	deadline := time.Now().Add(within)
	for {
		floors := map[string][]streamFloor{}
		ok := true
		for _, s := range c.sites {
			st, err := readStatus(ctx, s.HTTP)
			if err != nil {
				return floors, false, err
			}
			for _, r := range st.kvStreams() {
				floors[s.Site] = append(floors[s.Site], streamFloor{Stream: r.Stream, Head: r.Head, Truncated: r.Truncated, Retained: r.Retained})
				origin, _, _ := strings.Cut(r.Stream, "/")
				if l := load[origin]; l != nil && r.Truncated < l.LastSeq {
					ok = false
				}
			}
		}
		if ok || time.Now().After(deadline) {
			return floors, ok, nil
		}
		if err := local.Sleep(ctx, time.Second); err != nil {
			return floors, false, err
		}
	}
}

func getJSON(ctx context.Context, addr string, v any) error {
	st, err := fetchStatus(ctx, addr)
	if err != nil {
		return err
	}
	return json.Unmarshal(st, v)
}

// watchRestore polls the restarted site until it serves stable reads of
// every sampled key right and its transfers are done, recording the
// transfers' progress.
func watchRestore(ctx context.Context, c *siteCluster, cl *kvclient.Client, o wipeOptions, samples []wipeSampleKey, logOff int64,
	restart time.Time, limit time.Duration, res *wipeResults) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	s := c.site(o.site)
	origins := c.sitesNames()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastPrint := time.Now()
	for {
		if err := c.exited(); err != nil {
			return err
		}
		now := time.Since(restart)
		st, err := readStatus(ctx, s.HTTP)
		if err == nil {
			pt := wipeProgress{T: now.Seconds(), Streams: map[string]wipeStreamProgress{}}
			for _, tr := range st.Transfers {
				name := tr.Stream.Origin + "/" + tr.Stream.Name
				pt.Streams[name] = wipeStreamProgress{Bytes: tr.Bytes, Total: tr.TotalBytes, Source: tr.Source, Waiting: tr.Waiting}
			}
			res.Progress = append(res.Progress, pt)
			if time.Since(lastPrint) >= 5*time.Second {
				lastPrint = time.Now()
				fmt.Fprintf(o.progress, "  %5.1fs: %s; reads %s\n", now.Seconds(), pt.String(), map[bool]string{true: "served", false: "not yet"}[res.ReadsS > 0])
			}
		}
		if res.ReadsS == 0 {
			ok, why := readSamples(ctx, cl, samples)
			res.ReadAttempts++
			if ok {
				res.ReadsS = time.Since(restart).Seconds()
				fmt.Fprintf(o.progress, "  stable reads of all %d sampled keys right %.2f s after the restart\n", len(samples), res.ReadsS)
			} else if why != "" {
				res.LastReadError = why
			}
		}
		// Done: none listed, and the log has a done line for every
		// origin's kv stream (before the first transfer begins none is
		// listed either).
		if res.TransfersS == 0 && err == nil && len(st.Transfers) == 0 && doneFor(c.logPath(o.site), logOff, origins) {
			res.TransfersS = time.Since(restart).Seconds()
			fmt.Fprintf(o.progress, "  state transfers done (none listed, one done per origin's kv stream in the log) %.2f s after the restart\n", res.TransfersS)
		}
		if res.ReadsS > 0 && res.TransfersS > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the wiped site was not restored within %v of its restart (reads served: %v, transfers done: %v; last read error: %s)",
				limit, res.ReadsS > 0, res.TransfersS > 0, res.LastReadError)
		case <-t.C:
		}
	}
}

// readSamples reads every sampled key at the site under stable=majority
// and checks its value; it stops at the first that fails and says why.
func readSamples(ctx context.Context, cl *kvclient.Client, samples []wipeSampleKey) (bool, string) {
	for _, k := range samples {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := cl.Get(rctx, &kvpb.GetRequest{Key: k.key, Stable: "majority", TimeoutMs: 2000})
		cancel()
		if err != nil {
			return false, firstLine(err.Error())
		}
		if resp.Version == nil || sha256.Sum256(resp.Version.Value) != k.sum {
			return false, fmt.Sprintf("%s: a wrong value", k.key)
		}
	}
	return true, ""
}

// doneFor reports whether the log, from off, has a "state transfer: done"
// line for every origin's kv stream.
func doneFor(logPath string, off int64, origins []string) bool {
	done := map[string]bool{}
	for _, l := range readTransferLines(logPath, off) {
		if l.event == "done" {
			done[l.fields["stream"]] = true
		}
	}
	for _, o := range origins {
		if !done[o+"/kv"] {
			return false
		}
	}
	return true
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// liveSample is one live write.
type liveSample struct {
	at   time.Time
	lat  time.Duration
	err  error
	site string
}

// liveWriter writes rate job records a second at site, paced, 32 at most
// in flight, until lctx ends; the writes are made under ctx.
func liveWriter(ctx, lctx context.Context, cl *kvclient.Client, site string, seed uint64, rate float64, size int) []liveSample {
	var mu sync.Mutex
	var out []liveSample
	jobs := make(chan int)
	var wg sync.WaitGroup
	r := rand.New(rand.NewPCG(seed, 3))
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'a' + byte(r.IntN(26))
	}
	for range 32 {
		wg.Go(func() {
			for n := range jobs {
				key := fmt.Sprintf("jobs/%s/%04d", site, n%wipeLiveKeys)
				v := fmt.Sprintf(`{"id":"job-%s-%04d","owner_region":%q,"state":"running","fencing_token":%d,"notes":"`, site, n%wipeLiveKeys, site, n)
				v += string(pad[:max(0, size-len(v)-2)]) + `"}`
				t := time.Now()
				_, err := cl.Put(ctx, key, []byte(v), wipeLiveWait, 10*time.Second)
				mu.Lock()
				out = append(out, liveSample{at: t, lat: time.Since(t), err: err, site: site})
				mu.Unlock()
			}
		})
	}
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	n := 0
loop:
	for {
		timer.Reset(time.Until(next))
		select {
		case <-lctx.Done():
			break loop
		case <-timer.C:
		}
		for !next.After(time.Now()) {
			select {
			case jobs <- n:
			default:
				mu.Lock()
				out = append(out, liveSample{at: time.Now(), err: errMissedSlot, site: site})
				mu.Unlock()
			}
			n++
			next = next.Add(interval)
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

var errMissedSlot = errors.New("no worker free for the slot")

// wireInto sums the bytes the links into site carried.
func wireInto(w map[string]int64, site string) int64 {
	var n int64
	for k, v := range w {
		if _, to, ok := cutLink(k); ok && to == site {
			n += v
		}
	}
	return n
}
