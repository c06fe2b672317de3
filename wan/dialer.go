package wan

import (
	"context"
	"fmt"
	"net"
	"time"
)

// DialContext connects to addr the way site From would reach it across this
// link, with the signature of net.Dialer.DialContext. It routes through a
// proxy of this link to addr (made on first use, closed with the Network)
// and emulates the TCP handshake: the call returns after one round trip
// (this link's delay plus the reverse's), and while either direction is
// cut it waits for a restore until ctx ends, as a SYN is retransmitted
// until the caller's connect timeout.
func (l *Link) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("wan: dial %s %s through %s: only tcp is emulated", network, addr, l)
	}
	p, err := l.dialProxy(addr)
	if err != nil {
		return nil, err
	}
	if err := l.handshake(ctx); err != nil {
		return nil, fmt.Errorf("wan: dial %s through %s: %w", addr, l, err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.Addr())
	if err != nil {
		return nil, fmt.Errorf("wan: dial %s through %s: %w", addr, l, err)
	}
	return c, nil
}

func (l *Link) dialProxy(addr string) (*Proxy, error) {
	l.n.mu.Lock()
	closed := l.n.mu.closed
	l.n.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("wan: dial %s through %s: %w", addr, l, ErrClosed)
	}
	l.mu.Lock()
	p := l.mu.dialProxies[addr]
	l.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := l.Proxy(addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	old := l.mu.dialProxies[addr]
	if old == nil {
		if l.mu.dialProxies == nil {
			l.mu.dialProxies = make(map[string]*Proxy)
		}
		l.mu.dialProxies[addr] = p
	}
	l.mu.Unlock()
	if old != nil {
		// Another dial made one first; keep that one.
		_ = p.Close()
		return old, nil
	}
	return p, nil
}

// handshake waits while either direction is cut, then one round trip.
func (l *Link) handshake(ctx context.Context) error {
	for {
		var wait <-chan struct{}
		for _, x := range []*Link{l, l.rev} {
			if st := x.state(); st.cut {
				wait = st.restored
				break
			}
		}
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var w waiter
	if !w.until(time.Now().Add(l.Config().Delay+l.rev.Config().Delay), ctx.Done()) {
		return ctx.Err()
	}
	return nil
}

// Register records that addr belongs to site, so that a Dialer can tell
// which link a dial to addr crosses. Registering an address again moves it.
func (n *Network) Register(site, addr string) error {
	if t := n.cfg.Topology; t != nil && !t.HasSite(site) {
		return fmt.Errorf("wan: register %s: %w %q", addr, ErrUnknownSite, site)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.addrs[addr] = site
	return nil
}

// Dialer dials from one site to the others over the network's links. Its
// DialContext has the signature of net.Dialer.DialContext, so it can be
// handed to code that takes a dial function and knows nothing of wan.
type Dialer struct {
	n    *Network
	from string
}

// Dialer returns a dialer for site from.
func (n *Network) Dialer(from string) *Dialer { return &Dialer{n: n, from: from} }

// DialContext dials addr, which must have been registered to a site, through
// the link from the dialer's site to that one. An address of the dialer's
// own site is dialed directly.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n.mu.Lock()
	to, ok := d.n.mu.addrs[addr]
	d.n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("wan: dial %s from %s: address not registered to any site", addr, d.from)
	}
	return d.DialSite(ctx, to, network, addr)
}

// DialAddr is DialContext on "tcp", in the form gRPC's WithContextDialer
// and stabilizer/transport's Config.Dialer take:
//
//	cfg.Dialer = n.Dialer("us-east-1").DialAddr
func (d *Dialer) DialAddr(ctx context.Context, addr string) (net.Conn, error) {
	return d.DialContext(ctx, "tcp", addr)
}

// DialSite dials addr as an address of site to.
func (d *Dialer) DialSite(ctx context.Context, to, network, addr string) (net.Conn, error) {
	if to == d.from {
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	l, err := d.n.Link(d.from, to)
	if err != nil {
		return nil, err
	}
	return l.DialContext(ctx, network, addr)
}
