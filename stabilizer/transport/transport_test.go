package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest/testhelp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type event struct {
	kind  string // up, down, in-up, in-down
	peer  string
	plane Plane
	err   error
}

// recorder is a Handler that keeps everything it is told.
type recorder struct {
	mu     sync.Mutex
	frames map[planeKey][][]byte
	events []event
	// gate, if set for a plane, is waited on before each of its frames.
	gate map[Plane]chan struct{}
}

func newRecorder() *recorder {
	return &recorder{frames: make(map[planeKey][][]byte), gate: make(map[Plane]chan struct{})}
}

func (r *recorder) Frame(peer string, plane Plane, f []byte) {
	r.mu.Lock()
	g := r.gate[plane]
	r.mu.Unlock()
	if g != nil {
		<-g
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := planeKey{peer, plane}
	r.frames[k] = append(r.frames[k], f)
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Up(peer string, plane Plane)              { r.add(event{"up", peer, plane, nil}) }
func (r *recorder) Down(peer string, plane Plane, err error) { r.add(event{"down", peer, plane, err}) }
func (r *recorder) InboundUp(peer string, plane Plane)       { r.add(event{"in-up", peer, plane, nil}) }
func (r *recorder) InboundDown(peer string, plane Plane, err error) {
	r.add(event{"in-down", peer, plane, err})
}

func (r *recorder) count(peer string, plane Plane) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames[planeKey{peer, plane}])
}

func (r *recorder) got(peer string, plane Plane) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.frames[planeKey{peer, plane}]...)
}

func (r *recorder) countEvents(kind, peer string, plane Plane) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.kind == kind && e.peer == peer && e.plane == plane {
			n++
		}
	}
	return n
}

// eventually polls cond with testhelp.Eventually until it holds, for at
// most 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testhelp.Eventually(t, 10*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

// site is one transport under test.
type site struct {
	name string
	t    *Transport
	rec  *recorder
}

type cluster struct {
	tb    testing.TB
	dir   testhelp.Directory
	names []string
	// mutate, if set, adjusts a site's config before New.
	mutate func(name string, c *Config)
}

func (c *cluster) config(name string, lis ...net.Listener) Config {
	peers := make(map[string]PeerAddr)
	for _, n := range c.names {
		peers[n] = PeerAddr{Data: n + "/data", Control: n + "/control"}
	}
	cfg := Config{
		Cluster:    "test",
		Site:       name,
		Peers:      peers,
		Listeners:  lis,
		Dialer:     c.dir.Dial,
		Insecure:   true,
		BackoffMin: 5 * time.Millisecond,
		BackoffMax: 50 * time.Millisecond,
		Logger:     testhelp.Logger(c.tb, "transport."+name),
	}
	if c.mutate != nil {
		c.mutate(name, &cfg)
	}
	return cfg
}

// start starts site name with fresh listeners registered in the directory.
func (c *cluster) start(name string) *site {
	c.tb.Helper()
	var lis []net.Listener
	for _, p := range Planes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.tb.Fatal(err)
		}
		c.dir.Set(name+"/"+p.String(), l.Addr().String())
		lis = append(lis, l)
	}
	tr, err := New(c.config(name, lis...))
	if err != nil {
		c.tb.Fatal(err)
	}
	s := &site{name: name, t: tr, rec: newRecorder()}
	if err := tr.Start(s.rec); err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { _ = tr.Close() })
	return s
}

func waitUp(tb testing.TB, s *site, peers ...string) {
	tb.Helper()
	for _, p := range peers {
		for _, pl := range Planes {
			eventually(tb, fmt.Sprintf("%s -> %s %s up", s.name, p, pl), func() bool {
				return s.t.Status(p, pl).Connected
			})
		}
	}
}

