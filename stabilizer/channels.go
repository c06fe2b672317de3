package stabilizer

import (
	"errors"
	"fmt"
)

// MinChannelTag is the smallest tag an application channel may use. Frames
// of the stabilizer protocol start with the wire format byte, which stays
// below it, so the first byte tells the two apart.
const MinChannelTag = 0x80

// Channel tags the library keeps for itself; HandleChannel refuses them.
// Applications take theirs from MinChannelTag up (kv/lin 0x90, pubsub 0x91).
const (
	// rttChannel carries the pings and pongs that measure each peer's
	// round trip (rtt.go), on the control plane.
	rttChannel = 0xfd
	// transferChannel carries state transfer between sites: requests and
	// credit on the data plane, snapshot data on the bulk plane, so that a
	// transfer never queues live entries or acks behind it.
	transferChannel = 0xfe
)

// ChannelHandler receives the frames peers sent on an application channel.
// It is called from the transport's goroutines, in order per peer; it must
// not block for long (it holds up that peer's data plane).
type ChannelHandler func(from string, frame []byte)

// HandleChannel registers an application channel: raw frames that travel
// between sites on the data plane beside the protocol's own, such as the
// messages of a Raft group. Call before Start.
func (n *Node) HandleChannel(tag byte, h ChannelHandler) error {
	if tag < MinChannelTag {
		return fmt.Errorf("stabilizer: channel tag %#x: must be at least %#x", tag, MinChannelTag)
	}
	switch tag {
	case transferChannel:
		return fmt.Errorf("stabilizer: channel tag %#x: reserved for state transfer", tag)
	case rttChannel:
		return fmt.Errorf("stabilizer: channel tag %#x: reserved for round-trip pings", tag)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.started {
		return fmt.Errorf("stabilizer: channel %#x: register channels before Start", tag)
	}
	if n.mu.channels == nil {
		n.mu.channels = map[byte]ChannelHandler{}
	}
	if _, dup := n.mu.channels[tag]; dup {
		return fmt.Errorf("stabilizer: channel %#x: already registered", tag)
	}
	n.mu.channels[tag] = h
	return nil
}

// SendChannel sends frame to peer on an application channel. Frames may be
// lost while the peer is unreachable (an error says so); those that arrive
// do so in order.
func (n *Node) SendChannel(peer string, tag byte, frame []byte) error {
	if n.cfg.Transport == nil {
		return errors.New("stabilizer: send on channel: no transport")
	}
	if tag < MinChannelTag {
		return fmt.Errorf("stabilizer: channel tag %#x: must be at least %#x", tag, MinChannelTag)
	}
	buf := make([]byte, 1+len(frame))
	buf[0] = tag
	copy(buf[1:], frame)
	return n.cfg.Transport.Send(peer, PlaneData, buf)
}

// channelFrame hands an application frame to its channel; it reports
// whether the frame was one.
func (n *Node) channelFrame(from string, frame []byte) bool {
	if len(frame) == 0 || frame[0] < MinChannelTag {
		return false
	}
	switch frame[0] {
	case transferChannel:
		n.transferFrame(from, frame[1:])
		return true
	case rttChannel:
		n.rttFrame(from, frame[1:])
		return true
	}
	n.mu.Lock()
	h := n.mu.channels[frame[0]]
	n.mu.Unlock()
	if h == nil {
		n.log.Warn("dropping frame of an unregistered channel", "from", from, "tag", frame[0])
		return true
	}
	h(from, frame[1:])
	return true
}
