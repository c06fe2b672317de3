package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/pubsubclient"
	"github.com/stabilizer/stabilizer/wan"
)

// pubsubScene publishes job events in one region under majority and shows
// them delivered in the others only once stable, then moves a durable
// subscriber from one region to another.
func pubsubScene(ctx context.Context, w io.Writer, st *state, topo *wan.Topology) error {
	us, eu, ap := topo.Groups["us"][0], topo.Groups["eu"][0], topo.Groups["ap"][0]
	dial := func(site string) (*pubsubclient.Client, error) {
		return pubsubclient.Dial([]string{siteOf(st, site).Client})
	}
	pub, err := dial(us)
	if err != nil {
		return err
	}
	defer pub.Close()
	section(w, "Job events: published in "+us+" under majority, delivered elsewhere only once stable")
	topic := pubsubclient.Topic{Name: "jobs.events", PublishAck: "majority", Delivery: "majority"}
	if _, err := pub.CreateTopic(ctx, topic); err != nil {
		return err
	}
	fmt.Fprintf(w, "topic %s: publish-ack majority, delivery majority (a dashboard never sees an event before\n"+
		"the record it announces would survive the loss of a region)\n\n", topic.Name)
	subs := map[string]*pubsubclient.Subscription{}
	for _, site := range []string{eu, ap} {
		c, err := dial(site)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := waitTopic(ctx, c, topic.Name); err != nil {
			return err
		}
		sub, err := c.Subscribe(ctx, topic.Name, pubsubclient.Durable("dashboard"), pubsubclient.StartNew())
		if err != nil {
			return err
		}
		subs[site] = sub
	}
	events := []string{"started", "scaled", "checkpointed", "preempted", "migrated"}
	// Receivers note when each event arrives, while the publisher goes on.
	type arrival struct {
		site string
		seq  uint64
		at   time.Time
	}
	arrived := make(chan arrival, 2*len(events))
	for _, site := range []string{eu, ap} {
		go func() {
			for range events {
				m, err := subs[site].Next(ctx)
				if err != nil {
					return
				}
				arrived <- arrival{site, m.Seq, time.Now()}
				_ = m.Ack()
			}
		}()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "EVENT\tSEQ\tPUBLISH-ACK\tDELIVERED AT %s\tDELIVERED AT %s\t\n", eu, ap)
	for _, ev := range events {
		start := time.Now()
		ack, err := pub.Publish(ctx, topic.Name, fmt.Appendf(nil, `{"job":"job-7","event":%q}`, ev), pubsubclient.MsgID("job-7/"+ev))
		if err != nil {
			return err
		}
		acked := time.Since(start)
		at := map[string]time.Duration{}
		for len(at) < 2 {
			select {
			case a := <-arrived:
				if a.seq == ack.Seq {
					at[a.site] = a.at.Sub(start)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f ms\t%.1f ms\t%.1f ms\t\n", ev, ack.Seq, ms(acked), ms(at[eu]), ms(at[ap]))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nDelivery waits for a majority of regions to have persisted the event, as seen from the subscriber's site.")
	return moveSubscriber(ctx, w, st, pub, eu, ap, topic.Name)
}

// moveSubscriber starts a durable subscription at one site, leaves two
// events unacked there, closes, and resumes it at another site.
func moveSubscriber(ctx context.Context, w io.Writer, st *state, pub *pubsubclient.Client, from, to, topic string) error {
	section(w, "A scheduler's durable subscription moves from "+from+" to "+to)
	dial := func(site string) (*pubsubclient.Client, error) {
		return pubsubclient.Dial([]string{siteOf(st, site).Client})
	}
	a, err := dial(from)
	if err != nil {
		return err
	}
	defer a.Close()
	sub, err := a.Subscribe(ctx, topic, pubsubclient.Durable("scheduler"), pubsubclient.StartNew())
	if err != nil {
		return err
	}
	for i := range 4 {
		if _, err := pub.Publish(ctx, topic, fmt.Appendf(nil, `{"job":"job-%d","event":"queued"}`, 10+i)); err != nil {
			return err
		}
	}
	for i := range 4 {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if i < 2 {
			if err := m.Ack(); err != nil {
				return err
			}
		}
	}
	if err := sub.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "at %s: 4 events delivered, 2 acked, then the scheduler left (its position is stored under majority)\n", from)
	b, err := dial(to)
	if err != nil {
		return err
	}
	defer b.Close()
	moved, err := b.Subscribe(ctx, topic, pubsubclient.Durable("scheduler"))
	if err != nil {
		return err
	}
	for range 2 {
		m, err := moved.Next(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "at %s: %s (origin %s, seq %d)\n", to, m.Data, m.Origin, m.Seq)
		if err := m.Ack(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "resumed at %s: the 2 unacked events came again; nothing lost, nothing acked repeated\n", to)
	return moved.Close(ctx)
}

func waitTopic(ctx context.Context, c *pubsubclient.Client, name string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.GetTopic(ctx, name)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