// frame encodes (from, to, plane, i) and pads it to size.
func frame(from, to string, plane Plane, i, size int) []byte {
	hdr := fmt.Sprintf("%s>%s/%s#%d;", from, to, plane, i)
	f := make([]byte, max(size, len(hdr)))
	copy(f, hdr)
	for j := len(hdr); j < len(f); j++ {
		f[j] = byte(i + j)
	}
	return f
}

func sizeOf(i int) int {
	switch i % 50 {
	case 0:
		return 1 << 20
	case 1:
		return 0
	case 2:
		return 70 << 10
	}
	return 10 + i%300
}

func TestThreeSitesExchangeFramesInOrderOnBothPlanes(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a", "b", "c"}}
	sites := []*site{c.start("a"), c.start("b"), c.start("c")}
	for _, s := range sites {
		var others []string
		for _, o := range sites {
			if o != s {
				others = append(others, o.name)
			}
		}
		waitUp(t, s, others...)
		if got := s.t.Peers(); len(got) != 2 {
			t.Fatalf("%s peers %v", s.name, got)
		}
	}
	const n = 400
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, s := range sites {
		for _, o := range sites {
			if o == s {
				continue
			}
			for _, pl := range Planes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < n; i++ {
						if err := s.t.Send(ctx, o.name, pl, frame(s.name, o.name, pl, i, sizeOf(i))); err != nil {
							t.Errorf("send %s->%s %s #%d: %v", s.name, o.name, pl, i, err)
							return
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	for _, s := range sites {
		for _, o := range sites {
			if o == s {
				continue
			}
			for _, pl := range Planes {
				eventually(t, fmt.Sprintf("%s receives %d from %s on %s", o.name, n, s.name, pl), func() bool {
					return o.rec.count(s.name, pl) >= n
				})
				got := o.rec.got(s.name, pl)
				if len(got) != n {
					t.Fatalf("%s got %d frames from %s on %s, want %d", o.name, len(got), s.name, pl, n)
				}
				for i, f := range got {
					if want := frame(s.name, o.name, pl, i, sizeOf(i)); !bytes.Equal(f, want) {
						t.Fatalf("%s from %s on %s: frame %d differs (%d bytes, want %d)", o.name, s.name, pl, i, len(f), len(want))
					}
				}
				if k := o.rec.countEvents("in-up", s.name, pl); k != 1 {
					t.Errorf("%s saw %d inbound sessions from %s on %s", o.name, k, s.name, pl)
				}
			}
		}
	}
}

func TestReconnectAfterPeerRestart(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a", "b"}}
	a, b := c.start("a"), c.start("b")
	waitUp(t, a, "b")
	// b's own sessions to a must be up too before b stops, or a counts
	// one inbound session from b less than the check at the end expects.
	waitUp(t, b, "a")
	eventually(t, "a sees b's inbound session", func() bool { return a.rec.countEvents("in-up", "b", Control) == 1 })
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if err := a.t.Send(ctx, "b", Data, frame("a", "b", Data, i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "first frames", func() bool { return b.rec.count("a", Data) == 10 })

	// Stop b: a must notice on both planes although it sends nothing.
	if err := b.t.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pl := range Planes {
		eventually(t, "down "+pl.String(), func() bool { return a.rec.countEvents("down", "b", pl) == 1 })
	}
	if err := a.t.Send(ctx, "b", Data, []byte("lost")); !errors.Is(err, ErrNotConnected) {
		t.Errorf("send while down: %v, want ErrNotConnected", err)
	}
	if st := a.t.Status("b", Data); st.Connected || st.LastError == nil {
		t.Errorf("status while down: %+v", st)
	}

	// Restart b on new ports under the same names.
	b2 := c.start("b")
	waitUp(t, a, "b")
	if a.rec.countEvents("up", "b", Data) != 2 || a.rec.countEvents("down", "b", Data) != 1 {
		t.Errorf("events: %+v", a.rec.events)
	}
	if st := a.t.Status("b", Data); st.Sessions != 2 || st.LastError != nil {
		t.Errorf("status after reconnect: %+v", st)
	}
	for i := 10; i < 20; i++ {
		if err := a.t.Send(ctx, "b", Data, frame("a", "b", Data, i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "frames after reconnect", func() bool { return b2.rec.count("a", Data) == 10 })
	for i, f := range b2.rec.got("a", Data) {
		if !bytes.Equal(f, frame("a", "b", Data, 10+i, 100)) {
			t.Fatalf("frame %d after reconnect differs", i)
		}
	}
	// And the other way: b2 reached a, whose inbound session from b is new.
	waitUp(t, b2, "a")
	eventually(t, "a sees b's new inbound session", func() bool { return a.rec.countEvents("in-up", "b", Control) == 2 })
}

// leakyConn, once frozen, drops what is written and does not close its
// socket on Close, as when a site dies without anything more reaching the
// peer: the peer keeps the old stream open.
type leakyConn struct {
	net.Conn
	leaked *[]net.Conn
	mu     *sync.Mutex
	frozen *atomic.Bool
}

func (c leakyConn) Write(p []byte) (int, error) {
	if c.frozen.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c leakyConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.leaked = append(*c.leaked, c.Conn)
	// Unblock our reader without closing the socket.
	return c.Conn.SetReadDeadline(time.Now())
}

// TestInboundSessionReplacedByNewer restarts a while b still holds a's old
// streams open (their sockets are never closed): b must replace the old
// inbound sessions by the new ones, ending each old one before the new one
// delivers.
func TestInboundSessionReplacedByNewer(t *testing.T) {
	var mu sync.Mutex
	var leaked []net.Conn
	var frozen atomic.Bool
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range leaked {
			c.Close()
		}
	})
	c := &cluster{tb: t, names: []string{"a", "b"}}
	c.mutate = func(name string, cfg *Config) {
		if name == "a" {
			cfg.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
				conn, err := c.dir.Dial(ctx, addr)
				if err != nil {
					return nil, err
				}
				return leakyConn{Conn: conn, leaked: &leaked, mu: &mu, frozen: &frozen}, nil
			}
		}
	}
	a, b := c.start("a"), c.start("b")
	waitUp(t, a, "b")
	eventually(t, "b sees a", func() bool { return b.rec.countEvents("in-up", "a", Control) == 1 })
	frozen.Store(true)
	if err := a.t.Close(); err != nil {
		t.Fatal(err)
	}
	if n := b.rec.countEvents("in-down", "a", Control); n != 0 {
		t.Fatalf("old session ended although its socket is open (%d)", n)
	}
	frozen.Store(false) // the new a's connections work
	a2 := c.start("a")
	waitUp(t, a2, "b")
	if err := a2.t.Send(context.Background(), "b", Control, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "frame from new a", func() bool { return b.rec.count("a", Control) == 1 })
	eventually(t, "old session replaced", func() bool {
		return b.rec.countEvents("in-up", "a", Control) == 2 && b.rec.countEvents("in-down", "a", Control) == 1
	})
	// The old session ended before the new one began.
	b.rec.mu.Lock()
	var kinds []string
	for _, e := range b.rec.events {
		if e.peer == "a" && e.plane == Control && strings.HasPrefix(e.kind, "in-") {
			kinds = append(kinds, e.kind)
		}
	}
	b.rec.mu.Unlock()
	if strings.Join(kinds, ",") != "in-up,in-down,in-up" {
		t.Errorf("b's events for a/control: %v", kinds)
	}
}

func TestHandshakeRejections(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(name string, c *Config)
		want   error
	}{
		{"unknown peer", func(name string, c *Config) {
			if name == "b" {
				delete(c.Peers, "a") // b does not know a
			}
		}, ErrUnknownPeer},
		{"protocol version", func(name string, c *Config) {
			if name == "a" {
				c.protocolVersion = ProtocolVersion + 1
			}
		}, ErrProtocolVersion},
		{"cluster", func(name string, c *Config) {
			if name == "a" {
				c.Cluster = "other"
			}
		}, ErrWrongCluster},
		{"wrong site", func(name string, c *Config) {
			if name == "a" {
				c.Peers["b"] = PeerAddr{Data: "c/data"} // reaches c instead of b
			}
		}, ErrWrongSite},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{tb: t, names: []string{"a", "b", "c"}, mutate: tc.mutate}
			a := c.start("a")
			c.start("b")
			c.start("c")
			eventually(t, "rejection", func() bool { return errors.Is(a.t.Status("b", Data).LastError, tc.want) })
			err := a.t.Status("b", Data).LastError
			t.Logf("surfaced: %v", err)
			if a.t.Status("b", Data).Connected || a.rec.countEvents("up", "b", Data) != 0 {
				t.Errorf("session came up despite rejection")
			}
			if err := a.t.Send(context.Background(), "b", Data, []byte("x")); !errors.Is(err, ErrNotConnected) {
				t.Errorf("send: %v", err)
			}
		})
	}
}

// TestControlNotDelayedBySaturatedData stalls b's data plane completely (its
// handler blocks), fills a's data queue, and checks that control frames
// still arrive, and quickly.
func TestControlNotDelayedBySaturatedData(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a", "b"}, mutate: func(name string, c *Config) {
		c.DataQueueBytes = 4 << 20
	}}
	a, b := c.start("a"), c.start("b")
	gate := make(chan struct{})
	b.rec.mu.Lock()
	b.rec.gate[Data] = gate
	b.rec.mu.Unlock()
	waitUp(t, a, "b")

	// Fill everything between a and b's handler: gRPC windows, socket
	// buffers, a's queue, until a blocking Send finds no room for a while.
	payload := make([]byte, 64<<10)
	sent := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := a.t.Send(ctx, "b", Data, payload)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
		if sent > 10000 {
			t.Fatal("data plane never filled")
		}
	}
	if err := a.t.TrySend("b", Data, payload); !errors.Is(err, ErrQueueFull) {
		t.Errorf("TrySend on full queue: %v", err)
	}
	if q := a.t.Status("b", Data).QueuedBytes; q < 3<<20 {
		t.Errorf("only %d bytes queued on a stalled data plane", q)
	}

	var worst time.Duration
	for i := 0; i < 50; i++ {
		start := time.Now()
		if err := a.t.Send(context.Background(), "b", Control, []byte(fmt.Sprintf("ack %d", i))); err != nil {
			t.Fatal(err)
		}
		eventually(t, "control frame", func() bool { return b.rec.count("a", Control) == i+1 })
		worst = max(worst, time.Since(start))
	}
	t.Logf("data frames stuck: %d (%d MiB); worst control latency %v", sent, sent/16, worst)
	// Generous: the point is that control is not stuck behind data at all.
	if worst > time.Second {
		t.Errorf("control latency %v behind a stalled data plane", worst)
	}
	close(gate) // release data
	eventually(t, "data drains", func() bool { return b.rec.count("a", Data) == sent })
}

