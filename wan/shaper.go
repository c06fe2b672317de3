package wan

import (
	"math"
	"math/rand/v2"
	"time"
)

const (
	// segmentSize is the TCP payload per packet on a 1500-byte MTU path
	// with timestamps; loss is drawn per segment.
	segmentSize = 1448
	// chunkTime is how long one chunk may occupy a bandwidth-limited link.
	// Chunks are read from the sender at most this size so that a small
	// message on another connection never queues behind much more than
	// this at the shared bandwidth limit.
	chunkTime = time.Millisecond
	// maxChunk caps a chunk on fast or unlimited links.
	maxChunk = 64 << 10
	// burstWindow is the token bucket's depth in time at the link's rate:
	// an idle link accepts this much at once, and a reader that wakes late
	// catches up instead of losing rate.
	burstWindow = 5 * time.Millisecond
	// backlogWindow bounds how far a backlogged sender's bytes may be
	// dated back to keep the link's rate when the reader ran late (a
	// host that stalls the emulator for longer loses rate).
	backlogWindow = time.Second
	// tlpFloor is Linux's lower bound on the tail loss probe timeout.
	tlpFloor = 10 * time.Millisecond
)

// chunkSize is the most bytes to read at once for a link of rate b.
func (b Bandwidth) chunkSize() int {
	if b <= 0 {
		return maxChunk
	}
	n := int(float64(b) * chunkTime.Seconds())
	return min(max(n, segmentSize), maxChunk)
}

// shaper is one directed link's schedule: a token bucket for bandwidth and
// the draws for jitter and loss. It reads no clock and does no I/O: callers
// pass the time, so it can be tested with made-up instants. It is not safe
// for concurrent use; Link guards it with its mutex.
type shaper struct {
	cfg LinkConfig
	// txFree is when the bandwidth limit has finished sending every byte
	// accepted so far (a virtual clock; it may lag behind now when idle).
	txFree time.Time
	rng    *rand.Rand
}

// admit books n bytes offered at now on the bandwidth limit and returns the
// time the last of them has been sent: done on the link's virtual clock,
// and sent, the same but never before now. Booking by virtual time rather than
// by sleeping per chunk keeps the long-run rate exact even though the
// caller's timers wake late: bytes are dated as if the caller had been on
// time. How far back that may reach depends on why the link had nothing
// to send. If the sender was idle, the bucket has saved up at most
// burstWindow of tokens, as any token bucket. If the sender was backlogged
// since its previous chunk was done at backlogSince (bytes were left
// unread: only the reader's wake-up was late, typically on a busy host),
// the link was never idle for it, and the bytes may continue from then, up
// to backlogWindow back. backlogSince is zero for a sender that was not
// backlogged or has sent nothing yet.
func (s *shaper) admit(now time.Time, n int, backlogSince time.Time) (sent, done time.Time) {
	bw := s.cfg.Bandwidth
	if bw <= 0 {
		return now, now
	}
	floor := now.Add(-max(burstWindow, bw.transmit(bw.chunkSize())))
	if !backlogSince.IsZero() && backlogSince.Before(floor) {
		floor = latest(backlogSince, now.Add(-backlogWindow))
	}
	start := latest(s.txFree, floor)
	done = start.Add(bw.transmit(n))
	s.txFree = done
	return latest(done, now), done
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// arrival returns when n bytes sent at sent reach the far end, and whether
// a segment among them was lost. prev is the arrival of the previous chunk
// of the same connection: a TCP stream is delivered in order, so a chunk
// never overtakes it. rtt is the path's round trip, which prices a loss.
func (s *shaper) arrival(sent time.Time, n int, prev time.Time, rtt time.Duration) (time.Time, bool) {
	d := s.cfg.Delay
	if j := s.cfg.Jitter; j > 0 {
		d += time.Duration(s.rng.Int64N(int64(2*j)+1)) - j
		d = max(d, 0)
	}
	lost := false
	if p := s.cfg.Loss; p > 0 {
		segs := (n + segmentSize - 1) / segmentSize
		if s.rng.Float64() < 1-math.Pow(1-p, float64(segs)) {
			lost = true
			d += recoveryDelay(segs, rtt)
		}
	}
	at := sent.Add(d)
	if at.Before(prev) {
		at = prev
	}
	return at, lost
}

// recoveryDelay is the extra time a lost segment costs. With at least three
// segments behind it (here: in the same chunk) the receiver's duplicate
// acks trigger a fast retransmit one round trip later. A lone or tail
// segment waits for the tail loss probe, about two round trips (never less
// than Linux's 10 ms floor). Several losses in one chunk are recovered
// together (SACK), so a chunk pays at most once.
func recoveryDelay(segs int, rtt time.Duration) time.Duration {
	if segs >= 4 {
		return rtt
	}
	return max(2*rtt, tlpFloor)
}
