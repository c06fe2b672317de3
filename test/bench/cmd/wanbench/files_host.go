package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/test/bench/internal/local"

	"github.com/stabilizer/stabilizer/test/bench/internal/stpeer"
)

// What the file-sync bench reads of the host: CPU time (whole machine and
// per process), peak RSS, and the links' throughput over time, so that the
// report can show whether the link or the host was the bottleneck.

// cpuTimes is the host's CPU time from /proc/stat, in clock ticks.
type cpuTimes struct{ idle, total uint64 }

func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var t cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", v, err)
		}
		t.total += n
		if i == 3 || i == 4 { // idle, iowait
			t.idle += n
		}
	}
	return t, nil
}

// idleShare is the idle share of the CPU between a and b.
func idleShare(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.idle-a.idle) / float64(b.total-a.total)
}

// procCPU is a process's user and system CPU time in seconds, from
// /proc/PID/stat (fields 14 and 15, after the command's parenthesis).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: times %q %q", pid, f[11], f[12])
	}
	const hz = 100 // USER_HZ on Linux
	return float64(u+s) / hz, nil
}

// cpuOf reads procCPU for each named process; unreadable ones are left
// out.
func cpuOf(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if v, err := procCPU(pid); err == nil {
			out[name] = v
		}
	}
	return out
}

// statusMiB reads a "Vm...:  N kB" field of /proc/PID/status in MiB.
func statusMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, field, err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// resetPeak resets a process's VmHWM to its current RSS (clear_refs 5).
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200)
}

// linkSampler samples the links' delivered bytes every interval and
// prints a progress line every printEvery.
type linkSampler struct {
	cancel func()
	done   chan struct{}
	mu     struct {
		sync.Mutex
		series map[string][]fsLinkPoint
	}
}

// startLinkSampler samples read every interval from t0 on, keeping the
// throughput of the links from origin; status, if not nil, is printed
// with every progress line.
func startLinkSampler(ctx context.Context, read func() (map[stpeer.Link]int64, error), origin string, t0 time.Time,
	every, printEvery time.Duration, print func(string), status func() string) *linkSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &linkSampler{cancel: cancel, done: make(chan struct{})}
	s.mu.series = map[string][]fsLinkPoint{}
	prev, _ := read()
	prevAt, lastPrint := time.Now(), time.Now()
	base := prev
	// Owned by the sampler; finish stops it and waits.
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := read()
			if err != nil {
				continue
			}
			now := time.Now()
			dt := now.Sub(prevAt).Seconds()
			var line []string
			s.mu.Lock()
			for k, v := range cur {
				if k.From != origin {
					continue
				}
				name := k.From + "->" + k.To
				s.mu.series[name] = append(s.mu.series[name], fsLinkPoint{T: now.Sub(t0).Seconds(), MBps: float64(v-prev[k]) / dt / 1e6})
				line = append(line, fmt.Sprintf("%s %.0f MB (%.1f MB/s)", name, float64(v-base[k])/1e6, float64(v-prev[k])/dt/1e6))
			}
			s.mu.Unlock()
			prev, prevAt = cur, now
			if now.Sub(lastPrint) >= printEvery {
				lastPrint = now
				slices.Sort(line)
				msg := strings.Join(line, ", ")
				if status != nil {
					msg += "; " + status()
				}
				print(fmt.Sprintf("  %5.1fs %s", now.Sub(t0).Seconds(), msg))
			}
		}
	}()
	return s
}

func (s *linkSampler) finish() map[string][]fsLinkPoint {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.series
}

// waitQuiet waits until the links' delivered bytes stop growing for
// quiet (at most limit), so that a checkpoint's count includes its last
// bytes and acks, and returns the counters then.
func waitQuiet(ctx context.Context, read func() (map[stpeer.Link]int64, error), quiet, limit time.Duration) (map[stpeer.Link]int64, error) {
	deadline := time.Now().Add(limit)
	last, err := read()
	if err != nil {
		return nil, err
	}
	since := time.Now()
	for time.Now().Before(deadline) && time.Since(since) < quiet {
		if err := local.Sleep(ctx, 100*time.Millisecond); err != nil {
			return last, err
		}
		cur, err := read()
		if err != nil {
			return nil, err
		}
		var grew int64
		for k, v := range cur {
			grew += v - last[k]
		}
		// Heartbeats and acks keep trickling: quiet means under 64 KB.
		if grew > 64<<10 {
			since = time.Now()
		}
		last = cur
	}
	return last, nil
}

// wireDelta is b - a per link, keyed "from->to".
func wireDelta(a, b map[stpeer.Link]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range b {
		out[k.From+"->"+k.To] = v - a[k]
	}
	return out
}

// pidsWith finds the processes whose command line contains arg, by pid.
func pidsWith(arg string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(arg)) {
			out = append(out, pid)
		}
	}
	return out
}
