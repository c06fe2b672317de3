package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// counter is a Handler that only counts, so the benchmark measures the
// transport.
type counter struct {
	frames [2]atomic.Int64
	bytes  [2]atomic.Int64
	// control, if set, receives the arrival time of each control frame.
	control chan time.Time
}

func (c *counter) Frame(_ string, plane Plane, f []byte) {
	c.frames[plane].Add(1)
	c.bytes[plane].Add(int64(len(f)))
	if plane == Control && c.control != nil {
		c.control <- time.Now()
	}
}
func (c *counter) Up(string, Plane)          {}
func (c *counter) Down(string, Plane, error) {}

// benchPair starts a and b on loopback with quiet logs; b's handler is h.
func benchPair(b *testing.B, h Handler) *Transport {
	a, _ := benchPairWith(b, &counter{}, h)
	return a
}

// benchPairWith starts a and b on loopback with quiet logs and the given
// handlers, and returns them once a's sessions to b are up.
func benchPairWith(b *testing.B, ha, hb Handler) (*Transport, *Transport) {
	c := &cluster{tb: b, names: []string{"a", "b"}}
	c.mutate = func(name string, cfg *Config) { cfg.Logger = hclog.NewNullLogger() }
	start := func(name string, h Handler) *Transport {
		var lis []net.Listener
		for _, p := range Planes {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			c.dir.Set(name+"/"+p.String(), l.Addr().String())
			lis = append(lis, l)
		}
		tr, err := New(c.config(name, lis...))
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.Start(h); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	a := start("a", ha)
	bt := start("b", hb)
	eventually(b, "a and b connected", func() bool {
		return a.Status("b", Data).Connected && a.Status("b", Control).Connected && bt.Status("a", Data).Connected
	})
	return a, bt
}

// BenchmarkSend measures one peer's data plane: a sends b.N frames to b,
// which counts them; reported per peer as frames/s and MB/s.
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{256, 64 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			h := &counter{}
			a := benchPair(b, h)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				// A fresh frame each time: Send takes ownership.
				if err := a.Send(ctx, "b", Data, make([]byte, size)); err != nil {
					b.Fatal(err)
				}
			}
			for h.frames[Data].Load() < int64(b.N) {
				time.Sleep(100 * time.Microsecond)
			}
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "frames/s")
			b.ReportMetric(float64(b.N)*float64(size)/el/1e6, "MB/s")
		})
	}
}

// BenchmarkControlLatencyUnderDataLoad saturates a's data plane to b with
// 64 KiB frames and measures how long control frames take from Send to b's
// handler, one at a time; reports p50 and p99 in microseconds.
func BenchmarkControlLatencyUnderDataLoad(b *testing.B) {
	for _, load := range []bool{false, true} {
		b.Run(fmt.Sprintf("dataload=%v", load), func(b *testing.B) {
			h := &counter{control: make(chan time.Time, 1)}
			a := benchPair(b, h)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if load {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						if err := a.Send(ctx, "b", Data, make([]byte, 64<<10)); err != nil && !errors.Is(err, context.Canceled) {
							b.Error(err)
							return
						}
					}
				}()
				// Let the data plane fill up before measuring.
				eventually(b, "64 MiB of data received", func() bool { return h.bytes[Data].Load() >= 64<<20 })
			}
			lat := make([]time.Duration, 0, b.N)
			dataBefore := h.bytes[Data].Load()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := a.Send(context.Background(), "b", Control, []byte("acks")); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-h.control).Sub(t0))
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			cancel()
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(h.bytes[Data].Load()-dataBefore)/el/1e6, "data-MB/s")
		})
	}
}
