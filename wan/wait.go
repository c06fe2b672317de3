package wan

import (
	"runtime"
	"time"
)

const (
	// coarseMargin is how early a Go timer is asked to fire. Go timers
	// wake up to about a millisecond late (the netpoller sleeps in whole
	// milliseconds), which a naive emulator would add to every crossing.
	coarseMargin = 2 * time.Millisecond
	// spinMargin is the last stretch before a deadline that is spent
	// yielding in a loop instead of sleeping.
	spinMargin = 100 * time.Microsecond
)

// waiter sleeps until absolute deadlines with sub-millisecond precision:
// a Go timer for the bulk of the wait, a precise OS sleep (where there is
// one) for the last coarseMargin, and a short yield loop for the final
// spinMargin. Deadlines are absolute so errors never accumulate. A waiter
// belongs to one goroutine.
type waiter struct {
	t *time.Timer
}

// until returns true at deadline, or false as soon as cancel is closed.
func (w *waiter) until(deadline time.Time, cancel <-chan struct{}) bool {
	for {
		d := time.Until(deadline)
		if d <= 0 {
			return true
		}
		select {
		case <-cancel:
			return false
		default:
		}
		switch {
		case d > coarseMargin:
			if !w.sleep(d-coarseMargin, cancel) {
				return false
			}
		case d > spinMargin && fineSleep(d-spinMargin):
		default:
			runtime.Gosched()
		}
	}
}

// coarse waits until about deadline (late by timer slack, never early).
// It is for pacing, where lateness is absorbed by the token bucket.
func (w *waiter) coarse(deadline time.Time, cancel <-chan struct{}) bool {
	if d := time.Until(deadline); d > 0 {
		return w.sleep(d, cancel)
	}
	return true
}

func (w *waiter) sleep(d time.Duration, cancel <-chan struct{}) bool {
	if w.t == nil {
		w.t = time.NewTimer(d)
	} else {
		w.t.Reset(d)
	}
	select {
	case <-w.t.C:
		return true
	case <-cancel:
		w.t.Stop()
		return false
	}
}
