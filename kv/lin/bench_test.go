package lin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkLatency measures put and get latency per client site over the
// in-memory network with WAN-like one-way delays scaled down tenfold
// (us-east-1 leads; eu-west-1 is 4 ms away, ap-south-1 9 ms, and 11 ms
// between them), with real pebble stores that fsync every append. The
// round-trip bounds: a put at the leader needs one round trip to the
// nearest follower (8 ms) plus fsyncs; a put elsewhere adds the round trip
// to the leader; a get needs the leader's read-index round trip to a
// majority, plus the trip to the leader from a follower.
func BenchmarkLatency(b *testing.B) {
	c := newCluster(b, 3, func(cfg *Config) { cfg.Preferred = "us-east-1" })
	c.net.SetDelay("us-east-1", "eu-west-1", 4*time.Millisecond)
	c.net.SetDelay("us-east-1", "ap-south-1", 9*time.Millisecond)
	c.net.SetDelay("eu-west-1", "ap-south-1", 11*time.Millisecond)
	eventually(b, 10*time.Second, func() error {
		if l := c.waitLeader(c.sites, 5*time.Second); l != "us-east-1" {
			return fmt.Errorf("leader %s", l)
		}
		return nil
	})
	for _, site := range c.sites {
		for _, op := range []string{"put", "get"} {
			b.Run(op+"/"+site, func(b *testing.B) {
				n := c.node(site)
				ctx := context.Background()
				val := make([]byte, 1024) // a job record
				lat := make([]time.Duration, 0, b.N)
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					var err error
					if op == "put" {
						_, err = n.Put(ctx, fmt.Sprintf("job/%d", i%64), val)
					} else {
						_, err = n.Get(ctx, "job/1")
						if err != nil && !isNotFound(err) {
							b.Fatal(err)
						}
						err = nil
					}
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, ErrNotFound) }
