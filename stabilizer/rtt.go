package stabilizer

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Round trips: every PingInterval, and as soon as a peer connects, the
// node sends each connected peer a ping on the reserved rttChannel of the
// control plane; the peer answers at once with a pong that echoes the
// ping's send time. The control connection goes through the same links as
// the data (under the emulated WAN, the same emulated link) but never
// queues behind data, so what it measures is the link and the two
// transports, not a backlog of entries.

// PingInterval is how often the node measures each connected peer's
// round trip.
const PingInterval = 2 * time.Second

// rttWeight is the weight of a new sample in the smoothed round trip (an
// EWMA, as TCP's SRTT with its 1/8).
const rttWeight = 0.125

// Frame kinds of rttChannel: the kind, then the sender's clock (ns since
// its node was made, big endian) that the pong echoes.
const (
	framePing = 'p'
	framePong = 'q'
)

// maxRTT bounds a plausible sample: a pong echoing a stamp further back
// (or ahead) is not a round trip of ours and is ignored.
const maxRTT = time.Minute

// PeerStatus is what this site knows of the link to one peer.
type PeerStatus struct {
	Site string
	// Connected: every connection to the peer is up.
	Connected bool
	// RTT is the smoothed round trip (an EWMA of the pongs since the peer
	// last connected); 0 until the first pong.
	RTT time.Duration
	// LastRTT is the latest sample, Measured when it arrived (zero: none).
	LastRTT  time.Duration
	Measured time.Time
	// SentBytes and ReceivedBytes count the protocol frames exchanged
	// with the peer since this node started (application channels and
	// pings not included).
	SentBytes, ReceivedBytes uint64
}

// rttTable holds the round trips measured. Its mutex is a leaf.
type rttTable struct {
	base time.Time     // the stamps' origin; time.Since reads the monotonic clock
	kick chan struct{} // a peer connected: ping now
	mu   struct {
		sync.Mutex
		peers map[string]rttSample
	}
}

type rttSample struct {
	smooth, last time.Duration
	at           time.Time
}

func (r *rttTable) init() {
	r.base = time.Now()
	r.kick = make(chan struct{}, 1)
	r.mu.peers = map[string]rttSample{}
}

// runPings is the pinger goroutine: it pings every connected peer each
// PingInterval and when a peer connects, until the node stops.
func (n *Node) runPings() {
	defer n.wg.Done()
	t := time.NewTicker(PingInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.rtt.kick:
		}
		for peer, up := range n.Connected() {
			if up {
				_ = n.cfg.Transport.Send(peer, PlaneControl, pingFrame(framePing, int64(time.Since(n.rtt.base))))
			}
		}
	}
}

func pingFrame(kind byte, stamp int64) []byte {
	b := make([]byte, 2, 10)
	b[0], b[1] = rttChannel, kind
	return binary.BigEndian.AppendUint64(b, uint64(stamp))
}

// rttFrame answers a ping or records a pong's round trip (from the
// transport's goroutine).
func (n *Node) rttFrame(from string, frame []byte) {
	if len(frame) != 9 {
		n.log.Warn("dropping malformed ping", "from", from, "bytes", len(frame))
		return
	}
	stamp := int64(binary.BigEndian.Uint64(frame[1:]))
	switch frame[0] {
	case framePing:
		_ = n.cfg.Transport.Send(from, PlaneControl, pingFrame(framePong, stamp))
	case framePong:
		d := time.Since(n.rtt.base) - time.Duration(stamp)
		if d < 0 || d > maxRTT {
			return
		}
		n.mu.Lock()
		up := n.mu.planes[from] == allPlanes
		n.mu.Unlock()
		if !up {
			return // a pong from before the peer went down
		}
		n.rtt.mu.Lock()
		s := n.rtt.mu.peers[from]
		if s.smooth == 0 {
			s.smooth = d
		} else {
			s.smooth += time.Duration(rttWeight * float64(d-s.smooth))
		}
		s.last, s.at = d, time.Now()
		n.rtt.mu.peers[from] = s
		n.rtt.mu.Unlock()
		n.m.rtt.WithLabelValues(from).Set(s.smooth.Seconds())
	}
}

// rttConnected starts measuring a peer that just connected, or forgets
// what was measured of one that went down.
func (n *Node) rttConnected(peer string, up bool) {
	if up {
		select {
		case n.rtt.kick <- struct{}{}:
		default:
		}
		return
	}
	n.rtt.mu.Lock()
	delete(n.rtt.mu.peers, peer)
	n.rtt.mu.Unlock()
	n.m.rtt.DeleteLabelValues(peer)
}

// RoundTrips returns the smoothed round trip of every peer measured since
// it last connected.
func (n *Node) RoundTrips() map[string]time.Duration {
	n.rtt.mu.Lock()
	defer n.rtt.mu.Unlock()
	out := make(map[string]time.Duration, len(n.rtt.mu.peers))
	for p, s := range n.rtt.mu.peers {
		out[p] = s.smooth
	}
	return out
}

// Peers describes the link to every other site, in schema order.
func (n *Node) Peers() []PeerStatus {
	conn := n.Connected()
	n.rtt.mu.Lock()
	samples := make(map[string]rttSample, len(n.rtt.mu.peers))
	for p, s := range n.rtt.mu.peers {
		samples[p] = s
	}
	n.rtt.mu.Unlock()
	var out []PeerStatus
	for _, site := range n.cfg.Schema.Sites {
		if site == n.cfg.Site {
			continue
		}
		s := samples[site]
		out = append(out, PeerStatus{Site: site, Connected: conn[site], RTT: s.smooth, LastRTT: s.last, Measured: s.at,
			SentBytes: counterValue(n.m.sentBytes.WithLabelValues(site)), ReceivedBytes: counterValue(n.m.recvBytes.WithLabelValues(site))})
	}
	return out
}

func counterValue(c prometheus.Counter) uint64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return uint64(m.GetCounter().GetValue())
}
