package testhelp

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// Directory maps names to the addresses of listeners on loopback, so that
// a restarted site can listen on a new port (port 0) and still be found
// under its old name. The zero Directory is empty and ready to use.
type Directory struct {
	mu    sync.Mutex
	addrs map[string]string
}

// Set makes name resolve to addr from now on.
func (d *Directory) Set(name, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.addrs == nil {
		d.addrs = make(map[string]string)
	}
	d.addrs[name] = addr
}

// Dial connects to name's current address over TCP; it has the shape of
// the transport's Dialer.
func (d *Directory) Dial(ctx context.Context, name string) (net.Conn, error) {
	d.mu.Lock()
	addr, ok := d.addrs[name]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("testhelp: no address for %q", name)
	}
	var dl net.Dialer
	return dl.DialContext(ctx, "tcp", addr)
}
