package storage

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	commits       prometheus.Counter
	writes        prometheus.Counter
	appendedMsgs  prometheus.Counter
	appendedBytes prometheus.Counter
	commitSeconds prometheus.Histogram
	groupWrites   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_storage_commits_total",
			Help: "Synced pebble commits (one per group of combined Writes).",
		}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_storage_writes_total",
			Help: "Write calls committed.",
		}),
		appendedMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_storage_appended_messages_total",
			Help: "Stream messages made durable.",
		}),
		appendedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stabilizer_storage_appended_bytes_total",
			Help: "Payload bytes of stream messages made durable.",
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stabilizer_storage_commit_duration_seconds",
			Help:    "Time from a group's apply to its fsync completing.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14),
		}),
		groupWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stabilizer_storage_commit_group_writes",
			Help:    "Write calls combined into one synced commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.commits, m.writes, m.appendedMsgs, m.appendedBytes, m.commitSeconds, m.groupWrites} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("storage: register metrics"), err)
	}
	return m, nil
}

// walFsync exports pebble's own histogram of WAL fsync latencies, read at
// scrape time: the disk's part of a commit, beside commit_duration, which
// also counts the wait for a sync already running and the hand-offs.
type walFsync struct {
	s    *Store
	desc *prometheus.Desc
}

func newWALFsync(s *Store) walFsync {
	return walFsync{s, prometheus.NewDesc("stabilizer_storage_wal_fsync_seconds",
		"Duration of pebble's WAL fsyncs.", nil, nil)}
}

func (c walFsync) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c walFsync) Collect(ch chan<- prometheus.Metric) {
	if !c.s.enter() {
		return
	}
	defer c.s.ops.Done()
	var m dto.Metric
	if err := c.s.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		return
	}
	h := m.GetHistogram()
	buckets := make(map[float64]uint64, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()/1e9] = b.GetCumulativeCount() // pebble counts nanoseconds
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, h.GetSampleCount(), h.GetSampleSum()/1e9, buckets)
}
