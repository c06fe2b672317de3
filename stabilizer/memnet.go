package stabilizer

import (
	"errors"
	"fmt"
	"sync"
)

// MemNetwork connects nodes in one process without sockets, for tests of
// applications built on the library. Links can be cut and restored; a cut
// drops frames and reports the connections down, as a partition followed by
// a timeout would.
type MemNetwork struct {
	mu    sync.Mutex
	ends  map[string]*memTransport
	cut   map[[2]string]bool
	queue chan memFrame
	wg    sync.WaitGroup
	stop  chan struct{}
}

type memFrame struct {
	from, to string
	plane    Plane
	frame    []byte
}

// NewMemNetwork returns a network; Close stops its delivery goroutine.
func NewMemNetwork() *MemNetwork {
	n := &MemNetwork{ends: map[string]*memTransport{}, cut: map[[2]string]bool{},
		queue: make(chan memFrame, 65536), stop: make(chan struct{})}
	n.wg.Add(1)
	go n.run()
	return n
}

// Transport returns the transport of one site.
func (n *MemNetwork) Transport(site string) Transport {
	return &memTransport{net: n, site: site}
}

func (n *MemNetwork) run() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case f := <-n.queue:
			n.mu.Lock()
			dst := n.ends[f.to]
			cut := n.cut[[2]string{f.from, f.to}]
			n.mu.Unlock()
			if dst != nil && !cut {
				dst.h.Frame(f.from, f.plane, f.frame)
			}
		}
	}
}

// Cut breaks both directions between a and b.
func (n *MemNetwork) Cut(a, b string) { n.setCut(a, b, true) }

// Restore heals what Cut broke.
func (n *MemNetwork) Restore(a, b string) { n.setCut(a, b, false) }

func (n *MemNetwork) setCut(a, b string, cut bool) {
	n.mu.Lock()
	n.cut[[2]string{a, b}], n.cut[[2]string{b, a}] = cut, cut
	ea, eb := n.ends[a], n.ends[b]
	n.mu.Unlock()
	for _, pair := range [][2]*memTransport{{ea, eb}, {eb, ea}} {
		if pair[0] == nil || pair[1] == nil {
			continue
		}
		for _, p := range []Plane{PlaneData, PlaneControl} {
			if cut {
				pair[0].h.Down(pair[1].site, p, errors.New("memnet: link cut"))
			} else {
				pair[0].h.Up(pair[1].site, p)
			}
		}
	}
}

// Close stops delivery.
func (n *MemNetwork) Close() {
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	n.wg.Wait()
}

type memTransport struct {
	net  *MemNetwork
	site string
	h    Handler
}

func (t *memTransport) Start(h Handler) error {
	t.h = h
	n := t.net
	n.mu.Lock()
	if _, dup := n.ends[t.site]; dup {
		n.mu.Unlock()
		return fmt.Errorf("memnet: site %q started twice", t.site)
	}
	n.ends[t.site] = t
	var peers []*memTransport
	for name, e := range n.ends {
		if name != t.site && !n.cut[[2]string{t.site, name}] {
			peers = append(peers, e)
		}
	}
	n.mu.Unlock()
	for _, p := range peers {
		for _, pl := range []Plane{PlaneData, PlaneControl} {
			t.h.Up(p.site, pl)
			p.h.Up(t.site, pl)
		}
	}
	return nil
}

func (t *memTransport) Send(peer string, plane Plane, frame []byte) error {
	select {
	case t.net.queue <- memFrame{from: t.site, to: peer, plane: plane, frame: frame}:
		return nil
	case <-t.net.stop:
		return errors.New("memnet: closed")
	}
}

func (t *memTransport) Close() error {
	n := t.net
	n.mu.Lock()
	if n.ends[t.site] != t {
		n.mu.Unlock()
		return nil
	}
	delete(n.ends, t.site)
	var peers []*memTransport
	for _, e := range n.ends {
		peers = append(peers, e)
	}
	n.mu.Unlock()
	for _, p := range peers {
		for _, pl := range []Plane{PlaneData, PlaneControl} {
			p.h.Down(t.site, pl, errors.New("memnet: peer closed"))
		}
	}
	return nil
}
