package pubsub

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// The pub/sub streams' logs are truncated at every site once every site
// applied them (at ap, TruncateLag entries short of that); subscribers
// still read every message (from the broker's namespace), and a restarted
// site keeps its floors and goes on.
func TestStreamTruncation(t *testing.T) {
	const lag = 2
	c := newCluster(t, func(site string, cfg *Config) {
		byHand(site, cfg)
		if site == ap {
			cfg.TruncateLag = lag
		}
	}, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events", Retention: Retention{MaxMessages: 25}})
	last := map[string]uint64{}
	for _, s := range sites3 {
		acks := publishN(t, c.broker(s), "jobs.events", 10, s)
		last[s] = acks[9].Seq
	}
	truncated := func(site string) map[string]uint64 {
		sts, err := c.Node(site).Streams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, st := range sts {
			if st.Stream.Name == Stream {
				out[st.Stream.Origin] = st.Truncated
			}
		}
		return out
	}
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range sites3 {
			if err := c.broker(s).truncateNow(ctx); err != nil {
				return err
			}
		}
		for _, s := range sites3 {
			for _, o := range sites3 {
				want := last[o]
				if s == ap {
					want -= lag
				}
				if got := truncated(s)[o]; got < want {
					return fmt.Errorf("%s truncated %s's stream to %d, want %d", s, o, got, want)
				}
			}
		}
		return nil
	})
	for _, o := range sites3 {
		if got := truncated(ap)[o]; got != last[o]-lag {
			t.Fatalf("%s, %d entries behind, truncated %s's stream to %d, want %d", ap, lag, o, got, last[o]-lag)
		}
	}
	for _, s := range sites3 {
		if got := testutil.ToFloat64(c.broker(s).metrics.truncated.WithLabelValues(us)); got != float64(truncated(s)[us]) {
			t.Fatalf("at %s: pubsub_stream_truncated_seq{origin=%s} %v, want %d", s, us, got, truncated(s)[us])
		}
	}
	c.retainAt(t, eu) // 5 of the 30 go at eu
	before := originOf(t, c.broker(eu), "jobs.events", us)
	for _, s := range sites3 {
		cn, err := c.broker(s).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartAll})
		if err != nil {
			t.Fatal(err)
		}
		n := 30
		if s == eu {
			n = 25
		}
		receive(t, ctx, cn, n, true)
		none(t, cn, 20*time.Millisecond)
		if err := cn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	c.Stop(eu)
	c.Start(eu)
	if after := originOf(t, c.broker(eu), "jobs.events", us); after != before {
		t.Fatalf("after a restart %s says %+v of %s, before %+v", eu, after, us, before)
	}
	if got := truncated(eu)[us]; got < last[us] {
		t.Fatalf("after a restart %s's log of %s is truncated to %d, was %d", eu, us, got, last[us])
	}
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartNew})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, c.broker(us), "jobs.events", 2, "after-us")
	publishN(t, c.broker(eu), "jobs.events", 2, "after-eu")
	got := data(receive(t, ctx, cn, 4, true))
	for _, want := range []string{"after-us-0", "after-us-1", "after-eu-0", "after-eu-1"} {
		if !strings.Contains(strings.Join(got, ","), want) {
			t.Fatalf("after a restart %s got %v, missing %s", eu, got, want)
		}
	}
	stabilizertest.Eventually(t, 0, func() error {
		if err := c.broker(eu).truncateNow(ctx); err != nil {
			return err
		}
		if got, f := truncated(eu)[eu], c.broker(eu).store.statsOf("jobs.events", eu).LastSeq; got < f {
			return fmt.Errorf("%s's own stream truncated to %d, want %d", eu, got, f)
		}
		return nil
	})
}

// The streams a truncation reads are the ack table's applied row.
func TestAllApplied(t *testing.T) {
	// levels received, persisted, applied; three sites.
	acks := []uint64{9, 9, 9, 8, 8, 7, 6, 4, 5}
	if got := allApplied(acks, 3); got != 4 {
		t.Fatalf("allApplied = %d, want 4", got)
	}
}

// A site that lost its disk, after every site truncated the pub/sub logs,
// copies each origin's messages from a peer (state transfer): a
// subscriber there from the start reads every message of every origin,
// and the site publishes again.
func TestWipedSiteGetsMessagesBack(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events"})
	for _, s := range sites3 {
		publishN(t, c.broker(s), "jobs.events", 10, s)
	}
	stabilizertest.Eventually(t, 0, func() error {
		for _, s := range sites3 {
			if err := c.broker(s).truncateNow(ctx); err != nil {
				return err
			}
		}
		sts, err := c.Node(eu).Streams(ctx)
		if err != nil {
			return err
		}
		for _, st := range sts {
			if st.Stream.Name == Stream && st.Truncated < st.Persisted {
				return fmt.Errorf("%s: %s truncated to %d of %d", eu, st.Stream, st.Truncated, st.Persisted)
			}
		}
		return nil
	})
	c.Stop(ap)
	if err := os.RemoveAll(c.Dir(ap)); err != nil {
		t.Fatal(err)
	}
	c.Start(ap)
	var got []string
	stabilizertest.Eventually(t, 0, func() error {
		cn, err := c.broker(ap).Subscribe(ctx, SubOptions{Topic: "jobs.events", Start: StartAll})
		if err != nil {
			return err
		}
		defer cn.Close(ctx)
		got = got[:0]
		for len(got) < 30 {
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			ds, err := cn.Next(rctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%s after the wipe read %d of 30 messages: %v", ap, len(got), err)
			}
			for _, d := range ds {
				got = append(got, string(d.Msg.Data))
			}
		}
		return nil
	})
	for _, s := range sites3 {
		for i := range 10 {
			if want := fmt.Sprintf("%s-%d", s, i); !slices.Contains(got, want) {
				t.Fatalf("%s after the wipe lacks %s: %v", ap, want, got)
			}
		}
	}
	publishN(t, c.broker(ap), "jobs.events", 1, "after")
}
