package site

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/kv/lin"
	"github.com/stabilizer/stabilizer/stabilizer"
)

// collector reads the node's streams at scrape time: heads, the ack table
// and every frontier, so the metrics are exactly what the node knows.
type collector struct {
	node      *stabilizer.Node
	uncovered *uncovered
}

var (
	descHead = prometheus.NewDesc("stabilizer_stream_head",
		"Highest seq of the stream this site holds (appended or received in order).", []string{"origin", "stream"}, nil)
	descAck = prometheus.NewDesc("stabilizer_stream_ack",
		"Ack table: highest seq acknowledged by a site at a level.", []string{"origin", "stream", "site", "level"}, nil)
	descFrontier = prometheus.NewDesc("stabilizer_frontier",
		"Frontier of a named predicate on a stream.", []string{"origin", "stream", "predicate"}, nil)
	descLag = prometheus.NewDesc("stabilizer_frontier_lag_seconds",
		"How long the oldest write a predicate's frontier does not cover has waited (now minus its HLC), 0 when the frontier is at the head.",
		[]string{"origin", "stream", "predicate"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHead
	ch <- descAck
	ch <- descFrontier
	ch <- descLag
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	streams, err := c.node.Streams(ctx)
	if err != nil {
		return
	}
	schema := c.node.Schema()
	n := len(schema.Sites)
	now := time.Now()
	for _, st := range streams {
		o, name := st.Stream.Origin, st.Stream.Name
		ch <- prometheus.MustNewConstMetric(descHead, prometheus.GaugeValue, float64(st.Head), o, name)
		for l, level := range schema.LevelNames() {
			for i, site := range schema.Sites {
				ch <- prometheus.MustNewConstMetric(descAck, prometheus.GaugeValue, float64(st.Acks[l*n+i]), o, name, site, level)
			}
		}
		for pred, f := range st.Frontiers {
			ch <- prometheus.MustNewConstMetric(descFrontier, prometheus.GaugeValue, float64(f.Seq), o, name, pred)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lagSeconds(f, st.Head, c.uncovered.since(st, pred), now), o, name, pred)
		}
	}
}

// linCollector reads the linearizable group's state at scrape time: whether
// this site knows a leader (leases and fenced writes wait for one), leads,
// and the term and applied index.
type linCollector struct{ node *lin.Node }

var (
	descLinHasLeader = prometheus.NewDesc("stabilizer_lin_has_leader",
		"1 when this site knows a leader of the linearizable group, 0 during elections and when it is cut off from a majority.", nil, nil)
	descLinIsLeader = prometheus.NewDesc("stabilizer_lin_is_leader",
		"1 when this site leads the linearizable group.", nil, nil)
	descLinTerm = prometheus.NewDesc("stabilizer_lin_term",
		"The linearizable group's Raft term as this site knows it; each rise is an election.", nil, nil)
	descLinApplied = prometheus.NewDesc("stabilizer_lin_applied_index",
		"The last Raft log index this site applied.", nil, nil)
)

func (c *linCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLinHasLeader
	ch <- descLinIsLeader
	ch <- descLinTerm
	ch <- descLinApplied
}

func (c *linCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.node.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(descLinHasLeader, prometheus.GaugeValue, b(st.Leader != ""))
	ch <- prometheus.MustNewConstMetric(descLinIsLeader, prometheus.GaugeValue, b(st.Leader != "" && st.Leader == st.Site))
	ch <- prometheus.MustNewConstMetric(descLinTerm, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(descLinApplied, prometheus.GaugeValue, float64(st.Applied))
}
