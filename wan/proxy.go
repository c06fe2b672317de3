package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Proxy listens on a loopback address and forwards each connection to its
// target through a link: bytes from the dialer to the target are shaped by
// the link, bytes coming back by the link's reverse. A site dials the proxy
// instead of the target to reach it "over the WAN".
type Proxy struct {
	link   *Link
	target string
	ln     *net.TCPListener
	log    hclog.Logger
	// ctx is cancelled by Close; it stops dials and wakes every wait.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		conns  map[*conn]struct{}
	}
}

// Proxy starts a proxy that forwards to target through l. It listens on
// Config.ListenHost at a free port; see Addr. Close it when done, or close
// the Network.
func (l *Link) Proxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(l.n.cfg.ListenHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("wan: proxy %s to %s: %w", l, target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		link:   l,
		target: target,
		ln:     ln.(*net.TCPListener),
		log:    l.n.log.With("link", l.String(), "target", target),
		ctx:    ctx,
		cancel: cancel,
	}
	p.mu.conns = make(map[*conn]struct{})
	if err := l.n.addProxy(p); err != nil {
		cancel()
		_ = ln.Close()
		return nil, fmt.Errorf("wan: proxy %s to %s: %w", l, target, err)
	}
	p.goStart(p.serve)
	p.log.Debug("proxy listening", "addr", p.Addr())
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// Link is the link the proxy's requests travel on.
func (p *Proxy) Link() *Link { return p.link }

// Close stops accepting, resets every connection through the proxy and
// waits for its goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.mu.closed = true
	conns := make([]*conn, 0, len(p.mu.conns))
	for c := range p.mu.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, c := range conns {
		c.abort(true)
	}
	p.wg.Wait()
	p.link.n.removeProxy(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("wan: close proxy %s: %w", p.Addr(), err)
	}
	return nil
}

// goStart runs f on a goroutine that Close waits for, unless Close began.
func (p *Proxy) goStart(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if p.ctx.Err() == nil {
				p.log.Error("accept failed; proxy stops", "error", err)
			}
			return
		}
		if !p.goStart(func() { p.handle(c) }) {
			_ = c.Close()
			return
		}
	}
}

// handle connects one accepted client to the target and runs its two pipes.
func (p *Proxy) handle(client *net.TCPConn) {
	l := p.link
	var d net.Dialer
	sc, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The refusal comes back over the path: the client learns of it
		// a round trip later, as a reset.
		p.log.Debug("dial target failed", "error", err)
		var w waiter
		w.until(time.Now().Add(l.Config().Delay+l.rev.Config().Delay), p.ctx.Done())
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	server := sc.(*net.TCPConn)
	c := &conn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		c.abort(true)
		return
	}
	p.mu.conns[c] = struct{}{}
	p.mu.Unlock()
	l.m.conns.Inc()
	defer func() {
		l.m.conns.Dec()
		p.mu.Lock()
		delete(p.mu.conns, c)
		p.mu.Unlock()
	}()

	maxHeld := l.n.cfg.MaxHeld
	fwd := newPipe(c, l, client, server, maxHeld)
	rev := newPipe(c, l.rev, server, client, maxHeld)
	// These goroutines belong to this one, which waits for them; Close
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
