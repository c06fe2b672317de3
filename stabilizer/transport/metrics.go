package transport

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	sentFrames, sentBytes, recvFrames, recvBytes *prometheus.CounterVec
	dropped, coalesced, sessions                 *prometheus.CounterVec
	queued, up                                   *prometheus.GaugeVec

	mu    sync.Mutex
	peers map[planeKey]*peerMetrics
}

// peerMetrics are one (peer, plane)'s children, looked up once.
type peerMetrics struct {
	sentFrames, sentBytes, recvFrames, recvBytes prometheus.Counter
	dropped, coalesced, sessions                 prometheus.Counter
	queued, up                                   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"peer", "plane"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_transport_" + name, Help: help}, labels)
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stabilizer_transport_" + name, Help: help}, labels)
	}
	m := &metrics{
		sentFrames: counter("sent_frames_total", "Frames written to a peer's stream."),
		sentBytes:  counter("sent_bytes_total", "Frame bytes written to a peer's stream."),
		recvFrames: counter("received_frames_total", "Frames received from a peer."),
		recvBytes:  counter("received_bytes_total", "Frame bytes received from a peer."),
		dropped:    counter("dropped_frames_total", "Frames not sent: no session, or queued when a session ended."),
		coalesced:  counter("coalesced_frames_total", "Queued frames replaced by a newer one with the same key."),
		sessions:   counter("sessions_total", "Outbound sessions established."),
		queued:     gauge("queued_bytes", "Bytes queued and not yet sent."),
		up:         gauge("session_up", "1 while the outbound session is up."),
		peers:      make(map[planeKey]*peerMetrics),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.sentFrames, m.sentBytes, m.recvFrames, m.recvBytes, m.dropped, m.coalesced, m.sessions, m.queued, m.up} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("transport: register metrics"), err)
	}
	return m, nil
}

func (m *metrics) peer(peer string, plane Plane) *peerMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := planeKey{peer, plane}
	if p := m.peers[k]; p != nil {
		return p
	}
	l := prometheus.Labels{"peer": peer, "plane": plane.String()}
	p := &peerMetrics{
		sentFrames: m.sentFrames.With(l), sentBytes: m.sentBytes.With(l),
		recvFrames: m.recvFrames.With(l), recvBytes: m.recvBytes.With(l),
		dropped: m.dropped.With(l), coalesced: m.coalesced.With(l), sessions: m.sessions.With(l),
		queued: m.queued.With(l), up: m.up.With(l),
	}
	m.peers[k] = p
	return p
}
