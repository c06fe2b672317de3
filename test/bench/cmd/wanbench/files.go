package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/test/bench/internal/stpeer"
	"github.com/stabilizer/stabilizer/wan"
)

// `wanbench files`: our file sync (sites + stabsync) against Syncthing on
// the same emulated links, issue 17, with issue 26's targets. This file runs the phases;
// files_ours.go starts our cluster, files_data.go writes the checkpoints,
// files_host.go reads the host and the links, files_results.go holds the
// results and targets, files_report.go writes the report.

// fsOptions are the flags of `wanbench files`.
type fsOptions struct {
	topology, out string
	origin        string
	bandwidth     wan.Bandwidth
	memBandwidth  wan.Bandwidth
	shards        int
	shardBytes    int64
	bigBytes      int64
	settle        time.Duration
	kvIdle        int
	skip          map[string]bool
	keepWork      bool
	progress      io.Writer
}

// Parts of the run --skip names.
var fsParts = []string{"ours", "syncthing", "memory", "chunking", "kv"}

func newFilesCmd() *cobra.Command {
	var o fsOptions
	var skip, bw, memBW string
	var shardMiB, bigMiB int
	cmd := &cobra.Command{
		Use:   "files --topology ec2-3 --out DIR",
		Short: "Our file sync (sites + stabsync) against Syncthing: checkpoint commits on the WAN, KV latency meanwhile, chunking, memory",
		Long: `Runs, in one go, on the emulated WAN with every link at --bw:
  1. ours: three stabilizerd sites, a share committed by .metadata in ckpt/*, stabsync run at every
     site; checkpoint 1 (--shards shards of --shard-mib random MiB) written at --origin and
     committed by renaming .metadata into place: time to stable under majority (the origin's List,
     polled every 10 ms) and to complete at every other region (its folder polled every 5 ms);
     majority KV puts at the origin idle and while it streams; checkpoint 2 (one shard unchanged,
     one rewritten, two with 10% changed in 4 MiB runs, one added): time and bytes on the wire;
  2. a --big-mib file at --mem-bw: peak RSS (VmHWM) of every stabsync and stabilizerd;
  3. Syncthing, one instance per region behind the same links, the same two checkpoints, its
     rescan triggered through its REST API right after each commit;
  4. chunking and SHA-256 throughput on one core.
Writes DIR/results.json, DIR/report.md and PNG plots, every target marked met, missed or not
measured. Bulk data goes under DIR/work and is removed at the end (--keep-work keeps it).`,
		Example: `  wanbench files --topology ec2-3 --out /tmp/files
  wanbench files --out /tmp/files --shard-mib 16 --big-mib 256 --skip syncthing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			if o.out == "" {
				errs = append(errs, errors.New("--out DIR is required"))
			}
			o.skip = map[string]bool{}
			for _, s := range strings.FieldsFunc(skip, func(r rune) bool { return r == ',' }) {
				if s = strings.TrimSpace(s); !slices.Contains(fsParts, s) {
					errs = append(errs, fmt.Errorf("--skip %q: unknown part (known: %s)", s, strings.Join(fsParts, ", ")))
				}
				o.skip[s] = true
			}
			var err error
			if o.bandwidth, err = wan.ParseBandwidth(bw); err != nil || o.bandwidth <= 0 {
				errs = append(errs, fmt.Errorf("--bw %q: want a rate such as 25MB/s", bw))
			}
			if o.memBandwidth, err = wan.ParseBandwidth(memBW); err != nil || o.memBandwidth <= 0 {
				errs = append(errs, fmt.Errorf("--mem-bw %q: want a rate such as 100MB/s", memBW))
			}
			if o.shards < 4 {
				errs = append(errs, fmt.Errorf("--shards %d: the second checkpoint needs at least 4", o.shards))
			}
			if shardMiB < 8 {
				errs = append(errs, fmt.Errorf("--shard-mib %d: at least 8 (edits are 4 MiB runs)", shardMiB))
			}
			if bigMiB < 1 {
				errs = append(errs, fmt.Errorf("--big-mib %d: must be positive", bigMiB))
			}
			if o.settle <= 0 {
				errs = append(errs, fmt.Errorf("--settle %v: must be positive", o.settle))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			o.shardBytes, o.bigBytes = int64(shardMiB)<<20, int64(bigMiB)<<20
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runFiles(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topology, "topology", "ec2-3", "a preset ("+strings.Join(wan.PresetNames(), ", ")+") or a topology YAML file")
	f.StringVar(&o.out, "out", "", "folder for results.json, report.md and the plots (required)")
	f.StringVar(&o.origin, "origin", "us-east-1", "the region that writes the checkpoints")
	f.StringVar(&bw, "bw", "25MB/s", "bandwidth of every emulated link")
	f.StringVar(&memBW, "mem-bw", "100MB/s", "bandwidth of every link in the memory phase")
	f.IntVar(&o.shards, "shards", 4, "shards of checkpoint 1")
	f.IntVar(&shardMiB, "shard-mib", 128, "size of a shard")
	f.IntVar(&bigMiB, "big-mib", 2048, "size of the memory phase's file")
	f.DurationVar(&o.settle, "settle", 100*time.Millisecond, "stabsync's settle time (stabsync init --settle)")
	f.IntVar(&o.kvIdle, "kv-idle", 40, "majority puts at the origin measured before checkpoint 1")
	f.StringVar(&skip, "skip", "", "parts to leave out: "+strings.Join(fsParts, ", ")+" (comma-separated)")
	f.BoolVar(&o.keepWork, "keep-work", false, "keep the data and logs in DIR/work")
	return cmd
}

func runFiles(ctx context.Context, o fsOptions) error {
	topo, err := wan.OpenTopology(o.topology)
	if err != nil {
		return err
	}
	if len(topo.Sites) < 3 {
		return fmt.Errorf("--topology %s: %d sites; the file bench needs 3 or more", topo.Name, len(topo.Sites))
	}
	if !topo.HasSite(o.origin) {
		return fmt.Errorf("--origin %q is not a site of %s (%s)", o.origin, topo.Name, strings.Join(topo.Sites, ", "))
	}
	work := filepath.Join(o.out, "work")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if !o.keepWork {
		defer os.RemoveAll(work)
	}
	if err := checkDisk(work, o, len(topo.Sites)); err != nil {
		return err
	}
	res := &fsResults{Bench: fsBenchName, Topology: topo.Name, Sites: topo.Sites, Origin: o.origin,
		Nearest: nearestOf(topo, o.origin), RTTms: map[string]map[string]float64{},
		Bandwidth: o.bandwidth.String(), BandwidthBps: float64(o.bandwidth), Shards: o.shards, ShardBytes: o.shardBytes,
		Settle: o.settle.String(), Started: time.Now(), Host: hostDescription()}
	for _, a := range topo.Sites {
		res.RTTms[a] = map[string]float64{}
		for _, b := range topo.Sites {
			if a != b {
				res.RTTms[a][b] = ms(rtt(topo, a, b))
			}
		}
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "\n[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	save := func() error {
		res.Finished = time.Now()
		return writeFSOutputs(o.out, res)
	}
	res.note("Every link (both directions of every pair) is limited to %s; the topology's delays (%s) are kept.", o.bandwidth, topo.Name)

	if o.skip["chunking"] {
		res.Chunking = &fsChunking{Skipped: "skipped: --skip chunking"}
	} else {
		step("chunking and SHA-256 on one core (fileshare/chunks.Split, as BenchmarkSplit)")
		res.Chunking = benchChunking(64 << 20)
		fmt.Fprintf(o.progress, "  %.0f MB/s chunking and hashing, %.0f MB/s SHA-256 alone\n", res.Chunking.MBps, res.Chunking.SumMBps)
	}
	if err := save(); err != nil {
		return err
	}
	phases := []struct {
		part, what string
		run        func() error
		skip       func(why string)
	}{
		{"ours", "ours: stabilizerd sites and stabsync clients on " + topo.Name + " at " + o.bandwidth.String() + " a link",
			func() error { return benchFSOurs(ctx, o, topo, filepath.Join(work, "ours"), res, step) },
			func(why string) { skipFS(res, sysOurs, topo, o, why) }},
		{"syncthing", "Syncthing: one instance per region behind the same links",
			func() error { return benchFSSyncthing(ctx, o, topo, filepath.Join(work, "syncthing"), res, step) },
			func(why string) { skipFS(res, sysSyncthing, topo, o, why) }},
	}
	// A phase that fails is recorded and the next one still runs, so that
	// one system's failure does not cost the other's figures.
	var failed []error
	for _, ph := range phases {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if o.skip[ph.part] {
			ph.skip("skipped: --skip " + ph.part)
			continue
		}
		step("%s", ph.what)
		err := ph.run()
		if serr := save(); serr != nil {
			return serr
		}
		if err != nil {
			fmt.Fprintf(o.progress, "FAILED: %s: %v\n", ph.what, err)
			res.note("Failed: %s: %v", ph.what, err)
			failed = append(failed, fmt.Errorf("%s: %w", ph.what, err))
		}
	}
	if err := save(); err != nil {
		return err
	}
	fmt.Fprintln(o.progress)
	for _, t := range res.Targets {
		fmt.Fprintf(o.progress, "%-14s %s: %s\n", t.Status, t.Name, t.Detail)
	}
	step("done: %s, %s", filepath.Join(o.out, reportFile), filepath.Join(o.out, resultsFile))
	return errors.Join(failed...)
}

// checkDisk refuses to start when the work folder's filesystem lacks room
// for what the run writes: each checkpoint at every site's store and
// every folder, and the same for the big file, with a margin.
func checkDisk(dir string, o fsOptions, sites int) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	ckpts := int64(o.shards+2) * o.shardBytes
	need := ckpts*int64(3*sites) + o.bigBytes*int64(3*sites)
	if o.skip["memory"] || o.skip["ours"] {
		need -= o.bigBytes * int64(3*sites)
	}
	fmt.Fprintf(o.progress, "disk: %s free under %s, the run writes up to about %s\n", mib(free), dir, mib(need))
	if free < need+(2<<30) {
		return fmt.Errorf("%s: %s free, the run needs about %s (lower --shard-mib or --big-mib)", dir, mib(free), mib(need+(2<<30)))
	}
	return nil
}

// skipFS adds a system's rows as not measured.
func skipFS(res *fsResults, system string, topo *wan.Topology, o fsOptions, why string) {
	for i, ck := range []string{"ckpt/step-1000", "ckpt/step-2000"} {
		lack := int64(o.shards) * o.shardBytes
		if i == 1 {
			lack = 2*o.shardBytes + 2*int64(float64(o.shardBytes)*fsEditShare)
		}
		k := len(res.receivers())
		if system == sysOurs {
			r := rtt(topo, o.origin, res.Nearest)
			res.Transfers = append(res.Transfers, &fsTransfer{System: system, Checkpoint: ck, Kind: fsStable, Region: res.Nearest,
				LackBytes: lack, BoundMs: ms(fsBound(lack, o.bandwidth, r)), CoopBoundMs: ms(fsCoopBound(lack, o.bandwidth, k, r)), Skipped: why})
		}
		for _, s := range res.receivers() {
			r := rtt(topo, o.origin, s)
			res.Transfers = append(res.Transfers, &fsTransfer{System: system, Checkpoint: ck, Kind: fsComplete, Region: s,
				LackBytes: lack, BoundMs: ms(fsBound(lack, o.bandwidth, r)), CoopBoundMs: ms(fsCoopBound(lack, o.bandwidth, k, r)), Skipped: why})
		}
		res.Runs = append(res.Runs, &fsCheckpointRun{System: system, Checkpoint: ck, Skipped: why})
	}
	if system == sysOurs {
		res.KV = &fsKV{Skipped: why}
		res.Memory = &fsMemory{Skipped: why}
	}
}

// benchChunking splits size random bytes with fileshare/chunks on one
// core (GOMAXPROCS 1 meanwhile, as go test -cpu 1), best of three rounds,
// and SHA-256 alone on the same bytes.
func benchChunking(size int) *fsChunking {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	data := make([]byte, size)
	_, _ = stream(7).Read(data)
	out := &fsChunking{Bytes: int64(size), Rounds: 3}
	for range out.Rounds {
		n := 0
		t := time.Now()
		_ = chunks.Split(bytes.NewReader(data), func(chunks.Chunk, []byte) error { n++; return nil })
		out.MBps = max(out.MBps, float64(size)/time.Since(t).Seconds()/1e6)
		out.Chunks = n
		t = time.Now()
		for off := 0; off < size; off += chunks.AvgSize {
			chunks.Sum(data[off:min(size, off+chunks.AvgSize)])
		}
		out.SumMBps = max(out.SumMBps, float64(size)/time.Since(t).Seconds()/1e6)
	}
	return out
}

// ckptMeasure is how a system's checkpoint is driven and observed.
type ckptMeasure struct {
	system    string
	origin    string
	folder    string // the origin's
	staging   string
	receivers []string
	topo      *wan.Topology
	bw        wan.Bandwidth
	wire      func() (map[stpeer.Link]int64, error)
	// afterCommit runs right after the commit (Syncthing's scan).
	afterCommit func(ctx context.Context) error
	// stable (ours) returns when the checkpoint is stable at the origin.
	stable func(ctx context.Context, c *ckpt) (time.Time, error)
	// complete returns when the checkpoint is complete at site.
	complete func(ctx context.Context, site string, c *ckpt) (time.Time, error)
	// pids of the system's processes, for their CPU time.
	pids     map[string]int
	progress io.Writer
	// during, if set, runs from just before the commit until the last
	// region completed (the KV load).
	during func(ctx context.Context)
}

// measureCkpt writes a checkpoint with write, commits it and measures
// what res needs. prev is the checkpoint before (nil for the first).
func measureCkpt(ctx context.Context, m ckptMeasure, res *fsResults, write func() (*ckpt, error)) (*ckpt, *fsCheckpointRun, error) {
	run := &fsCheckpointRun{System: m.system}
	res.Runs = append(res.Runs, run)
	w0, err := m.wire()
	if err != nil {
		return nil, run, err
	}
	tw := time.Now()
	procW := cpuOf(m.pids)
	c, err := write()
	if err != nil {
		return nil, run, fmt.Errorf("writing the checkpoint: %w", err)
	}
	run.WriteMs = ms(time.Since(tw))
	run.Checkpoint = c.Dir
	total := maxBound(m, c)
	ctx, cancel := context.WithTimeout(ctx, 3*total+60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	duringCtx, stopDuring := context.WithCancel(ctx)
	if m.during != nil {
		wg.Go(func() { m.during(duringCtx) })
	}
	cpu0, _ := readCPU()
	proc0 := cpuOf(m.pids)
	if err := commitCkpt(m.folder, m.staging, c); err != nil {
		stopDuring()
		wg.Wait()
		return nil, run, fmt.Errorf("commit: %w", err)
	}
	t0 := time.Now()
	run.commitAt = t0
	run.Files = len(c.Files)
	run.Bytes, run.ChangedBytes = c.bytes()
	var mu sync.Mutex
	state := map[string]string{}
	status := func() string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, k := range slices.Sorted(maps.Keys(state)) {
			out = append(out, k+" "+state[k])
		}
		return strings.Join(out, ", ")
	}
	sampler := startLinkSampler(ctx, m.wire, m.origin, t0, 250*time.Millisecond, 2*time.Second,
		func(s string) { fmt.Fprintln(m.progress, s) }, status)
	if m.afterCommit != nil {
		if err := m.afterCommit(ctx); err != nil {
			sampler.finish()
			stopDuring()
			wg.Wait()
			return c, run, err
		}
	}
	var errs []error
	record := func(kind, region string, at time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		lack := run.ChangedBytes
		r := rtt(m.topo, m.origin, region)
		t := &fsTransfer{System: m.system, Checkpoint: c.Dir, Kind: kind, Region: region, LackBytes: lack,
			BoundMs: ms(fsBound(lack, m.bw, r)), CoopBoundMs: ms(fsCoopBound(lack, m.bw, len(m.receivers), r))}
		if err != nil {
			t.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s %s at %s: %w", c.Dir, kind, region, err))
			state[kind+"@"+region] = "failed"
		} else {
			t.TookMs = ms(at.Sub(t0))
			state[kind+"@"+region] = fmt.Sprintf("%.1fs", at.Sub(t0).Seconds())
		}
		res.Transfers = append(res.Transfers, t)
	}
	var waits sync.WaitGroup
	if m.stable != nil {
		waits.Go(func() {
			at, err := m.stable(ctx, c)
			record(fsStable, res.Nearest, at, err)
		})
	}
	var last time.Time
	for _, s := range m.receivers {
		waits.Go(func() {
			at, err := m.complete(ctx, s, c)
			mu.Lock()
			if at.After(last) {
				last = at
			}
			mu.Unlock()
			record(fsComplete, s, at, err)
		})
	}
	waits.Wait()
	stopDuring()
	wg.Wait()
	cpu1, _ := readCPU()
	proc1 := cpuOf(m.pids)
	run.Series = sampler.finish()
	if last.IsZero() {
		last = time.Now()
	}
	run.WindowMs = ms(last.Sub(t0))
	run.CPUIdle = idleShare(cpu0, cpu1)
	if len(proc1) > 0 {
		run.CPUSeconds = map[string]float64{}
		for k, v := range proc1 {
			run.CPUSeconds[k] = v - proc0[k]
		}
	}
	w1, err := waitQuiet(ctx, m.wire, time.Second, 15*time.Second)
	if err != nil {
		errs = append(errs, err)
	}
	procQ := cpuOf(m.pids)
	run.SpanMs = ms(time.Since(tw))
	if len(procQ) > 0 {
		run.CPUSpan = map[string]float64{}
		for k, v := range procQ {
			if v0, ok := procW[k]; ok {
				run.CPUSpan[k] = v - v0
			}
		}
	}
	run.Wire = wireDelta(w0, w1)
	run.Util = map[string]float64{}
	for _, s := range m.receivers {
		k := m.origin + "->" + s
		if w := run.WindowMs / 1000; w > 0 {
			run.Util[k] = float64(run.Wire[k]) / (float64(m.bw) * w)
		}
	}
	if err := errors.Join(errs...); err != nil {
		run.Error = err.Error()
		return c, run, err
	}
	return c, run, nil
}

// maxBound is the largest bound of c's receivers.
func maxBound(m ckptMeasure, c *ckpt) time.Duration {
	_, changed := c.bytes()
	var out time.Duration
	for _, s := range m.receivers {
		out = max(out, fsBound(changed, m.bw, rtt(m.topo, m.origin, s)))
	}
	return out
}

// pollUntil calls ok every interval until it says true, and returns when
// it first did.
func pollUntil(ctx context.Context, every time.Duration, ok func() (bool, error)) (time.Time, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last error
	for {
		done, err := ok()
		if done {
			return time.Now(), nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return time.Time{}, fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return time.Time{}, ctx.Err()
		case <-t.C:
		}
	}
}

// benchFSSyncthing runs the two checkpoints through Syncthing.
func benchFSSyncthing(ctx context.Context, o fsOptions, topo *wan.Topology, dir string, res *fsResults, step func(string, ...any)) error {
	bin, err := findBinary("syncthing")
	if err != nil {
		skipFS(res, sysSyncthing, topo, o, "not measured: "+err.Error())
		return nil
	}
	c, err := stpeer.Start(ctx, stpeer.Options{Binary: bin, Dir: dir, Topology: topo, Bandwidth: o.bandwidth, Origin: o.origin})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			fmt.Fprintln(o.progress, err)
		}
	}()
	fmt.Fprintf(o.progress, "syncthing: %d instances connected through their emulated links; %s sendonly, the others receiveonly\n", len(topo.Sites), o.origin)
	folder := c.FolderPath(o.origin)
	// Syncthing's monitor and its child per site, and this process (the
	// links), for their CPU time.
	pids := map[string]int{"wanbench (links, polling)": os.Getpid()}
	for _, s := range topo.Sites {
		for _, pid := range pidsWith(filepath.Join(dir, s, "home")) {
			pids[fmt.Sprintf("syncthing@%s pid %d", s, pid)] = pid
		}
	}
	m := ckptMeasure{system: sysSyncthing, pids: pids, origin: o.origin, folder: folder, staging: filepath.Join(dir, "staging"),
		receivers: res.receivers(), topo: topo, bw: o.bandwidth, progress: o.progress,
		wire: c.WireBytes,
		afterCommit: func(ctx context.Context) error {
			return c.Scan(ctx, o.origin)
		},
		complete: func(ctx context.Context, site string, ck *ckpt) (time.Time, error) {
			return c.WaitInSync(ctx, site, ck.want())
		},
	}
	step("syncthing: checkpoint 1")
	ck1, _, err := measureCkpt(ctx, m, res, func() (*ckpt, error) {
		return writeCkpt1(folder, "ckpt/step-1000", o.shards, o.shardBytes)
	})
	if err != nil {
		return err
	}
	step("syncthing: checkpoint 2")
	_, _, err = measureCkpt(ctx, m, res, func() (*ckpt, error) { return writeCkpt2(folder, "ckpt/step-2000", ck1) })
	return err
}
