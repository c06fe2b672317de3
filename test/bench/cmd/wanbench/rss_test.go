package main

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestParseVmRSS(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"Name:\tnats\nVmPeak:\t  9000 kB\nVmRSS:\t   123456 kB\nThreads:\t8\n", 123456, false},
		{"VmRSS: 1 kB", 1, false},
		{"Name:\tkthreadd\n", 0, true},
		{"VmRSS:\t12 MB\n", 0, true},
	} {
		got, err := parseVmRSS([]byte(c.in))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("parseVmRSS(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestRSSSampler samples this process, which has an RSS, and a process
// that does not exist, whose error it reports.
func TestRSSSampler(t *testing.T) {
	s := startRSS(context.Background(), map[string]int{"self": os.Getpid(), "gone": 1 << 30}, time.Hour)
	// The first round of samples is taken at once, before the sampler
	// looks at its context; finish waits for it.
	got, err := s.finish()
	if len(got["self"]) != 1 || got["self"][0].mib <= 0 {
		t.Fatalf("own RSS: %v", got["self"])
	}
	if v := got["self"][0].mib; v <= 0 {
		t.Errorf("own RSS %v MiB", v)
	}
	if err == nil || len(got["gone"]) != 0 {
		t.Errorf("a missing process: %v, %v", err, got["gone"])
	}
	pts := rssPoints(got["self"], got["self"][0].at.Add(-time.Second))
	if len(pts) != len(got["self"]) || pts[0].T != 1 {
		t.Errorf("points %v", pts)
	}
}
