package pubsub

import (
	"context"
	"testing"
	"time"
)

// TestRequestTimeoutWithinCallDeadline: a publish waits for the request's
// timeout even when the call has a later deadline (a client's gRPC
// deadline holds a grace beyond it); without a request timeout it waits
// for the call's deadline, and without either for the default.
func TestRequestTimeoutWithinCallDeadline(t *testing.T) {
	b := &Broker{cfg: Config{DefaultTimeout: 30 * time.Second}}
	call, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	callEnd, _ := call.Deadline()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		timeout time.Duration
		within  time.Duration // the wait ends no later than this from now
		after   time.Time     // and no earlier than this
	}{
		{"request timeout inside the call's deadline", call, 3 * time.Second, 3 * time.Second, time.Now().Add(2 * time.Second)},
		{"no request timeout: the call's deadline", call, 0, time.Hour, callEnd},
		{"neither: the default", context.Background(), 0, 30 * time.Second, time.Now().Add(29 * time.Second)},
	} {
		ctx, stop := b.withTimeout(tc.ctx, tc.timeout)
		end, ok := ctx.Deadline()
		limit := time.Now().Add(tc.within)
		stop()
		if !ok || end.After(limit) || end.Before(tc.after) {
			t.Errorf("%s: the wait ends at %v, want between %v and %v", tc.name, end, tc.after, limit)
		}
	}
}
