package consumer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stabilizer/stabilizer/pubsub/internal/consumer"
)

// t0 is the fake clock's start; tests pass t0 plus offsets as now.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func id(origin string, seq uint64) consumer.MsgID { return consumer.MsgID{Origin: origin, Seq: seq} }

// show formats deliveries as "origin:seq>consumer#attempt".
func show(ds []consumer.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%v>c%d#%d", d.Msg, d.Consumer, d.Attempt)
	}
	return out
}

// offer offers messages that must be taken.
func offer(t testing.TB, s *consumer.State, now time.Time, ms ...consumer.MsgID) {
	t.Helper()
	for _, m := range ms {
		if err := s.Offer(m, now); err != nil {
			t.Fatalf("offer %v: %v", m, err)
		}
	}
}

// next calls Next and checks the deliveries against want.
func next(t testing.TB, s *consumer.State, now time.Time, want ...string) []consumer.Delivery {
	t.Helper()
	ds := s.Next(now)
	if got := show(ds); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Next(%v) = %v, want %v", now.Sub(t0), got, want)
	}
	check(t, s)
	return ds
}

func check(t testing.TB, s *consumer.State) {
	t.Helper()
	if err := consumer.CheckInvariants(s); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
