package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Handler receives what arrives and learns about sessions. Its methods are
// called from the transport's goroutines: Frame calls for one (peer, plane)
// come one at a time in order; different peers and planes are concurrent.
// Frame may block to push back on a fast sender (its plane of that peer
// stops, the others go on). Up and Down for one (peer, plane) alternate,
// starting with Up.
type Handler interface {
	// Frame delivers a frame from peer. The handler owns frame; frames
	// received in one gRPC message share one buffer, so copy a small frame
	// that is kept long rather than keep the whole buffer alive.
	Frame(peer string, plane Plane, frame []byte)
	// Up reports that a new outbound session to peer on plane began: frames
	// sent from now on are delivered in order, each at most once.
	Up(peer string, plane Plane)
	// Down reports that the outbound session ended; frames queued and not
	// sent were dropped. err says why (for example wrapping ErrUnknownPeer
	// or ErrProtocolVersion when the peer rejected us).
	Down(peer string, plane Plane, err error)
}

// InboundHandler is optionally implemented by a Handler that wants to know
// when peers' sessions towards this site begin and end. InboundUp comes
// before the session's first Frame; InboundDown after its last.
type InboundHandler interface {
	InboundUp(peer string, plane Plane)
	InboundDown(peer string, plane Plane, err error)
}

type planeKey struct {
	peer  string
	plane Plane
}

// Transport connects this site to its peers over gRPC.
type Transport struct {
	cfg     Config
	log     hclog.Logger
	metrics *metrics
	senders map[planeKey]*sender

	mu struct {
		sync.Mutex
		started, closed bool
		handler         Handler
		server          *grpc.Server
		conns           []*grpc.ClientConn
		inbound         map[planeKey]*inSession
		listeners       []*trackedListener
	}
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the transport started
}

// New validates cfg and builds a transport; nothing runs until Start.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, log: cfg.Logger, metrics: m, senders: make(map[planeKey]*sender)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.inbound = make(map[planeKey]*inSession)
	for name, addr := range cfg.Peers {
		if name == cfg.Site {
			continue
		}
		for _, p := range Planes {
			a := addr.Data
			if p == Control && addr.Control != "" {
				a = addr.Control
			}
			limit := cfg.DataQueueBytes
			if p == Control {
				limit = cfg.ControlQueueBytes
			}
			t.senders[planeKey{name, p}] = newSender(t, name, p, a, limit)
		}
	}
	return t, nil
}

// Peers returns the configured peers' names, sorted.
func (t *Transport) Peers() []string {
	var out []string
	for k := range t.senders {
		if k.plane == Data {
			out = append(out, k.peer)
		}
	}
	sort.Strings(out)
	return out
}

// go starts f as a goroutine owned by t; false once Close began.
func (t *Transport) goLocked(f func()) bool {
	if t.mu.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// Start serves the listeners and starts connecting to every peer on both
// planes, delivering to h. It may be called once.
func (t *Transport) Start(h Handler) error {
	if h == nil {
		return errors.New("transport: start: nil handler")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	if t.mu.started {
		return errors.New("transport: already started")
	}
	t.mu.started = true
	t.mu.handler = h

	creds := t.cfg.ServerCredentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	recvLimit := max(t.cfg.MaxFrameSize, t.cfg.BatchBytes) + 64
	sopts := append([]grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(recvLimit),
		grpc.MaxSendMsgSize(1 << 16),
		// Large static windows let one data stream fill a fast link
		// without waiting for window updates.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.ReadBufferSize(256 << 10),
		grpc.WriteBufferSize(64 << 10),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             t.cfg.KeepaliveTime / 2,
			PermitWithoutStream: true,
		}),
		// A connection that does not finish its handshake in time is
		// dropped (grpc's default waits 120 s); its dialer retries.
		grpc.ConnectionTimeout(t.cfg.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    t.cfg.KeepaliveTime,
			Timeout: t.cfg.KeepaliveTime,
		}),
	}, t.cfg.ServerOptions...)
	srv := grpc.NewServer(sopts...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    streamName,
			Handler:       func(_ any, ss grpc.ServerStream) error { return t.serve(ss) },
			ClientStreams: true,
			ServerStreams: true,
		}},
	}, struct{}{})
	t.mu.server = srv
	for _, raw := range t.cfg.Listeners {
		l := track(raw)
		t.mu.listeners = append(t.mu.listeners, l)
		t.goLocked(func() {
			// Close closes the listeners before it stops the server, so
			// Serve ends with ErrClosed then: a clean shutdown, not a
			// failure to log as an error.
			if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
				t.log.Error("serve failed", "addr", l.Addr().String(), "error", err)
			}
		})
	}
	for _, s := range t.senders {
		conn, err := s.dial()
		if err != nil {
			return fmt.Errorf("transport: dial %s %s: %w", s.peer, s.plane, err)
		}
		t.mu.conns = append(t.mu.conns, conn)
		t.goLocked(func() { s.run(t.ctx, conn) })
	}
	t.log.Info("started", "site", t.cfg.Site, "peers", len(t.senders)/2)
	return nil
}

