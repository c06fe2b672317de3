package wan

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the wan_* collectors, labelled by directed link. Labels are
// site names only, so cardinality is the number of links.
type metrics struct {
	sent      *prometheus.CounterVec
	delivered *prometheus.CounterVec
	lost      *prometheus.CounterVec
	held      *prometheus.GaugeVec
	conns     *prometheus.GaugeVec
	cut       *prometheus.GaugeVec
	delay     *prometheus.GaugeVec
	bandwidth *prometheus.GaugeVec
}

var linkLabels = []string{"from", "to"}

// newMetrics builds the collectors and registers them in reg when it is
// not nil. Without a registerer the collectors still count, unexported.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wan_sent_bytes_total",
			Help: "Bytes that entered an emulated link from the sending side.",
		}, linkLabels),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wan_delivered_bytes_total",
			Help: "Bytes an emulated link delivered to the receiving side.",
		}, linkLabels),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wan_lost_segments_total",
			Help: "Emulated TCP segment losses (each costs a retransmission delay).",
		}, linkLabels),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wan_held_bytes",
			Help: "Bytes inside an emulated link: in flight, or held by a cut.",
		}, linkLabels),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wan_connections",
			Help: "Open connections dialed through an emulated link.",
		}, linkLabels),
		cut: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wan_link_cut",
			Help: "1 while an emulated link is cut, else 0.",
		}, linkLabels),
		delay: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wan_link_delay_seconds",
			Help: "Configured one-way delay of an emulated link.",
		}, linkLabels),
		bandwidth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wan_link_bandwidth_bytes_per_second",
			Help: "Configured bandwidth of an emulated link (0: unlimited).",
		}, linkLabels),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.sent, m.delivered, m.lost, m.held, m.conns, m.cut, m.delay, m.bandwidth} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("wan: register metrics: %w", err)
	}
	return m, nil
}

// linkMetrics are one link's children, resolved once.
type linkMetrics struct {
	sent, delivered, lost prometheus.Counter
	held, conns           prometheus.Gauge
	cut, delay, bandwidth prometheus.Gauge
}

func (m *metrics) forLink(from, to string) linkMetrics {
	return linkMetrics{
		sent:      m.sent.WithLabelValues(from, to),
		delivered: m.delivered.WithLabelValues(from, to),
		lost:      m.lost.WithLabelValues(from, to),
		held:      m.held.WithLabelValues(from, to),
		conns:     m.conns.WithLabelValues(from, to),
		cut:       m.cut.WithLabelValues(from, to),
		delay:     m.delay.WithLabelValues(from, to),
		bandwidth: m.bandwidth.WithLabelValues(from, to),
	}
}
