package stabilizer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/stabilizer/core"
)

// metrics of one node. Labels stay low-cardinality: peers, predicates and
// stream names, never seqs or keys.
type metrics struct {
	appends     prometheus.Counter
	sentBytes   *prometheus.CounterVec
	sentMsgs    *prometheus.CounterVec
	recvBytes   *prometheus.CounterVec
	recvMsgs    *prometheus.CounterVec
	connected   *prometheus.GaugeVec
	rtt         *prometheus.GaugeVec
	waitSeconds *prometheus.HistogramVec
	readies     prometheus.Counter
	entries     prometheus.Counter
	advances    *prometheus.CounterVec
	relayed     *prometheus.CounterVec
	inline      *prometheus.GaugeVec
	// inlineInUse and inlineIdle are inline's two series.
	inlineInUse, inlineIdle prometheus.Gauge
	// The disk guard's (disk.go).
	diskFree, diskReserve, diskFull prometheus.Gauge
	diskRefusals, diskDropped       prometheus.Counter
	// State transfer's (transfer*.go).
	transferBytes *prometheus.CounterVec
	transfers     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, site string) (*metrics, error) {
	constLabels := prometheus.Labels{"site": site}
	m := &metrics{
		appends: prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_appends_total",
			Help: "Messages appended to this site's streams.", ConstLabels: constLabels}),
		sentBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_peer_sent_bytes_total",
			Help: "Bytes of protocol frames sent, per peer.", ConstLabels: constLabels}, []string{"peer"}),
		sentMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_peer_sent_frames_total",
			Help: "Protocol frames sent, per peer.", ConstLabels: constLabels}, []string{"peer"}),
		recvBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_peer_received_bytes_total",
			Help: "Bytes of protocol frames received, per peer.", ConstLabels: constLabels}, []string{"peer"}),
		recvMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_peer_received_frames_total",
			Help: "Protocol frames received, per peer.", ConstLabels: constLabels}, []string{"peer"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stabilizer_peer_connected",
			Help: "1 while both connections to the peer are up.", ConstLabels: constLabels}, []string{"peer"}),
		rtt: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stabilizer_peer_rtt_seconds",
			Help:        "Smoothed round trip to the peer, measured by pings on the control connection since it last connected; absent while not connected.",
			ConstLabels: constLabels}, []string{"peer"}),
		waitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stabilizer_wait_seconds",
			Help: "Time WaitFor waited for a frontier, per predicate.", ConstLabels: constLabels,
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"predicate"}),
		readies: prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_readies_total",
			Help: "Ready batches handled by the loop.", ConstLabels: constLabels}),
		entries: prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_persisted_entries_total",
			Help: "Stream messages persisted at this site, own and remote.", ConstLabels: constLabels}),
		advances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_frontier_advances_total",
			Help: "Frontier advances published, per predicate.", ConstLabels: constLabels}, []string{"predicate"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_relayed_entries_total",
			Help: "Entries of other origins' streams this site relayed, per peer sent to.", ConstLabels: constLabels}, []string{"peer"}),
		inline: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "stabilizer_inline_predicates",
			Help: "Inline predicates the site holds: in_use by a call, or idle and kept for reuse.", ConstLabels: constLabels}, []string{"state"}),
	}
	m.inlineInUse, m.inlineIdle = m.inline.WithLabelValues("in_use"), m.inline.WithLabelValues("idle")
	m.diskFree = prometheus.NewGauge(prometheus.GaugeOpts{Name: "stabilizer_disk_free_bytes",
		Help: "Bytes available to unprivileged users under the site's data directory, at the last check.", ConstLabels: constLabels})
	m.diskReserve = prometheus.NewGauge(prometheus.GaugeOpts{Name: "stabilizer_disk_reserve_bytes",
		Help: "Free space below which the site refuses appends and peers' data (0: no guard).", ConstLabels: constLabels})
	m.diskFull = prometheus.NewGauge(prometheus.GaugeOpts{Name: "stabilizer_disk_full",
		Help: "1 while the site's free space is below its reserve: appends refused, peers' data dropped.", ConstLabels: constLabels})
	m.diskRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_disk_full_refusals_total",
		Help: "Messages whose append was refused because the disk was full.", ConstLabels: constLabels})
	m.diskDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_disk_full_dropped_frames_total",
		Help: "Data frames from peers dropped because the disk was full; the peers resend them.", ConstLabels: constLabels})
	m.transferBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stabilizer_state_transfer_bytes_total",
		Help: "Bytes of application state sent and received by state transfer (keys and values).", ConstLabels: constLabels}, []string{"direction"})
	// Both directions exist from the start, at 0: a rate over them (a
	// dashboard's, an alert's) reads 0 on a site that never transferred,
	// not an absent series.
	m.transferBytes.WithLabelValues("sent")
	m.transferBytes.WithLabelValues("received")
	m.transfers = prometheus.NewCounter(prometheus.CounterOpts{Name: "stabilizer_state_transfers_total",
		Help: "State transfers this site completed as receiver.", ConstLabels: constLabels})
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.appends, m.sentBytes, m.sentMsgs, m.recvBytes, m.recvMsgs,
		m.connected, m.rtt, m.waitSeconds, m.readies, m.entries, m.advances, m.relayed, m.inline,
		m.diskFree, m.diskReserve, m.diskFull, m.diskRefusals, m.diskDropped, m.transferBytes, m.transfers} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) sent(peer string, n int) {
	m.sentBytes.WithLabelValues(peer).Add(float64(n))
	m.sentMsgs.WithLabelValues(peer).Inc()
}

func (m *metrics) received(peer string, n int) {
	m.recvBytes.WithLabelValues(peer).Add(float64(n))
	m.recvMsgs.WithLabelValues(peer).Inc()
}

func (m *metrics) setConnected(peer string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.connected.WithLabelValues(peer).Set(v)
}

func (m *metrics) setDisk(st DiskStatus) {
	m.diskFree.Set(float64(st.Free))
	m.diskReserve.Set(float64(st.Reserve))
	full := 0.0
	if st.Full {
		full = 1
	}
	m.diskFull.Set(full)
}

func (m *metrics) observeReady(rd *core.Ready) {
	m.readies.Inc()
	m.entries.Add(float64(len(rd.Entries)))
	for _, a := range rd.Frontiers {
		m.advances.WithLabelValues(predicateLabel(a.Predicate)).Inc()
	}
	for i := range rd.Messages {
		// The core sends relayed entries in Data messages of their own.
		if msg := &rd.Messages[i]; msg.Type == core.MsgData && len(msg.Entries) > 0 && msg.Entries[0].Stream.Origin != msg.From {
			m.relayed.WithLabelValues(msg.To).Add(float64(len(msg.Entries)))
		}
	}
}
