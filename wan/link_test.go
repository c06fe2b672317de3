package wan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

// Changing a link applies to the traffic flowing through it.
func TestSetWhileFlowing(t *testing.T) {
	t.Parallel()
	n := newTestNetwork(t, Config{})
	ab := pair(t, n, LinkConfig{Delay: 10 * time.Millisecond})
	p, err := ab.Proxy(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if d := measureRTT(t, c, 5); d < 20*time.Millisecond-time.Millisecond || d > 20*time.Millisecond+20*time.Millisecond {
		t.Fatalf("RTT %v, want 20ms", d)
	}
	if err := ab.Set(LinkConfig{Delay: 60 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := ab.Config().Delay; got != 60*time.Millisecond {
		t.Fatalf("Config().Delay = %v", got)
	}
	// Only one direction changed: 60 + 10.
	if d := measureRTT(t, c, 5); d < 70*time.Millisecond-time.Millisecond || d > 70*time.Millisecond+20*time.Millisecond {
		t.Fatalf("RTT after Set %v, want 70ms", d)
	}
}

// Jitter never reorders or corrupts a stream.
func TestJitterKeepsStreamIntact(t *testing.T) {
	t.Parallel()
	n := newTestNetwork(t, Config{Seed: 7})
	ab := pair(t, n, LinkConfig{Delay: 5 * time.Millisecond, Jitter: 4 * time.Millisecond, Bandwidth: 50 * MBPerSecond})
	p, err := ab.Proxy(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	echoStream(t, dial(t, p.Addr()), 2<<20)
}

// echoStream sends size random bytes in uneven writes while reading the echo
// back, and checks every byte.
func echoStream(t *testing.T, c net.Conn, size int) {
	t.Helper()
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(40000))
			if _, err := c.Write(rest[:k]); err != nil {
				return
			}
			rest = rest[k:]
		}
	}()
	got := readFull(t, c, size, 30*time.Second)
	wg.Wait()
	if !bytes.Equal(got, data) {
		t.Fatal("stream came back corrupted or reordered")
	}
}

// Loss costs time, never bytes; metrics count what crossed.
func TestLossKeepsStreamIntact(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	n := newTestNetwork(t, Config{Registerer: reg, Seed: 3})
	ab := pair(t, n, LinkConfig{Delay: 2 * time.Millisecond, Loss: 0.02})
	p, err := ab.Proxy(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	echoStream(t, c, 1<<20)
	lost := testutil.ToFloat64(n.metrics.lost.WithLabelValues("a", "b"))
	if lost == 0 {
		t.Error("no segment lost at Loss=0.02 over 1 MiB")
	}
	sent := testutil.ToFloat64(n.metrics.sent.WithLabelValues("a", "b"))
	// The last write's count lands just after the bytes did: poll.
	var delivered float64
	testhelp.Eventually(t, 5*time.Second, func() error {
		if delivered = testutil.ToFloat64(n.metrics.delivered.WithLabelValues("b", "a")); delivered != 1<<20 {
			return fmt.Errorf("delivered b->a %v, want %d", delivered, 1<<20)
		}
		return nil
	})
	if sent != 1<<20 || delivered != 1<<20 {
		t.Errorf("sent a->b %v, delivered b->a %v, want %d each", sent, delivered, 1<<20)
	}
	if got := testutil.ToFloat64(n.metrics.conns.WithLabelValues("a", "b")); got != 1 {
		t.Errorf("wan_connections = %v, want 1", got)
	}
	if got := testutil.ToFloat64(n.metrics.delay.WithLabelValues("b", "a")); got != 0.002 {
		t.Errorf("wan_link_delay_seconds = %v", got)
	}
	ab.Cut()
	if got := testutil.ToFloat64(n.metrics.cut.WithLabelValues("a", "b")); got != 1 {
		t.Errorf("wan_link_cut = %v, want 1", got)
	}
	ab.Restore()
	if _, err := NewNetwork(Config{Registerer: reg}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}

// A FIN crosses the link like data; the other direction stays open.
func TestHalfClose(t *testing.T) {
	t.Parallel()
	const delay = 10 * time.Millisecond
	n := newTestNetwork(t, Config{})
	ab := pair(t, n, LinkConfig{Delay: delay})
	target := startServer(t, func(c net.Conn) {
		got, _ := io.ReadAll(c) // until the client's FIN
		_, _ = c.Write([]byte("got " + string(got)))
	})
	p, err := ab.Proxy(target)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	start := time.Now()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "got hello" {
		t.Errorf("reply %q", got)
	}
	if took := time.Since(start); took < 2*delay {
		t.Errorf("reply and FIN came back after %v, before a round trip", took)
	}
}

// A target that refuses shows up as a reset, a round trip later.
func TestTargetRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const delay = 10 * time.Millisecond
	n := newTestNetwork(t, Config{})
	ab := pair(t, n, LinkConfig{Delay: delay})
	p, err := ab.Proxy(closed)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy's round trip begins when it accepts, which may be before
	// the dial returns here: time it from before the dial.
	start := time.Now()
	c := dial(t, p.Addr())
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read from a proxy to a closed port: %v, want a reset", err)
	}
	if took := time.Since(start); took < 2*delay-time.Millisecond {
		t.Errorf("refusal seen after %v, before a round trip", took)
	}
}

// Closing the network while bytes are held by a cut resets everything and
// leaves no goroutine behind (TestMain checks).
func TestCloseWhileCut(t *testing.T) {
	t.Parallel()
	n := newTestNetwork(t, Config{MaxHeld: 64 << 10})
	ab := pair(t, n, LinkConfig{Delay: 5 * time.Millisecond})
	p, err := ab.Proxy(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	roundTrip(t, c)
	ab.Cut()
	// More than MaxHeld: the writer ends up blocked, as behind a full window.
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 8<<20))
		wrote <- err
	}()
	expectSilence(t, c, 100*time.Millisecond)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err == nil {
		t.Error("8 MiB write into a cut link completed")
	}
	if _, err := ab.Proxy("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("Proxy after Close: %v, want ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNetworkErrors(t *testing.T) {
	topo, err := Preset("ec2-3")
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNetwork(t, Config{Topology: topo})
	if _, err := n.Link("us-east-1", "us-east-1"); err == nil {
		t.Error("a link from a site to itself")
	}
	if _, err := n.Link("us-east-1", "eu-wst-1"); !errors.Is(err, ErrUnknownSite) || !strings.Contains(err.Error(), "known: us-east-1, eu-west-1, ap-northeast-1") {
		t.Errorf("unknown site: %v", err)
	}
	l, err := n.Link("us-east-1", "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Config().Delay; got != 34850*time.Microsecond {
		t.Errorf("link from topology has delay %v, want 34.85ms", got)
	}
	if l.Reverse().Reverse() != l || l.Reverse().From() != "eu-west-1" {
		t.Error("Reverse is not the other direction")
	}
	err = l.Set(LinkConfig{Delay: -1, Loss: 1})
	if err == nil || !strings.Contains(err.Error(), "Delay: -1ns") || !strings.Contains(err.Error(), "Loss: 1 ") {
		t.Errorf("Set with bad values: %v", err)
	}
	if _, err := NewNetwork(Config{MaxHeld: -1}); err == nil {
		t.Error("negative MaxHeld accepted")
	}
	if err := n.Register("mars-1", "127.0.0.1:1"); !errors.Is(err, ErrUnknownSite) {
		t.Errorf("Register on unknown site: %v", err)
	}
	if got := len(n.Links()); got != 2 {
		t.Errorf("Links() has %d links, want 2", got)
	}
}

// After a cut, held bytes are retransmitted at the link's rate, not in one
// burst, and the held-bytes gauge returns to zero.
func TestRestorePacesHeldBytes(t *testing.T) {
	t.Parallel()
	const (
		size = 1 << 20
		rate = 10 * MBPerSecond
	)
	n := newTestNetwork(t, Config{Registerer: prometheus.NewRegistry()})
	ab := pair(t, n, LinkConfig{Delay: 5 * time.Millisecond, Bandwidth: rate})
	all := make(chan time.Time, 1)
	sink := startServer(t, func(c net.Conn) {
		got, _ := io.ReadFull(c, make([]byte, size))
		if got == size {
			all <- time.Now()
		}
		_, _ = io.Copy(io.Discard, c)
	})
	p, err := ab.Proxy(sink)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	ab.Cut()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	// Wait (with a deadline) until the link holds all of it.
	held := n.metrics.held.WithLabelValues("a", "b")
	testhelp.Eventually(t, 10*time.Second, func() error {
		if h := testutil.ToFloat64(held); h < size {
			return fmt.Errorf("link holds %v bytes, want %d", h, size)
		}
		return nil
	})
	ab.Restore()
	restored := ab.state().restoredAt
	var done time.Time
	select {
	case done = <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("held bytes never arrived")
	}
	took := done.Sub(restored)
	want := rate.transmit(size)
	t.Logf("1 MiB held by a cut arrived %v after restore (at 10 MB/s: %v)", took, want)
	if took < want-10*time.Millisecond {
		t.Errorf("held bytes arrived %v after restore, faster than the link's rate allows (%v)", took, want)
	}
	testhelp.Eventually(t, 5*time.Second, func() error {
		if h := testutil.ToFloat64(held); h != 0 {
			return fmt.Errorf("wan_held_bytes = %v after delivery, want 0", h)
		}
		return nil
	})
}

// A connection that goes on writing small messages through a long cut and
// after it must get its backlog within about a delay of the restore: the
// held chunks are retransmitted back to back, not each one a delay after
// the previous (which took a gRPC stream of small frames, written every
// millisecond through a 13 s cut, minutes to drain).
func TestRestoreDrainsBacklogWhileSenderWrites(t *testing.T) {
	t.Parallel()
	const (
		delay = 20 * time.Millisecond
		msg   = 100
		held  = 100 // messages written during the cut
	)
	n := newTestNetwork(t, Config{})
	ab := pair(t, n, LinkConfig{Delay: delay, Bandwidth: 100 * MBPerSecond})
	all := make(chan time.Time, 1)
	sink := startServer(t, func(c net.Conn) {
		got, _ := io.ReadFull(c, make([]byte, held*msg))
		if got == held*msg {
			all <- time.Now()
		}
		_, _ = io.Copy(io.Discard, c)
	})
	p, err := ab.Proxy(sink)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	ab.Cut()
	for range held {
		if _, err := c.Write(make([]byte, msg)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // one chunk each
	}
	ab.Restore()
	restored := ab.state().restoredAt
	stop := make(chan struct{})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := c.Write(make([]byte, msg)); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-writing }()
	var done time.Time
	select {
	case done = <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("held bytes never arrived")
	}
	took := done.Sub(restored)
	t.Logf("%d messages held by a cut arrived %v after restore (delay %v)", held, took, delay)
	if took > 10*delay {
		t.Errorf("held bytes arrived %v after restore, want about one delay (%v)", took, delay)
	}
}
