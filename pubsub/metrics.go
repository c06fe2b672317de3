package pubsub

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus series, per topic (and subscription
// where it says): topic and subscription names are few and chosen by
// operators, like stream names.
type metrics struct {
	publishedMsgs  *prometheus.CounterVec
	publishedBytes *prometheus.CounterVec
	receivedMsgs   *prometheus.CounterVec
	delivered      *prometheus.CounterVec
	acked          *prometheus.CounterVec
	redelivered    *prometheus.CounterVec
	deadLettered   *prometheus.CounterVec
	unacked        *prometheus.GaugeVec
	live           *prometheus.GaugeVec
	lag            *prometheus.HistogramVec
	duplicates     prometheus.Counter
	droppedMsgs    *prometheus.CounterVec
	droppedBytes   *prometheus.CounterVec
	truncated      *prometheus.GaugeVec
}

// Why retention dropped a message (the reason label).
const (
	reasonInterest       = "interest"
	reasonWorkQueue      = "workqueue"
	reasonMaxAge         = "max_age"
	reasonLimitsMessages = "limits_messages"
	reasonLimitsBytes    = "limits_bytes"
)

func newMetrics(reg prometheus.Registerer, site string) *metrics {
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &metrics{
		publishedMsgs:  c("pubsub_published_messages_total", "Messages published at this site.", "topic"),
		publishedBytes: c("pubsub_published_bytes_total", "Bytes of data and headers published at this site.", "topic"),
		receivedMsgs:   c("pubsub_stored_messages_total", "Messages stored at this site, by origin.", "topic", "origin"),
		delivered:      c("pubsub_delivered_total", "Deliveries to subscribers at this site, first ones and redeliveries.", "topic", "subscription"),
		acked:          c("pubsub_acked_total", "Messages acked (or terminated) by subscribers at this site.", "topic", "subscription"),
		redelivered:    c("pubsub_redelivered_total", "Redeliveries after an ack wait, a nak or a consumer that left.", "topic", "subscription"),
		deadLettered:   c("pubsub_dead_lettered_total", "Messages sent to a dead-letter topic after their last delivery.", "topic", "subscription"),
		unacked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pubsub_unacked_messages",
			Help: "Messages a subscription at this site has offered and not seen acked."}, []string{"topic", "subscription"}),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pubsub_live_subscribers",
			Help: "Consumers attached to the topic's subscriptions at this site."}, []string{"topic"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pubsub_delivery_lag_seconds",
			Help:    "From a message's publication (its HLC) to its first delivery at this site.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"topic"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "pubsub_duplicates_dropped_total",
			Help: "Retried publishes whose message id this site had already stored, not stored again."}),
		droppedMsgs: c("pubsub_retention_dropped_messages_total",
			"Stored messages this site dropped by the topic's retention, by reason (limits_messages, limits_bytes, max_age, interest, workqueue).", "topic", "reason"),
		droppedBytes: c("pubsub_retention_dropped_bytes_total", "Bytes of the stored messages this site dropped by the topic's retention.", "topic"),
		truncated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pubsub_stream_truncated_seq",
			Help: "The seq up to which this site truncated the log of an origin's pub/sub stream (every site applied it)."}, []string{"origin"}),
	}
	if reg != nil {
		reg.MustRegister(m.publishedMsgs, m.publishedBytes, m.receivedMsgs, m.delivered, m.acked, m.redelivered,
			m.deadLettered, m.unacked, m.live, m.lag, m.duplicates, m.droppedMsgs, m.droppedBytes, m.truncated)
	}
	return m
}

func (m *metrics) published(topic string, bytes int) {
	m.publishedMsgs.WithLabelValues(topic).Inc()
	m.publishedBytes.WithLabelValues(topic).Add(float64(bytes))
}

func (m *metrics) received(topic, origin string, n int) {
	m.receivedMsgs.WithLabelValues(topic, origin).Add(float64(n))
}

func (m *metrics) liveSubscribers(topic string, d int) {
	m.live.WithLabelValues(topic).Add(float64(d))
}
