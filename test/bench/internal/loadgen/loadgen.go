package loadgen

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// Put writes one key; worker says which writer calls it (0..inflight-1), so
// a caller can spread writers over several connections.
type Put func(ctx context.Context, worker int, key string, value []byte) error

// Result is what one run measured.
type Result struct {
	// Lat holds the latency of every write completed in the window.
	Lat []time.Duration
	// Errors counts failed writes; FirstError is the first of them.
	Errors     int
	FirstError error
}

// maxErrors stops a writer that keeps failing.
const maxErrors = 1000

// ClosedLoop runs inflight writers of valueBytes-byte random values for warm
// plus dur. Writers still busy after the window are waited for at most 15 s
// more; their writes do not count.
func ClosedLoop(ctx context.Context, inflight, valueBytes int, warm, dur time.Duration, put Put) Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+dur)
	var mu sync.Mutex
	var res Result
	var wg sync.WaitGroup
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := make([]byte, valueBytes)
			_, _ = rand.Read(value)
			var lat []time.Duration
			for i := 0; ; i++ {
				t0 := time.Now()
				if t0.After(to) || ctx.Err() != nil {
					break
				}
				err := put(ctx, w, fmt.Sprintf("bench/%03d/%05d", w, i%10000), value)
				t1 := time.Now()
				if err != nil {
					mu.Lock()
					res.Errors++
					if res.FirstError == nil {
						res.FirstError = err
					}
					n := res.Errors
					mu.Unlock()
					if n > maxErrors {
						break
					}
					continue
				}
				if t1.After(from) && !t1.After(to) {
					lat = append(lat, t1.Sub(t0))
				}
			}
			mu.Lock()
			res.Lat = append(res.Lat, lat...)
			mu.Unlock()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(warm + dur + 15*time.Second):
		cancel()
		<-done
	}
	return res
}