func TestSendErrors(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a", "b"}, mutate: func(name string, c *Config) { c.MaxFrameSize = 1000 }}
	a := c.start("a")
	ctx := context.Background()
	if err := a.t.Send(ctx, "zz", Data, nil); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("unknown peer: %v", err)
	}
	if err := a.t.Send(ctx, "b", Data, make([]byte, 1001)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("too large: %v", err)
	}
	// b is not running.
	if err := a.t.TrySend("b", Control, []byte("x")); !errors.Is(err, ErrNotConnected) {
		t.Errorf("not connected: %v", err)
	}
	if err := a.t.SendLatest("b", Control, "", []byte("x")); err == nil {
		t.Error("SendLatest accepted an empty key")
	}
	if err := a.t.Start(newRecorder()); err == nil {
		t.Error("second Start accepted")
	}
	if err := a.t.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.t.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := a.t.Send(ctx, "b", Data, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

func TestCloseWithoutStartClosesListeners(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{Cluster: "c", Site: "a", Listeners: []net.Listener{l}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("listener still open")
	}
}

func TestConfigValidateReportsEveryField(t *testing.T) {
	err := Config{
		Peers:             map[string]PeerAddr{"b": {}},
		Listeners:         []net.Listener{nil},
		MaxFrameSize:      -1,
		BackoffMin:        time.Second,
		BackoffMax:        time.Millisecond,
		ClientCredentials: nil,
	}.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"Cluster", "Site", `Peers["b"].Data`, "Listeners[0]", "Credentials: missing", "MaxFrameSize: -1", "BackoffMin: 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

// TestSendLatestReplacesQueuedFrame exercises the queue without a network.
func TestSendLatestReplacesQueuedFrame(t *testing.T) {
	tr := &Transport{cfg: Config{MaxFrameSize: 1 << 20, BatchBytes: 1 << 20}}
	tr.metrics, _ = newMetrics(nil)
	s := newSender(tr, "b", Control, "b", 100)
	s.mu.connected = true
	send := func(key, f string) error {
		return s.enqueue(context.Background(), []byte(f), key, false)
	}
	for _, op := range []struct{ key, frame string }{
		{"acks", "acks v1"}, {"", "predicate p"}, {"acks", "acks v2"}, {"hb", "hb 1"}, {"acks", "acks v3"},
	} {
		if err := send(op.key, op.frame); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.statusBytes(s); got != len("acks v3")+len("predicate p")+len("hb 1") {
		t.Errorf("queued bytes %d", got)
	}
	var got []string
	for _, f := range s.take(nil) {
		got = append(got, string(f))
	}
	if strings.Join(got, "|") != "acks v3|predicate p|hb 1" {
		t.Errorf("sent %q", got)
	}
	// Once taken, a new frame with the key queues anew.
	if err := send("acks", "acks v4"); err != nil {
		t.Fatal(err)
	}
	if f := s.take(nil); len(f) != 1 || string(f[0]) != "acks v4" {
		t.Errorf("after take: %q", f)
	}
	// Queue bound: a frame into an empty queue always fits, then no more.
	if err := send("", string(make([]byte, 150))); err != nil {
		t.Errorf("large frame into empty queue: %v", err)
	}
	if err := send("", "x"); !errors.Is(err, ErrQueueFull) {
		t.Errorf("full queue: %v", err)
	}
}

func (t *Transport) statusBytes(s *sender) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.bytes
}

func TestWireRoundTrips(t *testing.T) {
	h := hello{version: 7, plane: Control, cluster: "prod", from: "us-east-1", to: "eu-west-1"}
	got, err := decodeHello(encodeHello(h))
	if err != nil || got != h {
		t.Errorf("hello: %+v %v", got, err)
	}
	if _, err := decodeHello(append(encodeHello(h), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	v, code, msg, err := decodeWelcome(encodeWelcome(codeUnknownPeer, "who?"))
	if err != nil || v != ProtocolVersion || code != codeUnknownPeer || msg != "who?" {
		t.Errorf("welcome: %d %d %q %v", v, code, msg, err)
	}
	frames := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("x"), 300)}
	var buf []byte
	for _, b := range appendFrames(nil, frames) {
		buf = append(buf, b.ReadOnlyData()...)
	}
	var out [][]byte
	if err := decodeFrames(buf, 1000, func(f []byte) { out = append(out, f) }); err != nil || len(out) != 3 ||
		len(out[0]) != 0 || string(out[1]) != "a" || len(out[2]) != 300 {
		t.Errorf("frames: %q %v", out, err)
	}
	if err := decodeFrames(buf, 100, func([]byte) {}); !errors.Is(err, errBadBatch) {
		t.Errorf("oversized frame: %v", err)
	}
	if err := decodeFrames(buf[:len(buf)-1], 1000, func([]byte) {}); !errors.Is(err, errBadBatch) {
		t.Errorf("truncated batch: %v", err)
	}
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := &cluster{tb: t, names: []string{"a", "b"}, mutate: func(name string, c *Config) {
		if name == "a" {
			c.Registerer = reg
		}
	}}
	a := c.start("a")
	c.start("b")
	waitUp(t, a, "b")
	if err := a.t.Send(context.Background(), "b", Data, []byte("12345")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "sent metric", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "stabilizer_transport_sent_bytes_total" {
				for _, m := range mf.GetMetric() {
					if m.GetCounter().GetValue() == 5 {
						return true
					}
				}
			}
		}
		return false
	})
}

