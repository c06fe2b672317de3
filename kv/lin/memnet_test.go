package lin

import (
	"context"
	"sync"
	"time"
)

// memNet is an in-process network between sites: per-link one-way delays,
// cuts (messages on a cut link are dropped), and delivery to whichever Node
// is currently registered for a site (a restarted site registers its new
// Node). Each link delivers in order from its own goroutine.
type memNet struct {
	mu     sync.Mutex
	nodes  map[string]*Node
	cut    map[[2]string]bool
	delay  map[[2]string]time.Duration
	links  map[[2]string]chan frame
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type frame struct {
	msg []byte
	at  time.Time
}

func newMemNet() *memNet {
	n := &memNet{nodes: map[string]*Node{}, cut: map[[2]string]bool{}, delay: map[[2]string]time.Duration{}, links: map[[2]string]chan frame{}}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

func (n *memNet) register(site string, node *Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if node == nil {
		delete(n.nodes, site)
	} else {
		n.nodes[site] = node
	}
}

// setDelay sets the one-way delay of both directions between a and b.
func (n *memNet) setDelay(a, b string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay[[2]string{a, b}] = d
	n.delay[[2]string{b, a}] = d
}

// partition cuts every link between the sites of group and the others.
func (n *memNet) partition(group []string, all []string) {
	in := map[string]bool{}
	for _, s := range group {
		in[s] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range all {
		for _, b := range all {
			if in[a] != in[b] {
				n.cut[[2]string{a, b}] = true
			}
		}
	}
}

func (n *memNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

func (n *memNet) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

func (n *memNet) transport(from string) Transport { return memTransport{n, from} }

type memTransport struct {
	net  *memNet
	from string
}

func (t memTransport) Send(to string, msg []byte) error {
	n := t.net
	k := [2]string{t.from, to}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.cut[k] {
		return nil // dropped silently, as a real network would
	}
	ch := n.links[k]
	if ch == nil {
		ch = make(chan frame, 65536)
		n.links[k] = ch
		n.wg.Add(1)
		go n.deliver(k, ch)
	}
	select {
	case ch <- frame{msg: msg, at: time.Now().Add(n.delay[k])}:
	default: // queue full: drop
	}
	return nil
}

func (n *memNet) deliver(k [2]string, ch chan frame) {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var f frame
		select {
		case f = <-ch:
		case <-n.ctx.Done():
			return
		}
		if d := time.Until(f.at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-n.ctx.Done():
				return
			}
		}
		n.mu.Lock()
		node, cut := n.nodes[k[1]], n.cut[k]
		n.mu.Unlock()
		if node == nil || cut {
			continue
		}
		_ = node.Step(n.ctx, k[0], f.msg)
	}
}
