package site

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// The console's defaults: how often the frontiers are sampled, how many
// samples each keeps, and how long a frontier below its head must stand
// still to count as stalled.
const (
	defaultSampleEvery = time.Second
	historyLen         = 120
	defaultStallAfter  = 5 * time.Second
)

// consoleOptions tune the status page's sampler; the zero value takes the
// defaults above (tests shorten them).
type consoleOptions struct {
	SampleEvery, StallAfter time.Duration
}

// history keeps the last historyLen samples of every stream's frontier per
// predicate, and when each last moved. Its mutex is a leaf.
type history struct {
	mu struct {
		sync.Mutex
		series map[histKey]*series
	}
}

type histKey struct {
	stream stabilizer.StreamID
	pred   string
}

// point is one sample of a frontier.
type point struct {
	Seq        uint64
	LagSeconds float64
}

// series is a ring of points, oldest first from next once full.
type series struct {
	ring    [historyLen]point
	n, next int
	seq     uint64    // the frontier at the last sample
	moved   time.Time // when it last changed (or was first seen)
}

// add records one sample of every stream's frontiers taken at now;
// uncovered says since when each frontier's first uncovered write waits
// (nil or zero: unknown, see lagSeconds).
func (h *history) add(now time.Time, streams []stabilizer.StreamStatus, uncovered func(stabilizer.StreamStatus, string) time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.series == nil {
		h.mu.series = map[histKey]*series{}
	}
	for _, st := range streams {
		for pred, f := range st.Frontiers {
			k := histKey{st.Stream, pred}
			s := h.mu.series[k]
			if s == nil {
				s = &series{seq: f.Seq, moved: now}
				h.mu.series[k] = s
			}
			if f.Seq != s.seq {
				s.seq, s.moved = f.Seq, now
			}
			var since time.Time
			if uncovered != nil {
				since = uncovered(st, pred)
			}
			s.ring[s.next] = point{f.Seq, lagSeconds(f, st.Head, since, now)}
			s.next = (s.next + 1) % historyLen
			s.n = min(s.n+1, historyLen)
		}
	}
}

// get returns a frontier's samples, oldest first, and when it last moved
// (zero: never sampled).
func (h *history) get(id stabilizer.StreamID, pred string) ([]point, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.mu.series[histKey{id, pred}]
	if s == nil {
		return nil, time.Time{}
	}
	out := make([]point, 0, s.n)
	for i := range s.n {
		out = append(out, s.ring[(s.next-s.n+i+historyLen)%historyLen])
	}
	return out, s.moved
}

// lagSeconds is how far a frontier trails its stream's head in time: how
// long the oldest write it does not cover has waited (now minus since, the
// HLC of entry f.Seq+1), 0 at the head. When that entry cannot be read
// (since zero), now minus the HLC of the frontier's own entry, which
// overstates the wait when writes are sparse. Never below 0: an HLC may
// come from a clock ahead of this site's. The console and the
// stabilizer_frontier_lag_seconds metric both show it.
func lagSeconds(f stabilizer.FrontierState, head uint64, since, now time.Time) float64 {
	if f.Seq >= head {
		return 0
	}
	if since.IsZero() {
		if f.HLC.Wall <= 0 {
			return 0
		}
		since = time.Unix(0, f.HLC.Wall)
	}
	return max(0, now.Sub(since).Seconds())
}

// uncovered remembers, per frontier, the HLC of the first entry above it,
// so that lag is measured from the oldest write a predicate has not
// covered yet. Each frontier's entry is read once per position, and one
// is kept per frontier. Its mutex is a leaf.
type uncovered struct {
	node *stabilizer.Node
	mu   struct {
		sync.Mutex
		at map[histKey]uncoveredAt
	}
}

// uncoveredAt is the first entry above a frontier and when it was written.
type uncoveredAt struct {
	seq uint64
	at  time.Time
}

// since returns when entry f.Seq+1 of st was written (its HLC), where f is
// st's frontier of pred; zero when f is at the head or the entry cannot be
// read (truncated, or the site is closing).
func (u *uncovered) since(st stabilizer.StreamStatus, pred string) time.Time {
	f := st.Frontiers[pred]
	if f.Seq >= st.Head {
		return time.Time{}
	}
	k, seq := histKey{st.Stream, pred}, f.Seq+1
	u.mu.Lock()
	if c, ok := u.mu.at[k]; ok && c.seq == seq {
		u.mu.Unlock()
		return c.at
	}
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	e, err := u.node.ReadEntry(ctx, st.Stream, seq)
	cancel()
	if err != nil || e.HLC.Wall <= 0 {
		return time.Time{}
	}
	t := time.Unix(0, e.HLC.Wall)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.mu.at == nil {
		u.mu.at = map[histKey]uncoveredAt{}
	}
	u.mu.at[k] = uncoveredAt{seq, t}
	return t
}

// runSampler samples the node's frontiers into s.hist at once and then
// every period until stop is closed; it closes done when it returns.
func (s *Site) runSampler(stop <-chan struct{}, done chan<- struct{}, every time.Duration) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		streams, err := s.node.Streams(ctx)
		cancel()
		if err == nil {
			s.hist.add(time.Now(), streams, s.uncovered.since)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Sparkline geometry, in CSS pixels.
const sparkW, sparkH = 132, 22

// sparkline draws the lag samples as an inline SVG: an area under the
// line, red when the frontier is stalled. Its title gives the range.
func sparkline(pts []point, stalled bool) template.HTML {
	if len(pts) == 0 {
		return ""
	}
	most := 0.0
	for _, p := range pts {
		most = max(most, p.LagSeconds)
	}
	top := max(most, 1) // seconds: a flat line at 0 stays at the bottom
	colour := "#2b7a4b"
	if stalled {
		colour = "#c0392b"
	}
	step := float64(sparkW) / float64(historyLen-1)
	x0 := float64(sparkW) - step*float64(len(pts)-1)
	var line strings.Builder
	for i, p := range pts {
		y := float64(sparkH-2) - (float64(sparkH-4) * p.LagSeconds / top)
		fmt.Fprintf(&line, "%.1f,%.1f ", x0+step*float64(i), y)
	}
	area := fmt.Sprintf("%.1f,%d %s%d,%d", x0, sparkH-2, line.String(), sparkW, sparkH-2)
	return template.HTML(fmt.Sprintf(`<svg class=spark width=%d height=%d viewBox="0 0 %d %d" role=img>`+
		`<title>lag over the last %d s: max %s</title>`+
		`<line x1=0 y1=%d x2=%d y2=%d stroke="#d5d9e0" stroke-dasharray="2 3"/>`+
		`<polygon points="%s" fill="%s" fill-opacity=".15"/>`+
		`<polyline points="%s" fill=none stroke="%s" stroke-width="1.5"/></svg>`,
		sparkW, sparkH, sparkW, sparkH, len(pts), secondsText(most), sparkH-2, sparkW, sparkH-2, area, colour, strings.TrimSpace(line.String()), colour))
}

// secondsText prints a duration in seconds the way the page shows lag.
func secondsText(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 100:
		return fmt.Sprintf("%.1f s", s)
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}
