package consumer_test

import (
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

// BenchmarkAckPath is one message's way through a subscription: Offer,
// Next (one delivery), Ack, with one consumer, in order.
func BenchmarkAckPath(b *testing.B) {
	s := consumer.New(consumer.Config{}, nil)
	s.Attach(1, 0)
	now := t0
	b.ReportAllocs()
	for i := range b.N {
		m := consumer.MsgID{Origin: "us-east-1", Seq: uint64(i) + 1}
		if err := s.Offer(m, now); err != nil {
			b.Fatal(err)
		}
		ds := s.Next(now)
		if len(ds) != 1 {
			b.Fatalf("Next = %v", ds)
		}
		if err := s.Ack(1, m, ds[0].Attempt, now); err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Microsecond)
	}
}

// BenchmarkAckPathWindow keeps a window of 500 messages in flight over four
// consumers and three origins, acks arriving out of order within a batch:
// the acked set above the floor and the timer heap are in play.
func BenchmarkAckPathWindow(b *testing.B) {
	const window = 500
	s := consumer.New(consumer.Config{MaxAckPending: window}, nil)
	for c := consumer.ConsumerID(1); c <= 4; c++ {
		s.Attach(c, 0)
	}
	origins := []string{"us-east-1", "eu-west-1", "ap-south-1"}
	seq := map[string]uint64{}
	now := t0
	var inflight []consumer.Delivery
	b.ReportAllocs()
	for i := 0; i < b.N; {
		for s.Room() > 0 && i < b.N {
			o := origins[i%len(origins)]
			seq[o] += 2 // other topics between
			if err := s.Offer(consumer.MsgID{Origin: o, Seq: seq[o]}, now); err != nil {
				b.Fatal(err)
			}
			i++
		}
		inflight = append(inflight, s.Next(now)...)
		// Ack the older half, the newest of it first.
		half := inflight[:len(inflight)/2+1]
		for j := len(half) - 1; j >= 0; j-- {
			d := half[j]
			if err := s.Ack(d.Consumer, d.Msg, d.Attempt, now); err != nil {
				b.Fatal(err)
			}
		}
		inflight = append(inflight[:0], inflight[len(half):]...)
		now = now.Add(time.Millisecond)
	}
}
