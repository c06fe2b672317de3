package segment

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	appendedBytes   prometheus.Counter
	appendedRecords prometheus.Counter
	syncs           prometheus.Counter
	syncSeconds     prometheus.Histogram
	tornTails       prometheus.Counter
	corruptRecords  prometheus.Counter
	deletedSegments prometheus.Counter
	reg             prometheus.Registerer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		appendedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_appended_bytes_total",
			Help: "Bytes written to segment files by Append, record headers included.",
		}),
		appendedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_appended_records_total",
			Help: "Records appended.",
		}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_syncs_total",
			Help: "Sync calls that completed.",
		}),
		syncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stabilizer_segment_sync_duration_seconds",
			Help:    "Duration of Sync calls: the fdatasyncs of the segments written since the last one and the fsyncs of changed directories.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		tornTails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_torn_tails_cut_total",
			Help: "Torn or corrupt stream tails Open cut.",
		}),
		corruptRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_corrupt_records_total",
			Help: "Records Read found corrupt (checksum or framing mismatch).",
		}),
		deletedSegments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_segment_deleted_segments_total",
			Help: "Segment files deleted by Truncate, Reset and Open's cuts.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range done {
			reg.Unregister(c)
		}
		return nil, errors.Join(errors.New("segment: register metrics"), err)
	}
	m.reg = reg
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.appendedBytes, m.appendedRecords, m.syncs, m.syncSeconds, m.tornTails, m.corruptRecords, m.deletedSegments}
}

// unregister removes the metrics from the Registerer, so that a store opened
// again in the same process can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}
