package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// parseVmRSS reads the resident set size, in KiB, from the text of a
// /proc/PID/status file.
func parseVmRSS(status []byte) (int64, error) {
	for _, line := range bytes.Split(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		return strconv.ParseInt(string(f[0]), 10, 64)
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// readRSS is a process's resident set size in MiB.
func readRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	kb, err := parseVmRSS(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return float64(kb) / 1024, nil
}

// rssSample is one process's RSS at a moment.
type rssSample struct {
	at  time.Time
	mib float64
}

// rssSampler samples the RSS of named processes every interval from its
// start until it is stopped.
type rssSampler struct {
	stop func()
	done chan struct{}
	mu   struct {
		sync.Mutex
		samples map[string][]rssSample
		err     error
	}
}

// startRSS starts sampling pids (by name) every interval, at once first.
// Stop it with stop, which returns the samples.
func startRSS(ctx context.Context, pids map[string]int, every time.Duration) *rssSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &rssSampler{stop: cancel, done: make(chan struct{})}
	s.mu.samples = map[string][]rssSample{}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			now := time.Now()
			for name, pid := range pids {
				v, err := readRSS(pid)
				s.mu.Lock()
				if err != nil {
					if s.mu.err == nil {
						s.mu.err = fmt.Errorf("%s: %w", name, err)
					}
				} else {
					s.mu.samples[name] = append(s.mu.samples[name], rssSample{now, v})
				}
				s.mu.Unlock()
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// finish stops sampling and returns what was sampled, and the first error.
func (s *rssSampler) finish() (map[string][]rssSample, error) {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.samples, s.mu.err
}

// rssPoints makes a memory row's series: seconds since start.
func rssPoints(samples []rssSample, start time.Time) []rssPoint {
	var out []rssPoint
	for _, x := range samples {
		out = append(out, rssPoint{T: x.at.Sub(start).Seconds(), MiB: x.mib})
	}
	return out
}
