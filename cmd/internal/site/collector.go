package site

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// collector reads the node's streams at scrape time: heads, the ack table
// and every frontier, so the metrics are exactly what the node knows.
type collector struct{ node *stabilizer.Node }

var (
	descHead = prometheus.NewDesc("stabilizer_stream_head",
		"Highest seq of the stream this site holds (appended or received in order).", []string{"origin", "stream"}, nil)
	descAck = prometheus.NewDesc("stabilizer_stream_ack",
		"Ack table: highest seq acknowledged by a site at a level.", []string{"origin", "stream", "site", "level"}, nil)
	descFrontier = prometheus.NewDesc("stabilizer_frontier",
		"Frontier of a named predicate on a stream.", []string{"origin", "stream", "predicate"}, nil)
	descLag = prometheus.NewDesc("stabilizer_frontier_lag_seconds",
		"How far a predicate's frontier trails the stream's head, in time: now minus the HLC of the frontier, 0 when at the head.",
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
			lag := 0.0
			if f.Seq < st.Head && f.HLC.Wall > 0 {
				lag = now.Sub(time.Unix(0, f.HLC.Wall)).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag, o, name, pred)
		}
	}
}
