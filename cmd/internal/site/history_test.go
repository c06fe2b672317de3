package site

import (
	"strings"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// The ring keeps the last historyLen samples, oldest first, and the time
// a frontier last moved.
func TestHistory(t *testing.T) {
	id := stabilizer.StreamID{Origin: "us-east-1", Name: "kv"}
	t0 := time.Unix(1_700_000_000, 0)
	var h history
	sample := func(i int, seq, head uint64) {
		h.add(t0.Add(time.Duration(i)*time.Second), []stabilizer.StreamStatus{{Stream: id, Head: head,
			Frontiers: map[string]stabilizer.FrontierState{"all": {Seq: seq, HLC: stabilizer.HLC{Wall: t0.UnixNano()}}}}}, nil)
	}
	if pts, moved := h.get(id, "all"); pts != nil || !moved.IsZero() {
		t.Fatalf("before any sample: %v, %v", pts, moved)
	}
	sample(0, 1, 1)
	sample(1, 2, 2)
	for i := 2; i < historyLen+10; i++ {
		sample(i, 2, 3) // stuck at 2 below the head from the third sample on
	}
	pts, moved := h.get(id, "all")
	if len(pts) != historyLen {
		t.Fatalf("%d samples kept, want %d", len(pts), historyLen)
	}
	if !moved.Equal(t0.Add(time.Second)) {
		t.Errorf("last moved at %v, want %v", moved, t0.Add(time.Second))
	}
	// The oldest kept is sample 10, the newest sample historyLen+9: lag is
	// the time since the frontier's HLC (t0).
	if first, last := pts[0], pts[len(pts)-1]; first.LagSeconds != 10 || last.LagSeconds != float64(historyLen+9) || last.Seq != 2 {
		t.Errorf("oldest %+v, newest %+v", first, last)
	}
}

func TestLagSeconds(t *testing.T) {
	now := time.Unix(100, 0)
	for _, c := range []struct {
		f     stabilizer.FrontierState
		head  uint64
		since time.Time // when the first uncovered write was made
		want  float64
	}{
		{stabilizer.FrontierState{Seq: 5, HLC: stabilizer.HLC{Wall: time.Unix(90, 0).UnixNano()}}, 5, time.Time{}, 0}, // at the head
		{stabilizer.FrontierState{Seq: 4, HLC: stabilizer.HLC{Wall: time.Unix(90, 0).UnixNano()}}, 5, time.Time{}, 10},
		// The frontier's write was at 0 s, the first it does not cover at
		// 75 s (a site went down then): 25 s, not 100.
		{stabilizer.FrontierState{Seq: 4, HLC: stabilizer.HLC{Wall: time.Unix(0, 0).UnixNano()}}, 9, time.Unix(75, 0), 25},
		{stabilizer.FrontierState{Seq: 0}, 5, time.Time{}, 0},                                                          // nothing stable, nothing read: no time
		{stabilizer.FrontierState{Seq: 0}, 5, time.Unix(40, 0), 60},                                                    // nothing stable: since the first write
		{stabilizer.FrontierState{Seq: 4, HLC: stabilizer.HLC{Wall: time.Unix(101, 0).UnixNano()}}, 5, time.Time{}, 0}, // a clock ahead
	} {
		if got := lagSeconds(c.f, c.head, c.since, now); got != c.want {
			t.Errorf("lagSeconds(%+v, %d, %v) = %v, want %v", c.f, c.head, c.since, got, c.want)
		}
	}
}

func TestSecondsText(t *testing.T) {
	for s, want := range map[float64]string{0: "0 s", 0.0421: "42 ms", 3.25: "3.2 s", 31.8: "31.8 s", 4000: "1h6m40s"} {
		if got := secondsText(s); got != want {
			t.Errorf("secondsText(%v) = %q, want %q", s, got, want)
		}
	}
}

func TestSparkline(t *testing.T) {
	if got := sparkline(nil, false); got != "" {
		t.Errorf("no samples: %q", got)
	}
	got := string(sparkline([]point{{1, 0}, {1, 2}, {1, 4}}, true))
	for _, want := range []string{"<svg class=spark", "lag over the last 3 s: max 4.0 s", `stroke="#c0392b"`, "</svg>"} {
		if !strings.Contains(got, want) {
			t.Errorf("sparkline lacks %q: %s", want, got)
		}
	}
}
