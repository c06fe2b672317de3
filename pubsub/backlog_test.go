package pubsub

import (
	"fmt"
	"testing"

	"github.com/stabilizer/stabilizer/stabilizer/stabilizertest"
)

// TestBacklogWithoutConsumer: a durable subscription whose consumer is
// gone reports the messages it has not acked, from its stored position,
// at every site (before: 0 unacked everywhere, so no backlog alert could
// fire for a dead consumer).
func TestBacklogWithoutConsumer(t *testing.T) {
	c := newCluster(t, byHand, sites3...)
	ctx := ctxT(t)
	c.createTopic(t, us, Topic{Name: "jobs.events"})
	cn, err := c.broker(eu).Subscribe(ctx, SubOptions{Topic: "jobs.events", Durable: "dash", Start: StartAll})
	if err != nil {
		t.Fatal(err)
	}
	acks := publishN(t, c.broker(us), "jobs.events", 4, "ev")
	ds := receive(t, ctx, cn, 4, false)
	if err := cn.Ack(AckRequest{Origin: ds[0].Msg.Origin, Seq: ds[0].Msg.Seq, Attempt: ds[0].Attempt}); err != nil {
		t.Fatal(err)
	}
	for _, s := range sites3 {
		c.waitPosition(t, s, "jobs.events", "dash", us, acks[0].Seq)
	}
	if err := cn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range sites3 {
		stabilizertest.Eventually(t, 0, func() error {
			subs, err := c.broker(s).Subscriptions(ctx, "jobs.events")
			if err != nil {
				return err
			}
			for _, sub := range subs {
				if sub.Name == "dash" {
					if got := toPBSubInfo(sub).Unacked; got != 3 {
						return fmt.Errorf("at %s: dash shows %d unacked (consumers %d), want 3", s, got, sub.Consumers)
					}
					return nil
				}
			}
			return fmt.Errorf("at %s: no dash in %+v", s, subs)
		})
	}
}
