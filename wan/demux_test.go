package wan

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialFrom dials addr from the loopback address src, skipping the test
// where the system cannot bind it (only Linux routes all of 127/8 to lo).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		if strings.Contains(err.Error(), "assign requested address") {
			t.Skipf("cannot dial from %s here: %v", src, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectReset checks that c is closed by the far side (EOF or reset), not
// merely silent.
func expectReset(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read: %v, want the connection closed", err)
	}
}

// expectTurnedAway checks that a connection from src is reset, whether
// the reset comes during the dial or after it.
func expectTurnedAway(t *testing.T, src, addr string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		if strings.Contains(err.Error(), "assign requested address") {
			t.Skipf("cannot dial from %s here: %v", src, err)
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial from %s: %v, want it accepted then reset, or reset", src, err)
		}
		return
	}
	defer c.Close()
	expectReset(t, c)
}

// TestDemux: one listening address, two source sites. Each connection
// travels on its own source's link (told apart by round trip, and by a cut
// of one link that silences only that source), pays a handshake first, and
// an unknown source is turned away.
func TestDemux(t *testing.T) {
	t.Parallel()
	const delayA, delayB = 5 * time.Millisecond, 50 * time.Millisecond
	n := newTestNetwork(t, Config{})
	for from, delay := range map[string]time.Duration{"a": delayA, "b": delayB} {
		l, err := n.Link(from, "c")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*Link{l, l.Reverse()} {
			if err := x.Set(LinkConfig{Delay: delay}); err != nil {
				t.Fatal(err)
			}
		}
	}
	echo := startEcho(t)
	d, err := n.Demux(DemuxConfig{To: "c", Target: echo, Sources: map[string]string{"127.0.0.1": "a", "127.0.0.2": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.To() != "c" || d.Target() != echo || !strings.HasPrefix(d.Addr(), "127.0.0.1:") {
		t.Fatalf("demux to %s at %s, target %s", d.To(), d.Addr(), d.Target())
	}

	// The first message waits for the handshake's round trip, which began
	// when the connection was accepted, then makes its own.
	start := time.Now()
	fromA := dialFrom(t, "127.0.0.1", d.Addr())
	roundTrip(t, fromA)
	if took := time.Since(start); took < 4*delayA-time.Millisecond {
		t.Errorf("dial and first round trip from a took %v, want at least handshake and echo %v", took, 4*delayA)
	}
	fromB := dialFrom(t, "127.0.0.2", d.Addr())
	if rt := measureRTT(t, fromA, 7); rt < 2*delayA-time.Millisecond || rt > 2*delayA+50*time.Millisecond {
		t.Errorf("RTT from a %v, want a->c's %v", rt, 2*delayA)
	}
	if rt := measureRTT(t, fromB, 5); rt < 2*delayB-time.Millisecond {
		t.Errorf("RTT from b %v, want b->c's %v", rt, 2*delayB)
	}

	// Cut b->c: a new connection from b waits for it (a SYN being
	// retransmitted), one from a does not.
	bc, err := n.Link("b", "c")
	if err != nil {
		t.Fatal(err)
	}
	bc.Cut()
	cutB := dialFrom(t, "127.0.0.2", d.Addr())
	msg := []byte("across-the-cut")
	if _, err := cutB.Write(msg); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, dialFrom(t, "127.0.0.1", d.Addr()))
	expectSilence(t, cutB, 200*time.Millisecond)
	bc.Restore()
	if got := readFull(t, cutB, len(msg), 5*time.Second); string(got) != string(msg) {
		t.Fatalf("after restore got %q, want %q", got, msg)
	}

	// A source the demux does not know is reset at once: on a busy
	// machine the reset may even beat the end of the dial.
	expectTurnedAway(t, "127.0.0.3", d.Addr())

	// Close resets what is open, and is idempotent.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	expectReset(t, fromA)
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Demux(DemuxConfig{To: "c", Target: echo, Sources: map[string]string{"127.0.0.1": "a"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Demux after Close: %v, want ErrClosed", err)
	}
}

// TestDemuxConfig: every bad field is reported, each with its value.
func TestDemuxConfig(t *testing.T) {
	t.Parallel()
	err := DemuxConfig{To: "c", Sources: map[string]string{"10.0.0.1": "c", "nowhere": ""}}.Validate()
	want := []string{
		`wan: demux: Target: missing`,
		`wan: demux: Sources["10.0.0.1"]: "c" is To, which crosses no link to itself`,
		`wan: demux: Sources["nowhere"]: not an IP address`,
		`wan: demux: Sources["nowhere"]: empty site name`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("Validate:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if err := (DemuxConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "To: missing") || !strings.Contains(err.Error(), "Sources: missing") {
		t.Errorf("Validate of the zero config: %v", err)
	}

	topo, err := Preset("ec2-3")
	if err != nil {
		t.Fatal(err)
	}
	n := newTestNetwork(t, Config{Topology: topo})
	_, err = n.Demux(DemuxConfig{To: "us-east-1", Target: "127.0.0.1:1", Sources: map[string]string{"127.0.0.1": "mars-1"}})
	if !errors.Is(err, ErrUnknownSite) || !strings.Contains(err.Error(), `Sources["127.0.0.1"]`) {
		t.Errorf("Demux from an unknown site: %v, want ErrUnknownSite naming the source", err)
	}
	if _, err := n.Demux(DemuxConfig{Listen: "127.0.0.1:-1", To: "us-east-1", Target: "127.0.0.1:1", Sources: map[string]string{"127.0.0.1": "eu-west-1"}}); err == nil {
		t.Error("Demux on a bad listen address: no error")
	}
}