const (
	streamWindow = 8 << 20
	connWindow   = 16 << 20
)

// Close stops serving, ends every session and waits for every goroutine the
// transport started. It is idempotent. Handlers must not block forever, or
// Close waits for them.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	srv, conns, listeners := t.mu.server, t.mu.conns, t.mu.listeners
	t.mu.Unlock()

	t.cancel()
	for _, s := range t.senders {
		s.close()
	}
	if srv != nil {
		// Connections still in their handshake first: Stop would wait
		// for them. Stop then closes the rest and cancels the inbound
		// streams; the handlers below then return.
		for _, l := range listeners {
			l.closeAll()
		}
		srv.Stop()
	} else {
		// Never started: the listeners were never served.
		for _, l := range t.cfg.Listeners {
			_ = l.Close()
		}
	}
	t.wg.Wait()
	var errs []error
	for _, c := range conns {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	t.log.Info("closed")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("transport: close: %w", err)
	}
	return nil
}

func (t *Transport) sender(peer string, plane Plane) (*sender, error) {
	s := t.senders[planeKey{peer, plane}]
	if s == nil {
		return nil, fmt.Errorf("transport: send to %q on %s: %w", peer, plane, ErrUnknownPeer)
	}
	return s, nil
}

// Send queues frame for peer on plane and returns once it is queued. If the
// plane's queue is full it blocks until there is room or ctx ends: this is
// how the data plane pushes back on a sender faster than the link. It fails
// at once with ErrNotConnected when no session is up (the frame is dropped;
// resend after the next Up).
//
// Send takes ownership of frame: it is written to the connection without a
// copy, so do not modify it afterwards.
func (t *Transport) Send(ctx context.Context, peer string, plane Plane, frame []byte) error {
	s, err := t.sender(peer, plane)
	if err != nil {
		return err
	}
	return s.enqueue(ctx, frame, "", true)
}

// TrySend is Send without blocking: it returns ErrQueueFull when the queue
// has no room.
func (t *Transport) TrySend(peer string, plane Plane, frame []byte) error {
	s, err := t.sender(peer, plane)
	if err != nil {
		return err
	}
	return s.enqueue(context.Background(), frame, "", false)
}

// SendLatest queues frame like TrySend, but if a frame sent with the same key
// is still queued and unsent it is replaced in place: only the newest
// version of, say, an ack row goes out, where the older one stood in the
// queue. Use it for state that supersedes itself on the control plane.
func (t *Transport) SendLatest(peer string, plane Plane, key string, frame []byte) error {
	s, err := t.sender(peer, plane)
	if err != nil {
		return err
	}
	if key == "" {
		return errors.New("transport: SendLatest with an empty key")
	}
	return s.enqueue(context.Background(), frame, key, false)
}

// Status describes the outbound session to one peer on one plane.
type Status struct {
	// Connected is true while a session is up.
	Connected bool
	// Sessions counts the sessions established so far.
	Sessions uint64
	// LastError is why the last session or connection attempt ended (for
	// example wrapping ErrUnknownPeer or ErrProtocolVersion when the peer
	// rejected the handshake); nil while connected.
	LastError error
	// QueuedBytes are queued and not yet sent.
	QueuedBytes int
}

// Status returns the state of the outbound session to peer on plane; the
// zero Status for a peer that is not configured.
func (t *Transport) Status(peer string, plane Plane) Status {
	s := t.senders[planeKey{peer, plane}]
	if s == nil {
		return Status{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Connected: s.mu.connected, Sessions: s.mu.sessions, LastError: s.mu.lastErr, QueuedBytes: s.mu.bytes}
}
