package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
)

// sender owns the outbound session to one peer on one plane: its queue,
// its gRPC connection and the goroutine that connects, handshakes and
// writes.
type sender struct {
	t     *Transport
	peer  string
	plane Plane
	addr  string
	limit int // queue bound in bytes
	m     *peerMetrics

	// ready has a token when the queue may be non-empty.
	ready chan struct{}

	mu struct {
		sync.Mutex
		closed    bool
		connected bool
		lastErr   error // why the last session or attempt ended
		sessions  uint64
		queue     []*queued
		bytes     int
		latest    map[string]*queued // SendLatest keys of unsent frames
		// space is closed (and replaced) whenever queued bytes drop, to wake
		// blocked Sends.
		space chan struct{}
	}
}

type queued struct {
	frame []byte
	key   string
}

func newSender(t *Transport, peer string, plane Plane, addr string, limit int) *sender {
	s := &sender{t: t, peer: peer, plane: plane, addr: addr, limit: limit,
		m: t.metrics.peer(peer, plane), ready: make(chan struct{}, 1)}
	s.mu.latest = make(map[string]*queued)
	s.mu.space = make(chan struct{})
	return s
}

func (s *sender) dial() (*grpc.ClientConn, error) {
	cfg := s.t.cfg
	creds := cfg.ClientCredentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	recvLimit := 1 << 16 // the receiver only answers the handshake
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(cfg.Dialer),
		// The authority, and so the name TLS verifies the peer's
		// certificate against, is the site's name, not its address: the
		// address may be an emulated WAN link or a proxy.
		grpc.WithAuthority(s.peer),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallSendMsgSize(max(cfg.MaxFrameSize, cfg.BatchBytes)+64),
			grpc.MaxCallRecvMsgSize(recvLimit),
		),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  cfg.BackoffMin,
				Multiplier: 2,
				Jitter:     0.2,
				MaxDelay:   cfg.BackoffMax,
			},
			MinConnectTimeout: cfg.HandshakeTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                cfg.KeepaliveTime,
			Timeout:             cfg.KeepaliveTime,
			PermitWithoutStream: true,
		}),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithWriteBufferSize(256 << 10),
		grpc.WithReadBufferSize(64 << 10),
	}, cfg.DialOptions...)
	// passthrough: the address goes to the Dialer as is, with no DNS.
	return grpc.NewClient("passthrough:///"+s.addr, opts...)
}

// enqueue implements Send, TrySend and SendLatest.
func (s *sender) enqueue(ctx context.Context, frame []byte, key string, block bool) error {
	if len(frame) > s.t.cfg.MaxFrameSize {
		return fmt.Errorf("transport: send %d bytes to %s on %s (limit %d): %w",
			len(frame), s.peer, s.plane, s.t.cfg.MaxFrameSize, ErrFrameTooLarge)
	}
	for {
		s.mu.Lock()
		switch {
		case s.mu.closed:
			s.mu.Unlock()
			return ErrClosed
		case !s.mu.connected:
			s.mu.Unlock()
			s.m.dropped.Inc()
			return fmt.Errorf("transport: send to %s on %s: %w", s.peer, s.plane, ErrNotConnected)
		}
		if key != "" {
			if q := s.mu.latest[key]; q != nil {
				s.mu.bytes += len(frame) - len(q.frame)
				q.frame = frame
				s.m.coalesced.Inc()
				s.mu.Unlock()
				return nil
			}
		}
		if s.mu.bytes == 0 || s.mu.bytes+len(frame) <= s.limit {
			q := &queued{frame: frame, key: key}
			s.mu.queue = append(s.mu.queue, q)
			s.mu.bytes += len(frame)
			if key != "" {
				s.mu.latest[key] = q
			}
			s.m.queued.Set(float64(s.mu.bytes))
			s.mu.Unlock()
			select {
			case s.ready <- struct{}{}:
			default:
			}
			return nil
		}
		if !block {
			s.mu.Unlock()
			s.m.dropped.Inc()
			return fmt.Errorf("transport: send to %s on %s: %w", s.peer, s.plane, ErrQueueFull)
		}
		space := s.mu.space
		s.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return fmt.Errorf("transport: send to %s on %s: %w", s.peer, s.plane, ctx.Err())
		}
	}
}

// take removes queued frames up to the batch bound (at least one).
func (s *sender) take(buf [][]byte) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, size := 0, 0
	for _, q := range s.mu.queue {
		if n > 0 && size+len(q.frame) > s.t.cfg.BatchBytes {
			break
		}
		buf = append(buf, q.frame)
		size += len(q.frame)
		if q.key != "" {
			delete(s.mu.latest, q.key)
		}
		n++
	}
	rest := copy(s.mu.queue, s.mu.queue[n:])
	clear(s.mu.queue[rest:])
	s.mu.queue = s.mu.queue[:rest]
	s.mu.bytes -= size
	s.m.queued.Set(float64(s.mu.bytes))
	if n > 0 {
		close(s.mu.space)
		s.mu.space = make(chan struct{})
	}
	return buf
}

// dropQueueLocked discards unsent frames at the end of a session and wakes
// blocked Sends (which then see the session down).
func (s *sender) dropQueueLocked() {
	if len(s.mu.queue) > 0 {
		s.m.dropped.Add(float64(len(s.mu.queue)))
	}
	clear(s.mu.queue)
	s.mu.queue = s.mu.queue[:0]
	clear(s.mu.latest)
	s.mu.bytes = 0
	s.m.queued.Set(0)
	close(s.mu.space)
	s.mu.space = make(chan struct{})
}

