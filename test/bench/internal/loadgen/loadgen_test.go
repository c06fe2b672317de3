package loadgen

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestClosedLoopCountsOnlyTheWindow(t *testing.T) {
	var calls atomic.Int64
	res := ClosedLoop(context.Background(), 4, 16, 20*time.Millisecond, 50*time.Millisecond,
		func(ctx context.Context, w int, key string, value []byte) error {
			if len(value) != 16 || w < 0 || w > 3 {
				t.Errorf("worker %d, value of %d bytes", w, len(value))
			}
			calls.Add(1)
			time.Sleep(time.Millisecond)
			if calls.Load()%10 == 0 {
				return errors.New("every tenth fails")
			}
			return nil
		})
	if len(res.Lat) == 0 || int64(len(res.Lat)+res.Errors) >= calls.Load() {
		t.Fatalf("%d counted, %d errors, %d calls: warm-up writes must not count", len(res.Lat), res.Errors, calls.Load())
	}
	if res.Errors == 0 || res.FirstError == nil {
		t.Fatalf("errors not counted: %+v", res.Errors)
	}
}
