package transport

import (
	"net"
	"testing"
	"time"
)

// echo is a Handler that sends every frame back to its sender, or, at the
// measuring end, signals its arrival.
type echo struct {
	t   *Transport
	got chan struct{}
}

func (e *echo) Frame(peer string, plane Plane, f []byte) {
	if e.got != nil {
		e.got <- struct{}{}
		return
	}
	_ = e.t.TrySend(peer, plane, f)
}
func (*echo) Up(string, Plane)          {}
func (*echo) Down(string, Plane, error) {}

// echoPair starts a, which signals each frame it gets on the returned
// channel, and b, which echoes, and waits until a's data session is up.
func echoPair(b *testing.B) (*Transport, chan struct{}) {
	c := &cluster{tb: b, names: []string{"a", "b"}}
	start := func(name string, h *echo) *Transport {
		var lis []net.Listener
		for _, p := range Planes {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			c.dir.set(name+"/"+p.String(), l.Addr().String())
			lis = append(lis, l)
		}
		cfg := c.config(name, lis...)
		cfg.Logger = nil
		tr, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h.t = tr
		if err := tr.Start(h); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	ha := &echo{got: make(chan struct{}, 1)}
	a := start("a", ha)
	bt := start("b", &echo{})
	eventually(b, "up", func() bool {
		return a.Status("b", Data).Connected && bt.Status("a", Data).Connected
	})
	return a, ha.got
}

// BenchmarkFrameRoundTrip measures one 300-byte frame to a peer and back on
// loopback, one at a time: the transport's latency, not its throughput.
func BenchmarkFrameRoundTrip(b *testing.B) {
	a, got := echoPair(b)
	f := make([]byte, 300)
	for b.Loop() {
		for a.TrySend("b", Data, f) != nil {
		}
		<-got
	}
}

// BenchmarkFrameRoundTripIdle is BenchmarkFrameRoundTrip with 2ms of
// quiet before each frame, as between the writes of a lightly loaded
// site: its threads are parked when the frame comes. It reports the round
// trip alone (rtt-us): 107-154 µs here, against 25-36 µs back to back.
func BenchmarkFrameRoundTripIdle(b *testing.B) {
	a, got := echoPair(b)
	f := make([]byte, 300)
	var total time.Duration
	for b.Loop() {
		time.Sleep(2 * time.Millisecond) // the quiet being measured, not synchronisation
		t0 := time.Now()
		for a.TrySend("b", Data, f) != nil {
		}
		<-got
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "rtt-us")
}