func FuzzDecodeFrames(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{3, 'a', 'b', 'c', 1, 'd'})
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		err := decodeFrames(b, 1<<20, func(fr []byte) { total += len(fr) })
		if err == nil && total > len(b) {
			t.Fatalf("frames longer than input")
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(encodeHello(hello{version: 1, plane: Data, cluster: "c", from: "a", to: "b"}))
	f.Add([]byte("STBZ"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			return
		}
		if again, err := decodeHello(encodeHello(h)); err != nil || again != h {
			t.Fatalf("round trip: %+v %+v %v", h, again, err)
		}
	})
}

func TestLargestFrameCrosses(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a", "b"}}
	a, b := c.start("a"), c.start("b")
	waitUp(t, a, "b")
	big := frame("a", "b", Data, 1, DefaultMaxFrameSize)
	if err := a.t.Send(context.Background(), "b", Data, big); err != nil {
		t.Fatal(err)
	}
	if err := a.t.Send(context.Background(), "b", Data, []byte("after")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "16 MiB frame", func() bool { return b.rec.count("a", Data) == 2 })
	got := b.rec.got("a", Data)
	if !bytes.Equal(got[0], big) || string(got[1]) != "after" {
		t.Errorf("got %d and %q", len(got[0]), got[1])
	}
	if err := a.t.Send(context.Background(), "b", Data, make([]byte, DefaultMaxFrameSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

// TestCloseEndsSilentConnections: a connection accepted but silent (a peer
// behind a cut link, through a proxy that accepted it) must not hold Close
// for the handshake timeout.
func TestCloseEndsSilentConnections(t *testing.T) {
	c := &cluster{tb: t, names: []string{"a"}, mutate: func(_ string, cfg *Config) { cfg.HandshakeTimeout = time.Minute }}
	a := c.start("a")
	raw, err := c.dir.Dial(context.Background(), "a/data")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	eventually(t, "the silent connection accepted", func() bool {
		a.t.mu.Lock()
		defer a.t.mu.Unlock()
		n := 0
		for _, l := range a.t.mu.listeners {
			l.mu.Lock()
			n += len(l.conns)
			l.mu.Unlock()
		}
		return n > 0
	})
	done := make(chan error, 1)
	go func() { done <- a.t.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits for a silent connection after 20s (handshake timeout 1m)")
	}
}

// TestCloseLogsNoError: a transport that shuts down cleanly logs no error
// (its listeners closing under Serve is the shutdown, not a failure).
func TestCloseLogsNoError(t *testing.T) {
	var buf testhelp.SyncBuffer
	c := &cluster{tb: t, names: []string{"a", "b"}, mutate: func(name string, cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "transport." + name, Output: &buf, Level: hclog.Error})
	}}
	a, b := c.start("a"), c.start("b")
	waitUp(t, a, "b")
	waitUp(t, b, "a")
	for _, s := range []*site{a, b} {
		if err := s.t.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s := buf.String(); s != "" {
		t.Fatalf("clean shutdown logged:\n%s", s)
	}
}
