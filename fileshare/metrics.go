package fileshare

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/fileshare/manifest"
	"github.com/stabilizer/stabilizer/fileshare/plan"
)

// metrics of a site's file sharing: per share what clients moved, and per
// origin what the files streams brought.
type metrics struct {
	upBytes, upChunks     *prometheus.CounterVec
	dedupBytes, dedupN    *prometheus.CounterVec
	downBytes, downChunks *prometheus.CounterVec
	commits               *prometheus.CounterVec
	pending, conflicts    *prometheus.GaugeVec
	chunksIn, chunkBytes  *prometheus.CounterVec
	appliedDup            *prometheus.CounterVec
	pruned                *prometheus.CounterVec
	lists                 *prometheus.CounterVec
	gc                    gcMetrics
}

// gcMetrics are the chunk collector's.
type gcMetrics struct {
	relocated, dropped prometheus.Counter
	reclaimed          *prometheus.CounterVec
	live               prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string, label string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fileshare_" + name, Help: help}, []string{label})
		if reg != nil {
			reg.MustRegister(v)
		}
		return v
	}
	g := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fileshare_" + name, Help: help}, []string{"share"})
		if reg != nil {
			reg.MustRegister(v)
		}
		return v
	}
	m := &metrics{
		upBytes:    c("uploaded_bytes_total", "Chunk bytes clients uploaded to this site that it did not hold.", "share"),
		upChunks:   c("uploaded_chunks_total", "Chunks clients uploaded to this site that it did not hold.", "share"),
		dedupBytes: c("deduplicated_bytes_total", "Chunk bytes clients offered that this site held already (not stored or sent again).", "share"),
		dedupN:     c("deduplicated_chunks_total", "Chunks clients offered that this site held already.", "share"),
		downBytes:  c("downloaded_bytes_total", "Chunk bytes clients fetched from this site.", "share"),
		downChunks: c("downloaded_chunks_total", "Chunks clients fetched from this site.", "share"),
		commits:    c("versions_committed_total", "File versions recorded at this site.", "share"),
		pending:    g("versions_pending_stability", "Versions this site knows that are not yet stable under the share's visibility predicate."),
		conflicts:  g("conflicts", "Conflict copies the share shows (concurrent edits kept side by side) plus deletes that lost to an edit."),
		chunksIn:   c("chunks_applied_total", "Chunks of the origin's files streams stored at this site.", "origin"),
		chunkBytes: c("chunk_bytes_applied_total", "Chunk bytes of the origin's files streams stored at this site.", "origin"),
		appliedDup: c("chunks_applied_duplicate_total", "Chunks of the origin's files streams this site held already.", "origin"),
		pruned:     c("versions_pruned_total", "Versions this site recorded whose content history retention dropped (keep_versions, keep_seconds).", "share"),
	}
	m.gc = gcMetrics{
		relocated: prometheus.NewCounter(prometheus.CounterOpts{Name: "fileshare_gc_relocated_bytes_total",
			Help: "Chunk bytes the collector rewrote to this site's files streams: live chunks moved out of a prefix it drops, and chunks other sites asked for again."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "fileshare_gc_dropped_chunks_total",
			Help: "Chunks the collector stopped locating here: no retained version named them for the grace period."}),
		reclaimed: c("gc_reclaimed_bytes_total", "Bytes of the origin's files streams' entries the collector truncated from this site's log.", "origin"),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fileshare_gc_live_bytes",
			Help: "Bytes of the chunks held here that a retained version (or a commit in progress) names, at the last collection."}),
	}
	m.lists = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fileshare_lists_total",
		Help: "Lists of a whole share with a cursor answered here: in full (no cursor, or one this site does not know) or only what changed since the cursor (kind delta)."},
		[]string{"share", "kind"})
	if reg != nil {
		reg.MustRegister(m.gc.relocated, m.gc.dropped, m.gc.live, m.lists)
	}
	return m
}

func shareLabel(share string) string {
	if checkShareName(share) != nil {
		return "" // unknown or bad: never a label from raw input
	}
	return share
}

func (m *metrics) uploaded(share string, n int, dup bool) {
	share = shareLabel(share)
	if dup {
		m.dedupN.WithLabelValues(share).Inc()
		m.dedupBytes.WithLabelValues(share).Add(float64(n))
		return
	}
	m.upChunks.WithLabelValues(share).Inc()
	m.upBytes.WithLabelValues(share).Add(float64(n))
}

func (m *metrics) downloaded(share string, n int) {
	share = shareLabel(share)
	m.downChunks.WithLabelValues(share).Inc()
	m.downBytes.WithLabelValues(share).Add(float64(n))
}

func (m *metrics) listed(share string, delta bool) {
	kind := "full"
	if delta {
		kind = "delta"
	}
	m.lists.WithLabelValues(shareLabel(share), kind).Inc()
}

func (m *metrics) committed(share string) { m.commits.WithLabelValues(share).Inc() }

func (m *metrics) applied(origin string, stored, dup int, bytes int64) {
	m.chunksIn.WithLabelValues(origin).Add(float64(stored))
	m.chunkBytes.WithLabelValues(origin).Add(float64(bytes))
	if dup > 0 {
		m.appliedDup.WithLabelValues(origin).Add(float64(dup))
	}
}

// ShareStatus summarises one share at this site, for the status page.
type ShareStatus struct {
	Name, Visibility string
	Versions         int // known here
	Pending          int // not yet stable
	Paths            int // shown
	Conflicts        int
}

// Status summarises every share at this site.
func (s *Service) Status(ctx context.Context) ([]ShareStatus, error) {
	shares, err := s.Shares(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ShareStatus, 0, len(shares))
	for _, sh := range shares {
		vs, err := s.List(ctx, sh.Name, "")
		if err != nil {
			return nil, err
		}
		st := ShareStatus{Name: sh.Name, Visibility: sh.Visibility, Versions: len(vs)}
		pv := make([]plan.Version, len(vs))
		for i, v := range vs {
			if !v.Stable {
				st.Pending++
			}
			pv[i] = manifest.ToPlan(v)
		}
		view := plan.Resolve(pv)
		st.Paths, st.Conflicts = len(view.Files), len(view.Conflicts)
		out = append(out, st)
	}
	return out, nil
}

func (s *Service) refreshGauges(ctx context.Context) {
	st, err := s.Status(ctx)
	if err != nil {
		return
	}
	for _, sh := range st {
		s.metrics.pending.WithLabelValues(sh.Name).Set(float64(sh.Pending))
		s.metrics.conflicts.WithLabelValues(sh.Name).Set(float64(sh.Conflicts))
	}
}
