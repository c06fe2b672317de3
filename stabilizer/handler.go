package stabilizer

import (
	"context"

	"github.com/stabilizer/stabilizer/stabilizer/core"
	"github.com/stabilizer/stabilizer/stabilizer/wire"
)

// allPlanes is the mask of a peer whose every connection is up.
const allPlanes = 1<<PlaneData | 1<<PlaneControl | 1<<PlaneBulk

// handler adapts the node to the Transport's callbacks.
type handler struct{ n *Node }

func (h handler) Frame(from string, plane Plane, frame []byte) {
	if h.n.channelFrame(from, frame) {
		return
	}
	m, err := wire.Decode(frame)
	if err != nil {
		h.n.log.Warn("dropping malformed frame", "from", from, "plane", plane, "error", err)
		return
	}
	if m.From != from {
		h.n.log.Warn("dropping frame whose sender does not match its connection", "from", from, "claims", m.From)
		return
	}
	h.n.m.received(from, len(frame))
	if m.Type == core.MsgData && h.n.disk.dropData() {
		return // the peer resends it once space is back (disk.go)
	}
	ch := h.n.inputs
	switch plane {
	case PlaneControl:
		ch = h.n.ctrl
	case PlaneBulk:
		ch = h.n.bulkIn
	}
	_ = h.n.submitTo(h.n.ctx, ch, func() {
		if err := h.n.core.Step(m); err != nil {
			h.n.log.Warn("step", "from", from, "type", m.Type, "error", err)
		}
	})
}

func (h handler) Up(peer string, plane Plane) { h.n.planeChange(peer, plane, true) }

func (h handler) Down(peer string, plane Plane, err error) {
	if err != nil {
		h.n.log.Debug("connection down", "peer", peer, "plane", plane, "error", err)
	}
	h.n.planeChange(peer, plane, false)
}

// planeChange tells the core a peer is connected once all planes are up,
// and disconnected as soon as one breaks.
func (n *Node) planeChange(peer string, plane Plane, up bool) {
	n.mu.Lock()
	was := n.mu.planes[peer] == allPlanes
	if up {
		n.mu.planes[peer] |= 1 << plane
	} else {
		n.mu.planes[peer] &^= 1 << plane
	}
	now := n.mu.planes[peer] == allPlanes
	n.mu.Unlock()
	if was == now {
		return
	}
	n.m.setConnected(peer, now)
	n.rttConnected(peer, now)
	_ = n.submit(context.Background(), func() {
		var err error
		if now {
			err = n.core.Connected(peer)
		} else {
			err = n.core.Disconnected(peer)
		}
		if err != nil {
			n.log.Warn("peer", "peer", peer, "error", err)
		}
	})
}

// sendBulk sends the bulk messages release hands it, in order.
func (n *Node) sendBulk() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case m := <-n.bulkOut:
			n.send(m)
		}
	}
}

// send encodes and hands a message to the transport. A failed send is
// dropped: the core resends what matters after the next Connected.
func (n *Node) send(m *core.Message) {
	if n.cfg.Transport == nil {
		return
	}
	frame := wire.Append(make([]byte, 0, wire.SizeHint(m)), m)
	if err := n.cfg.Transport.Send(m.To, m.Plane(), frame); err != nil {
		n.log.Trace("send dropped", "to", m.To, "type", m.Type, "error", err)
		return
	}
	n.m.sent(m.To, len(frame))
}
