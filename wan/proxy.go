package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Proxy listens on a loopback address and forwards each connection to its
// target through a link: bytes from the dialer to the target are shaped by
// the link, bytes coming back by the link's reverse. A site dials the proxy
// instead of the target to reach it "over the WAN".
type Proxy struct {
	link *Link
	fw   *forwarder
}

// Proxy starts a proxy that forwards to target through l. It listens on
// Config.ListenHost at a free port; see Addr. Close it when done, or close
// the Network.
func (l *Link) Proxy(target string) (*Proxy, error) {
	fw, err := l.n.startForwarder(forwarderConfig{
		listen: net.JoinHostPort(l.n.cfg.ListenHost, "0"),
		target: target,
		log:    l.n.log.With("link", l.String(), "target", target),
		route:  func(netip.Addr) *Link { return l },
	})
	if err != nil {
		return nil, fmt.Errorf("wan: proxy %s to %s: %w", l, target, err)
	}
	return &Proxy{link: l, fw: fw}, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.fw.addr() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.fw.target }

// Link is the link the proxy's requests travel on.
func (p *Proxy) Link() *Link { return p.link }

// Close stops accepting, resets every connection through the proxy and
// waits for its goroutines. It is idempotent.
func (p *Proxy) Close() error {
	if err := p.fw.close(); err != nil {
		return fmt.Errorf("wan: close proxy %s: %w", p.Addr(), err)
	}
	return nil
}

// forwarderConfig is what a Proxy or a Demux asks of its forwarder.
type forwarderConfig struct {
	listen, target string
	log            hclog.Logger
	// route returns the link a connection from src travels on, or nil
	// to refuse it.
	route func(src netip.Addr) *Link
	// handshake charges every connection one round trip of its link
	// before its bytes enter the link, as Link.DialContext charges a dial.
	handshake bool
}

// forwarder is what a Proxy and a Demux share: a listener and, for every
// connection accepted on it, a connection to the target with each
// direction carried through a link by a pipe.
type forwarder struct {
	forwarderConfig
	n  *Network
	ln *net.TCPListener
	// ctx is cancelled by close; it stops dials and wakes every wait.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		conns  map[*conn]struct{}
	}
}

// startForwarder listens on cfg.listen and serves until close or the
// network's Close.
func (n *Network) startForwarder(cfg forwarderConfig) (*forwarder, error) {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, err
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("listen %s: not a TCP listener", cfg.listen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{forwarderConfig: cfg, n: n, ln: tl, ctx: ctx, cancel: cancel}
	f.mu.conns = make(map[*conn]struct{})
	if err := n.addForwarder(f); err != nil {
		cancel()
		_ = ln.Close()
		return nil, err
	}
	f.goStart(f.serve)
	f.log.Debug("listening", "addr", f.addr())
	return f, nil
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

// close stops accepting, resets every connection and waits for the
// forwarder's goroutines. It is idempotent.
func (f *forwarder) close() error {
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		f.wg.Wait()
		return nil
	}
	f.mu.closed = true
	conns := make([]*conn, 0, len(f.mu.conns))
	for c := range f.mu.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	f.cancel()
	err := f.ln.Close()
	for _, c := range conns {
		c.abort(true)
	}
	f.wg.Wait()
	f.n.removeForwarder(f)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// goStart runs fn on a goroutine that close waits for, unless close began.
func (f *forwarder) goStart(fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		return false
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
	return true
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.AcceptTCP()
		if err != nil {
			if f.ctx.Err() == nil {
				f.log.Error("accept failed; no more connections", "error", err)
			}
			return
		}
		if !f.goStart(func() { f.handle(c) }) {
			_ = c.Close()
			return
		}
	}
}

// sourceOf is the IP address a connection comes from.
func sourceOf(c *net.TCPConn) netip.Addr {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	return a.AddrPort().Addr().Unmap()
}

// handle connects one accepted client to the target and runs its two pipes.
func (f *forwarder) handle(client *net.TCPConn) {
	l := f.route(sourceOf(client))
	if l == nil {
		f.log.Debug("connection from an unknown source refused", "source", client.RemoteAddr().String())
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	var d net.Dialer
	sc, err := d.DialContext(f.ctx, "tcp", f.target)
	if err != nil {
		// The refusal comes back over the path: the client learns of it
		// a round trip later, as a reset.
		f.log.Debug("dial target failed", "error", err)
		var w waiter
		w.until(time.Now().Add(l.Config().Delay+l.rev.Config().Delay), f.ctx.Done())
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	server := sc.(*net.TCPConn)
	c := &conn{client: client, server: server, done: make(chan struct{})}
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		c.abort(true)
		return
	}
	f.mu.conns[c] = struct{}{}
	f.mu.Unlock()
	l.m.conns.Inc()
	defer func() {
		l.m.conns.Dec()
		f.mu.Lock()
		delete(f.mu.conns, c)
		f.mu.Unlock()
	}()
	// The client's bytes wait in its socket meanwhile; the pipe's reader
	// dates them no earlier than its first read, so they enter the link
	// after the handshake, as a real client could send them only then.
	if f.handshake && l.handshake(f.ctx) != nil {
		c.abort(true)
		return
	}

	maxHeld := l.n.cfg.MaxHeld
	fwd := newPipe(c, l, client, server, maxHeld)
	rev := newPipe(c, l.rev, server, client, maxHeld)
	// These goroutines belong to this one, which waits for them; close
	// reaches them through c.abort.
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); fwd.read() }()
	go func() { defer wg.Done(); rev.read() }()
	go func() { defer wg.Done(); rev.write() }()
	fwd.write()
	wg.Wait()
	c.abort(false)
	// Bytes still inside an aborted connection leave the gauge with it.
	l.m.held.Sub(float64(fwd.q.held()))
	l.rev.m.held.Sub(float64(rev.q.held()))
}

// conn is one proxied connection.
type conn struct {
	client, server *net.TCPConn
	done           chan struct{} // closed by abort: every pipe goroutine stops
	once           sync.Once
}

// abort closes both sides and stops the pipes. With reset, the sides see a
// connection reset (as when the peer reset or the emulator shut down);
// without, the connection had finished in both directions.
func (c *conn) abort(reset bool) {
	c.once.Do(func() {
		close(c.done)
		if reset {
			_ = c.client.SetLinger(0)
			_ = c.server.SetLinger(0)
		}
		_ = c.client.Close()
		_ = c.server.Close()
	})
}
