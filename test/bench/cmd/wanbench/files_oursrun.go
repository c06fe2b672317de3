package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/stabilizer/stabilizer/fileshare/chunks"
	"github.com/stabilizer/stabilizer/kv/kvclient"
	"github.com/stabilizer/stabilizer/test/workload"
	"github.com/stabilizer/stabilizer/wan"
)

// benchFSOurs runs our phases: the two checkpoints (with the KV load
// during the first) and the memory phase.
func benchFSOurs(ctx context.Context, o fsOptions, topo *wan.Topology, dir string, res *fsResults, step func(string, ...any)) error {
	c, err := startFSCluster(ctx, o, topo, dir)
	if err != nil {
		c.Close(o.progress) // what it started
		return err
	}
	defer c.Close(o.progress)
	origin := c.folders[o.origin]
	pids := map[string]int{"wanbench (links, polling)": os.Getpid()}
	for s, pid := range c.sitePIDs() {
		pids["stabilizerd@"+s] = pid
	}
	for s, pid := range c.clientPIDs() {
		pids["stabsync@"+s] = pid
	}
	m := ckptMeasure{system: sysOurs, origin: o.origin, folder: origin, staging: filepath.Join(dir, "staging"),
		receivers: res.receivers(), topo: topo, bw: o.bandwidth, progress: o.progress, wire: c.wireBytes, pids: pids,
		stable: func(ctx context.Context, ck *ckpt) (time.Time, error) {
			return pollUntil(ctx, 10*time.Millisecond, func() (bool, error) {
				if err := c.exited(); err != nil {
					return false, err
				}
				return c.stableAt(ctx, ck.Dir, len(ck.Files))
			})
		},
		complete: func(ctx context.Context, site string, ck *ckpt) (time.Time, error) {
			folder := c.folders[site]
			d := filepath.Join(folder, filepath.FromSlash(ck.Dir))
			return pollUntil(ctx, 5*time.Millisecond, func() (bool, error) {
				if _, err := os.Stat(d); err != nil {
					return false, c.exited()
				}
				return ckptPresent(folder, ck), nil
			})
		},
	}

	// KV: majority puts at the origin, idle, then during checkpoint 1.
	var kv *kvclient.Client
	res.KV = &fsKV{Predicate: "majority", BoundMs: ms(rtt(topo, o.origin, res.Nearest))}
	var busy []kvSample
	if o.skip["kv"] {
		res.KV.Skipped = "skipped: --skip kv"
	} else {
		if kv, err = kvclient.Dial(c.site(o.origin).Client); err != nil {
			return err
		}
		defer kv.Close()
		step("ours: %d majority KV puts at %s, idle", o.kvIdle, o.origin)
		idle := kvLoop(ctx, kv, o.kvIdle+3)
		idle = idle[min(3, len(idle)):] // warm-up
		idleLat := latencies(idle, time.Time{}, time.Time{}, res.KV)
		fmt.Fprintf(o.progress, "  idle p50 %.1f ms\n", ms(workload.Percentile(idleLat, .5)))
		m.during = func(ctx context.Context) { busy = kvLoop(ctx, kv, 0) }
		defer func() { res.KV.setLatencies(idleLat, res.KV.busyLat(busy)) }()
	}

	step("ours: checkpoint 1 (%d × %s) written at %s and committed by %s", o.shards, mib(o.shardBytes), o.origin, fsMarker)
	ck1, run1, err := measureCkpt(ctx, m, res, func() (*ckpt, error) {
		return writeCkpt1(origin, "ckpt/step-1000", o.shards, o.shardBytes)
	})
	if ck1 != nil {
		res.Checkpoints = append(res.Checkpoints, ck1)
	}
	if err != nil {
		return err
	}
	if kv != nil {
		res.KV.window(run1, res.Origin+"->"+res.Nearest, float64(o.bandwidth)/1e6)
		res.KV.t0 = run1.commitAt
	}
	m.during = nil
	if err := verifyAt(c, res.receivers(), ck1); err != nil {
		return err
	}

	step("ours: checkpoint 2 (one shard unchanged, one rewritten, two 10%% edited in 4 MiB runs, one added)")
	ck2, run2, err := measureCkpt(ctx, m, res, func() (*ckpt, error) { return writeCkpt2(origin, "ckpt/step-2000", ck1) })
	if ck2 != nil {
		res.Checkpoints = append(res.Checkpoints, ck2)
	}
	if err != nil {
		return err
	}
	if err := verifyAt(c, res.receivers(), ck2); err != nil {
		return err
	}
	if run2.ChunkLackBytes, err = chunkLack(origin, ck1, ck2); err != nil {
		return err
	}
	fmt.Fprintf(o.progress, "  changed %s, of which our chunks lack %s\n", mib(run2.ChangedBytes), mib(run2.ChunkLackBytes))

	if o.skip["memory"] {
		res.Memory = &fsMemory{Skipped: "skipped: --skip memory"}
		return nil
	}
	step("ours: memory, a %s file from %s with every link at %s", mib(o.bigBytes), o.origin, o.memBandwidth)
	res.Memory, err = benchFSMemory(ctx, o, c, pids)
	return err
}

