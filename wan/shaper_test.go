package wan

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func newShaper(cfg LinkConfig) *shaper {
	return &shaper{cfg: cfg, rng: rand.New(rand.NewPCG(1, 2))}
}

func TestChunkSize(t *testing.T) {
	for _, tc := range []struct {
		bw   Bandwidth
		want int
	}{
		{0, maxChunk},
		{20 * MBPerSecond, 20000},
		{100 * KBPerSecond, segmentSize},
		{10 * GBPerSecond, maxChunk},
	} {
		if got := tc.bw.chunkSize(); got != tc.want {
			t.Errorf("%v.chunkSize() = %d, want %d", tc.bw, got, tc.want)
		}
	}
}

// A backlogged sender whose reader always wakes late still gets exactly the
// link's rate: the bucket books by virtual time, not by wake-ups.
func TestAdmitKeepsRateDespiteLateWakeups(t *testing.T) {
	s := newShaper(LinkConfig{Bandwidth: 10 * MBPerSecond})
	now := t0
	const chunk = 10000 // 1 ms at 10 MB/s
	var sent, done time.Time
	for range 1000 {
		sent, done = s.admit(now, chunk, done)
		if sent.After(now) {
			// The reader sleeps until sent, and wakes 1.5 ms late.
			now = sent.Add(1500 * time.Microsecond)
		} else {
			// Already due: it reads on at once.
			now = now.Add(10 * time.Microsecond)
		}
	}
	// 10 MB at 10 MB/s: the last byte is sent 1 s after the start (the
	// first 5 ms of it were in the bucket already).
	want := t0.Add(time.Second - burstWindow)
	if d := sent.Sub(want); d < -2*time.Millisecond || d > 2*time.Millisecond {
		t.Errorf("10 MB sent by %v, want about %v", sent.Sub(t0), want.Sub(t0))
	}
}

// An idle link saves at most burstWindow of tokens.
func TestAdmitIdleBurst(t *testing.T) {
	s := newShaper(LinkConfig{Bandwidth: 1 * MBPerSecond})
	// After a long idle spell, 5 ms worth (5000 bytes) goes at once...
	if got, _ := s.admit(t0, 5000, time.Time{}); !got.Equal(t0) {
		t.Errorf("burst sent at %v, want at once", got.Sub(t0))
	}
	// ...and the next byte waits for the rate.
	if got, _ := s.admit(t0, 1000, time.Time{}); got.Sub(t0) != time.Millisecond {
		t.Errorf("after the burst 1000 bytes sent at +%v, want +1ms", got.Sub(t0))
	}
	// A backlogged sender may reach further back (its reader was late).
	s = newShaper(LinkConfig{Bandwidth: 1 * MBPerSecond})
	s.txFree = t0.Add(-50 * time.Millisecond)
	if got, _ := s.admit(t0, 50000, t0.Add(-50*time.Millisecond)); !got.Equal(t0) {
		t.Errorf("backlogged catch-up sent at +%v, want at once", got.Sub(t0))
	}
	s.txFree = t0.Add(-50 * time.Millisecond)
	if got, _ := s.admit(t0, 50000, time.Time{}); got.Sub(t0) != 45*time.Millisecond {
		t.Errorf("idle sender sent at +%v, want +45ms (only 5 ms saved)", got.Sub(t0))
	}
}

func TestAdmitUnlimited(t *testing.T) {
	s := newShaper(LinkConfig{})
	if got, _ := s.admit(t0, 1<<30, t0); !got.Equal(t0) {
		t.Errorf("unlimited link sent at +%v", got.Sub(t0))
	}
}

// Delay is per chunk, not cumulative; jitter stays within bounds and never
// reorders a stream.
func TestArrival(t *testing.T) {
	s := newShaper(LinkConfig{Delay: 50 * time.Millisecond})
	var prev time.Time
	for i := range 100 {
		sent := t0.Add(time.Duration(i) * time.Millisecond)
		at, lost := s.arrival(sent, 100, prev, 0)
		if lost || at.Sub(sent) != 50*time.Millisecond {
			t.Fatalf("chunk %d arrives after %v (lost %v), want 50ms", i, at.Sub(sent), lost)
		}
		prev = at
	}

	s = newShaper(LinkConfig{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond})
	prev = time.Time{}
	var lo, hi time.Duration = time.Hour, 0
	for i := range 2000 {
		sent := t0.Add(time.Duration(i) * time.Second) // far apart: no queueing
		at, _ := s.arrival(sent, 100, prev, 0)
		d := at.Sub(sent)
		lo, hi = min(lo, d), max(hi, d)
		prev = at
	}
	if lo < 40*time.Millisecond || hi > 60*time.Millisecond || hi-lo < 18*time.Millisecond {
		t.Errorf("jittered delays span [%v, %v], want about [40ms, 60ms]", lo, hi)
	}
	prev = time.Time{}
	for i := range 2000 {
		sent := t0.Add(time.Duration(i) * 100 * time.Microsecond) // back to back
		at, _ := s.arrival(sent, 100, prev, 0)
		if at.Before(prev) {
			t.Fatalf("chunk %d overtakes the one before it", i)
		}
		prev = at
	}
}

func TestRecoveryDelay(t *testing.T) {
	for _, tc := range []struct {
		segs int
		rtt  time.Duration
		want time.Duration
	}{
		{10, 100 * time.Millisecond, 100 * time.Millisecond}, // fast retransmit
		{1, 100 * time.Millisecond, 200 * time.Millisecond},  // tail loss probe
		{1, time.Millisecond, tlpFloor},
		{4, 0, 0},
	} {
		if got := recoveryDelay(tc.segs, tc.rtt); got != tc.want {
			t.Errorf("recoveryDelay(%d, %v) = %v, want %v", tc.segs, tc.rtt, got, tc.want)
		}
	}
}

// With loss, some chunks pay a recovery delay, in proportion to Loss and the
// chunk's segment count.
func TestArrivalLoss(t *testing.T) {
	s := newShaper(LinkConfig{Delay: 10 * time.Millisecond, Loss: 0.1})
	lost := 0
	const n = 10000
	for i := range n {
		sent := t0.Add(time.Duration(i) * time.Second)
		at, l := s.arrival(sent, segmentSize, time.Time{}, 20*time.Millisecond)
		if l {
			lost++
			if d := at.Sub(sent); d != 10*time.Millisecond+40*time.Millisecond {
				t.Fatalf("lost single segment arrives after %v, want 50ms (delay + 2 RTT)", d)
			}
		}
	}
	if lost < n*8/100 || lost > n*12/100 {
		t.Errorf("%d of %d single-segment chunks lost at Loss=0.1", lost, n)
	}
}
