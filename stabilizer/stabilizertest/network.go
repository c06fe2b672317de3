package stabilizertest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// Network connects the sites of one process without sockets. Each
// direction of each pair of sites is a link with a one-way delay (zero by
// default) that delivers frames in order; a cut link drops frames and
// reports both planes down to both ends, as a partition followed by a
// timeout would, and restoring it reports them up again.
type Network struct {
	mu     sync.Mutex
	ends   map[string]*transport // started transports, by site
	cut    map[pair]bool
	delay  map[pair]time.Duration
	links  map[link]chan frame
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

type pair struct{ from, to string }

type link struct {
	pair
	plane stabilizer.Plane
}

type frame struct {
	data []byte
	at   time.Time // when the link delivers it
}

// linkQueue bounds the frames in flight on one link; a sender blocks while
// it is full, as on a congested connection.
const linkQueue = 1 << 16

// NewNetwork returns an empty network. Close it when done; a Cluster
// closes the one it made.
func NewNetwork() *Network {
	return &Network{ends: map[string]*transport{}, cut: map[pair]bool{}, delay: map[pair]time.Duration{},
		links: map[link]chan frame{}, stop: make(chan struct{})}
}

// Transport returns a transport for site. A site may have one started
// transport at a time; a restarted site takes a new one.
func (n *Network) Transport(site string) stabilizer.Transport {
	return &transport{net: n, site: site}
}

// SetDelay sets the one-way delay of both directions between a and b, for
// frames sent from now on.
func (n *Network) SetDelay(a, b string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay[pair{a, b}], n.delay[pair{b, a}] = d, d
}

// Cut breaks both directions between a and b.
func (n *Network) Cut(a, b string) { n.setCut(a, b, true) }

// Restore heals what Cut broke between a and b.
func (n *Network) Restore(a, b string) { n.setCut(a, b, false) }

// Partition cuts every link between the sites of group and the other
// sites of all.
func (n *Network) Partition(group, all []string) {
	in := map[string]bool{}
	for _, s := range group {
		in[s] = true
	}
	for _, a := range group {
		for _, b := range all {
			if !in[b] {
				n.Cut(a, b)
			}
		}
	}
}

// Heal restores every cut link.
func (n *Network) Heal() {
	n.mu.Lock()
	var cut []pair
	for p, c := range n.cut {
		if c && p.from < p.to {
			cut = append(cut, p)
		}
	}
	n.mu.Unlock()
	for _, p := range cut {
		n.Restore(p.from, p.to)
	}
}

func (n *Network) setCut(a, b string, cut bool) {
	n.mu.Lock()
	was := n.cut[pair{a, b}]
	n.cut[pair{a, b}], n.cut[pair{b, a}] = cut, cut
	ea, eb := n.ends[a], n.ends[b]
	n.mu.Unlock()
	if was == cut || ea == nil || eb == nil {
		return
	}
	for _, p := range stabilizer.Planes {
		if cut {
			err := errors.New("stabilizertest: link cut")
			ea.h.Down(b, p, err)
			eb.h.Down(a, p, err)
		} else {
			ea.h.Up(b, p)
			eb.h.Up(a, p)
		}
	}
}

// Close stops every link's delivery and waits for it.
func (n *Network) Close() {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.stop)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// queue returns the queue of link l, starting its delivery on first use.
func (n *Network) queue(l link) (chan frame, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("stabilizertest: network closed")
	}
	q := n.links[l]
	if q == nil {
		q = make(chan frame, linkQueue)
		n.links[l] = q
		n.wg.Add(1)
		go n.deliver(l, q)
	}
	return q, nil
}

// deliver hands link l's frames, in order and each after its delay, to
// whatever transport of the destination is started then, unless the link
// is cut.
func (n *Network) deliver(l link, q chan frame) {
	defer n.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var f frame
		select {
		case <-n.stop:
			return
		case f = <-q:
		}
		if d := time.Until(f.at); d > 0 {
			timer.Reset(d)
			select {
			case <-n.stop:
				return
			case <-timer.C:
			}
		}
		n.mu.Lock()
		dst := n.ends[l.to]
		cut := n.cut[l.pair]
		n.mu.Unlock()
		if dst != nil && !cut {
			dst.h.Frame(l.from, l.plane, f.data)
		}
	}
}

// transport is one site's end of a Network.
type transport struct {
	net  *Network
	site string
	h    stabilizer.Handler
}

func (t *transport) Start(h stabilizer.Handler) error {
	t.h = h
	n := t.net
	n.mu.Lock()
	if _, dup := n.ends[t.site]; dup {
		n.mu.Unlock()
		return fmt.Errorf("stabilizertest: site %q started twice", t.site)
	}
	n.ends[t.site] = t
	var peers []*transport
	for name, e := range n.ends {
		if name != t.site && !n.cut[pair{t.site, name}] {
			peers = append(peers, e)
		}
	}
	n.mu.Unlock()
	for _, p := range peers {
		for _, pl := range stabilizer.Planes {
			t.h.Up(p.site, pl)
			p.h.Up(t.site, pl)
		}
	}
	return nil
}

func (t *transport) Send(peer string, plane stabilizer.Plane, data []byte) error {
	n := t.net
	l := link{pair{t.site, peer}, plane}
	q, err := n.queue(l)
	if err != nil {
		return err
	}
	n.mu.Lock()
	at := time.Now().Add(n.delay[l.pair])
	n.mu.Unlock()
	select {
	case q <- frame{data: data, at: at}:
		return nil
	case <-n.stop:
		return errors.New("stabilizertest: network closed")
	}
}

func (t *transport) Close() error {
	n := t.net
	n.mu.Lock()
	if n.ends[t.site] != t {
		n.mu.Unlock()
		return nil
	}
	delete(n.ends, t.site)
	var peers []*transport
	for name, e := range n.ends {
		if !n.cut[pair{t.site, name}] {
			peers = append(peers, e)
		}
	}
	n.mu.Unlock()
	for _, p := range peers {
		for _, pl := range stabilizer.Planes {
			p.h.Down(t.site, pl, errors.New("stabilizertest: peer closed"))
		}
	}
	return nil
}
