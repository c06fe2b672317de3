package transport

import (
	"net"
	"sync"
)

// trackedListener remembers the connections it accepted until they close,
// so that Close can end them all. grpc's Stop closes the connections it
// serves, but waits for those still in their handshake: a peer behind a cut
// link whose connection was accepted (by a proxy or a middlebox) and then
// went silent would hold a shutdown for grpc's connection timeout.
type trackedListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

type trackedConn struct {
	net.Conn
	l    *trackedListener
	once sync.Once
}

func track(l net.Listener) *trackedListener {
	return &trackedListener{Listener: l, conns: map[*trackedConn]struct{}{}}
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// closeAll closes the listener and every connection it accepted that is
// still open.
func (l *trackedListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	_ = l.Listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
}