// verifyAt hashes the checkpoint in the receivers' folders.
func verifyAt(c *fsCluster, sites []string, ck *ckpt) error {
	for _, s := range sites {
		if err := verifyCkpt(c.folders[s], ck); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// kvSample is one put.
type kvSample struct {
	at  time.Time
	lat time.Duration
	err error
}

// kvLoop puts in a closed loop at the origin, n puts or (n = 0) until ctx
// ends.
func kvLoop(ctx context.Context, kv *kvclient.Client, n int) []kvSample {
	var out []kvSample
	val := make([]byte, 64)
	for i := 0; n == 0 || i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		t := time.Now()
		_, err := kv.Put(ctx, fmt.Sprintf("bench/files/kv-%d", i%64), val, "majority", 10*time.Second)
		if ctx.Err() != nil {
			break
		}
		out = append(out, kvSample{at: t, lat: time.Since(t), err: err})
	}
	return out
}

// latencies of the samples that began within [from, to] (zero: any)
// and succeeded; failures are counted into k.
func latencies(ss []kvSample, from, to time.Time, k *fsKV) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if (!from.IsZero() && s.at.Before(from)) || (!to.IsZero() && s.at.After(to)) {
			continue
		}
		if s.err != nil {
			if k != nil {
				k.Errors++
				if k.FirstError == "" {
					k.FirstError = s.err.Error()
				}
			}
			continue
		}
		out = append(out, s.lat)
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

// window sets the busy window: while the link the majority puts cross
// ran at half its bandwidth or more (from the checkpoint's link series).
func (k *fsKV) window(run *fsCheckpointRun, link string, bwMBps float64) {
	from, to, ok := busyWindow(run.Series[link], bwMBps/2)
	if ok {
		k.BusyFromS, k.BusyToS = from, to
	}
}

// busyLat keeps the busy samples: those begun within the window, and
// records them for the plot.
func (k *fsKV) busyLat(ss []kvSample) []time.Duration {
	if k.t0.IsZero() || k.BusyToS <= k.BusyFromS {
		return nil
	}
	from := k.t0.Add(time.Duration(k.BusyFromS * float64(time.Second)))
	to := k.t0.Add(time.Duration(k.BusyToS * float64(time.Second)))
	for _, s := range ss {
		if s.err == nil {
			k.BusyAt = append(k.BusyAt, s.at.Sub(k.t0).Seconds())
			k.BusyLat = append(k.BusyLat, ms(s.lat))
		}
	}
	return latencies(ss, from, to, k)
}

// busyWindow is the span from the first to the last sample of series at
// or above threshold; a sample's rate covers the interval before it.
func busyWindow(series []fsLinkPoint, threshold float64) (from, to float64, ok bool) {
	first, last := -1, -1
	for i, p := range series {
		if p.MBps >= threshold {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	from = 0
	if first > 0 {
		from = series[first-1].T
	}
	return from, series[last].T, true
}

// chunkLack is the bytes of the distinct chunks of next that prev's files
// do not have, as our chunker cuts them.
func chunkLack(folder string, prev, next *ckpt) (int64, error) {
	have := map[[32]byte]bool{}
	each := func(c *ckpt, fn func(chunks.Chunk)) error {
		for _, f := range c.Files {
			r, err := os.Open(filepath.Join(folder, filepath.FromSlash(c.Dir), f.Name))
			if err != nil {
				return err
			}
			err = chunks.Split(r, func(ch chunks.Chunk, _ []byte) error { fn(ch); return nil })
			r.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := each(prev, func(ch chunks.Chunk) { have[ch.Hash] = true }); err != nil {
		return 0, err
	}
	var lack int64
	err := each(next, func(ch chunks.Chunk) {
		if !have[ch.Hash] {
			have[ch.Hash] = true
			lack += int64(ch.Size)
		}
	})
	return lack, err
}

// benchFSMemory syncs one big random file from the origin with every link
// at o.memBandwidth and reads each process's peak RSS meanwhile.
func benchFSMemory(ctx context.Context, o fsOptions, c *fsCluster, pids map[string]int) (*fsMemory, error) {
	m := &fsMemory{Bytes: o.bigBytes, Bandwidth: o.memBandwidth.String(), HWM: map[string]float64{}, HWMRun: map[string]float64{}, Reset: true}
	if err := setAllBandwidth(c.net, o.memBandwidth); err != nil {
		return m, err
	}
	pids = maps.Clone(pids)
	delete(pids, "wanbench (links, polling)")
	for name, pid := range pids {
		if v, err := statusMiB(pid, "VmHWM"); err == nil {
			m.HWMRun[name] = v
		}
		if err := resetPeak(pid); err != nil {
			m.Reset = false
		}
	}
	rel := "big/blob.bin"
	src := filepath.Join(c.folders[o.origin], filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		return m, err
	}
	sum, err := writeRandom(src, o.bigBytes, 9)
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 3*fsBound(o.bigBytes, o.memBandwidth, 0)+90*time.Second)
	defer cancel()
	sampler := startLinkSampler(ctx, c.wireBytes, o.origin, t0, time.Second, 3*time.Second,
		func(s string) { fmt.Fprintln(o.progress, s) }, nil)
	var last time.Time
	var failed error
	for _, s := range without(c.sitesNames(), o.origin) {
		p := filepath.Join(c.folders[s], filepath.FromSlash(rel))
		at, err := pollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
			st, err := os.Stat(p)
			if err != nil {
				return false, c.exited()
			}
			return st.Size() == o.bigBytes, nil
		})
		if err != nil {
			failed = fmt.Errorf("not complete at %s after %.0f s: %w", s, time.Since(t0).Seconds(), err)
			break
		}
		if at.After(last) {
			last = at
		}
	}
	sampler.finish()
	// The peaks are read also when the file did not get through: they
	// are what the run saw until then.
	for name, pid := range pids {
		v, err := statusMiB(pid, "VmHWM")
		if err != nil {
			return m, err
		}
		m.HWM[name] = v
	}
	if failed != nil {
		m.Error = failed.Error()
		fmt.Fprintf(o.progress, "  %s\n", m.Error)
		return m, nil
	}
	m.TookMs = ms(last.Sub(t0))
	for _, s := range without(c.sitesNames(), o.origin) {
		got, err := sha256File(filepath.Join(c.folders[s], filepath.FromSlash(rel)))
		if err != nil {
			return m, err
		}
		if got != sum {
			m.Error = fmt.Sprintf("%s: the file's sha256 differs", s)
			return m, fmt.Errorf("memory phase: %s", m.Error)
		}
	}
	fmt.Fprintf(o.progress, "  %s at every region in %.1f s\n", mib(o.bigBytes), m.TookMs/1000)
	return m, nil
}