func (s *sender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	s.mu.closed = true
	s.mu.connected = false
	s.dropQueueLocked()
}

// run connects, runs sessions and reconnects with backoff until ctx ends.
func (s *sender) run(ctx context.Context, conn *grpc.ClientConn) {
	cfg := s.t.cfg
	delay := cfg.BackoffMin
	var lastErr string
	for ctx.Err() == nil {
		wasUp, err := s.session(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		if wasUp {
			delay = cfg.BackoffMin
		}
		s.mu.Lock()
		s.mu.lastErr = err
		s.mu.Unlock()
		// Log a failure once, not on every retry.
		if msg := err.Error(); msg != lastErr {
			s.t.log.Warn("session failed; retrying", "peer", s.peer, "plane", s.plane.String(), "error", err)
			lastErr = msg
		}
		wait := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		delay = min(2*delay, cfg.BackoffMax)
	}
}

// session runs one outbound session: open a stream, handshake, report Up,
// write queued frames until the stream breaks, report Down.
func (s *sender) session(ctx context.Context, conn *grpc.ClientConn) (wasUp bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Fail fast: while gRPC's connection is in transient failure (peer
	// down, TLS refused) NewStream returns its error at once, so Status
	// shows why, and run retries with backoff; gRPC redials meanwhile.
	hsTimer := time.AfterFunc(s.t.cfg.HandshakeTimeout, cancel)
	stream, err := conn.NewStream(sctx, &streamDesc, fullMethod)
	if err != nil {
		hsTimer.Stop()
		return false, fmt.Errorf("transport: open stream to %s on %s: %w", s.peer, s.plane, err)
	}
	if err := s.handshake(stream); err != nil {
		hsTimer.Stop()
		return false, err
	}
	if !hsTimer.Stop() {
		return false, fmt.Errorf("transport: handshake with %s on %s: timed out: %w", s.peer, s.plane, ErrHandshake)
	}

	// The peer sends nothing after its answer: a receive returns only when
	// the stream ends, which is how a closed or restarted peer is noticed
	// while we have nothing to send.
	recvErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var b []byte
		err := stream.RecvMsg(&b)
		if err == nil {
			err = errors.New("transport: unexpected message from receiver")
		}
		recvErr <- err
		cancel()
	}()
	// Canceling ends the stream, which ends the receive.
	defer func() {
		cancel()
		wg.Wait()
	}()

	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return false, ErrClosed
	}
	s.mu.connected = true
	s.mu.lastErr = nil
	s.mu.sessions++
	s.mu.Unlock()
	s.m.up.Set(1)
	s.m.sessions.Inc()
	s.t.log.Info("session up", "peer", s.peer, "plane", s.plane.String())
	s.t.handler().Up(s.peer, s.plane)

	err = s.writeLoop(sctx, stream)
	cancel()
	select {
	case rerr := <-recvErr:
		// The receive side usually knows better why the stream ended.
		if err == nil || errors.Is(err, context.Canceled) || isEOF(err) {
			err = rerr
		}
	default:
	}
	if err == nil {
		err = ctx.Err()
	}
	s.mu.Lock()
	s.mu.connected = false
	if !s.mu.closed {
		s.dropQueueLocked()
	}
	s.mu.Unlock()
	s.m.up.Set(0)
	s.t.log.Info("session down", "peer", s.peer, "plane", s.plane.String(), "error", err)
	err = fmt.Errorf("transport: session to %s on %s: %w", s.peer, s.plane, err)
	s.t.handler().Down(s.peer, s.plane, err)
	return true, err
}

func (s *sender) handshake(stream grpc.ClientStream) error {
	h := encodeHello(hello{
		version: s.t.cfg.protocolVersion,
		plane:   s.plane,
		cluster: s.t.cfg.Cluster,
		from:    s.t.cfg.Site,
		to:      s.peer,
	})
	if err := stream.SendMsg(&h); err != nil {
		return s.streamErr(stream, "send handshake", err)
	}
	var ans []byte
	if err := stream.RecvMsg(&ans); err != nil {
		return fmt.Errorf("transport: handshake with %s on %s: %w", s.peer, s.plane, err)
	}
	_, code, msg, err := decodeWelcome(ans)
	if err != nil {
		return fmt.Errorf("transport: handshake with %s on %s: %w", s.peer, s.plane, ErrHandshake)
	}
	return welcomeError(s.peer, code, msg)
}

// streamErr turns a SendMsg error into the stream's real status: gRPC
// returns io.EOF from SendMsg and the reason from RecvMsg.
func (s *sender) streamErr(stream grpc.ClientStream, what string, err error) error {
	if isEOF(err) {
		var b []byte
		if rerr := stream.RecvMsg(&b); rerr != nil && !isEOF(rerr) {
			err = rerr
		}
	}
	return fmt.Errorf("transport: %s to %s on %s: %w", what, s.peer, s.plane, err)
}

func (s *sender) writeLoop(ctx context.Context, stream grpc.ClientStream) error {
	var frames [][]byte
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ready:
		}
		for {
			frames = s.take(frames[:0])
			if len(frames) == 0 {
				break
			}
			msg := outMsg{bufs: appendFrames(make(mem.BufferSlice, 0, 2*len(frames)), frames)}
			if err := stream.SendMsg(&msg); err != nil {
				return err
			}
			size := 0
			for _, f := range frames {
				size += len(f)
			}
			s.m.sentFrames.Add(float64(len(frames)))
			s.m.sentBytes.Add(float64(size))
			clear(frames)
		}
	}
}

func (t *Transport) handler() Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.handler
}
